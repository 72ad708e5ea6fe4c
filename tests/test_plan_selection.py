"""A plan is what pytest generates: ``t2i-fairness plan`` against a cold-cache ``pytest`` run of the same selection.

Each test plans a selection of the real suite, runs ``pytest`` on it with an empty cache (a fast
fake generator; the tiny scorers), and compares the images the run left in the cache with the plan's
image keys, one by one. ``-k africa`` (issue #17: triage is cheap) generates Africa's prompts and the
``{object}`` prompts every region's ``{object}`` gate samples from, nothing of another region.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMON = ["--t2i-model", "python:fakegen:make", "--t2i-objects", "bag,car", "--t2i-images-per-prompt", "2",
          "--t2i-no-progress"]
AFRICA = ("Africa", "African", "Nigeria", "Egypt")  # Africa's prompts: region, adjective, its three countries


def _pytest(args, cwd, in_process):
    return in_process.pytest(["--pyargs", "t2i_fairness.fairness_tests", "-q", "-p", "no:cacheprovider", *args], cwd=cwd)


def _plan_and_run(tmp_path, in_process, selection):
    args = [*selection, *COMMON, "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml"),
            "--t2i-artifacts", str(tmp_path / "art")]
    planned = in_process.cli(["plan", *args, "--output", str(tmp_path / "plan.json")], cwd=tmp_path)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert not (tmp_path / "cache" / "images").exists()  # planning generates nothing
    ran = _pytest(args, tmp_path, in_process)
    assert "INTERNALERROR" not in ran.stdout + ran.stderr, ran.stdout[-3000:] + ran.stderr[-3000:]
    made = {p.stem for p in (tmp_path / "cache" / "images").rglob("*.png")}
    keys = {k for role in plan["roles"] for r in role["requests"] for k in r["keys"]}
    generated = re.search(r"images: (\d+) generated", ran.stdout)
    return plan, planned.stdout, ran.stdout, made, keys, int(generated.group(1)) if generated else None


def test_k_africa_on_a_cold_cache_generates_only_africas_images(tmp_path, in_process):
    # --t2i-dedupe-scope group: under the default (DIG In's code: generated duplicates looked for over a
    # whole template before grouping) a region's rows depend on every region's images, so its gates read
    # the whole template; with group scope a region reads its own prompts only
    plan, planned, out, made, keys, generated = _plan_and_run(tmp_path, in_process,
                                                              ["-k", "africa", "--t2i-dedupe-scope", "group"])
    prompts = [r["prompt"] for role in plan["roles"] for r in role["requests"]]
    objects_only = [p for p in prompts if p in ("bag", "car")]  # {object}: every region's gate samples from them
    regional = [p for p in prompts if p not in objects_only]
    assert objects_only == ["bag", "car"] and regional
    assert all(any(a in p for a in AFRICA) for p in regional), regional
    # 2 objects x (2 {object} + 2 in Africa + 2 African + Africa's 2 images taken in turns by its 3 countries: 1, 1, 0)
    assert len(keys) == 2 * (2 + 2 + 2 + 2) == 16
    assert made == keys and generated == 16, (len(made), generated, out[-2000:])
    assert "16 image(s) to make" in planned
    assert "set-scope de-duplication" not in planned and plan["roles"][0]["widened"] is None


def test_k_africa_under_set_scope_dedupe_plans_the_whole_template_it_reads(tmp_path, in_process):
    """The default: DIG In's region gates read every region's images of their template (exact numbers
    first); the plan says so, and the run makes exactly the plan."""
    plan, planned, out, made, keys, generated = _plan_and_run(
        tmp_path, in_process, ["-k", "test_region_coverage and object_in_region-africa"])
    prompts = {r["prompt"] for role in plan["roles"] for r in role["requests"]}
    assert {"bag in Africa", "bag in Europe", "car in West Asia"} <= prompts
    assert made == keys and generated == len(keys) == 2 * 6 * 2, (len(made), len(keys), generated, out[-2000:])
    # the plan says in one line why, what it costs, and the cheaper alternative (issue 24 item 8)
    assert ("set-scope de-duplication (--t2i-dedupe-scope set, DIG In's code) compares every generated image with all "
            "of its template's images, so a gate of one region or object needs the whole template: 1 selected "
            "slice(s) plan 24 images where their own prompts need 4 (--t2i-dedupe-scope group") in planned, planned
    assert plan["roles"][0]["widened"]["narrow_images"] == 4


def test_a_mixed_selection_generates_exactly_its_plan(tmp_path, in_process):
    """IndicTTI (one language and English), word influence (one word's prompts), CIS's order test and
    DIG In's worst-region gates (every region): the run leaves the plan's images, no more, no fewer."""
    selection = ["-k", "hin_deva or doctor or order_invariance or (worst_region_precision and object_in_region)",
                 "--t2i-cis-k", "1,2", "--t2i-cis-prompts", "4", "--t2i-cis-images", "2"]  # CIS kept small
    plan, planned, out, made, keys, generated = _plan_and_run(tmp_path, in_process, selection)
    families = {row["family"] for role in plan["roles"] for row in role["families"]}
    assert families == {"dig_in", "word_influence", "cis", "indic_tti"}, planned
    assert made == keys and generated == len(keys), (len(made), len(keys), generated, out[-2000:])
    prompts = {r["prompt"] for role in plan["roles"] for r in role["requests"]}
    assert "the ceo of a fortune 500 company" not in prompts  # not a doctor prompt: not generated


def test_plan_counts_what_is_cached(tmp_path, in_process):
    args = ["-k", "test_object_consistency and object_in_region-africa", *COMMON,
            "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml")]
    first = in_process.cli(["generate", "--engine", "local", *args], cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "images: 4 generated, 0 already cached" in first.stdout, first.stdout
    again = in_process.cli(["plan", *args], cwd=tmp_path)
    assert re.search(r"all \(distinct\)\s+1\s+2\s+4\s+4\s+0", again.stdout), again.stdout
    assert "0 image(s) to make in 0 batch(es)" in again.stdout


def test_plan_reports_option_errors_as_pytest_would(tmp_path, in_process):
    bad = in_process.cli(["plan", "--t2i-objects", "bag,unicorn", "--t2i-cache-dir", str(tmp_path / "c")], cwd=tmp_path)
    assert bad.returncode == 2 and "--t2i-objects" in bad.stderr and "unicorn" in bad.stderr, bad.stderr
    unknown = in_process.cli(["plan", "--t2i-nope", "1"], cwd=tmp_path)
    assert unknown.returncode == 2 and "--t2i-nope" in unknown.stderr


def test_generate_stage_features_leaves_the_gate_run_nothing_to_compute(tmp_path, in_process):
    """``--stage features`` computes the selected gates' slices (reference features, Inception and CLIP
    features): the gate run on the same selection then generates no image and computes no feature."""
    args = ["-k", "object_in_region and africa and (consistency or region_coverage)", *COMMON,
            "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml")]
    made = in_process.cli(["generate", "--engine", "local", "--stage", "features", *args], cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr[-3000:]
    assert re.search(r"features: (\d+) slice\(s\) of \1 ", made.stdout), made.stdout
    warm = _pytest([*args, "--t2i-artifacts", str(tmp_path / "art")], tmp_path, in_process)
    assert "images: 0 generated" in warm.stdout, warm.stdout[-3000:]
    computed = re.findall(r"^(\S+): (\d+) computed, (\d+) from cache$", warm.stdout, re.M)
    assert computed and all(int(n) == 0 for _, n, _ in computed), computed


def test_plan_in_an_empty_folder_creates_nothing(tmp_path, subprocess_env):
    """Planning only looks: no cache folder (not even its identity index), no artifacts, no thresholds."""
    work = tmp_path / "empty"
    work.mkdir()
    # in a child: planning from an empty folder must not lean on what this process already digested
    planned = subprocess.run([sys.executable, "-m", "t2i_fairness.cli", "plan", "-k",
                              "test_object_consistency and object_in_region-africa", *COMMON], cwd=work,
                             env=subprocess_env, capture_output=True, text=True, timeout=900)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "image(s) to make" in planned.stdout, planned.stdout
    assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*")) == []
