"""Cost before you pay: ``t2i-fairness plan`` estimates generation hours from the per-image time a
generating run stored, and says it has no measured rate before there is one."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from t2i_fairness.base.cache import Cache
from t2i_fairness.spine.rates import Rate, estimate_hours, lookup_rate, store_rate

SELECTION = ["--pyargs", "t2i_fairness.fairness_tests", "-k", "object_consistency and africa",
             "--t2i-model", "python:fakegen:make", "--t2i-objects", "bag", "--t2i-images-per-prompt", "2",
             "--t2i-no-progress", "--t2i-device", "cpu"]


def test_plan_says_no_measured_rate_before_a_run_and_hours_after(tmp_path, in_process):
    args = [*SELECTION, "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml")]
    before = in_process.cli(["plan", *args, "--output", str(tmp_path / "before.json")], cwd=tmp_path)
    assert before.returncode == 0, before.stdout + before.stderr
    assert "estimated generation time: no measured rate for this model and settings on cpu" in before.stdout
    to_make = int(re.search(r"(\d+) image\(s\) to make", before.stdout).group(1))
    assert to_make > 0
    assert json.loads((tmp_path / "before.json").read_text())["roles"][0]["estimate"]["hours"] is None

    made = in_process.cli(["generate", *args], cwd=tmp_path)  # a generating run: stores its per-image time
    assert made.returncode == 0, made.stdout + made.stderr
    (rate_file,) = (tmp_path / "cache" / "rates").rglob("*.json")

    # a later selection with images still to make: the other regions
    args_all = [a if a != "object_consistency and africa" else "object_consistency" for a in args]
    after = in_process.cli(["plan", *args_all, "--output", str(tmp_path / "after.json")], cwd=tmp_path)
    assert after.returncode == 0, after.stdout + after.stderr
    line = re.search(r"estimated cpu time: ([\d.]+) h for (\d+) image\(s\) at ([\d.e-]+) s/image on cpu \(run, (\d+) images",
                     after.stdout)
    assert line, after.stdout
    estimate = json.loads((tmp_path / "after.json").read_text())["roles"][0]["estimate"]
    assert estimate["device"] == "cpu" and estimate["images"] == int(line.group(2)) > 0
    assert estimate["seconds_per_image"] > 0 and int(line.group(4)) >= to_make
    assert estimate["hours"] == pytest.approx(estimate["images"] * estimate["seconds_per_image"] / 3600)


def test_a_pytest_run_stores_its_rate_under_device_model_and_settings(tmp_path):
    import fakegen
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.rates import device_label
    from t2i_fairness.spine.workbench import Workbench

    options = T2IOptions(model="python:fakegen:make", cache_dir=tmp_path / "cache", device="cpu", progress=False)
    bench = Workbench(options)
    settings = dataclasses.asdict(bench.source.settings)
    assert lookup_rate(bench.cache, "cpu", bench.source.fingerprint, settings) is None
    fakegen.CALLS.update(calls=0, images=0)
    bench.images(["bag in Africa", "car in Europe"], 6)
    rate = lookup_rate(bench.cache, device_label("cpu"), bench.source.fingerprint, settings)
    assert rate is not None and rate.images == fakegen.CALLS["images"] == 12 and rate.source == "run"
    assert 0 < rate.seconds_per_image < 5 and rate.settings == settings
    # another batch size is another rate (settings name it)
    other = dict(settings, batch_size=(settings["batch_size"] or 1) + 1)
    assert lookup_rate(bench.cache, "cpu", bench.source.fingerprint, other) is None
    bench.close()


def test_estimate_hours_and_bad_rates(tmp_path):
    assert estimate_hours(7200, 0.5) == 1.0
    assert estimate_hours(100, Rate(36.0, 10, "cpu", "m")) == 1.0
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            estimate_hours(10, bad)
    with pytest.raises(ValueError):
        estimate_hours(-1, 1.0)
    cache = Cache(tmp_path)
    path = store_rate(cache, Rate(1.0, 4, "cpu", "m", {"steps": 2}))
    path.write_bytes(path.read_bytes()[:-3])  # a damaged entry: reported, and no rate
    assert lookup_rate(cache, "cpu", "m", {"steps": 2}) is None and cache.stats.corrupt == [str(path)]


def test_the_run_header_says_how_long_from_the_stored_rate_and_progress_lines_say_what_is_left(tmp_path, in_process):
    """Issue #30: no idea of a run's length up front. Without a stored rate the header says so; with one it says
    how long the selection's images take (as ``t2i-fairness plan`` counts them), and each generating progress
    line says how many of the run's images are made and how long is left."""
    from t2i_fairness.base.cache import Cache

    def run(n, design="--t2i-fixed-n"):  # generation first is the fixed-N run's (the paper preset's default: rounds)
        args = [*[a for a in SELECTION if a != "--t2i-no-progress"], "-p", "no:cacheprovider",
                "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml"),
                "--t2i-artifacts", str(tmp_path / "art"), "-q", design]
        args[args.index("--t2i-images-per-prompt") + 1] = str(n)
        return in_process.pytest(args, cwd=tmp_path)

    first = run(2)
    assert "INTERNALERROR" not in first.stdout + first.stderr, first.stdout[-3000:] + first.stderr[-3000:]
    assert "t2i-fairness: expected generation time: unknown, no measured rate for this model and settings on cpu" \
        in first.stdout, first.stdout[-3000:]
    cache = Cache(tmp_path / "cache")
    (path,) = (tmp_path / "cache" / "rates").rglob("*.json")
    stored = Rate(**cache.read(path, json.loads, checksum=True))
    store_rate(cache, dataclasses.replace(stored, seconds_per_image=90.0, source="bench", images=64))
    planned = in_process.cli(["plan", *[a if a != "2" else "6" for a in SELECTION], "--t2i-cache-dir",
                              str(tmp_path / "cache"), "--t2i-fixed-n"], cwd=tmp_path)
    to_make = int(re.search(r"(\d+) image\(s\) to make", planned.stdout).group(1))
    assert to_make > 0, planned.stdout

    second = run(6)
    header = re.search(r"^t2i-fairness: expected generation time: (\d+) min for (\d+) image\(s\) to make "
                       r"\((\d+) of (\d+) cached\) at 90 s/image on cpu \(bench, 64 images", second.stdout, re.M)
    assert header, second.stdout[-3000:]
    assert int(header.group(2)) == to_make and int(header.group(1)) == round(to_make * 90 / 60)
    assert f"[run: 0 of {to_make} images made, about {round(to_make * 90 / 60)} min left at 90 s/image (stored rate)]" \
        in second.stderr, second.stderr[-3000:]
    # generation first (issue #30: the generator released before the scorers load) makes every planned image
    # in one progress line, which carries the run's count and time left; calls after it (an image a gate asks
    # for that the plan did not foresee) would show the images written so far at this run's rate
    assert f"generating first (candidate) [run: 0 of {to_make} images made" in second.stderr, second.stderr[-3000:]
    later = [int(m) for m in re.findall(rf"\[run: (\d+) of {to_make} images made, about [^\]]* \(this run\)\]", second.stderr)]
    assert all(0 < m <= to_make for m in later), second.stderr[-3000:]
    # the paper preset's default design (rounds): the header gives the null model's expectation and, as its most,
    # the fixed-N plan's images (12 images per prompt: the 6 above are cached)
    third = run(12, design="--t2i-sequential")
    header = re.search(r"^t2i-fairness: expected generation time: .+? for (\d+) image\(s\) to make if the model did "
                       r"not regress \(sequential; at most .+? for (\d+), the fixed-N plan", third.stdout, re.M)
    assert header, third.stdout[:3000]
    assert 0 < int(header.group(1)) < int(header.group(2)), header.group(0)
