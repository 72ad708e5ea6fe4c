"""``--t2i-sequential`` in the suite (issue #29): the round loop (``gating.rounds.Rounds``, attached to each
family's study by ``fixtures/studies.py``), its records, and the done-means check: a sequential run of the
suite gives the fixed-N verdicts on the canaries' held slices, with fewer images.

The suite here is the repository's CIS and DIG In gate files on the procedural model (fast, and its
regressions are real: a canary changes the pixels of its slice). DIG In looks at 2, 4, 8 images per
prompt (``--t2i-batch-size 2``: rounds are multiples of the batch size); CIS at 1, 2, 3, 4 of its 4 prompts
per K (the smoke preset's M; each prompt with all its images).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SELECTION = ("(test_cis and not order and not drop and not rate) or "
             "(object_in_region and (test_region_precision or test_region_coverage))")
FLAGS = ["--t2i-model", "procedural", "--t2i-objects", "bag,stove", "--t2i-no-progress", "-p", "no:cacheprovider",
         "--t2i-batch-size", "2", "--t2i-images-per-prompt", "8", "--t2i-cis-images", "8", "-k", SELECTION]


@pytest.fixture
def suite(pytester):
    (pytester.path / "fairness_tests").mkdir()
    for name in ("test_dig_in_region.py", "test_cis.py"):
        (pytester.path / "fairness_tests" / name).write_text((REPO / "fairness_tests" / name).read_text())
    return pytester


def _run(pytester, *extra, cache: str = "cache"):
    args = ["fairness_tests", *FLAGS, "--t2i-thresholds", str(pytester.path / "t.yaml"),
            "--t2i-cache-dir", str(pytester.path / cache), "--t2i-artifacts", str(pytester.path / "art"), *extra]
    result = pytester.runpytest_inprocess(*args)
    records = {r["gate"]: r for r in json.loads((pytester.path / "art" / "run.json").read_text())["gates"]}
    return result, records


@pytest.fixture(scope="module")
def written_bounds() -> dict[str, str]:
    """The bounds file the module's first update run wrote, for the other tests to copy (one run, not three)."""
    return {}


def _write_bounds(pytester, written_bounds) -> None:
    """Bounds from seed 0 at fixed N, as a team writes them: the update flow runs once per module (each
    file runs on one worker under --dist loadfile); later tests copy its file."""
    if "t.yaml" in written_bounds:
        (pytester.path / "t.yaml").write_text(written_bounds["t.yaml"])
        return
    written, _ = _run(pytester, "--t2i-update-thresholds")
    assert written.ret == pytest.ExitCode.OK, written.stdout.str()[-3000:]
    written_bounds["t.yaml"] = (pytester.path / "t.yaml").read_text()


def _line(result, start: str) -> str:
    return next(line for line in result.stdout.lines if line.startswith(start))


def _failed(record: dict) -> bool:
    return record["status"] in ("fail", "missing", "refused") or (
        record["status"] == "inconclusive" and bool(record.get("blocking")))


def _generated(result) -> int:
    return int(_line(result, "images: ").split()[1])


# the second canary is slow (61 s): CI runs Africa's
@pytest.mark.parametrize("canary", ["collapse_region:africa", pytest.param("drop_component:macaw", marks=pytest.mark.slow)])
def test_a_sequential_run_gives_the_fixed_n_verdicts_on_the_canary_slices_with_fewer_images(suite, canary, written_bounds):
    _write_bounds(suite, written_bounds)
    # the sequential run first, on a cold cache: what it generates is what it needed
    seq, seq_records = _run(suite, "--t2i-seed", "1", "--t2i-canary", canary, "--t2i-sequential")
    fixed, fixed_records = _run(suite, "--t2i-seed", "1", "--t2i-canary", canary)
    assert seq_records.keys() == fixed_records.keys() and len(seq_records) == 16
    # the canary's tally (caught on its slice, false alarms elsewhere) and every gate's verdict are the same
    assert _line(seq, f"canary {canary}") == _line(fixed, f"canary {canary}")
    # every gate's verdict is the same: failed or not (an early pass may read "pass" where N's estimate, off its
    # bound without evidence, reads "inconclusive", and the other way round: a warning, neither fails the run)
    assert {g: _failed(r) for g, r in seq_records.items()} == {g: _failed(r) for g, r in fixed_records.items()}
    assert {g for g, r in seq_records.items() if r["status"] not in ("pass", "inconclusive")} == \
        {g for g, r in fixed_records.items() if r["status"] not in ("pass", "inconclusive")}
    assert seq.ret == fixed.ret
    # ... with fewer images: the fixed-N run after it still had images to make, and gates stopped early
    assert _generated(fixed) > 0, fixed.stdout.str()[-2000:]
    records = [r["details"]["sequential"] for r in seq_records.values()]
    early = [r for r in records if r["early"]]
    assert early and all(r["at"] < r["planned"] for r in early)
    assert all(r["at"] % 2 == 0 for r in early if r["unit"] == "images per prompt")  # multiples of the batch size
    assert {r["unit"] for r in records} == {"images per prompt", "prompts"}
    # every gate says how it was decided; no record leaks into the fixed-N run
    assert all(r["reason"] in ("fail: alpha spent at this look", "pass: futility", "pass: curtailed", "ran to N")
               for r in records)
    assert not any("sequential" in r["details"] for r in fixed_records.values())


def test_sequential_records_name_the_kind_the_look_and_why_a_gate_ran_to_n(suite, written_bounds):
    _write_bounds(suite, written_bounds)
    result, records = _run(suite, "--t2i-seed", "1", "--t2i-sequential")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    cis = records["test_cis[k2]"]["details"]["sequential"]
    # 4 prompts per K: cis_looks(4) = [1, 2, 3, 4]
    assert cis["kind"] == "share" and (cis["unit"], cis["planned"], cis["rounds"]) == ("prompts", 4, 4)
    coverage = records["test_region_coverage[synthetic-object_in_region-africa]"]["details"]["sequential"]
    # coverage grows with the images: it never fails early, it may pass by futility
    assert coverage["kind"] == "coverage" and coverage["reason"] in ("pass: futility", "pass: curtailed", "ran to N")
    assert (coverage["unit"], coverage["planned"], coverage["rounds"]) == ("images per prompt", 8, 3)
    for rec in (r["details"]["sequential"] for r in records.values()):
        if rec["reason"] == "ran to N":
            assert not rec["early"] and rec["at"] == rec["planned"] and 0 < rec["alpha_share"] <= 1
    result.stdout.fnmatch_lines(["-- sequential (--t2i-sequential) --", "reasons: * ran to N"])
    # a batch not below N: DIG In has a single look, the fixed-N call; CIS's looks are prompts, whatever the batch
    one, records = _run(suite, "--t2i-seed", "1", "--t2i-sequential", "--t2i-batch-size", "8")
    assert one.ret == pytest.ExitCode.OK, one.stdout.str()[-3000:]
    seq = records["test_region_precision[synthetic-object_in_region-africa]"]["details"]["sequential"]
    assert seq["reason"] == "ran to N" and seq["early"] is False and seq["rounds"] == 1
    assert records["test_cis[k1]"]["details"]["sequential"]["rounds"] == 4  # cis_looks(4): 1, 2, 3, 4 prompts


@pytest.mark.parametrize("flag", ["--t2i-update-thresholds", "--t2i-baseline-model", "--t2i-plan-samples",
                                  "--t2i-gate"])
def test_sequential_refuses_what_it_cannot_keep_its_level_with(flag):
    from t2i_fairness.errors import OptionError
    from t2i_fairness.families import FAMILIES
    from t2i_fairness.spine.options import resolve_options

    given = {"--t2i-sequential": True, "--t2i-update-thresholds": True, "--t2i-baseline-model": "tiny",
             "--t2i-plan-samples": 0.05, "--t2i-gate": "point"}
    raw = {"--t2i-reference": [], "--t2i-sequential": True, flag: given[flag]}
    with pytest.raises(OptionError, match=r"--t2i-sequential.*" + flag.removeprefix("--") if flag != "--t2i-gate"
                       else "--t2i-gate significant"):
        resolve_options(lambda f: raw.get(f), families=FAMILIES)
    resolve_options(lambda f: {"--t2i-reference": [], "--t2i-sequential": True}.get(f), families=FAMILIES)


def test_sequential_refusal_is_a_usage_error_naming_the_option(suite):
    result = suite.runpytest_inprocess("fairness_tests", *FLAGS, "--t2i-sequential", "--t2i-update-thresholds",
                                        "--t2i-cache-dir", str(suite.path / "cache"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--t2i-sequential: cannot be combined with --t2i-update-thresholds" in result.stderr.str() + result.stdout.str()


def test_an_indic_ratio_left_undefined_on_a_look_goes_on_and_gets_the_fixed_n_verdict(pytester):
    """IndicTTI on the procedural world (4 fixed prompts per language, 8 images, looks at 2, 4, 8): English's CLGC is
    at or below 0 on the first look's images at seed 1, which leaves CLGC(l) / CLGC(English) undefined there, but
    not at N, where the fixed-N run passes the 5 ratios. The look does not stop them (it ended them inconclusive
    before): each goes on to a look where its value is defined and gets the fixed-N verdict."""
    (pytester.path / "fairness_tests").mkdir()
    name = "test_indic_tti.py"
    (pytester.path / "fairness_tests" / name).write_text((REPO / "fairness_tests" / name).read_text())
    flags = [f for f in FLAGS if f not in ("-k", SELECTION)]
    base = ["fairness_tests", *flags, "--t2i-thresholds", str(pytester.path / "t.yaml"), "-W", "ignore::UserWarning"]

    def run(*extra, cache):
        result = pytester.runpytest_inprocess(*base, "--t2i-cache-dir", str(pytester.path / cache),
                                              "--t2i-artifacts", str(pytester.path / "art"), *extra)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
        return result, {r["gate"]: r for r in json.loads((pytester.path / "art" / "run.json").read_text())["gates"]}

    run("--t2i-update-thresholds", "--t2i-seed", "1000", cache="bounds")
    seq, records = run("--t2i-seed", "1", "--t2i-sequential", cache="c1")
    fixed, fixed_records = run("--t2i-seed", "1", cache="c2")
    ratios = sorted(g for g in records if g.startswith("test_clgc_vs_english["))
    assert len(ratios) == 5
    for g in ratios:
        r, rec = records[g], records[g]["details"]["sequential"]
        assert "undefined" not in r["details"] and rec["round"] > 1, (g, rec)
        assert r["status"] == fixed_records[g]["status"] == "pass", (g, r["message"], fixed_records[g]["message"])
    assert {g: r["status"] for g, r in records.items()} == {g: r["status"] for g, r in fixed_records.items()}
    assert _generated(seq) <= _generated(fixed) == 192


def test_a_look_makes_only_the_fixed_n_runs_canonical_batches_so_nothing_is_made_twice(pytester):
    """``{object} in {country}`` spreads an object-region's n images over its countries (3, 3 and 2 of 8): a look of 2
    or 4 images per object-region gives a country prompt 1 or 2, seldom a multiple of the batch. A look now makes
    whole canonical batches (``references.grouping.whole_batches``): before, a country prompt's first image was made
    alone at the first look, its batch made again whole at the next (18 images of the procedural suite's N 8, 90 of
    DIG In's regions at N 16), and the cache kept bytes of another batch than the fixed-N run's."""
    (pytester.path / "fairness_tests").mkdir()
    name = "test_dig_in_consistency.py"
    (pytester.path / "fairness_tests" / name).write_text((REPO / "fairness_tests" / name).read_text())
    flags = [f for f in FLAGS if f not in ("-k", SELECTION)]
    base = ["fairness_tests", *flags, "--t2i-thresholds", str(pytester.path / "t.yaml"), "-W", "ignore::UserWarning",
            "-k", "object_in_country", "--t2i-cache-dir", str(pytester.path / "cache")]
    assert pytester.runpytest_inprocess(*base, "--t2i-update-thresholds", "--t2i-seed", "1000").ret == 0
    seq = pytester.runpytest_inprocess(*base, "--t2i-seed", "1", "--t2i-sequential")
    fixed = pytester.runpytest_inprocess(*base, "--t2i-seed", "1")
    assert seq.ret == fixed.ret == pytest.ExitCode.OK, seq.stdout.str()[-3000:]
    for result in (seq, fixed):
        assert "made again whole" not in _line(result, "images: "), _line(result, "images: ")
    assert 0 < _generated(seq) < _generated(seq) + _generated(fixed) == 2 * 6 * 8  # 2 objects x 6 regions x 8
