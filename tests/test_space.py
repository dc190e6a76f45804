"""The tunable space (jupyter_ktune.space), host only.

Covers Param validation, Config (frozen, hashable, a Mapping, key()/label()), cxx_value (swizzle
names to bytes, other strings to their index), Space enumeration, default, neighbours,
violations with device limits, config() coercion and its errors, and the cell-expression
sandbox (compile_expr / eval_expr / Constraint).
"""

import pytest

from jupyter_ktune.errors import CellError
from jupyter_ktune.space import Config, Constraint, Param, Space, compile_expr, cxx_value, eval_expr


def _space(*constraints: str) -> Space:
    """BLOCK x SWIZZLE, as a cell declaring them on lines 2 and 3 would give."""
    return Space((Param("BLOCK", (64, 128, 256), line=2),
                  Param("SWIZZLE", ("none", "32B", "128B"), line=3)),
                 tuple(Constraint(c, line=4) for c in constraints))


# --- Param -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, values, fragment", [
    ("2BAD", (1,), "not a valid parameter name"),
    ("BLOCK", (), "has no values"),
    ("BLOCK", (64, 64), "lists a value twice"),
])
def test_param_rejects_bad_declarations_on_their_line(name, values, fragment):
    with pytest.raises(CellError) as e:
        Param(name, values, line=7)
    assert e.value.line == 7
    assert fragment in e.value.message
    assert e.value.fix
    assert str(e.value).startswith("[ktune] cell line 7: ")


@pytest.mark.parametrize("values, numeric, pow2", [
    ((16, 32, 64), True, True),
    ((16, 48), True, False),
    ((0, 1), True, False),
    (("none", "32B"), False, False),
])
def test_param_numeric_and_powers_of_two(values, numeric, pow2):
    p = Param("P", values)
    assert (p.numeric, p.powers_of_two) == (numeric, pow2)


# --- Config ------------------------------------------------------------------------------------

def test_config_is_an_order_free_hashable_mapping():
    a = Config({"SWIZZLE": "64B", "BLOCK": 128})
    b = Config({"BLOCK": 128, "SWIZZLE": "64B"})
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a == {"BLOCK": 128, "SWIZZLE": "64B"}
    assert a != Config({"BLOCK": 256, "SWIZZLE": "64B"})
    assert list(a) == ["BLOCK", "SWIZZLE"] and len(a) == 2
    assert a["BLOCK"] == 128 and "SWIZZLE" in a and "TILE" not in a
    with pytest.raises(KeyError):
        a["TILE"]


def test_config_is_frozen():
    c = Config({"BLOCK": 128})
    with pytest.raises(TypeError):
        c["BLOCK"] = 256  # type: ignore[index]
    with pytest.raises(AttributeError):
        c.extra = 1  # type: ignore[attr-defined]
    assert c["BLOCK"] == 128


def test_config_key_and_label():
    c = Config({"SWIZZLE": "64B", "BLOCK": 128})
    assert c.key() == '{"BLOCK":128,"SWIZZLE":"64B"}'
    assert c.label() == "BLOCK=128 SWIZZLE=64B"
    assert repr(c) == "Config(BLOCK=128, SWIZZLE='64B')"
    assert Config().label() == "(no parameters)"
    assert Config().key() == "{}"


# --- cxx_value ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value, choices, expected", [
    (128, (64, 128), 128),
    ("none", ("none", "32B", "128B"), 0),
    ("32B", ("none", "32B", "128B"), 32),
    ("128B", ("none", "32B", "128B"), 128),
    ("64b", ("none", "64b"), 64),
    ("row", ("col", "row"), 1),
    ("col", ("col", "row"), 0),
])
def test_cxx_value(value, choices, expected):
    assert cxx_value(value, choices) == expected


def test_space_cxx_env_maps_every_param():
    s = _space()
    assert s.cxx_env({"BLOCK": 256, "SWIZZLE": "32B"}) == {"BLOCK": 256, "SWIZZLE": 32}
    assert Param("SWIZZLE", ("none", "128B")).cxx("128B") == 128


# --- Space: enumeration, defaults, neighbours, limits -------------------------------------------

def test_configs_enumerate_first_parameter_slowest():
    s = _space()
    got = [(c["BLOCK"], c["SWIZZLE"]) for c in s.configs()]
    assert s.size == 9 and s.names == ("BLOCK", "SWIZZLE")
    assert got[:4] == [(64, "none"), (64, "32B"), (64, "128B"), (128, "none")]
    assert len(got) == 9


def test_constraints_filter_configs_using_cxx_values():
    # SWIZZLE is compared as bytes (none=0, 32B=32, 128B=128), not as an index
    s = _space("SWIZZLE <= BLOCK // 2")
    got = {(c["BLOCK"], c["SWIZZLE"]) for c in s.configs()}
    assert (64, "32B") in got and (256, "128B") in got
    assert (64, "128B") not in got and (128, "128B") not in got
    assert len(got) == 7


def test_violations_read_device_limits():
    s = _space("BLOCK * 4 <= SMEM_PER_BLOCK")
    c = Config({"BLOCK": 256, "SWIZZLE": "none"})
    assert s.violations(c, {"SMEM_PER_BLOCK": 1024}) == []
    assert s.violations(c, {"SMEM_PER_BLOCK": 512}) == [
        "breaks 'require BLOCK * 4 <= SMEM_PER_BLOCK'"]
    assert [x["BLOCK"] for x in s.configs({"SMEM_PER_BLOCK": 300})] == [64, 64, 64]
    assert s.default({"SMEM_PER_BLOCK": 600}) == {"BLOCK": 64, "SWIZZLE": "none"}


def test_violations_without_the_limit_is_a_cell_error_on_the_require_line():
    s = _space("BLOCK * 4 <= SMEM_PER_BLOCK")
    with pytest.raises(CellError) as e:
        s.violations(Config({"BLOCK": 64, "SWIZZLE": "none"}))
    assert e.value.line == 4
    assert "'SMEM_PER_BLOCK'" in e.value.message
    assert "ktune: SMEM_PER_BLOCK in" in e.value.fix


def test_default_is_first_valid_config_and_errors_when_none_is():
    assert _space("BLOCK >= 128").default() == {"BLOCK": 128, "SWIZZLE": "none"}
    with pytest.raises(CellError) as e:
        _space("BLOCK > 1024").default()
    assert "no combination" in e.value.message and "Relax" in e.value.fix


def test_neighbours_move_one_slider_one_step():
    s = _space()
    got = s.neighbours(Config({"BLOCK": 128, "SWIZZLE": "none"}))
    assert got == [Config({"BLOCK": 64, "SWIZZLE": "none"}),
                   Config({"BLOCK": 256, "SWIZZLE": "none"}),
                   Config({"BLOCK": 128, "SWIZZLE": "32B"})]


def test_neighbours_skip_configs_that_break_constraints():
    s = _space("BLOCK * 4 <= SMEM_PER_BLOCK")
    got = s.neighbours(Config({"BLOCK": 128, "SWIZZLE": "32B"}), {"SMEM_PER_BLOCK": 512})
    assert {(c["BLOCK"], c["SWIZZLE"]) for c in got} == {(64, "32B"), (128, "none"), (128, "128B")}


def test_space_rejects_a_duplicate_on_the_second_declaration():
    with pytest.raises(CellError) as e:
        Space((Param("B", (1,), line=2), Param("C", (1,), line=3), Param("B", (2,), line=5)))
    assert e.value.line == 5 and "declared twice" in e.value.message


# --- Space.config: coercion and errors ---------------------------------------------------------

@pytest.mark.parametrize("given, expected", [
    ({}, {"BLOCK": 64, "SWIZZLE": "none"}),
    ({"BLOCK": "128"}, {"BLOCK": 128, "SWIZZLE": "none"}),
    ({"BLOCK": 256, "SWIZZLE": "128b"}, {"BLOCK": 256, "SWIZZLE": "128B"}),
    ({"SWIZZLE": "NONE"}, {"BLOCK": 64, "SWIZZLE": "none"}),
])
def test_config_coerces_user_values(given, expected):
    c = _space().config(given)
    assert dict(c) == expected
    assert all(type(c[k]) is type(v) for k, v in expected.items())


def test_config_keywords_and_mapping_combine():
    assert _space().config({"BLOCK": 128}, SWIZZLE="32B") == {"BLOCK": 128, "SWIZZLE": "32B"}


def test_config_unknown_name_lists_the_names():
    with pytest.raises(CellError) as e:
        _space().config(TILE=64)
    assert "'TILE' is not a parameter" in e.value.message
    assert e.value.fix == "Parameters: BLOCK, SWIZZLE."


def test_config_bad_value_lists_the_allowed_values():
    with pytest.raises(CellError) as e:
        _space().config(BLOCK=100)
    assert "100 is not an allowed value of BLOCK" in e.value.message
    assert e.value.fix == "Choose one of 64, 128, 256."


def test_config_coerces_a_bare_byte_count_to_its_swizzle_name():
    assert _space().config(SWIZZLE=128)["SWIZZLE"] == "128B"


# --- cell expressions ----------------------------------------------------------------------------

def test_expressions_see_params_and_safe_helpers():
    code = compile_expr("cdiv(n, BLOCK) * max(1, log2(BLOCK))", 3, "grid")
    assert eval_expr(code, {"n": 1000, "BLOCK": 256}, "grid", 3) == 32.0
    assert eval_expr(compile_expr("(prod([2, 3]), abs(-4))", 3, "x"), {}, "", 3) == (6, 4)


@pytest.mark.parametrize("expr, fragment", [
    ("cdiv(n,", "cannot parse the grid expression"),
    ("n.__class__", "'__class__' is not allowed"),
    ("n._private", "'_private' is not allowed"),
    # nothing that could loop or format without bound (issue 15)
    ("[x for x in (1, 2)]", "a comprehension is not allowed"),
    ("(lambda: 1)()", "lambda is not allowed"),
    ("f'{n:>999999999}'", "an f-string is not allowed"),
    ("(m := 3)", "':=' is not allowed"),
    ("'a'.center(10**9)", "calling 'center' is not allowed"),
    ("open('x')", "calling 'open' is not allowed"),
    ("a @ a", "'@' (matrix product) is not allowed"),
])
def test_compile_expr_rejects_bad_expressions_on_their_line(expr, fragment):
    with pytest.raises(CellError) as e:
        compile_expr(expr, 6, "grid")
    assert e.value.line == 6 and fragment in e.value.message


@pytest.mark.parametrize("expr, env, fragment", [
    ("BLOK * 2", {"BLOCK": 1}, "'BLOK' in 'BLOK * 2' is neither a parameter nor an input"),
    ("open('x')", {}, "'open'"),  # no builtins beyond the safe helpers
    ("n // 0", {"n": 4}, "failed: ZeroDivisionError"),
])
def test_eval_expr_failures_are_cell_errors_on_their_line(expr, env, fragment):
    with pytest.raises(CellError) as e:
        eval_expr(compile_expr(expr, 9, "grid"), env, expr, 9)
    assert e.value.line == 9 and fragment in e.value.message
    assert str(e.value).startswith("[ktune] cell line 9: ")


def test_constraint_holds_and_equality_ignores_code():
    c = Constraint("BLOCK % 32 == 0", line=4)
    assert c.holds({"BLOCK": 64}) is True and c.holds({"BLOCK": 48}) is False
    assert c == Constraint("BLOCK % 32 == 0", line=4)


def test_error_text_keeps_an_ellipsis_in_the_fix():
    with pytest.raises(CellError) as e:
        eval_expr(compile_expr("TILE", 2, "grid"), {}, "TILE", 2)
    assert "// ktune: TILE in [...]" in e.value.fix  # the attribute is intact
    assert "// ktune: TILE in [...]" in str(e.value)


def test_a_partial_config_is_completed_with_the_first_values_every_require_allows():
    """``--config num_warps=4`` on a cell whose first config runs: the other tunables take the
    first values allowed with num_warps=4 (issue 36), not the first listed (BLOCK=32, which the
    require refuses)."""
    from jupyter_ktune.api import choose_config, parse_cell

    spec = parse_cell("k --backend cuda --config num_warps=4",
                      "// ktune: BLOCK in [32, 64, 128, 256]; num_warps in [1, 2, 4]\n"
                      "// ktune: STAGES in [2, 3]\n"
                      "// ktune: require BLOCK >= 32 * num_warps and BLOCK * STAGES <= SMEM\n"
                      "__global__ void k(float* y) {}\n")
    assert dict(choose_config(spec, limits={"SMEM": 1024})) == {"BLOCK": 128, "num_warps": 4,
                                                                "STAGES": 2}
    assert dict(choose_config(spec, {"STAGES": 3}, {"SMEM": 384})) == {
        "BLOCK": 128, "num_warps": 4, "STAGES": 3}
    # nothing completes it: the given values with the first listed, for the run to refuse
    assert dict(choose_config(spec, {"STAGES": 3}, {"SMEM": 256})) == {
        "BLOCK": 32, "num_warps": 4, "STAGES": 3}
    assert dict(choose_config(spec, limits={"SMEM": 1024})) == dict(
        spec.space.complete({"num_warps": 4}, {"SMEM": 1024}))
