"""Plans that scale (issue #30): the jobs and counts are computed per batch and per prompt, and give
exactly what the per-image computation they replaced gave.

The reference below is the per-image ``batch_jobs`` of main 1938921 (one presence check and one
cache key per image), kept verbatim as the brute force the new computation is checked against on
random small plans, cached images included. A timing test bounds the real thing: ``plan`` of a
large request on a cold cache answers in time proportional to its requests, not its images
(``bench/bench_plan.py`` prints the real sizes: the paper preset and ``--t2i-images-per-prompt 100000``).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from t2i_fairness.spine.plan import BatchJob, ImageRequest, Jobs, batch_jobs, request_tops


def reference_batch_jobs(requests, batch_size, present, role="candidate"):
    """main 1938921's batch_jobs: per image, ``present(prompt, index)`` asked once, jobs in run order."""
    have: dict[str, dict[int, bool]] = {}
    jobs = []
    for req in requests:
        known = have.setdefault(req.prompt, {})
        for start in range(0, req.n, batch_size):
            batch = tuple(range(start, min(start + batch_size, req.n)))
            for i in batch:
                if i not in known:
                    known[i] = bool(present(req.prompt, i))
            missing = tuple(i for i in batch if not known[i])
            if missing:
                jobs.append(BatchJob(req.prompt, batch, missing, role))
                for i in missing:
                    known[i] = True
    return jobs


requests_st = st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 40)), min_size=1, max_size=8)
cached_st = st.dictionaries(st.sampled_from("abcd"), st.sets(st.integers(0, 45), max_size=20), max_size=4)


@settings(max_examples=400, deadline=None)
@given(requests=requests_st, cached=cached_st, batch=st.integers(1, 9))
def test_jobs_are_those_of_the_per_image_computation(requests, cached, batch):
    reqs = [ImageRequest(p, n) for p, n in requests]
    want = reference_batch_jobs(reqs, batch, lambda p, i: i in cached.get(p, ()))
    got = batch_jobs(reqs, SimpleNamespace(batch_size=batch), cached=lambda p, n: [i for i in cached.get(p, ()) if i < n])
    assert list(got) == want
    assert len(got) == len(want) and [got[i] for i in range(len(got))] == want and list(reversed(got)) == want[::-1]
    assert got.images == sum(len(j.write) for j in want)
    # the plan's counts: images asked for, cached, to make (the old code's sets of (prompt, index) pairs)
    images = {(r.prompt, i) for r in reqs for i in range(r.n)}
    make = {(j.prompt, i) for j in want for i in j.write}
    tops = request_tops(reqs)
    have = {p: sorted(i for i in cached.get(p, ()) if i < n) for p, n in tops.items()}
    assert sum(tops.values()) == len(images)
    assert sum(len(v) for v in have.values()) == len(images - make)
    assert sum(tops.values()) - sum(len(v) for v in have.values()) == len(make) == got.images


@settings(max_examples=200, deadline=None)
@given(requests=requests_st, cached=cached_st, batch=st.integers(1, 9))
def test_family_counts_and_widening_are_those_of_the_per_image_sets(requests, cached, batch):
    from t2i_fairness.distributed.planner import RolePlan, family_counts, widening
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.plan import Need

    reqs = [ImageRequest(p, n) for p, n in requests]
    half = len(reqs) // 2
    by_family = {"dig_in": reqs[:half] or reqs, "cis": reqs[half:] or reqs}
    tops = request_tops(reqs)
    have = {p: sorted(i for i in cached.get(p, ()) if i < n) for p, n in tops.items()}
    have = {p: v for p, v in have.items() if v}
    want_jobs = reference_batch_jobs(reqs, batch, lambda p, i: i in cached.get(p, ()))
    make = {(j.prompt, i) for j in want_jobs for i in j.write}
    wide = Need("g", (), tuple(reqs), widened="set-scope", narrow=tuple(reqs[:1]))
    rp = RolePlan("candidate", T2IOptions(), None, requests=reqs, by_family=by_family, cached=have,
                  needs=[("dig_in", wide), ("cis", Need("h", (), tuple(reqs[half:])))])
    for row in family_counts(rp):  # the old formulas, over sets of (prompt, index) pairs
        images = {(r.prompt, i) for r in by_family[row["family"]] for i in range(r.n)}
        assert (row["prompts"], row["images"], row["cached"], row["to_make"]) == (
            len({r.prompt for r in by_family[row["family"]]}), len(images), len(images - make), len(images & make))
    narrow = {(r.prompt, i) for r in [reqs[0], *reqs[half:]] for i in range(r.n)}
    assert widening(rp)["narrow_images"] == len(narrow)


def test_a_stretch_of_whole_batches_is_one_item_and_jobs_index_like_a_list():
    jobs = batch_jobs([ImageRequest("a", 10**6)], SimpleNamespace(batch_size=16), cached=lambda p, n: (5, 999_999))
    assert len(jobs) == 62_500 and len(jobs._items) == 3 and jobs.images == 10**6 - 2
    assert jobs[0] == BatchJob("a", tuple(range(16)), tuple(i for i in range(16) if i != 5))
    assert jobs[1] == BatchJob("a", tuple(range(16, 32)), tuple(range(16, 32)))
    assert jobs[-1].write == tuple(range(999_984, 999_999))
    with pytest.raises(IndexError):
        jobs[62_500]
    assert len(Jobs()) == 0 and list(Jobs()) == []


def test_planning_38_million_images_takes_time_per_request_not_per_image():
    """388 prompts x 100 000 images (the tiny suite's prompts at --t2i-images-per-prompt 100000), requests as
    the families make them (several per prompt), on a cold cache: well under a second, where one step per
    image would take minutes."""
    reqs = [ImageRequest(f"prompt {p}", n) for n in (2, 50_000, 100_000) for p in range(388)]
    start = time.perf_counter()
    jobs = batch_jobs(reqs, SimpleNamespace(batch_size=16), cached=lambda p, n: ())
    seconds = time.perf_counter() - start
    # per prompt: the batch [0, 16) of n=2, its 14 missing images when n=50 000 asks for it whole, 6249 more
    assert jobs.images == 388 * 100_000 and len(jobs) == 388 * 6251
    assert seconds < 2.0, f"{seconds:.2f} s for {len(reqs)} requests"


def test_clip_token_counts_are_those_of_the_tokenizer_call():
    """``count_tokens`` reads the tokenizer's ids without its 10 000-wide tensor: the same counts (``!`` is id 0)."""
    from t2i_fairness.metrics.cis import render_prompt, sample_component_prompts
    from t2i_fairness.models.clip import ClipModel

    clip = ClipModel.from_profile("tiny", "cpu")
    texts = [render_prompt(p) for k in (1, 4, 9) for p in sample_component_prompts(k, 30, seed=[0, k])]
    texts += ["wow!! a dog!", "", "  spaced   out  ", "café crème &amp; ﬁsh", "एक लाल बस"]
    slow = [int((clip.tokenizer([t], context_length=10_000)[0] != 0).sum()) for t in texts]
    assert [clip.count_tokens(t) for t in texts] == slow


def test_plan_of_a_large_request_with_the_tiny_model_writes_nothing_and_says_it_is_large(tmp_path, subprocess_env):
    """From an empty folder, with the built-in tiny models (the word-level gates' masked LM, whose weights planning
    digests, left ``.t2i-cache/identity/.digest-*.lock`` files): the folder stays empty, lock files included;
    100 000 images per prompt answer in seconds (one step per image took minutes) and the plan says it is large."""
    import re
    import subprocess
    import sys

    work = tmp_path / "empty"
    work.mkdir()
    start = time.perf_counter()
    planned = subprocess.run([sys.executable, "-m", "t2i_fairness.cli", "plan", "-k",
                              "test_word_influence_report or (test_object_consistency and object_in_region-africa)",
                              "--t2i-objects", "bag,car",
                              "--t2i-images-per-prompt", "100000", "--t2i-no-progress"],
                             cwd=work, env=subprocess_env, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - start
    assert planned.returncode == 0, planned.stdout + planned.stderr
    made = int(re.search(r"(\d+) image\(s\) to make in (\d+) batch", planned.stdout).group(1))
    assert made >= 200_000 and "model tiny (diffusers:" in planned.stdout, planned.stdout
    assert re.search(rf"large plan: {made} images to make \(above the 100000 ", planned.stdout), planned.stdout
    assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*")) == []
    assert seconds < 120, f"plan took {seconds:.0f} s"  # the collection and model loading of a small selection
