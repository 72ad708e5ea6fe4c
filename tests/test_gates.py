"""Threshold files (round-trip, file:line errors) and the verdict on one measurement."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t2i_fairness.gating import verdicts as gates_module
from t2i_fairness.gating.verdicts import (
    Bound,
    Measurement,
    ThresholdFile,
    ThresholdFileError,
    evaluate,
    proposed_path,
    provenance_id,
    safe_round,
)

PROV = {"model": "fakegen:v1", "scorers": "tiny", "objects": "bag,car", "images_per_prompt": 6, "seed": 0,
        "t2i_fairness": "0.1.0", "torch": "2.14.1", "device": "cpu"}


def test_doctests_run():
    assert doctest.testmod(gates_module, raise_on_error=False).failed == 0


# ------------------------------------------------------------------------------- the file


def sample_file(path: Path) -> ThresholdFile:
    pid = provenance_id(PROV)
    return ThresholdFile(
        path,
        {
            "test_object_consistency[object_in_region-africa]": Bound("min", 0.123456, pid),
            "test_object_consistency[object]": Bound("min", -0.25, pid),
            "test_gap[x]": Bound("max", 3.0),
        },
        {pid: PROV, "unused0": {"seed": 1}},
    )


def test_dump_and_load_round_trip(tmp_path):
    t = sample_file(tmp_path / "t.yaml")
    t.save()
    back = ThresholdFile.load(tmp_path / "t.yaml")
    assert back.gates == t.gates
    assert back.provenances == {provenance_id(PROV): PROV}  # provenances no gate uses are dropped
    text = (tmp_path / "t.yaml").read_text()
    assert text.startswith("# t2i-fairness gates.")
    # Each gate's line is known (for messages), and points at the gate's key.
    lines = text.splitlines()
    for name, line in back.lines.items():
        assert lines[line - 1].strip().startswith((name + ":", f"'{name}':", f'"{name}":'))
    assert back.dump() == t.dump()  # stable: re-saving an unchanged file changes nothing


def test_a_missing_or_empty_file_has_no_gates(tmp_path):
    assert ThresholdFile.load(tmp_path / "none.yaml").gates == {}
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    assert ThresholdFile.load(tmp_path / "empty.yaml").gates == {}


# Control characters are left out: pytest escapes them in ids, and PyYAML folds U+0085 into a space.
gate_names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30)
finite = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(gate_names, st.tuples(st.sampled_from(["min", "max"]), finite), min_size=1, max_size=5))
def test_round_trip_any_names_and_values(tmp_path_factory, entries):
    path = tmp_path_factory.mktemp("rt") / "t.yaml"
    pid = provenance_id(PROV)
    t = ThresholdFile(path, {k: Bound(d, v, pid) for k, (d, v) in entries.items()}, {pid: PROV})
    t.save()
    back = ThresholdFile.load(path)
    assert back.gates == t.gates
    assert set(back.lines) == set(entries)


BAD = [
    ("gates:\n  a:\n    min: 0.1\n  b: [\n", ":5: invalid YAML"),
    ("gates:\n  a: {min: 0.1}\n  b:\n    maximum: 2\n", ":3: gate 'b' needs exactly one of 'min' or 'max'"),
    ("gates:\n  a: {min: 0.1, max: 0.3}\n", ":2: gate 'a' needs exactly one"),
    ("# c\ngates:\n  a: {min: 0.1}\n  b: {max: lots}\n", ":4: gate 'b': max must be a number, got 'lots'"),
    ("gates:\n  a: {min: .nan}\n", ":2: gate 'a': min must be a number, got nan"),
    ("gates:\n  a: {min: true}\n", ":2: gate 'a': min must be a number, got True"),
    ("gates:\n  a: 0.5\n", ":2: gate 'a' must be a mapping with 'min' or 'max', got 0.5"),
    ("gates:\n  a: {min: 0.1, provenance: abc}\n", ":2: gate 'a' names provenance 'abc', which the file does not define"),
    ("- 1\n- 2\n", ":1: expected a mapping with 'gates'"),
    ("gate:\n  a: {min: 1}\n", ":1: unknown top-level key(s) ['gate']"),
    ("# c\ngates: [1, 2]\n", ":2: 'gates' must be a mapping"),
    ("gates: {}\n\nprovenance: [1]\n", ":3: 'provenance' must be a mapping"),
    ("provenance:\n  abc: 5\ngates:\n  a: {min: 0.1, provenance: abc}\n", ":2: provenance 'abc' must be a mapping"),
    ("gates:\n  a: {min: 0.1}\n  b: {min: 0.2}\n  a: {min: 0.9}\n", ":4: 'a' appears twice under 'gates'"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m.split(": ", 1)[1][:30] for _, m in BAD])
def test_malformed_files_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ThresholdFileError) as info:
        ThresholdFile.load(path)
    assert str(info.value).startswith(f"{path}{message}")


# ------------------------------------------------------------------------------- verdicts


def thresholds(**bounds: Bound) -> ThresholdFile:
    return ThresholdFile(Path("thresholds/tiny.yaml"), dict(bounds))


@pytest.mark.parametrize(
    "direction, bound, value, status",
    [
        ("min", 0.5, 0.6, "pass"),
        ("min", 0.5, 0.5, "pass"),  # the bound itself passes
        # no uncertainty measured (se 0): a miss is inconclusive, never failed with certainty (issue 24)
        ("min", 0.5, 0.4999999, "inconclusive"),
        ("max", 0.5, 0.4, "pass"),
        ("max", 0.5, 0.5, "pass"),
        ("max", 0.5, 0.5000001, "inconclusive"),
        ("min", 0.5, float("nan"), "fail"),
        ("max", 0.5, float("nan"), "fail"),
    ],
)
def test_pass_and_fail(direction, bound, value, status):
    v = evaluate(Measurement("g", value, n=10, direction=direction), thresholds(g=Bound(direction, bound)), PROV)
    assert v.status == status
    assert v.failed == (status == "fail")
    assert v.write is None
    assert v.message.startswith("g: measured") and f"bound {direction} 0.5" in v.message
    assert v.message.endswith("FAILED") == (status == "fail")


def test_a_missing_gate_fails_and_proposes_a_bound_from_the_measurement():
    # no uncertainty known: the bound sits the float margin (1e-4) on the passing side of the value
    v = evaluate(Measurement("g", 0.12345678, n=42), thresholds(), PROV)
    assert (v.status, v.failed, v.write) == ("missing", True, 0.123356)
    assert "no gate in thresholds/tiny.yaml; measured 0.1235 (n=42)" in v.message
    assert "Proposed `min: 0.123356` (margin 0.0001008 at level 0.99) in thresholds/tiny.proposed.yaml" in v.message
    assert "--t2i-update-thresholds" in v.message
    v = evaluate(Measurement("g", 0.12345612, n=42, direction="max"), thresholds(), PROV)
    assert v.write == 0.123557


def test_a_missing_gate_measured_as_nan_proposes_nothing():
    v = evaluate(Measurement("g", float("nan"), n=3), thresholds(), PROV)
    assert (v.status, v.write) == ("missing", None)
    assert "nothing to propose" in v.message and "Proposed" not in v.message
    assert evaluate(Measurement("g", float("nan"), n=3), thresholds(), PROV, update=True).status == "missing"


def test_update_writes_new_and_tighter_gates():
    v = evaluate(Measurement("g", 0.7, n=5), thresholds(), PROV, update=True)
    assert (v.status, v.failed, v.write, v.write_margin, v.write_level) == ("written", False, 0.6999, 0.0001, 0.99)
    v = evaluate(Measurement("g", 0.7, n=5), thresholds(g=Bound("min", 0.5)), PROV, update=True)
    assert (v.status, v.failed, v.write) == ("written", False, 0.6999)
    assert "bound 0.5 -> 0.6999" in v.message
    v = evaluate(Measurement("g", 0.3, n=5, direction="max"), thresholds(g=Bound("max", 0.5)), PROV, update=True)
    assert (v.status, v.write) == ("written", 0.3001)
    # The same measurement again: the bound it would write is the one in the file, nothing to write.
    v = evaluate(Measurement("g", 0.5, n=5), thresholds(g=Bound("min", 0.4999)), PROV, update=True)
    assert (v.status, v.write) == ("pass", None)


def test_a_written_bound_sits_z_sqrt2_standard_errors_from_the_estimate():
    # se 0.05 from the interval's width; level 0.99: z = 2.3263, margin = z * sqrt(2) * se = 0.1645
    m = Measurement("g", 0.6, n=50, interval=(0.6 - 1.959964 * 0.05, 0.6 + 1.959964 * 0.05))
    v = evaluate(m, thresholds(), PROV, update=True)
    assert v.write == pytest.approx(0.6 - 2.326348 * 2 ** 0.5 * 0.05, abs=2e-6) and v.write_margin == pytest.approx(0.1645, abs=1e-4)
    v = evaluate(m, thresholds(), PROV, update=True, bound_level=0.95)
    assert v.write == pytest.approx(0.6 - 1.644854 * 2 ** 0.5 * 0.05, abs=2e-6)


@pytest.mark.parametrize("direction, bound, value", [("min", 0.5, 0.4), ("max", 0.5, 0.6)])
def test_update_refuses_to_loosen_unless_allowed(direction, bound, value):
    t = thresholds(g=Bound(direction, bound))
    m = Measurement("g", value, n=5, direction=direction)
    v = evaluate(m, t, PROV, update=True)
    written = value - 1e-4 if direction == "min" else value + 1e-4
    assert (v.status, v.failed, v.write) == ("refused", True, None)
    assert f"refusing to loosen the gate to {written:g} without --t2i-allow-loosen" in v.message
    v = evaluate(m, t, PROV, update=True, allow_loosen=True)
    assert (v.status, v.failed) == ("written", False) and v.write == pytest.approx(written)
    # Without --t2i-update-thresholds, allow_loosen changes nothing: the plain verdict (inconclusive: se 0).
    assert evaluate(m, t, PROV, allow_loosen=True).status == "inconclusive"


def test_an_update_that_would_not_change_the_bound_keeps_its_provenance():
    pid = provenance_id({**PROV, "seed": 1})
    t = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.4999, pid)}, {pid: {**PROV, "seed": 1}})
    v = evaluate(Measurement("g", 0.5, n=5), t, PROV)
    assert (v.status, v.provenance_changes) == ("pass", {"seed": (1, 0)})
    v = evaluate(Measurement("g", 0.5, n=5), t, PROV, update=True)
    assert (v.status, v.write) == ("pass", None)  # the bound stays as it was measured (and says so)


def test_provenance_changes_list_every_differing_field():
    pid = provenance_id(PROV)
    t = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.1, pid)}, {pid: PROV})
    assert evaluate(Measurement("g", 0.5, n=5), t, PROV).provenance_changes == {}
    now = {**PROV, "device": "cuda", "torch": "2.15.0", "extra": 1}
    assert evaluate(Measurement("g", 0.5, n=5), t, now).provenance_changes == {
        "device": ("cpu", "cuda"), "torch": ("2.14.1", "2.15.0"), "extra": (None, 1)}
    # A bound with no recorded provenance cannot be compared: no warning.
    assert evaluate(Measurement("g", 0.5, n=5), thresholds(g=Bound("min", 0.1)), now).provenance_changes == {}


def test_interval_is_shown():
    m = Measurement("g", 0.6, n=9, interval=(0.55, 0.65))
    v = evaluate(m, thresholds(g=Bound("min", 0.5)), PROV)
    assert "measured 0.6000 [0.5500, 0.6500] (n=9)" in v.message
    assert m.to_dict()["interval"] == [0.55, 0.65]


@settings(max_examples=500, deadline=None)
@given(finite, st.sampled_from(["min", "max"]))
def test_safe_round_never_fails_the_measured_value(value, direction):
    bound = safe_round(value, direction)
    assert value >= bound if direction == "min" else value <= bound
    if abs(value) < 1e6:
        assert abs(bound - value) <= 1e-6 + 1e-12 and round(bound, 6) == bound
    # and the written number reads back as the same number
    t = ThresholdFile(Path("t.yaml"), {"g": Bound(direction, bound)})
    assert evaluate(Measurement("g", value, n=1, direction=direction), t, {}).status == "pass"


@settings(max_examples=100, deadline=None)
@given(finite, st.sampled_from(["min", "max"]))
def test_a_written_bound_passes_after_a_save_and_load(tmp_path_factory, value, direction):
    path = tmp_path_factory.mktemp("sr") / "t.yaml"
    ThresholdFile(path, {"g": Bound(direction, safe_round(value, direction))}).save()
    verdict = evaluate(Measurement("g", value, n=1, direction=direction), ThresholdFile.load(path), {})
    assert verdict.status == "pass"


def test_proposed_path():
    assert proposed_path(Path("thresholds/tiny.yaml")) == Path("thresholds/tiny.proposed.yaml")
    assert safe_round(0.3 + 0.6, "min") == 0.899999  # 0.8999999999999999: rounding up would fail it
