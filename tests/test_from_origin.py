"""``%%kernel --from``: the package's source shown read-only, with the lines errors name.

The cell holds directives; the kernel's text comes from the installed package (liger-kernel,
installed from PyPI for the tests, never copied here). The view's two gutters must agree with
the source the cell compiles (cell lines, as compile errors and stall marks number them) and
with the package's own file (its line numbers).
"""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_ktune.api import parse_cell
from jupyter_ktune.from_package import module_file
from jupyter_ktune.ui.origin import origin_html, origin_lines

pytest.importorskip("liger_kernel")
REF = "liger_kernel.ops.dyt:_dyt_fwd_kernel"


@pytest.mark.parametrize("directives", ["", "# ktune: BLOCK_N in [1024]\n# ktune: grid = (1,)\n"])
def test_both_gutters_point_at_the_same_text(directives):
    spec = parse_cell(f"--from {REF} --backend triton", directives)
    cell = spec.source.splitlines()
    package = module_file(REF.split(":")[0]).read_text().splitlines()
    rows = origin_lines(spec)
    assert rows and any(at is not None for _, at, _ in rows)
    for cell_line, at, text in rows:
        assert cell[cell_line - spec.body_line] == text  # the line errors name
        if at is not None:
            assert package[at - 1] == text  # the package file's own line
    assert "def _dyt_fwd_kernel(" in "\n".join(t for _, _, t in rows)


def test_the_view_is_escaped_and_names_the_package():
    spec = parse_cell(f"--from {REF} --backend triton", "")
    page = origin_html(spec)
    assert "<details" in page and "read-only" in page
    assert spec.origin.split(" (")[1].rstrip(")") in page  # "liger-kernel 0.8.5"
    assert "dyt.py" in page
    assert "tl.store(" in page and "<tl" not in page


def test_the_magic_shows_the_view_above_its_result():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_ktune")
    shown = []
    shell.display_pub.publish = lambda data, **_: shown.append(data)  # what the cell displays
    try:
        shell.run_cell_magic("kernel", f"--from {REF} --backend triton --static-only",
                             "# ktune: grid = (1,)\n")
    except Exception:  # noqa: BLE001 - no inputs: the static report cannot run; the view shows
        pass
    html = [d.get("text/html", "") for d in shown]
    assert any("ktune-origin" in h and "_dyt_fwd_kernel" in h for h in html), html[:1]


def test_the_distribution_is_read_beside_the_module_not_from_every_installed_one(monkeypatch):
    """``--from`` names the kernel's distribution and version. The standard library's
    ``packages_distributions()`` parsed every installed distribution's metadata on each parse
    (0.7 s here with the test extras; 0.78 s of a parse on the H200); the distributions beside
    the module name it (a distribution whose import name differs: fla-core's ``fla``)."""
    import importlib.metadata

    from jupyter_ktune.from_package import distribution

    pytest.importorskip("liger_kernel")

    def every_one():
        raise AssertionError("every installed distribution was read")

    monkeypatch.setattr(importlib.metadata, "packages_distributions", every_one)
    assert distribution("liger_kernel.ops.dyt") == \
        f"{importlib.metadata.metadata('liger_kernel')['Name']} " \
        f"{importlib.metadata.version('liger_kernel')}"
    assert distribution("numpy.linalg").startswith("numpy ")
    pytest.importorskip("fla")
    assert distribution("fla.ops.utils.matmul").startswith("fla-core ")
