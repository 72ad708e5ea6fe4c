"""The thresholds file (gating/thresholds.py): round trip that keeps comments and order, the update
flow's write-back, and every thresholds-file hazard of issue #17, each reproduced here."""

from __future__ import annotations

import collections
import doctest
import difflib
import os
import re
import stat
from pathlib import Path

import pytest

from t2i_fairness.base.files import current_umask
from hypothesis import example, given, settings
from hypothesis import strategies as st

from t2i_fairness.gating import thresholds as module
from t2i_fairness.gating.thresholds import (
    Bound,
    BoundUpdate,
    ThresholdFile,
    ThresholdFileError,
    atomic_write_text,
    bound_problem,
    proposed_path,
    provenance_id,
    write_back,
)

REPO = Path(__file__).resolve().parents[1]
PROV = {"model": "fakegen:v1", "scorers": "tiny", "images_per_prompt": 6, "seed": 0, "device": "cpu"}
SMALL_RUN = {**PROV, "images_per_prompt": 2, "seed": 7}

COMMENTED = """\
# t2i-fairness gates. Review changes to this file like code.
# second header line

gates:
  # --- DIG In: region gates ---
  test_a[africa]:   # lowered for REL-42
    min: 0.25
    provenance: 6c31840d
  test_a[europe]:
    min: 1e-3  # policy floor
    provenance: 6c31840d

  # consistency: measured on the paper profile
  test_c[object]: {max: 0.5, provenance: 6c31840d}
  'test_q: quoted[x]':
    max: 2
# trailing comment of the gates section
provenance:
  6c31840d:   # the tiny default
    model: tiny
    seed: 0
    objects: null
# end of file
"""


def write(tmp_path: Path, text: str, name: str = "t.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path) -> str:
    with pytest.raises(ThresholdFileError) as info:
        ThresholdFile.load(path)
    return str(info.value)


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added) between two texts."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def test_doctests_run():
    assert doctest.testmod(module, raise_on_error=False).failed == 0


# ------------------------------------------------------------------------------- round trip


def test_an_unchanged_file_is_written_back_byte_for_byte(tmp_path):
    path = write(tmp_path, COMMENTED)
    t = ThresholdFile.load(path)
    assert t.gates == {
        "test_a[africa]": Bound("min", 0.25, "6c31840d"),
        "test_a[europe]": Bound("min", 0.001, "6c31840d"),
        "test_c[object]": Bound("max", 0.5, "6c31840d"),
        "test_q: quoted[x]": Bound("max", 2.0, None),
    }
    assert t.provenances == {"6c31840d": {"model": "tiny", "seed": 0, "objects": None}}
    assert t.lines == {"test_a[africa]": 6, "test_a[europe]": 9, "test_c[object]": 14, "test_q: quoted[x]": 15}
    assert t.dump() == COMMENTED
    t.save()
    assert path.read_text() == COMMENTED


def test_the_projects_own_file_round_trips_byte_for_byte(tmp_path):
    # thresholds/tiny.yaml less its `max: .inf` gates (refused since #13, see test_non_finite_bounds_are_refused).
    text = (REPO / "thresholds" / "tiny.yaml").read_text()
    lines = text.splitlines(True)
    keep, i = [], 0
    while i < len(lines):
        if i + 1 < len(lines) and lines[i + 1].strip() == "max: .inf":
            i += 3 if i + 2 < len(lines) and lines[i + 2].strip().startswith("provenance:") else 2
            continue
        keep.append(lines[i])
        i += 1
    finite = "".join(keep)
    assert ".inf" not in finite
    t = ThresholdFile.load(write(tmp_path, finite))
    assert len(t.gates) > 400
    assert t.dump() == finite


def test_an_update_changes_only_the_lines_of_changed_bounds(tmp_path):
    path = write(tmp_path, COMMENTED)
    t = ThresholdFile.load(path)
    result = t.apply_updates([
        BoundUpdate("test_a[europe]", "min", 0.002, SMALL_RUN),   # value changed: new provenance
        BoundUpdate("test_a[africa]", "min", 0.25, SMALL_RUN),    # same value: provenance kept
        BoundUpdate("test_c[object]", "max", 0.4, SMALL_RUN),     # flow-style entry
    ])
    assert result.changed == ["test_a[europe]", "test_c[object]"] and result.unchanged == ["test_a[africa]"]
    t.save()
    pid = provenance_id(SMALL_RUN)
    expected = COMMENTED.replace(
        "    min: 1e-3  # policy floor\n    provenance: 6c31840d\n",
        f"    min: 0.002 # policy floor\n    provenance: {pid}\n",
    ).replace(
        "{max: 0.5, provenance: 6c31840d}", f"{{max: 0.4, provenance: {pid}}}"
    ).replace(
        "    objects: null\n",
        "    objects: null\n  " + pid + ":\n" + "".join(f"    {k}: {v}\n" for k, v in SMALL_RUN.items()),
    )
    assert path.read_text() == expected
    back = ThresholdFile.load(path)
    assert back.gates["test_a[africa]"] == Bound("min", 0.25, "6c31840d")
    assert back.gates["test_a[europe]"] == Bound("min", 0.002, pid)
    assert back.provenances[pid] == SMALL_RUN


def test_new_gates_go_in_sorted_position_and_comments_stay_above_their_gate(tmp_path):
    path = write(tmp_path, COMMENTED)
    t = ThresholdFile.load(path)
    t.apply_updates([BoundUpdate(g, "max", 0.75, SMALL_RUN) for g in ("test_0[first]", "test_b[new]", "test_z[last]")])
    out = t.dump()
    removed, added = changed_lines(COMMENTED, out)
    assert removed == []  # nothing the team wrote is lost or rewritten
    pid = provenance_id(SMALL_RUN)
    lines = out.splitlines()
    # new gates directly below the previous entry; the comments above the next entry stay above it
    at = lines.index("  test_0[first]:")
    assert lines[at - 1] == "gates:" and lines[at + 3] == "  # --- DIG In: region gates ---"
    at = lines.index("  test_b[new]:")
    assert lines[at - 2:at] == ["    min: 1e-3  # policy floor", "    provenance: 6c31840d"]
    assert lines[at + 1:at + 6] == ["    max: 0.75", f"    provenance: {pid}", "", "  # consistency: measured on the paper profile",
                                    "  test_c[object]: {max: 0.5, provenance: 6c31840d}"]
    at = lines.index("  test_z[last]:")
    assert lines[at - 1] == "    max: 2" and lines[at + 3] == "# trailing comment of the gates section"
    assert lines[-1] == "# end of file"
    assert list(ThresholdFile.load(write(tmp_path, out, "o.yaml")).gates) == [
        "test_0[first]", "test_a[africa]", "test_a[europe]", "test_b[new]", "test_c[object]", "test_q: quoted[x]",
        "test_z[last]"]


def test_in_an_unsorted_file_a_new_gate_goes_before_the_first_gate_that_sorts_after_it(tmp_path):
    text = "gates:\n  m: {min: 1}\n  c: {min: 1}\n  x: {min: 1}\n"
    t = ThresholdFile.load(write(tmp_path, text))
    t.gates["d"] = Bound("min", 2.0)
    t.gates["n"] = Bound("min", 3.0)
    assert t.dump() == "gates:\n  d:\n    min: 2.0\n  m: {min: 1}\n  c: {min: 1}\n  n:\n    min: 3.0\n  x: {min: 1}\n"


def test_a_removed_gate_takes_only_its_own_lines(tmp_path):
    t = ThresholdFile.load(write(tmp_path, COMMENTED))
    del t.gates["test_a[europe]"]
    del t.gates["test_q: quoted[x]"]
    removed, added = changed_lines(COMMENTED, t.dump())
    assert removed == ["  test_a[europe]:", "    min: 1e-3  # policy floor", "    provenance: 6c31840d",
                       "  'test_q: quoted[x]':", "    max: 2"]
    assert added == []


def test_a_direction_change_or_a_dropped_provenance_keeps_the_gates_comments(tmp_path):
    t = ThresholdFile.load(write(tmp_path, COMMENTED))
    t.gates["test_a[africa]"] = Bound("max", 0.25, "6c31840d")
    t.gates["test_a[europe]"] = Bound("min", 0.001, None)
    removed, added = changed_lines(COMMENTED, t.dump())
    assert removed == ["    min: 0.25", "    provenance: 6c31840d"] and added == ["    max: 0.25"]
    assert "  test_a[africa]:   # lowered for REL-42\n    max: 0.25\n    provenance: 6c31840d\n" in t.dump()
    assert "  test_a[europe]:\n    min: 1e-3  # policy floor\n\n  # consistency" in t.dump()


def test_provenance_no_gate_names_is_dropped_and_a_missing_section_is_added(tmp_path):
    t = ThresholdFile.load(write(tmp_path, "# only a note\ngates:\n  a:  # keep me\n    max: 3\n"))
    t.apply_updates([BoundUpdate("a", "max", 2.5, PROV)])
    pid = provenance_id(PROV)
    assert t.dump().startswith(f"# only a note\ngates:\n  a:  # keep me\n    max: 2.5\n    provenance: {pid}\nprovenance:\n  {pid}:\n")
    t.gates["a"] = Bound("max", 2.5)
    assert t.dump() == "# only a note\ngates:\n  a:  # keep me\n    max: 2.5\nprovenance: {}\n"


def test_a_comments_only_file_keeps_its_comments(tmp_path):
    path = write(tmp_path, "# gates for the paper profile go here\n")
    t = ThresholdFile.load(path)
    assert t.gates == {}
    t.apply_updates([BoundUpdate("g", "min", 0.5, PROV)])
    t.save()
    assert path.read_text().startswith("# gates for the paper profile go here\ngates:\n  g:\n    min: 0.5\n")


def test_a_fresh_file_has_the_header_and_sorted_gates(tmp_path):
    t = ThresholdFile(tmp_path / "new.yaml", {"b": Bound("max", 1.0), "a": Bound("min", 0.5)})
    t.save()
    text = (tmp_path / "new.yaml").read_text()
    assert text == module.HEADER + "gates:\n  a:\n    min: 0.5\n  b:\n    max: 1.0\nprovenance: {}\n"
    assert ThresholdFile.load(tmp_path / "new.yaml").dump() == text


def test_a_legacy_provenance_id_that_yaml_1_2_reads_as_a_float_is_kept_as_written(tmp_path):
    # PyYAML (YAML 1.1) wrote a hex id such as 1234e567 unquoted; YAML 1.2 reads that as a number.
    text = "gates:\n  a:\n    min: 0.5\n    provenance: 1234e567\nprovenance:\n  1234e567:\n    seed: 0\n"
    t = ThresholdFile.load(write(tmp_path, text))
    assert t.gates["a"].provenance == "1234e567" and t.provenances == {"1234e567": {"seed": 0}}
    assert t.dump() == text
    t.apply_updates([BoundUpdate("b", "min", 0.1, PROV)])
    assert ThresholdFile.load(write(tmp_path, t.dump(), "o.yaml")).gates["a"] == Bound("min", 0.5, "1234e567")


names = st.sampled_from([f"test_g[{c}]" for c in "bdfhjlnprtvx"])
new_names = st.sampled_from([f"test_g[{c}]" for c in "acegikmoqsuwyz"])
comment = st.text(st.sampled_from("abcXYZ019 -#:!"), min_size=1, max_size=12).map(lambda s: "# " + s.strip())
finite = st.floats(allow_nan=False, allow_infinity=False, width=32).map(float)


# found by hypothesis in CI (e389eae): a flow-style gate beside an inserted one, which ndiff aligns as removed and added
@example(entries=[("test_g[b]", "min", 0.0, [], None, False, False), ("test_g[f]", "min", 0.0, [], None, False, True),
                  ("test_g[h]", "min", 0.0, [], None, False, False), ("test_g[d]", "min", 0.0, [], None, False, False)],
         changes=[(0, 1.0)], inserts=[("test_g[g]", 0.0)])
@settings(max_examples=120, deadline=None)
@given(
    entries=st.lists(st.tuples(names, st.sampled_from(["min", "max"]), finite, st.lists(comment, max_size=2),
                               st.none() | comment, st.booleans(), st.booleans()),
                     min_size=1, max_size=6, unique_by=lambda e: e[0]),
    changes=st.lists(st.tuples(st.integers(0, 5), finite), max_size=4),
    inserts=st.lists(st.tuples(new_names, finite), max_size=4, unique_by=lambda e: e[0]),
)
def test_every_comment_stays_where_it_was(tmp_path_factory, entries, changes, inserts):
    """Any file of commented gates, any updates: no line the team wrote changes except changed values,
    comment lines above a gate stay directly above it, end-of-line comments stay on their line."""
    lines = ["# header", "gates:"]
    for name, direction, value, above, eol, blank, flow in entries:
        lines += [""] * blank + [f"  {c}" for c in above]
        tail = f"  {eol}" if eol else ""
        lines += [f"  {name}: {{{direction}: {value!r}}}{tail}"] if flow else [f"  {name}:{tail}", f"    {direction}: {value!r}"]
    lines += ["# after the gates", "provenance: {}", "# end"]
    text = "\n".join(lines) + "\n"
    path = tmp_path_factory.mktemp("c") / "t.yaml"
    path.write_text(text)
    t = ThresholdFile.load(path)
    assert t.dump() == text
    expected = {name: Bound(d, v) for name, d, v, *_ in entries}
    updates = [BoundUpdate(entries[i % len(entries)][0], entries[i % len(entries)][1], v, SMALL_RUN) for i, v in changes]
    updates += [BoundUpdate(n, "min", v, SMALL_RUN) for n, v in inserts]
    t.apply_updates(updates)
    pid = provenance_id(SMALL_RUN)
    for u in updates:
        if u.gate not in expected or expected[u.gate].value != u.value:
            expected[u.gate] = Bound(u.direction, u.value, pid)
    out = t.dump()
    back = ThresholdFile.load(write(path.parent, out, "o.yaml"))
    assert back.gates == expected
    removed, added = changed_lines(text, out)
    changed = {u.gate for u in updates if u.gate in dict((e[0], e) for e in entries)}
    readded = collections.Counter(added)
    for line in removed:  # only a changed gate's own lines (its value) may differ, and `{}` gets entries
        if readded[line]:  # the same line removed and added again: difflib's alignment around an inserted gate, not
            readded[line] -= 1  # a change (where each line stands is checked below)
            continue
        assert line == "provenance: {}" or any(line.startswith((f"    {d}:", f"  {g}:")) for g in changed for d in ("min", "max")), line
    out_lines = out.splitlines()
    for name, direction, value, above, eol, blank, flow in entries:
        at = next(i for i, ln in enumerate(out_lines) if ln.startswith(f"  {name}:"))
        assert out_lines[at - len(above):at] == [f"  {c}" for c in above]
        if eol:
            assert out_lines[at].endswith(eol)
    assert out_lines[out_lines.index("provenance: {}" if "provenance: {}" in out_lines else "provenance:") - 1] == "# after the gates"
    assert "# end" in out_lines


# ------------------------------------------------------------------------------- hazards of issue #17


def test_a_second_top_level_gates_key_is_an_error_naming_both_lines(tmp_path):
    # Reproduced: PyYAML kept the second `gates:` and the update then deleted the first one's bounds.
    text = "gates:\n  a: {min: 0.1}\n  b: {min: 0.2}\nprovenance: {}\ngates:\n  c: {min: 0.3}\n"
    path = write(tmp_path, text)
    message = load_error(path)
    assert message.startswith(f"{path}:5: 'gates' appears twice at the top level (first at line 1)")
    # and nothing is written: the update flow loads the file first
    with pytest.raises(ThresholdFileError):
        write_back(path, [{"gate": "c", "status": "written", "direction": "min", "write": 0.5, "provenance": PROV}])
    assert path.read_text() == text


@pytest.mark.parametrize("text, line, first, key, where", [
    ("gates:\n  a:\n    min: 0.1\n    min: 0.9\n", 4, 3, "min", "in gate 'a'"),
    ("gates:\n  a: {min: 0.1, provenance: p, provenance: q}\n", 2, 2, "provenance", "in gate 'a'"),
    ("gates:\n  a: {min: 0.1}\n  b: {min: 0.2}\n  a: {min: 0.9}\n", 4, 2, "a", "under 'gates'"),
    ("gates: {}\nprovenance:\n  p:\n    seed: 0\n    seed: 1\n", 5, 4, "seed", "in provenance 'p'"),
    ("gates: {}\nprovenance:\n  p: {seed: 0}\n  p: {seed: 1}\n", 4, 3, "p", "under 'provenance'"),
])
def test_duplicate_keys_anywhere_are_errors_with_both_lines(tmp_path, text, line, first, key, where):
    # Reproduced: a gate with `min` twice loaded silently (PyYAML keeps the last).
    path = write(tmp_path, text)
    assert load_error(path).startswith(f"{path}:{line}: {key!r} appears twice {where} (first at line {first})")


@pytest.mark.parametrize("spelled, value", [("1e-3", 0.001), ("-2.5E+2", -250.0), ("0", 0.0), ("7", 7.0), (".5", 0.5)])
def test_yaml_1_2_numbers_are_numbers(tmp_path, spelled, value):
    # Reproduced: YAML 1.1 (PyYAML) reads 1e-3 as a string and the file was refused as "not a number".
    t = ThresholdFile.load(write(tmp_path, f"gates:\n  a:\n    min: {spelled}\n"))
    assert t.gates["a"] == Bound("min", value)


@pytest.mark.parametrize("spelled", [".inf", "-.inf", ".Inf", "1e400"])
def test_non_finite_bounds_are_refused(tmp_path, spelled):
    path = write(tmp_path, f"# c\ngates:\n  a: {{min: 0}}\n  b:\n    max: {spelled}\n")
    message = load_error(path)
    assert message.startswith(f"{path}:5: gate 'b': max is ")
    assert ".inf, not a finite number: a bound at infinity can never fail" in message


def test_non_finite_values_are_never_written(tmp_path):
    t = ThresholdFile.load(write(tmp_path, "gates:\n  a: {max: 1}\n"))
    result = t.apply_updates([BoundUpdate("a", "max", float("inf"), PROV), BoundUpdate("b", "min", float("nan"), PROV)])
    assert result.changed == [] and len(result.refused) == 2
    assert "a: max is .inf, not a finite number" in result.refused[0]
    assert t.gates == {"a": Bound("max", 1.0)}
    t.gates["c"] = Bound("min", float("-inf"))  # set by hand: dump refuses too (one rule, bound_problem)
    with pytest.raises(ThresholdFileError, match=r"t.yaml: gate 'c': min is -.inf, not a finite number"):
        t.dump()


BAD = [
    ("gates:\n  a:\n    min: 0.1\n  b: [\n", ":5: invalid YAML"),
    ("gates:\n  a: {min: 0.1}\n  b:\n    maximum: 2\n", ":3: gate 'b' needs exactly one of 'min' or 'max'"),
    ("gates:\n  a: {min: 0.1, max: 0.3}\n", ":2: gate 'a' needs exactly one"),
    ("# c\ngates:\n  a: {min: 0.1}\n  b:\n    max: lots\n", ":5: gate 'b': max must be a number, got 'lots'"),
    ("gates:\n  a: {min: .nan}\n", ":2: gate 'a': min must be a number, got nan"),
    ("gates:\n  a: {min: true}\n", ":2: gate 'a': min must be a number, got True"),
    ("gates:\n  a: {min: yes}\n", ":2: gate 'a': min must be a number, got 'yes'"),
    ("gates:\n  a: 0.5\n", ":2: gate 'a' must be a mapping with 'min' or 'max', got 0.5"),
    ("gates:\n  a:\n    min: 0.1\n    provenance: abc\n", ":4: gate 'a' names provenance 'abc', which the file does not define"),
    ("- 1\n- 2\n", ":1: expected a mapping with 'gates'"),
    ("gates: {}\ngate:\n  a: {min: 1}\n", ":2: unknown top-level key(s) ['gate']"),
    ("# c\ngates: [1, 2]\n", ":2: 'gates' must be a mapping"),
    ("gates: {}\n\nprovenance: [1]\n", ":3: 'provenance' must be a mapping"),
    ("provenance:\n  abc: 5\ngates:\n  a: {min: 0.1, provenance: abc}\n", ":2: provenance 'abc' must be a mapping"),
    ("base: &b {min: 1}\ngates:\n  a:\n    <<: *b\n", ":1: unknown top-level key(s) ['base']"),
    ("gates:\n  a:\n    <<: {min: 1}\n    provenance: x\n", ":3: YAML merge keys"),
    ("gates:\n  a: {min: 0.1}\n---\ngates: {}\n", ":3: invalid YAML: but found another document"),
    ("gates:\n  a: {min: 2020-13-45}\n", ": invalid YAML value"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m.split(": ", 1)[-1][:30] for _, m in BAD])
def test_malformed_files_name_file_and_line(tmp_path, text, message):
    path = write(tmp_path, text)
    assert load_error(path).startswith(f"{path}{message}")


def test_a_non_utf8_file_is_an_error_naming_file_and_line(tmp_path):
    # Reproduced: UnicodeDecodeError escaped from --t2i-thresholds as INTERNALERROR.
    path = tmp_path / "latin1.yaml"
    path.write_bytes("gates:\n  a: {min: 0.1}  # r\xe9gion\n".encode("latin-1"))
    message = load_error(path)
    assert message.startswith(f"{path}:2: not UTF-8 text (byte 0xe9 at offset 27); save the file as UTF-8")
    assert issubclass(ThresholdFileError, ValueError)  # plugin.py turns it into a usage error


def test_a_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfgates:\n  a: {min: 0.1}\n")
    assert ThresholdFile.load(path).gates == {"a": Bound("min", 0.1)}


def test_a_directory_is_an_error_naming_it(tmp_path):
    # Reproduced: IsADirectoryError escaped from --t2i-thresholds as INTERNALERROR.
    assert load_error(tmp_path) == f"{tmp_path}: is a directory; expected a thresholds YAML file (e.g. {tmp_path / 'tiny.yaml'})"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs file permissions that bind the user")
def test_an_unreadable_file_is_an_error_naming_it(tmp_path):
    path = write(tmp_path, "gates: {}\n")
    path.chmod(0)
    try:
        assert load_error(path) == f"{path}: cannot read: Permission denied"
    finally:
        path.chmod(0o600)


def test_a_missing_or_dangling_path_is_an_empty_file(tmp_path):
    assert ThresholdFile.load(tmp_path / "none.yaml").gates == {}
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "elsewhere" / "t.yaml")
    t = ThresholdFile.load(tmp_path / "dangling.yaml")
    t.gates["g"] = Bound("min", 0.5)
    assert t.save() == tmp_path / "elsewhere" / "t.yaml"
    assert (tmp_path / "dangling.yaml").is_symlink()


RECORDS = [
    {"gate": "new_gate", "status": "missing", "direction": "min", "write": 0.3, "provenance": SMALL_RUN},
    {"gate": "g_changed", "status": "written", "direction": "min", "write": 0.45, "provenance": SMALL_RUN},
    {"gate": "g_same", "status": "written", "direction": "max", "write": 0.2, "provenance": SMALL_RUN},
    {"gate": "g_pass", "status": "pass", "direction": "min", "write": None, "provenance": SMALL_RUN},
]
BASE = """\
gates:
  g_changed: {min: 0.5, provenance: 6c31840d}   # keep
  g_pass: {min: 0.1, provenance: 6c31840d}
  g_same: {max: 0.2, provenance: 6c31840d}
provenance:
  6c31840d: {seed: 0}
"""


def test_write_back_rewrites_provenance_only_where_the_value_changed(tmp_path):
    # Reproduced: GateSession.finish gave g_same (re-measured at its bound) the small run's provenance.
    path = write(tmp_path, BASE)
    result = write_back(path, RECORDS)
    assert result.written == ["g_changed"] and result.proposed == ["new_gate"] and result.notes == []
    pid = provenance_id(SMALL_RUN)
    t = ThresholdFile.load(path)
    assert t.gates == {"g_changed": Bound("min", 0.45, pid), "g_pass": Bound("min", 0.1, "6c31840d"),
                       "g_same": Bound("max", 0.2, "6c31840d")}
    assert path.read_text().startswith(f"gates:\n  g_changed: {{min: 0.45, provenance: {pid}}}  # keep\n")
    assert ThresholdFile.load(proposed_path(path)).gates == {"new_gate": Bound("min", 0.3, pid)}


def test_write_back_leaves_the_file_alone_when_nothing_changed(tmp_path):
    path = write(tmp_path, BASE)
    before = os.stat(path)
    assert write_back(path, RECORDS[2:]).written == []
    assert path.read_text() == BASE and os.stat(path).st_mtime_ns == before.st_mtime_ns


def test_write_back_accepts_gate_record_objects(tmp_path):
    from t2i_fairness.gating.session import GateRecord

    path = write(tmp_path, BASE)
    records = [GateRecord(nodeid="x", value=0.45, n=4, bound=0.5, message="", **{k: v for k, v in r.items()})
               for r in RECORDS]
    assert write_back(path, records).written == ["g_changed"]


@pytest.mark.parametrize("corrupt", [b"gates:\n  a: {min: [\n", b"\xff\xfe\x00", b"gates:\n  a: {min: 1}\ngates: {}\n", None])
def test_a_corrupt_proposal_file_is_set_aside_and_the_proposals_still_written(tmp_path, corrupt):
    # Reproduced: ThresholdFile.load of the old proposal raised and the run's proposals were lost.
    path = write(tmp_path, BASE)
    target = proposed_path(path)
    if corrupt is None:
        target.mkdir()  # a directory where the proposal file should be
    else:
        target.write_bytes(corrupt)
    result = write_back(path, RECORDS)
    assert result.proposed == ["new_gate"]
    assert ThresholdFile.load(target).gates == {"new_gate": Bound("min", 0.3, provenance_id(SMALL_RUN))}
    [aside] = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert re.fullmatch(r"t\.proposed\.yaml\.corrupt-\d{8}T\d{6}", aside.name)
    if corrupt is not None:
        assert aside.read_bytes() == corrupt
    [note] = result.notes
    assert note.startswith(f"{target} could not be read ({target}") and f"kept it as {aside}" in note


def test_existing_proposals_are_kept_with_their_comments(tmp_path):
    path = write(tmp_path, BASE)
    write(tmp_path, "gates:\n  older: {min: 0.9}  # from last week\n", "t.proposed.yaml")
    write_back(path, RECORDS)
    text = proposed_path(path).read_text()
    assert text.startswith("gates:\n  new_gate:\n    min: 0.3\n")
    assert "  older: {min: 0.9}  # from last week\n" in text


@pytest.mark.skipif(os.name != "posix", reason="symlinks and modes")
def test_an_update_writes_through_a_symlink_and_keeps_the_mode(tmp_path):
    # Reproduced: the update replaced the symlink with a regular file of mode 0600.
    (tmp_path / "team").mkdir()
    real = write(tmp_path / "team", BASE)
    real.chmod(0o664)
    link = tmp_path / "thresholds.yaml"
    link.symlink_to(Path("team") / "t.yaml")
    write_back(link, RECORDS)
    assert link.is_symlink() and os.readlink(link) == str(Path("team") / "t.yaml")
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o664
    assert ThresholdFile.load(real).gates["g_changed"].value == 0.45
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    # the proposals go beside the path the user named (the link), as before
    assert proposed_path(link).is_file()


@pytest.mark.skipif(os.name != "posix", reason="umask")
@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_new_files_get_the_users_umask(tmp_path, umask):
    # Reproduced: mkstemp made every written YAML 0600, unreadable to a team sharing the folder.
    old = os.umask(umask)
    try:
        assert current_umask() == umask
        write_back(tmp_path / "t.yaml", RECORDS)
        atomic_write_text(tmp_path / "direct.yaml", "a: 1\n")
    finally:
        os.umask(old)
    for name in ("t.proposed.yaml", "direct.yaml"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o666 & ~umask


def test_atomic_write_leaves_no_temporary_file_on_failure(tmp_path, monkeypatch):
    path = write(tmp_path, "old\n", "f.yaml")

    def fail(*args):
        raise OSError(28, "No space left on device")

    import t2i_fairness.base.files as files

    monkeypatch.setattr(files.os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write_text(path, "new\n")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["f.yaml"]


def test_save_names_the_file_it_cannot_write(tmp_path):
    t = ThresholdFile(tmp_path / "t.yaml", {"a": Bound("min", 1.0)})
    (tmp_path / "t.yaml").mkdir()
    with pytest.raises(ThresholdFileError, match=re.escape(f"{tmp_path / 't.yaml'}: cannot write")):
        t.save()


def test_bound_problem_is_the_one_rule():
    assert [bound_problem(v) is None for v in (0, -1, 2.5, 1e300)] == [True] * 4
    assert [bound_problem(v) is None for v in (True, "0.5", None, float("nan"), float("inf"), 10**400)] == [False] * 6


# -- issue #30: inputs that cannot be right are refused, with the file and line -------------------------


def test_a_bound_no_value_can_meet_is_refused_at_configure_with_file_and_line(pytester):
    """``min: 5.0`` on a share (a typo of 0.5) used to give INCONCLUSIVE, then ``verdict: PASSED`` and exit 0."""
    path = pytester.path / "t.yaml"
    path.write_text(
        "gates:\n"
        "  test_region_coverage[synthetic-object-africa]:\n"
        "    min: 5.0\n"                                # line 3: a coverage (share) above 1
        "  test_cis[k1]:\n"
        "    min: -0.2\n"                               # below a share's range: can never fail, kept (the update flow writes these)
        "  test_dwl[hin_deva]:\n"
        "    min: 1.5\n"                                # DWL is a distance in [0, 2] (its family's own range)
        "  test_clgc_vs_english[hin_deva]:\n"
        "    min: -3\n"                                 # a ratio of cosine means: any value
        "  test_region_disparity_precision[synthetic-object]:\n"
        "    provenance: p1\n"
        "    max: -0.1\n"                               # line 12: a ratio of shares is >= 0
        "  my_own_gate:\n"
        "    min: 99\n"                                 # not a suite test: its range is unknown, not checked
        "provenance:\n  p1: {seed: 0}\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--t2i-thresholds", str(path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    err = result.stderr.str()
    assert (f"--t2i-thresholds: {path}:3: gate 'test_region_coverage[synthetic-object-africa]': min 5 can never be met: "
            "the values lie in [0, 1] (test_region_coverage is a coverage gate)") in err, err
    assert (f"{path}:12: gate 'test_region_disparity_precision[synthetic-object]': max -0.1 can never be met: the values "
            "lie in >= 0 (test_region_disparity_precision is a ratio gate)") in err, err
    assert "test_cis" not in err and "test_dwl" not in err and "clgc" not in err and "my_own_gate" not in err
    assert "passed" not in result.stdout.str()


def test_every_kind_has_a_range_and_the_projects_bounds_are_inside_theirs():
    from t2i_fairness.families import value_ranges
    from t2i_fairness.gating.ranges import KIND_RANGES, bounds_outside
    from t2i_fairness.gating.indicator import KINDS

    assert set(KIND_RANGES) == set(KINDS)
    tiny = ThresholdFile.load(Path(__file__).resolve().parents[1] / "thresholds" / "tiny.yaml")
    ranges = value_ranges()
    assert all(g.split("[", 1)[0] in ranges for g in tiny.gates)  # every suite gate's range is known
    assert bounds_outside(tiny, ranges) == []


def test_a_file_too_large_to_be_a_thresholds_file_is_refused_at_once(tmp_path):
    """50 MB took the round-trip parser minutes and 2 GB (nothing printed); it is refused before it is read."""
    import time

    path = tmp_path / "big.yaml"
    block = "".join(f"  test_region_coverage[synthetic-object_in_region-r{i}]:\n    min: 0.5\n" for i in range(1000))
    with path.open("w") as fh:
        fh.write("gates:\n")
        while fh.tell() < 50 * 2**20:
            fh.write(block)
    start = time.perf_counter()
    with pytest.raises(ThresholdFileError) as info:
        ThresholdFile.load(path)
    assert time.perf_counter() - start < 10
    assert re.match(rf"{re.escape(str(path))}: 50\.\d MiB is too large to be a thresholds file \(at most 2 MiB", str(info.value))
    path.write_text("gates:\n" + block)  # a file under the limit still loads
    assert len(ThresholdFile.load(path).gates) == 1000
