"""``t2i-fairness plan --t2i-sequential``: worst, expected and best case images (and hours) of a run in rounds.

The CLI tests plan small selections of the real suite (a fake generator; nothing is generated) and
check the figures against the plan's own requests, counted here independently: the worst case is
the fixed-N plan, the best case the family's first look for the prompts whose every gate can stop early
(a grid family: one batch per prompt; CIS, whose prompts are a sample: the first look's prompts with all
their images, nothing for the others), the expected case the bench's null-model share of N, never below
the best case. Without the option the plan's output is
the same as before.
"""

from __future__ import annotations

import json
import math
import random
import re

import pytest

from t2i_fairness.families import NULL_SHARES, null_share
from t2i_fairness.gating.sequential import PromptUse, sequential_images

COMMON = ["--t2i-model", "python:fakegen:make", "--t2i-objects", "bag", "--t2i-no-progress", "--t2i-cis-k", "1,2",
          "--t2i-cis-prompts", "12"]
CIS_ONLY = "test_cis and not drop and not order and not floor"  # test_cis[k]: share gates with a look


def _plan(tmp_path, in_process, *args, name="plan"):
    out = tmp_path / f"{name}.json"
    done = in_process.cli(["plan", *COMMON, "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds",
                           str(tmp_path / "t.yaml"), *args, "--output", str(out)], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(out.read_text())["roles"][0]


def _row(stdout: str, label: str) -> tuple[int, int]:
    m = re.search(rf"^    {label} +(\d+) +(\d+) ", stdout, re.M)
    assert m, stdout
    return int(m.group(1)), int(m.group(2))


def test_cis_share_gates_best_is_the_first_look_s_prompts_and_expected_the_bench_share(tmp_path, in_process):
    """CIS looks over prompts: the first look is the first M / 16 (at least 1) prompts of each K with all their
    images; the prompts after it need nothing in the best case."""
    N, B, K = 8, 2, 2
    out, role = _plan(tmp_path, in_process, "-k", CIS_ONLY, "--t2i-sequential", "--t2i-batch-size", str(B),
                      "--t2i-cis-images", str(N))
    seq = role["sequential"]
    requests = [(r["prompt"], r["n"]) for r in role["requests"]]
    assert len(requests) == 12 * K and all(n == N for _, n in requests)  # 12 prompts per K, no text drawn twice
    share = NULL_SHARES[("cis", "share")][(500, 8)]  # the bench's nearest N (12 prompts per K: 500) and batch
    assert seq["worst"] == sum(n for _, n in requests) == sum(f["images"] for f in role["families"])
    assert seq["best"] == K * N  # cis_looks(12) = [1, 2, 3, 5, 8, 12]: one prompt per K, all its images
    # the expected case: the prefix of the prompts holding the bench's share of them, each with all its images
    # (ceil(0.6 * 12) = 8 prompts per K), never below the best case
    assert seq["expected"] == K * math.ceil(share * 12) * N
    assert seq["best"] < seq["expected"] < seq["worst"]
    assert seq["early_gates"] == seq["gates"] == 2 and seq["runs_to_n"] == {} and seq["bench_batches"] == [8]
    assert seq["bench_sizes"] == {"cis": [500, "prompts"]}
    assert seq["early_prompts"] == seq["prompts"] - K == len(requests) - K
    # printed: the three cases (nothing cached: to make = images), where the expectation comes from, no rate yet
    assert _row(out, "worst case") == (seq["worst"], seq["worst"])
    assert _row(out, "expected") == (seq["expected"], seq["expected"])
    assert _row(out, "best case") == (seq["best"], seq["best"])
    assert "null-model expectation of bench/bench_sequential.py" in out and "up to the worst case" in out
    assert "measured at batch 8 (the bench's nearest to 2) and the bench's N of 500 prompts (cis)" in out
    assert re.search(rf"^  {seq['worst']} image\(s\) to make", out, re.M)  # the worst case is the fixed-N plan's
    assert "no measured rate for this model and settings on cpu: no hours" in out


def test_the_fixed_n_plan_is_the_sequential_plan_less_its_section_and_the_paper_presets_default_is_sequential(
        tmp_path, in_process):
    args = ["-k", CIS_ONLY, "--t2i-batch-size", "2", "--t2i-cis-images", "8"]
    off, role_off = _plan(tmp_path, in_process, *args, "--t2i-fixed-n", name="off")
    on, role_on = _plan(tmp_path, in_process, *args, "--t2i-sequential", name="on")
    default, role_default = _plan(tmp_path, in_process, *args, name="default")  # a python: model: the paper preset
    assert role_default == role_on
    said = "; design sequential (the paper preset's default; --t2i-fixed-n decides every gate at N)"
    assert said in default and "; design sequential (--t2i-sequential)" in on
    assert default.replace(said, "").split("\n")[1:] == on.replace("; design sequential (--t2i-sequential)", "").replace(
        "on.json", "default.json").split("\n")[1:]
    assert "--t2i-sequential" not in off and "sequential" not in role_off
    section = on.index("  --t2i-sequential (")
    tail = on[section:].split("\n")
    rest = [line for line in tail[1:] if not line.startswith("    ")]  # the lines after the section
    without = (on[:section] + "\n".join(rest)).replace("on.json", "off.json")
    assert off.split("\n")[1:] == without.split("\n")[1:]  # the first line names the args
    assert {k: v for k, v in role_on.items() if k != "sequential"} == role_off


def test_the_order_test_stops_early_over_a_prefix_of_its_prompts(tmp_path, in_process):
    # the CIS order test passes early by futility (never fails early): a look of m of the M = 12 prompts per K reads the
    # first ceil(P m / M) of its P = 12 prompts and their shuffles, each with all its images
    N = 8
    out, role = _plan(tmp_path, in_process, "-k", "order_invariance", "--t2i-sequential", "--t2i-cis-images", str(N))
    seq = role["sequential"]
    assert seq["worst"] == 2 * 12 * N and seq["best"] == 2 * 1 * N  # cis_looks(12)[0] = 1 prompt and its shuffle
    share = null_share("cis", "test", 8, 12)[0]
    assert seq["expected"] == 2 * math.ceil(share * 12) * N
    assert seq["early_gates"] == seq["gates"] == 1 and seq["runs_to_n"] == {}


def test_a_report_reads_what_its_family_s_gates_make_and_alone_reads_n(tmp_path, in_process):
    # Decomposed-DIG's diagnostics (a report: no indicator) reads the last look its family's gates reached
    # (Rounds.reached): with the gates it holds no prompt; alone (no gate in its family's loop) it reads N
    args = ["--t2i-sequential", "--t2i-images-per-prompt", "8", "--t2i-batch-size", "2"]
    _, alone = _plan(tmp_path, in_process, "-k", "test_obj_precision", *args, name="alone")
    _, both = _plan(tmp_path, in_process, "-k", "test_obj_precision or decomposed_diagnostics", *args, name="both")
    out, report = _plan(tmp_path, in_process, "-k", "decomposed_diagnostics", *args, name="report")
    alone, both, report = alone["sequential"], both["sequential"], report["sequential"]
    assert alone["best"] < alone["worst"] and alone["early_prompts"] > 0
    assert {k: both[k] for k in ("worst", "expected", "best", "early_prompts", "early_gates", "runs_to_n")} == \
        {k: alone[k] for k in ("worst", "expected", "best", "early_prompts", "early_gates", "runs_to_n")}
    assert both["reports"] == both["gates"] - both["early_gates"] > 0 and alone["reports"] == 0
    assert report["best"] == report["expected"] == report["worst"] == alone["worst"] and report["reports"] == 0
    assert any("test_decomposed_diagnostics reads no indicator method" in why for why in report["runs_to_n"])


def test_a_single_look_runs_to_n(tmp_path, in_process):
    # CIS: one prompt per K leaves no earlier look; DIG In: a batch not below N
    out, role = _plan(tmp_path, in_process, "-k", CIS_ONLY, "--t2i-sequential", "--t2i-cis-prompts", "1",
                      "--t2i-cis-images", "8")
    seq = role["sequential"]
    assert seq["best"] == seq["expected"] == seq["worst"] > 0
    assert list(seq["runs_to_n"]) == ["Components Inclusion Score: one planned look (1 prompts: too few for an earlier one)"]
    _, role = _plan(tmp_path, in_process, "-k", "object_region_precision", "--t2i-sequential", "--t2i-batch-size", "8",
                    "--t2i-images-per-prompt", "8", name="dig")
    seq = role["sequential"]
    assert seq["best"] == seq["expected"] == seq["worst"] > 0
    assert list(seq["runs_to_n"]) == ["DIG In: one planned look (--t2i-batch-size 8 is not below N)"]


# -- the arithmetic ------------------------------------------------------------------------------------


def test_sequential_images_by_hand():
    uses = [PromptUse("a", 16, 4, 0.33), PromptUse("b", 16, 4, 0.1), PromptUse("b", 16, 16, 1.0),
            PromptUse("c", 16, 4, 0.8), PromptUse("c", 16, 4, 0.33)]
    r = sequential_images(uses)
    assert (r["worst"], r["best"], r["prompts"]) == (48, 4 + 16 + 4, 3)
    # a: 0.33 * 16 = 5.28; b: held at N by its run-to-N gate; c: the most demanding (0.8 * 16 = 12.8)
    assert r["expected"] == round(5.28 + 16 + 12.8)
    # a share below the first round counts the first round (never below the best case)
    assert sequential_images([PromptUse("a", 16, 8, 0.1)])["expected"] == 8
    # cached images are not made again; the expected case counts the fraction of its last image
    r = sequential_images([PromptUse("a", 16, 4, 0.33)], cached={"a": {0, 1, 5}})
    assert (r["worst_to_make"], r["best_to_make"], r["expected_to_make"]) == (13, 2, round(3 + 0.28))


def test_best_expected_worst_are_ordered_on_random_plans():
    rng = random.Random(0)
    for _ in range(200):
        uses = []
        for p in range(rng.randint(1, 6)):
            for _ in range(rng.randint(1, 3)):
                n = rng.randint(1, 32)
                uses.append(PromptUse(f"p{p}", n, rng.randint(1, n), rng.random()))
        r = sequential_images(uses)
        assert r["best"] <= r["expected"] <= r["worst"]
        assert r["worst"] == sum(max(u.planned for u in uses if u.prompt == p) for p in {u.prompt for u in uses})


def test_null_share_picks_the_bench_figure_or_n():
    table = NULL_SHARES[("cis", "share")]
    assert null_share("cis", "share", 8, 500) == (table[(500, 8)], (500, 8))
    dig = NULL_SHARES[("dig_in", "share")]
    assert null_share("dig_in", "share", 16, 60) == (dig[(60, 16)], (60, 16))
    assert null_share("dig_in", "share", 8) == (dig[(60, 8)], (60, 8))
    assert null_share("dig_in", "share", 12, 60) == (dig[(60, 16)], (60, 16))  # a tie takes the larger batch
    assert null_share("dig_in", "share", 64)[1] == (60, 16) and null_share("dig_in", "share", 1)[1] == (60, 8)
    # the bench's N nearest the plan's on a log scale (under issue #45's default the paper's 10,000 prompts per K no
    # longer stop sooner than 500: N there catches 0.02 misses, which a look must rule out before it passes)
    assert null_share("cis", "share", 16, 10000) == (table[(10000, 16)], (10000, 16)) and table[(10000, 16)] < 1.0
    assert null_share("cis", "share", 16, 2237)[1] == (10000, 16) and null_share("cis", "share", 16, 2236)[1] == (500, 16)
    assert null_share("cis", "share", 16, 24)[1] == null_share("cis", "share", 16)[1] == (500, 16)  # None: the smallest
    assert null_share("cis", "share", 16, 100000)[1] == (10000, 16)
    for kind in ("ratio", "percentile", "hoeffding", "score"):  # kinds the bench has no CIS gate of
        assert null_share("cis", kind, 8) == (1.0, None)
    assert null_share("decomposed", "share", 8) == (1.0, None)  # not measured: counted at N
    with pytest.raises(ValueError, match="unknown sequential kind"):
        null_share("cis", "mean", 4)
    with pytest.raises(ValueError, match="batch"):
        null_share("cis", "share", 0)
    with pytest.raises(ValueError, match="size"):
        null_share("cis", "share", 8, 0)


def test_prompt_use_checks_its_values():
    with pytest.raises(ValueError, match="first round 9 not in 0..8"):
        PromptUse("a", 8, 9)
    with pytest.raises(ValueError, match="share"):
        PromptUse("a", 8, 2, 1.5)
    assert math.isclose(PromptUse("a", 8, 2).share, 1.0)


def test_hours_of_each_case_from_the_measured_rate(tmp_path, in_process):
    import dataclasses

    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.rates import Rate, store_rate
    from t2i_fairness.spine.workbench import Workbench

    bench = Workbench(T2IOptions(model="python:fakegen:make", cache_dir=tmp_path / "cache", device="cpu", batch_size=2,
                                 progress=False))
    store_rate(bench.cache, Rate(1.8, 64, "cpu", bench.source.fingerprint, dataclasses.asdict(bench.source.settings),
                                 "bench"))
    bench.close()
    out, role = _plan(tmp_path, in_process, "-k", CIS_ONLY, "--t2i-sequential", "--t2i-batch-size", "2",
                      "--t2i-cis-images", "8")
    seq = role["sequential"]
    for case, label in (("worst", "worst case"), ("expected", "expected"), ("best", "best case")):
        assert seq[f"{case}_hours"] == pytest.approx(seq[f"{case}_to_make"] * 1.8 / 3600)
        assert re.search(rf"^    {label} +{seq[case]} +{seq[case + '_to_make']} +{seq[case + '_hours']:.2f} h ", out, re.M), out
    assert seq["best_hours"] < seq["worst_hours"] == pytest.approx(role["estimate"]["hours"])
    assert "no measured rate" not in out


def test_the_plan_states_a_teams_indifference_margins_and_the_default_rule(tmp_path):
    """`t2i-fairness plan` names a thresholds file's indifference margins (per kind, and how many gates have their
    own): a team's trade of power for images is never silent; a file without margins adds no line."""
    from types import SimpleNamespace

    from t2i_fairness.distributed.planner import _indifference_lines

    path = tmp_path / "t.yaml"
    path.write_text("indifference:\n  share: 0.05\ngates:\n  a:\n    min: 0.8\n    indifference: 0.03\n  b:\n    min: 0.7\n")
    (line,) = _indifference_lines(SimpleNamespace(thresholds=path))
    assert "per kind share 0.05; 1 gate(s) their own" in line and "the fixed-N run would fail" in line
    path.write_text("gates:\n  a:\n    min: 0.8\n")
    assert _indifference_lines(SimpleNamespace(thresholds=path)) == []
    assert _indifference_lines(SimpleNamespace(thresholds=tmp_path / "missing.yaml")) == []
