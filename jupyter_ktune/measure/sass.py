"""SASS instruction mix: disassemble a cubin and count its instructions per kernel.

Split out of :mod:`jupyter_ktune.measure.static` because reading SASS is one concept of its own
(an opcode table, a parser for ``cuobjdump -sass`` / ``nvdisasm -c`` text and a categoriser) that
the static report, its HTML view and callers with their own cubins all use. Categories are keyed
on the base opcode (text before the first '.'). :mod:`jupyter_ktune.measure.static` re-exports
the public names.

Examples
--------
>>> from jupyter_ktune.measure.sass import sass_mix
>>> sass_mix("vadd.cubin")["_Z4vaddPKfS0_Pfi"].global_load_bits  # doctest: +SKIP
{128: 2}
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_ktune.errors import PREFIX
from jupyter_ktune.toolchain import ToolNotFound, find_tool, tool_version

__all__ = ["SASS_SKIPPED", "WGMMA_OPCODES", "SassMix", "category", "disassemble",
           "disassembler_version", "parse_sass", "sass_mix", "with_sass"]

#: A static report's ``sass_error`` when a sweep's compile pool skipped the disassembly
#: (:data:`jupyter_ktune.measure.static.SWEEP_STATIC_ENV`); :func:`with_sass` fills it in later.
SASS_SKIPPED = ("SASS not disassembled during the sweep (the cubin is kept): run the config "
                "alone for its SASS mix")

_CATEGORY_OPCODES: dict[str, tuple[str, ...]] = {
    "tensor_mma": ("HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA", "HGMMA", "QGMMA", "IGMMA",
                   "BGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMXQMMA"),
    "tma": ("UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "UTMACCTL", "UBLKCP", "UBLKRED", "UBLKPF"),
    "global_load": ("LDG",), "global_store": ("STG",),
    "global_atomic": ("ATOMG", "RED", "REDG"), "async_copy": ("LDGSTS", "LDGDEPBAR"),
    "generic_memory": ("LD", "ST", "ATOM"),
    "shared_load": ("LDS", "LDSM"), "shared_store": ("STS", "STSM"), "shared_atomic": ("ATOMS",),
    "local_load": ("LDL",), "local_store": ("STL",), "constant_load": ("LDC", "ULDC"),
    "barrier": ("BAR", "SYNCS", "MEMBAR", "DEPBAR", "WARPSYNC", "WARPGROUP", "FENCE", "ERRBAR",
                "ARRIVES", "UCGABAR_ARV", "UCGABAR_WAIT", "CCTL"),
    "fp32": ("FFMA", "FADD", "FMUL", "FFMA32I", "FADD32I", "FMUL32I", "FMNMX", "FSET", "FSETP",
             "FSEL", "FCHK", "FSWZADD"),
    "fp16x2": ("HFMA2", "HADD2", "HMUL2", "HMNMX2", "HSET2", "HSETP2"),
    "fp64": ("DFMA", "DADD", "DMUL", "DSETP", "DMNMX"),
    "sfu": ("MUFU",),
    "convert": ("F2F", "F2I", "I2F", "F2FP", "I2I", "I2FP", "F2IP", "FRND"),
    "integer": ("IMAD", "IADD3", "IADD", "IADD32I", "IMUL", "LOP3", "LOP", "LOP32I", "SHF",
                "SHL", "SHR", "LEA", "ISETP", "IMNMX", "IABS", "POPC", "FLO", "BREV", "PRMT",
                "SGXT", "BMSK", "VIADD", "VIMNMX", "VIADDMNMX", "IDP", "ISCADD", "BFE", "BFI"),
    "warp": ("SHFL", "VOTE", "VOTEU", "MATCH", "REDUX", "ELECT"),
    "move": ("MOV", "MOV32I", "SEL", "S2R", "CS2R", "S2UR", "R2UR", "PLOP3", "P2R", "R2P",
             "UMOV"),
    "control": ("BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BSSY", "BSYNC", "BREAK",
                "KILL", "NANOSLEEP", "YIELD", "BPT", "ACQBULK", "ENDCOLLECTIVE", "BMOV"),
    "nop": ("NOP",),
}
_CATEGORY_OF = {op: cat for cat, ops in _CATEGORY_OPCODES.items() for op in ops}
WGMMA_OPCODES = frozenset({"HGMMA", "QGMMA", "IGMMA", "BGMMA"})
_INSN = re.compile(r"^\s*/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?:@!?U?P[T\d]+\s+)?"
                   r"(?P<op>[A-Z][A-Z0-9_]*)(?P<mods>(?:\.[\w]+)*)(?P<args>[^;]*);")
_FUNCTION = re.compile(r"^\s*(?:Function : (?P<cuobjdump>\S+)|\.text\.(?P<nvdisasm>\S+):)\s*$")
_WIDTH_MODS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128, "256": 256}


@dataclass(frozen=True)
class SassMix:
    """SASS instruction counts of one kernel, grouped the way a kernel engineer reads them.

    ``opcodes`` counts base opcodes (``LDG``), ``mnemonics`` full ones (``LDG.E.128.CONSTANT``,
    ``HGMMA.64x128x16.F32.BF16``); the alignment padding at the end (self-branch + NOPs) is not
    counted. ``categories`` puts each opcode in one group (``tensor_mma``, ``global_load``,
    ``local_load``, ``tma``, ``barrier``, ``fp32``, ``integer``, ``control``, ... or ``other``);
    uniform-datapath integer ops (``UIADD3``) count as ``integer``. ``global_load_bits`` maps
    access width in bits to count (``LDG.E`` -> 32, ``LDG.E.64`` -> 64, ``LDG.E.128`` -> 128).
    """

    name: str
    instructions: int
    opcodes: Mapping[str, int] = field(hash=False, repr=False)
    mnemonics: Mapping[str, int] = field(hash=False, repr=False)
    categories: Mapping[str, int] = field(hash=False)
    global_load_bits: Mapping[int, int] = field(hash=False)
    global_store_bits: Mapping[int, int] = field(hash=False)

    @property
    def tensor_mma(self) -> int:
        """Tensor-core MMA instructions (HMMA, IMMA, HGMMA/QGMMA = wgmma, UTC*MMA = tcgen05)."""
        return self.categories.get("tensor_mma", 0)

    @property
    def uses_tensor_cores(self) -> bool:
        """True when any tensor-core MMA instruction was emitted."""
        return self.tensor_mma > 0

    @property
    def uses_wgmma(self) -> bool:
        """True for Hopper warpgroup MMA (``wgmma.mma_async`` -> HGMMA/QGMMA/IGMMA/BGMMA)."""
        return any(self.opcodes.get(op, 0) for op in WGMMA_OPCODES)

    @property
    def uses_tma(self) -> bool:
        """True for TMA / bulk-copy instructions (UTMALDG, UTMASTG, UBLKCP ...)."""
        return self.categories.get("tma", 0) > 0

    @property
    def local_memory_traffic(self) -> int:
        """LDL + STL count; non-zero means spills or a local array that stayed in memory."""
        return self.categories.get("local_load", 0) + self.categories.get("local_store", 0)

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (width keys become strings, as JSON requires)."""
        return {"name": self.name, "instructions": self.instructions,
                "opcodes": dict(self.opcodes), "mnemonics": dict(self.mnemonics),
                "categories": dict(self.categories),
                "global_load_bits": {str(k): v for k, v in self.global_load_bits.items()},
                "global_store_bits": {str(k): v for k, v in self.global_store_bits.items()}}


def parse_sass(text: str) -> dict[str, SassMix]:
    """Count instructions per kernel in ``cuobjdump -sass`` or ``nvdisasm -c`` output.

    Examples
    --------
    >>> text = '''        Function : k
    ...         /*0000*/   LDG.E.128 R4, desc[UR4][R2.64] ;
    ...         /*0010*/   HMMA.16816.F32 R8, R4, R6, RZ ;
    ...         /*0020*/   EXIT ;'''
    >>> mix = parse_sass(text)["k"]
    >>> mix.global_load_bits, mix.uses_tensor_cores
    ({128: 1}, True)
    """
    bodies: dict[str, list[tuple[int, str, str, str]]] = {}
    current: list | None = None
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            current = bodies.setdefault(m["cuobjdump"] or m["nvdisasm"], [])
        elif current is not None and (m := _INSN.match(line)):
            current.append((int(m["addr"], 16), m["op"], m["mods"], m["args"].strip()))
    return {name: _mix(name, _strip_padding(body)) for name, body in bodies.items()}


def _strip_padding(body: list[tuple[int, str, str, str]]) -> list[tuple[int, str, str, str]]:
    # Kernels end with "BRA <own address>" (cuobjdump) or "BRA `(.L_x_N)" to itself (nvdisasm)
    # plus NOPs up to a 128-byte boundary; they never execute, so they would skew the mix.
    end = len(body)
    while end and body[end - 1][1] == "NOP":
        end -= 1
    if end and body[end - 1][1] == "BRA":
        addr, _, _, target = body[end - 1]
        if target.startswith("`(") or _hex(target) == addr:
            end -= 1
    return body[:end]


def _hex(text: str) -> int | None:
    return int(text, 16) if re.fullmatch(r"0x[0-9a-f]+", text) else None


def _mix(name: str, body: list[tuple[int, str, str, str]]) -> SassMix:
    opcodes, mnemonics, categories = Counter(), Counter(), Counter()
    loads, stores = Counter(), Counter()
    for _, op, mods, _ in body:
        opcodes[op] += 1
        mnemonics[op + mods] += 1
        categories[category(op)] += 1
        if op in ("LDG", "STG"):
            width = next((_WIDTH_MODS[m] for m in mods.split(".") if m in _WIDTH_MODS), 32)
            (loads if op == "LDG" else stores)[width] += 1
    return SassMix(name=name, instructions=len(body), opcodes=dict(opcodes),
                   mnemonics=dict(mnemonics), categories=dict(categories),
                   global_load_bits=dict(sorted(loads.items())),
                   global_store_bits=dict(sorted(stores.items())))


def category(op: str) -> str:
    """The instruction class of a SASS opcode (``tensor``, ``memory``, ... or ``other``)."""
    if op in _CATEGORY_OF:
        return _CATEGORY_OF[op]
    if op.startswith("U") and _CATEGORY_OF.get(op[1:]) in ("integer", "move"):
        return _CATEGORY_OF[op[1:]]
    return "other"


def sass_mix(cubin: bytes | Path) -> dict[str, SassMix]:
    """Disassemble a cubin and count its SASS instructions per kernel.

    Uses ``cuobjdump -sass`` and falls back to ``nvdisasm -c`` when only that is installed.

    Raises
    ------
    ToolNotFound
        Neither disassembler is installed (the message says which wheel to install).
    RuntimeError
        The disassembler failed, for example on a cubin newer than the tool.
    """
    with tempfile.TemporaryDirectory(prefix="ktune-sass-") as tmp:
        if isinstance(cubin, bytes | bytearray):
            path = Path(tmp) / "kernel.cubin"
            path.write_bytes(cubin)
        else:
            path = Path(cubin)
        return parse_sass(disassemble(path))


def disassemble(path: Path) -> str:
    """SASS text of a cubin: ``cuobjdump -sass``, or ``nvdisasm -c`` where only that exists."""
    try:
        cmd = [str(find_tool("cuobjdump")), "-sass", str(path)]
    except ToolNotFound:
        cmd = [str(find_tool("nvdisasm")), "-c", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{PREFIX} {' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc.stdout


def with_sass(report: Any) -> Any:
    """Return a static report with the SASS mix a sweep's compile pool skipped, from its cubin.

    A config the sweep built and the user then moves onto runs from the sweep's report, whose
    mix said "not disassembled during the sweep" for good (issue 35); the session calls this
    when a config runs alone. A report with its mix (or without it for another reason) comes
    back as it is; a failed disassembly replaces the note with its own reason. The mix read
    here carries the disassembler's version, as one read at build time does.
    """
    if getattr(report, "sass_error", "") != SASS_SKIPPED or not getattr(report, "cubin", b""):
        return report
    versions = dict(report.versions)
    try:
        mixes, error = sass_mix(report.cubin), ""
        versions["disassembler"] = disassembler_version()
    except (ToolNotFound, RuntimeError, subprocess.TimeoutExpired) as exc:
        mixes, error = {}, str(exc)
    kernels = {key: dataclasses.replace(k, sass=mixes.get(k.name))
               for key, k in report.kernels.items()}
    return dataclasses.replace(report, kernels=kernels, sass_error=error, versions=versions)


def disassembler_version() -> str:
    """The tool that read a SASS mix, with its version, for the report's provenance: the
    tool :func:`disassemble` uses (``cuobjdump``, else ``nvdisasm``)."""
    try:
        return f"cuobjdump {tool_version('cuobjdump')}"
    except ToolNotFound:
        return f"nvdisasm {tool_version('nvdisasm')}"
