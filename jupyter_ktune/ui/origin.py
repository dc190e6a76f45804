"""The read-only view of a ``--from`` kernel: the package's source, as the cell compiles it.

A ``%%kernel --from liger_kernel.ops.dyt:_dyt_fwd_kernel`` cell holds only directives; the
kernel's text comes from the installed package. The cell's output shows that text, read-only,
with two gutters: the cell line that compile errors and stall marks name (the package's text
follows the cell's own lines), and the line in the package's file, so an error on "cell line 17"
can be found in the view and in the package.
"""

from __future__ import annotations

import html
from typing import Any


def origin_lines(spec: Any) -> list[tuple[int, int | None, str]]:
    """``(cell line, package file line or None, text)`` per line of the package's source."""
    from jupyter_ktune.from_package import line_map

    text = spec.package_source.splitlines()
    first = spec.body_line + len(spec.source.splitlines()) - len(text)
    try:
        _path, where = line_map(spec.origin.split(" (")[0])
    except Exception:  # noqa: BLE001 - the package changed since parsing: cell lines only
        where = []
    if len(where) != len(text):
        where = [None] * len(text)
    return [(first + i, where[i], line) for i, line in enumerate(text)]


def origin_html(spec: Any) -> str:
    """A collapsible ``<details>`` block with the package's source and both line gutters."""
    from jupyter_ktune.from_package import module_file

    try:
        name = module_file(spec.origin.split(":")[0]).name
    except Exception:  # noqa: BLE001
        name = "file"
    rows = "".join(
        f'<tr><td style="color:#8c959f;text-align:right;padding-right:8px">{cell}</td>'
        f'<td style="color:#8c959f;text-align:right;padding-right:12px">'
        f'{"" if at is None else at}</td>'
        f'<td style="white-space:pre">{html.escape(text)}</td></tr>'
        for cell, at, text in origin_lines(spec))
    return (f'<details class="ktune-origin"><summary>kernel source from '
            f"<code>{html.escape(spec.origin)}</code> (read-only; edit the package or copy it "
            f"into the cell to change it)</summary>"
            f'<table style="font-family:monospace;font-size:12px;border-collapse:collapse">'
            f'<thead><tr><th style="{_HEAD}">cell</th><th style="{_HEAD}">'
            f"{html.escape(name)}</th><th></th></tr></thead>{rows}</table></details>")


_HEAD = "color:#8c959f;text-align:right;padding-right:12px;font-weight:normal"
