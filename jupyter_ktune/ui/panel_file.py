"""A saved panel's file: plain JSON, so loading one never runs code from it (issue 34).

Saved panels were cloudpickles, and ``load_panel`` unpickled before checking the format: a shared
"results" file ran ``os.system``. Now a file is JSON, written by :func:`dump` and read by
:func:`load`: numbers, strings, lists and objects, plus tagged values for ktune's own result
types. A tag names a class, and :func:`load` builds only dataclasses and enums of the modules in
``_MODULES`` (ktune's result, spec and static-report types), through their constructors, from
plain data; anything else is refused. Functions (the cell's inputs and reference) are not saved:
a replay runs nothing. An older, pickled file gets one ``[ktune]`` line and is never unpickled.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.space import Config

FORMAT = 2  # 1: a cloudpickle (never read again)
MAGIC = "jupyter-ktune saved panel"
# the modules whose dataclasses and enums a saved panel may hold; nothing else is built
_MODULES = frozenset({
    "jupyter_ktune.results", "jupyter_ktune.status", "jupyter_ktune.space", "jupyter_ktune.spec",
    "jupyter_ktune.directives", "jupyter_ktune.errors", "jupyter_ktune.measure.static",
    "jupyter_ktune.measure.sass", "jupyter_ktune.measure.occupancy",
    "jupyter_ktune.measure.breakdown", "jupyter_ktune.measure.tolerance",
})
_PICKLE_STARTS = (b"\x80", b"(", b"c", b"}", b"]")  # protocol 2+ opcode, or protocol 0/1 ones


class PanelFileError(KtuneError, ValueError):
    """A file that is not a saved panel this ktune reads; nothing in it was run."""


def dump(data: Mapping[str, Any], path: Path) -> Path:
    """Write ``data`` (a panel's spec, limits, ceilings, history, current config) as JSON."""
    payload = {"magic": MAGIC, "format": FORMAT, **{k: _encode(v) for k, v in data.items()}}
    path.write_text(json.dumps(payload, separators=(",", ":")))
    return path


def load(path: Path) -> dict[str, Any]:
    """Read a file written by :func:`dump`; a pickle or anything else is one ``[ktune]`` line."""
    raw = path.read_bytes()
    if raw[:1] in _PICKLE_STARTS and not raw.lstrip().startswith(b"{"):
        raise PanelFileError(
            f"[ktune] {path} is a saved panel of an older ktune (a pickle), which is not opened: "
            "loading it could run any code in it. Save the panel again with this ktune "
            "(jupyter_ktune.ui.replay.save_panel) where it was measured.")
    try:
        payload = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        payload = None
    if not isinstance(payload, dict) or payload.get("magic") != MAGIC:
        raise PanelFileError(f"[ktune] {path} is not a saved ktune panel. Save one with "
                             "jupyter_ktune.ui.replay.save_panel(panel, path).")
    if payload.get("format") != FORMAT:
        raise PanelFileError(f"[ktune] {path} is a saved panel of format {payload.get('format')}"
                             f"; this ktune reads format {FORMAT}. Save the panel again.")
    try:
        return {k: _decode(v) for k, v in payload.items() if k not in ("magic", "format")}
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise PanelFileError(f"[ktune] {path}: a saved value cannot be read ({exc}); nothing "
                             "in it was run. Save the panel again.") from None


def _encode(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, enum.Enum):
        return {"$enum": _name(type(v)), "value": _encode(v.value)}
    if isinstance(v, str):
        return str(v)  # str subclasses (a torch version) as plain text
    if isinstance(v, bytes):
        return {"$bytes": base64.b64encode(v).decode()}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return {"$array": v.dtype.str, "data": v.tolist()}
    if isinstance(v, Config):
        return {"$config": _encode(dict(v))}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {"$dataclass": _name(type(v)),
                "fields": {f.name: _encode(getattr(v, f.name, f.default))
                           for f in dataclasses.fields(v)
                           if f.init and not f.name.startswith("_")}}
    if isinstance(v, (list, tuple)):
        items = [_encode(x) for x in v]
        return items if isinstance(v, list) else {"$tuple": items}
    if isinstance(v, Mapping):
        return {"$map": [[_encode(k), _encode(x)] for k, x in v.items()]}
    if callable(v):
        return None  # functions are not saved: a replay runs nothing
    return repr(v)  # anything else, as text only


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _allowed(name: str, kind: type) -> Any:
    """The class a tag names, only if it is a dataclass or enum of an allowed module."""
    module, _, qualname = str(name).partition(":")
    if module not in _MODULES or not qualname.isidentifier():
        raise ValueError(f"{name!r} is not a ktune result type")
    cls = getattr(importlib.import_module(module), qualname, None)
    ok = isinstance(cls, type) and (issubclass(cls, enum.Enum) if kind is enum.Enum
                                    else dataclasses.is_dataclass(cls))
    if not ok:
        raise ValueError(f"{name!r} is not a ktune result type")
    return cls


def _decode(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "$tuple" in v:
        return tuple(_decode(x) for x in v["$tuple"])
    if "$map" in v:
        return {_hashable(_decode(k)): _decode(x) for k, x in v["$map"]}
    if "$config" in v:
        return Config(_decode(v["$config"]))
    if "$array" in v:
        dtype = np.dtype(str(v["$array"]))
        if dtype.kind not in "biufc":  # numbers only: an object array could hold anything
            raise ValueError(f"arrays of {dtype} are not read")
        return np.asarray(_decode(v["data"]), dtype=dtype)
    if "$bytes" in v:
        return base64.b64decode(str(v["$bytes"]))
    if "$enum" in v:
        return _allowed(v["$enum"], enum.Enum)(_decode(v["value"]))
    if "$dataclass" in v:
        cls = _allowed(v["$dataclass"], object)
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        return cls(**{k: _decode(x) for k, x in v["fields"].items() if k in known})
    raise ValueError(f"unknown value {sorted(v)[:3]}")


def _hashable(k: Any) -> Any:
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k
