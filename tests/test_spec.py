"""Parsing a ``%%kernel`` cell (jupyter_ktune.api.parse_cell), host only.

Covers the ``// ktune:`` and ``# ktune:`` directives (value lists, pow2, range, grid/block/smem/
flops/bytes, require, ``;`` outside brackets), the magic line's flags and how they override the
body, the cell line and fix every CellError carries (``%%kernel`` is line 1, the first body line
is line 2), source_hash and with_options.
"""

import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.directives import parse_values
from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import RunOptions

BODY = """\
// ktune: BLOCK in [64, 128, 256]; SWIZZLE in [none, 32B, 128B]
// ktune: grid = (cdiv(n, BLOCK), 2); block = BLOCK
// ktune: require BLOCK * 4 <= SMEM_PER_BLOCK
__global__ void scale(float* y, int n) {}
"""


def _inputs():
    return {"n": 1000}


def _reference(n):
    return n


NS = {"make": _inputs, "ref": _reference, "data": [1, 2, 3]}


def _error(line: str, body: str = BODY, ns=None) -> CellError:
    with pytest.raises(CellError) as e:
        parse_cell(line, body, NS if ns is None else ns)
    return e.value


# --- directives --------------------------------------------------------------------------------

def test_directives_build_the_space_and_geometry_with_their_lines():
    spec = parse_cell("scale", BODY)
    assert spec.name == "scale" and spec.backend == "cuda" and spec.source == BODY
    assert spec.space.names == ("BLOCK", "SWIZZLE")
    block, swz = spec.space.params
    assert (block.values, block.line) == ((64, 128, 256), 2)
    assert (swz.values, swz.line) == (("none", "32B", "128B"), 2)
    assert (spec.grid.text, spec.grid.line, spec.grid.what) == ("(cdiv(n, BLOCK), 2)", 3, "grid")
    assert (spec.block.text, spec.block.line) == ("BLOCK", 3)
    assert spec.grid({"n": 1000, "BLOCK": 256}) == (4, 2)
    (req,) = spec.space.constraints
    assert (req.expr, req.line) == ("BLOCK * 4 <= SMEM_PER_BLOCK", 4)
    assert spec.smem is None and spec.flops is None and spec.bytes is None
    assert spec.inputs is None and spec.reference is None and spec.outputs == ()
    assert spec.options == RunOptions()


def test_python_style_directives_and_cost_expressions():
    body = ("import triton\n"
            "#ktune: BLOCK in pow2(16, 128)\n"
            "  #  ktune :  STAGES in range(1, 4) ; smem = BLOCK * 8\n"
            "# ktune: flops = 2 * n; bytes = 8 * n\n"
            "# not a directive: X in [1]\n")
    spec = parse_cell("k --backend triton", body)
    assert spec.backend == "triton"
    assert spec.space.param("BLOCK").values == (16, 32, 64, 128)
    assert spec.space.param("STAGES").values == (1, 2, 3)
    assert spec.space.param("STAGES").line == 4
    assert spec.smem({"BLOCK": 64}) == 512 and spec.smem.line == 4
    assert spec.flops({"n": 10}) == 20 and spec.bytes({"n": 10}) == 80 and spec.bytes.line == 5
    assert spec.space.names == ("BLOCK", "STAGES")


@pytest.mark.parametrize("text, expected", [
    ("[64, 128]", (64, 128)),
    ("[0x10, 32,]", (16, 32)),
    ("[none, '32B', \"64B\"]", ("none", "32B", "64B")),
    ("pow2(16, 256)", (16, 32, 64, 128, 256)),
    ("pow2(1, 1)", (1,)),
    ("range(1, 5)", (1, 2, 3, 4)),
    ("range(0, 12, 4)", (0, 4, 8)),
])
def test_parse_values(text, expected):
    assert parse_values(text, 2, "P") == expected


def test_semicolons_inside_brackets_do_not_split():
    spec = parse_cell("k", "// ktune: B in [1, 2]; grid = (cdiv(n, B), max(1, 2)); block = (B, 1)")
    assert spec.grid.text == "(cdiv(n, B), max(1, 2))"
    assert spec.block({"B": 2}) == (2, 1)


# --- the magic line ----------------------------------------------------------------------------

def test_magic_line_flags_reach_the_spec():
    line = ("scale -b cuda --inputs make --reference ref --out 'y, z' --warm-cache --budget-ms 50 "
            "--timeout 5 --arch sm_80 --rtol 1e-3 --atol 0 --no-verify --static-only")
    spec = parse_cell(line, BODY, NS)
    assert spec.inputs is _inputs and spec.reference is _reference
    assert spec.outputs == ("y", "z")
    assert spec.options == RunOptions(verify=False, warm_cache=True, budget_ms=50.0, timeout_s=5.0,
                                      arch="sm_80", rtol=1e-3, atol=0.0, static_only=True)


def test_param_flag_overrides_the_directive_on_line_1():
    spec = parse_cell("scale --param BLOCK=32,64 -p TILE=1,2", BODY)
    assert spec.space.param("BLOCK").values == (32, 64)
    assert spec.space.param("BLOCK").line == 1
    assert spec.space.param("TILE").values == (1, 2)
    assert spec.space.param("SWIZZLE").line == 2


def test_geometry_flags_override_the_body():
    spec = parse_cell('scale --grid "cdiv(n, 128)" --block 128 --require "BLOCK < 256"', BODY)
    assert (spec.grid.text, spec.grid.line) == ("cdiv(n, 128)", 1)
    assert spec.grid({"n": 1000}) == 8
    assert spec.block.text == "128"
    assert [(c.expr, c.line) for c in spec.space.constraints] == [
        ("BLOCK * 4 <= SMEM_PER_BLOCK", 4), ("BLOCK < 256", 1)]


def test_config_flag_is_checked_and_kept():
    spec = parse_cell("scale --config BLOCK=128 -c SWIZZLE=128b", BODY)
    assert spec.initial == {"BLOCK": "128", "SWIZZLE": "128b"}
    assert spec.space.config(spec.initial) == {"BLOCK": 128, "SWIZZLE": "128B"}


# --- errors: every one names its cell line and a fix --------------------------------------------

@pytest.mark.parametrize("line, body, cell_line, fragment, fix", [
    ("scale --backend opencl", BODY, 1, "unknown backend 'opencl'", "cuda"),
    ("scale --grid 'cdiv(n", BODY, 1, "No closing quotation", "Balance the quotes"),
    ("scale --inputs nope", BODY, 1, "names 'nope', which is not defined", "def nope()"),
    ("scale --inputs data", BODY, 1, "data is a list, not a function", "def data()"),
    ("scale --reference nope --out y", BODY, 1, "not defined", "def nope()"),
    ("scale --reference ref", BODY, 1, "--reference needs the names of the outputs", "--out y"),
    ("scale --config BLOCK", BODY, 1, "--config BLOCK needs a value", "--config BLOCK=128"),
    ("scale", BODY + "// ktune: warp = 32\n", 6, "cannot read the ktune directive 'warp = 32'",
     "Directives:"),
    ("scale", "\n// ktune: B in [1]\n// ktune: B in [2]", 4, "parameter B is declared twice",
     "Keep one"),
    ("scale", "// ktune: B in [1]; B in [2]", 2, "declared twice", "Keep one"),
    ("scale", "\n\n// ktune: B in 64, 128", 4, "cannot read the values of B",
     "B in [64, 128, 256]"),
    ("scale", "// ktune: B in pow2(16, x)", 2, "pow2() takes integers", "B in pow2(16, 256)"),
    ("scale", "// ktune: B in range(a)", 2, "range() takes integers", "B in range(16, 256)"),
    ("scale", "// ktune: B in []", 2, "parameter B has no values", "B in [64, 128]"),
    ("scale", "// ktune: 9B in [1]", 2, "cannot read the ktune directive", "Directives:"),
    ("scale", "\n// ktune: grid = cdiv(n,", 3, "cannot parse the grid expression",
     "cdiv(n, BLOCK)"),
])
def test_cell_errors_name_line_and_fix(line, body, cell_line, fragment, fix):
    e = _error(line, body)
    assert e.line == cell_line
    assert str(e).startswith(f"[ktune] cell line {cell_line}: ")
    assert fragment in e.message
    assert fix in e.fix


@pytest.mark.parametrize("values", ["pow2(3, 16)", "pow2(16, 8)", "pow2(0, 8)", "pow2(16, 24)"])
def test_bad_pow2_bounds(values):
    e = _error("scale", f"\n// ktune: B in {values}")
    assert e.line == 3 and "needs powers of two with lo <= hi" in e.message


def test_pow2_with_one_bound_is_a_cell_error():
    assert _error("scale", "// ktune: B in pow2(16)").line == 2


@pytest.mark.parametrize("line", ["scale --bogus", "scale --budget-ms fast", ""])
def test_argparse_errors_are_reported_once_with_usage(line):
    e = _error(line)
    assert e.line == 1
    assert str(e).count("[ktune]") == 1
    assert "Balance the quotes" not in str(e)
    assert "%%kernel" in e.fix


@pytest.mark.parametrize("flag, fragment", [("BLOCK=100", "100"), ("TILE=64", "'TILE'")])
def test_bad_config_flag_points_at_line_1(flag, fragment):
    e = _error(f"scale --config {flag}")
    assert fragment in e.message and e.fix
    assert e.line == 1


# --- hashing and options -----------------------------------------------------------------------

def test_source_hash_follows_what_changes_the_code():
    base = parse_cell("scale", BODY).source_hash
    assert len(base) == 16
    assert parse_cell("scale --budget-ms 10 --no-verify", BODY).source_hash == base
    assert parse_cell("scale", BODY.replace("float* y", "float* out")).source_hash != base
    assert parse_cell("scale --grid 'cdiv(n, BLOCK)'", BODY).source_hash != base
    assert parse_cell("scale --block 64", BODY).source_hash != base
    assert parse_cell("scale --backend triton", BODY).source_hash != base


def test_with_options_returns_a_copy():
    spec = parse_cell("scale", BODY)
    fast = spec.with_options(budget_ms=20.0, verify=False)
    assert (fast.options.budget_ms, fast.options.verify) == (20.0, False)
    assert fast.options.max_runs == spec.options.max_runs
    assert spec.options.budget_ms == 200.0 and spec.options.verify is True
    assert fast.source_hash == spec.source_hash and fast.space == spec.space
    with pytest.raises(TypeError):
        spec.with_options(budget=1.0)
