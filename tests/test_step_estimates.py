"""Every computing step says how long before it starts: its progress bar's description names the
expected time at the rate stored for that step (its model, on this device), or that the clock starts
after its first items; the run header and ``t2i-fairness plan`` add up the steps the last run of the same
selection computed (spine/rates.py: StepClock, store_steps, steps_estimate)."""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

import pytest

from t2i_fairness.base.cache import Cache
from t2i_fairness.spine.rates import (STEPS, Rate, StepClock, lookup_rate, selection_key, step_settings,
                                      steps_estimate, store_rate, store_steps)


class FakeBar:
    """A progress bar that records what it was shown."""

    def __init__(self):
        self.shown: list[tuple[int, str]] = []
        self.advanced = 0

    @contextlib.contextmanager
    def __call__(self, total, desc):
        self.shown.append((total, desc))

        def advance(n):
            self.advanced += n

        yield advance


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_a_step_without_a_stored_rate_starts_its_clock_after_the_first_items_and_stores_their_rate(tmp_path):
    bar, now = FakeBar(), FakeClock()
    clock = StepClock(bar, Cache(tmp_path), "cpu", now=now)
    with clock(5, "segmenting reference synthetic", step=("masks", "seg-ns")) as advance:
        now.t += 50.0  # the first item, with the model's loading: not counted in the rate
        advance(1)
        for _ in range(4):
            now.t += 3.0
            advance(1)
    assert bar.shown == [(5, "segmenting reference synthetic (no stored rate on cpu: the clock starts after the "
                             "first items)")]
    assert bar.advanced == 5
    rate = lookup_rate(Cache(tmp_path), "cpu", "seg-ns", step_settings("masks"), STEPS)
    assert rate is not None and rate.seconds_per_image == pytest.approx(3.0) and rate.images == 4
    assert clock.steps == [{"desc": "segmenting reference synthetic", "kind": "masks", "namespace": "seg-ns",
                            "items": 5, "seconds": pytest.approx(62.0)}]


def test_a_step_with_a_stored_rate_says_its_expected_time_before_its_first_item(tmp_path):
    cache = Cache(tmp_path)
    store_rate(cache, Rate(4.0, 30, "cpu", "vit-ns", step_settings("features"), "run"), STEPS)
    bar = FakeBar()
    clock = StepClock(bar, cache, "cpu", now=FakeClock())
    with clock(60, "ViT obj", step=("features", "vit-ns")):
        assert bar.shown and bar.shown[0][1].startswith("ViT obj (expected 4 min at 4 s/item (stored rate, cpu, ")
    # another device, another model or another kind of step has no rate of its own
    assert StepClock(bar, cache, "cuda:H200").rate(("features", "vit-ns")) is None
    assert clock.rate(("features", "other")) is None and clock.rate(("masks", "vit-ns")) is None
    # a bar without a step (generation has its own clock) is passed through as it was
    with clock(3, "generating"):
        pass
    assert bar.shown[-1] == (3, "generating")


def test_the_selection_estimate_is_each_recorded_step_at_its_stored_rate(tmp_path):
    cache = Cache(tmp_path)
    assert steps_estimate(cache, "cpu", "k") == (None, "no run of this selection on cpu has stored its steps yet")
    steps = [{"desc": "segmenting reference synthetic", "kind": "masks", "namespace": "seg", "items": 7, "seconds": 99.0},
             {"desc": "ViT full", "kind": "features", "namespace": "vit", "items": 10, "seconds": 12.0},
             {"desc": "CLIP", "kind": "features", "namespace": "clip", "items": 0, "seconds": 0.0}]
    store_steps(cache, "cpu", "k", steps)
    store_rate(cache, Rate(20.0, 6, "cpu", "seg", step_settings("masks")), STEPS)  # vit: no stored rate
    seconds, said = steps_estimate(cache, "cpu", "k")
    assert seconds == pytest.approx(7 * 20.0 + 12.0)  # a step without a rate: its recorded seconds per item
    assert said == "segmenting reference synthetic 2 min (7 at 20 s/item); ViT full 12 s (10 at 1.2 s/item)"
    # a warm run (nothing computed) keeps the record of the run that computed
    assert store_steps(cache, "cpu", "k", [dict(s, items=0) for s in steps]) is None
    assert steps_estimate(cache, "cpu", "k")[0] == pytest.approx(152.0)
    assert steps_estimate(cache, "cuda:H200", "k")[0] is None


def test_the_selection_key_follows_the_tests_and_the_options_that_change_the_work(tmp_path):
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.plan import GateCall

    calls = [GateCall("test_region_precision", {"region": "africa"}), GateCall("test_object_consistency", {})]
    base = T2IOptions(model="tiny", cache_dir=tmp_path / "a")
    key = selection_key(calls, base)
    assert selection_key(list(reversed(calls)), T2IOptions(model="tiny", cache_dir=tmp_path / "b")) == key
    assert selection_key(calls[:1], base) != key
    assert selection_key(calls, T2IOptions(model="tiny", cache_dir=tmp_path / "a", images_per_prompt=7)) != key


SELECTION = ["--pyargs", "t2i_fairness.fairness_tests", "-k", "object_consistency and africa", "-p", "no:cacheprovider",
             "--t2i-model", "python:fakegen:make", "--t2i-objects", "bag", "--t2i-images-per-prompt", "2",
             "--t2i-device", "cpu", "--t2i-fixed-n", "-q"]


def test_the_header_and_plan_name_each_step_and_its_bar_its_estimate(tmp_path, in_process):
    args = [*SELECTION, "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml"),
            "--t2i-artifacts", str(tmp_path / "art")]
    first = in_process.pytest(args, cwd=tmp_path)
    out = first.stdout + first.stderr
    assert "INTERNALERROR" not in out, out[-3000:]
    assert ("t2i-fairness: expected time of segmentation, features and captions: unknown, no run of this selection "
            "on cpu has stored its steps yet") in first.stdout, first.stdout[-3000:]
    bars = re.findall(r"([^\r\n:]+) \(no stored rate on cpu: the clock starts after the first items\)", first.stderr)
    assert bars, first.stderr[-3000:]  # the CLIP encodings of the generated images and their labels
    # the features, not the record: every step computes again, now from its stored rate
    for folder in (tmp_path / "cache").iterdir():
        if folder.name not in ("steps", "rates"):
            shutil.rmtree(folder)
    second = in_process.pytest(args, cwd=tmp_path)
    header = re.search(r"^t2i-fairness: expected time of segmentation, features and captions: up to (.+?) \(the last "
                       r"run of this selection on cpu that computed them; a warm cache skips what it holds\): (.+)$",
                       second.stdout, re.M)
    assert header, second.stdout[-3000:]
    for desc in bars:
        assert re.search(rf"{re.escape(desc.strip())} \d[^(;]* \(\d+ at [\d.e-]+ s/item\)", header.group(2)), header.group(2)
        assert re.search(rf"{re.escape(desc.strip())} \(expected \d[^(]* at [\d.e-]+ s/item \(stored rate, cpu, ",
                         second.stderr), second.stderr[-3000:]
    assert re.search(r"^t2i-fairness: expected time in all: up to ", second.stdout, re.M), second.stdout[-3000:]
    planned = in_process.cli(["plan", *[a for a in args if a not in ("-p", "no:cacheprovider", "-q", "--t2i-artifacts",
                                                                       str(tmp_path / "art"))],
                              "--output", str(tmp_path / "plan.json")], cwd=tmp_path)
    # the plan reads the record the second run left (its rest, timed again, may round to another second)
    plan_line = re.search(r"expected time of segmentation, features and captions: up to \d[^(]* \(the last run of this "
                          r"selection on cpu that computed them; a warm cache skips what it holds\): (.+)$",
                          planned.stdout, re.M)
    assert plan_line, planned.stdout[-3000:]
    for desc in bars:
        assert re.search(rf"{re.escape(desc.strip())} \d[^(;]* \(\d+ at [\d.e-]+ s/item\)", plan_line.group(1))
    import json

    assert json.loads((tmp_path / "plan.json").read_text())["roles"][0]["steps_seconds"] > 0


def test_a_fresh_cache_reads_the_package_reference_rates_named_as_such_and_its_own_rate_wins(tmp_path, monkeypatch):
    """A fresh clone has measured nothing: the package's reference rates (tools/reference_rates.py) give its first
    run an estimate, said to be the reference machine's; a rate this cache measured replaces it."""
    import json
    import runpy

    from t2i_fairness.spine import rates

    measured = Cache(tmp_path / "measured")
    store_rate(measured, Rate(2.5, 31, "cpu", "sd:random", {"steps": 2}), "rates")
    store_rate(measured, Rate(12.0, 4, "cpu", "seg-ns", step_settings("masks")), STEPS)
    store_steps(measured, "cpu", "sel", [{"desc": "segmenting", "kind": "masks", "namespace": "seg-ns", "items": 7,
                                         "seconds": 90.0}])
    store_rate(measured, Rate(0.1, 8, "cuda:H100", "sd:random", {"steps": 2}), "rates")  # not a CPU rate: left out
    out = tmp_path / "reference_rates.json"
    tool = runpy.run_path(str(Path(__file__).resolve().parents[1] / "tools" / "reference_rates.py"))
    assert tool["main"]([str(measured.root), "--machine", "2 CPU cores (test)", "--output", str(out)]) == 0
    reference = json.loads(out.read_text())
    assert reference["machine"] == "2 CPU cores (test)" and len(reference["entries"]) == 3

    monkeypatch.setattr(rates, "reference_rates", lambda: reference)
    fresh = Cache(tmp_path / "fresh")
    rate = lookup_rate(fresh, "cpu", "sd:random", {"steps": 2})
    assert rate.seconds_per_image == 2.5 and rate.source == "reference"
    assert "(reference rate of 2 CPU cores (test), not this machine's yet, 31 images" in rate.describe()
    assert lookup_rate(fresh, "cuda:H100", "sd:random", {"steps": 2}) is None
    seconds, said = steps_estimate(fresh, "cpu", "sel")
    assert seconds == pytest.approx(84.0) and said.startswith("measured on 2 CPU cores (test), not this machine yet: segmenting")
    bar = FakeBar()
    with StepClock(bar, fresh, "cpu")(7, "segmenting", step=("masks", "seg-ns")):
        pass
    assert "expected 1 min at 12 s/item (reference rate of 2 CPU cores (test)" in bar.shown[0][1]
    store_rate(fresh, Rate(3.0, 10, "cpu", "sd:random", {"steps": 2}), "rates")  # this machine measured its own
    assert lookup_rate(fresh, "cpu", "sd:random", {"steps": 2}).source == "run"


def test_the_rest_of_a_run_is_a_step_of_the_next_estimate_and_a_selection_key_names_no_clone(tmp_path):
    """What no step measured (collection, loading models, the gates' arithmetic) is kept as one step, so the next
    run's expected time covers the whole run; a bundled file's path does not make two clones' keys differ."""
    from t2i_fairness.spine import rates

    clock = StepClock(FakeBar(), Cache(tmp_path), "cpu")
    clock.account_rest(100.0, 30.0)
    assert clock.steps == []  # nothing computed (a warm run): the last record that did is kept
    clock.steps.append({"desc": "segmenting", "kind": "masks", "namespace": "ns", "items": 5, "seconds": 50.0})
    clock.account_rest(100.0, 30.0)
    assert clock.steps[-1] == {"desc": rates.REST, "kind": "rest", "namespace": "run", "items": 1, "seconds": 20.0}
    store_steps(clock.cache, "cpu", "k", clock.steps)
    seconds, said = steps_estimate(clock.cache, "cpu", "k")
    assert seconds == pytest.approx(70.0) and said.endswith(f"; {rates.REST} 20 s")
    assert rates._portable(f"{rates._PACKAGE}/data/indic_smoke.jsonl") == "t2i_fairness/data/indic_smoke.jsonl"
