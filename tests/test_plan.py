"""The plan: which images a selection of gates asks for, and the batches that make them.

Unit tests of the mechanics (:mod:`t2i_fairness.spine.plan`), the families' slices, the one cache
loop with its two backends; the end-to-end checks that a plan is exactly what ``pytest`` generates
(``-k africa`` on a cold cache included) are in ``tests/test_plan_selection.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from t2i_fairness.spine.plan import BatchJob, GateCall, ImageRequest, Need, batch_jobs, role_options, run_job


def _factory(tmp_path, fake_source, batch_size=4):
    from t2i_fairness.base.cache import Cache
    from t2i_fairness.spine.generation import ImageFactory
    from t2i_fairness.base.memo import no_progress

    fake_source.settings = type(fake_source.settings)(batch_size=batch_size)
    factory = ImageFactory(fake_source, Cache(tmp_path), 0, no_progress)
    factory.batch_size = batch_size
    return factory


# -- jobs are the pytest path's batches --------------------------------------------------------------

def test_jobs_are_the_canonical_batches_the_factory_would_generate(tmp_path, fake_source):
    factory = _factory(tmp_path, fake_source)
    jobs = batch_jobs([ImageRequest("bag", 6), ImageRequest("car", 3), ImageRequest("bag", 6)], factory)
    assert [(j.prompt, j.indices, j.write) for j in jobs] == [
        ("bag", (0, 1, 2, 3), (0, 1, 2, 3)), ("bag", (4, 5), (4, 5)), ("car", (0, 1, 2), (0, 1, 2))]


def test_a_batch_whose_images_are_all_cached_is_not_a_job_and_a_partial_one_writes_only_the_missing(tmp_path, fake_source):
    factory = _factory(tmp_path, fake_source)
    factory.images(["bag"], 2)  # batch [0, 1] cached; a later n=6 run cuts [0..3], [4, 5]
    jobs = batch_jobs([ImageRequest("bag", 2), ImageRequest("bag", 6)], factory)
    assert [(j.indices, j.write) for j in jobs] == [((0, 1, 2, 3), (2, 3)), ((4, 5), (4, 5))]


def test_running_the_jobs_gives_the_bytes_and_counts_of_the_factory(tmp_path, fake_source):
    """Jobs run in any order (here reversed) write what ImageFactory.images writes, each image once."""
    requests = [ImageRequest("bag", 2), ImageRequest("bag", 6), ImageRequest("car", 5)]
    planned = _factory(tmp_path / "planned", fake_source)
    for job in reversed(batch_jobs(requests, planned)):
        run_job(planned, job)
    direct = _factory(tmp_path / "direct", fake_source)
    for r in requests:
        direct.images([r.prompt], r.n)
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in root.rglob("*.png")}  # noqa: E731
    assert files(tmp_path / "planned") == files(tmp_path / "direct") and len(files(tmp_path / "direct")) == 11
    # each image written once (11); both paths remake the batch [0..3] whole for bag's n=6 (2 of it cached)
    new = lambda f: f.cache.stats.generated - f.cache.stats.regenerated  # noqa: E731
    assert new(planned) == new(direct) == 11 and planned.cache.stats.generated == direct.cache.stats.generated


def test_a_job_generates_its_whole_batch_but_writes_only_its_images(tmp_path, fake_source):
    factory = _factory(tmp_path, fake_source)
    gen = fake_source.get()
    before = gen.__class__.__module__ and __import__("fakegen").CALLS["images"]
    assert run_job(factory, BatchJob("bag", (0, 1, 2, 3), (2, 3))) == 2
    assert __import__("fakegen").CALLS["images"] - before == 4  # the whole canonical batch went through the model
    assert sorted(p.stem for p in tmp_path.rglob("*.png")) == sorted(factory.ref("bag", i).key for i in (2, 3))
    assert run_job(factory, BatchJob("bag", (0, 1, 2, 3), (2, 3))) == 0  # done: nothing generated or written again


def test_a_job_locked_by_another_process_is_deferred_when_asked_not_to_wait(tmp_path, fake_source):
    factory = _factory(tmp_path, fake_source)
    job = BatchJob("bag", (0, 1), (0, 1))
    ref = factory.ref("bag", 0)
    lock = factory.cache.lock(ref.path.with_suffix(".b2"))
    with lock:
        assert run_job(factory, job, wait=False) is None
    assert run_job(factory, job, wait=False) == 2


def test_requests_and_calls_check_their_values():
    with pytest.raises(ValueError, match="n must be an integer >= 1, got 0"):
        ImageRequest("bag", 0)
    with pytest.raises(ValueError, match="prompt must be a non-empty string"):
        ImageRequest("", 2)
    assert GateCall("t", {"t2i": "baseline"}).role == "baseline"
    assert Need("scores", (1,)).key == ("scores", (1,))
    job = BatchJob("a", (0, 1), (1,), "baseline")
    assert BatchJob.from_dict(job.to_dict()) == job


def test_the_baseline_role_gets_the_baseline_model_and_seed():
    from t2i_fairness.spine.options import T2IOptions

    o = T2IOptions(model="tiny", seed=3, baseline_model="other", baseline_seed=7)
    assert (role_options(o, "baseline").model, role_options(o, "baseline").seed) == ("other", 7)
    assert role_options(o, "candidate") is o


# -- families: slices from the studies' own code ---------------------------------------------------

def test_dig_in_groups_take_their_prompts_from_the_same_slices_as_the_study():
    from t2i_fairness.references.grouping import PromptSpace, group_generated, group_prompts
    from t2i_fairness.references.sets import synthetic_reference

    ref = synthetic_reference(["bag", "car"], None, per_group=4, seed=0)
    space = PromptSpace.from_reference(ref)
    for template in ("object", "object_in_region", "object_in_country", "regional_adjective"):
        prompts = space.prompts(template)
        pairs = [(p, [p.text]) for p in prompts]
        for region in ref.regions:
            full = group_generated(pairs, template, ref, "region", seed=0)[region]
            sliced = [(p, [p.text]) for p in group_prompts(prompts, template, region)]
            assert group_generated(sliced, template, ref, "region", seed=0)[region] == full, (template, region)
            for obj in ("bag", "car"):
                full = group_generated(pairs, template, ref, "object_region")[(obj, region)]
                sliced = [(p, [p.text]) for p in group_prompts(prompts, template, region, obj)]
                assert group_generated(sliced, template, ref, "object_region")[(obj, region)] == full


def test_word_influence_rows_of_a_slice_are_the_rows_of_the_whole_suite():
    """for_word / for_prompt analyse only the prompts involved; every row they give equals the full analysis's."""
    from t2i_fairness.families.word_influence.study import analyse, observe, plan_prompts

    fake = lambda words, idx, m: [[w + f"~{j}" if i in idx else w for i, w in enumerate(words)] for j in range(m)]  # noqa: E731

    def labeller(texts, n):
        return [[(f"{t}#{i}", (hash(t) + i) % 2) for i in range(n)] for t in texts]

    prompts = ["a doctor at work", "the nurse at home", "a nurse"]
    levels = {prompts[0]: (1, 2), prompts[1]: (1,), prompts[2]: (1,)}
    every = plan_prompts(prompts, levels, fake, 2, 3)
    full = analyse(every, observe(every, labeller), ["male", "female"], n_resamples=50, seed=1)
    for word, k in (("nurse", 1), ("a", 1), ("doctor", 2)):
        holding = [p for p in prompts if word in p.split() and k in levels[p]]
        some = plan_prompts(holding, {p: levels[p] for p in holding}, fake, 2, 3)
        part = analyse(some, observe(some, labeller), ["male", "female"], n_resamples=50, seed=1)
        assert part.word(word, "female", k) == full.word(word, "female", k)
    one = plan_prompts([prompts[1]], {prompts[1]: (1,)}, fake, 2, 3)
    part = analyse(one, observe(one, labeller), ["male", "female"], n_resamples=50, seed=1)
    assert part.prompt_representation(prompts[1], "male") == full.prompt_representation(prompts[1], "male")


def test_cis_image_calls_repeat_as_the_study_draws_texts():
    from t2i_fairness.families.cis.study import image_calls, occurrences

    texts = ["a", "b", "a", "c", "a"]
    assert image_calls(texts, 2) == [(["b", "c"], 2), (["a"], 6)]
    assert occurrences(texts) == [0, 0, 1, 0, 2]


# -- one cache loop, two backends -------------------------------------------------------------------

def test_memo_gives_the_same_values_and_counts_over_files_and_over_the_row_store(tmp_path):
    from t2i_fairness.base.cache import Cache, decode_array, encode_array
    from t2i_fairness.base.memo import FileEntries, Memo
    from t2i_fairness.base.rowstore import FeatureRows

    def compute(keys):
        return lambda idx: [np.full(3, float(keys[i]), np.float32) for i in idx]

    out = {}
    for name in ("files", "rows"):
        cache = Cache(tmp_path / name)
        rows = FeatureRows(cache, legacy=False)
        entries = FileEntries(cache, "features", "ns", ".npy", encode_array, decode_array) if name == "files" \
            else rows.entries("ns")
        memo = Memo(cache, "features", "ns", label="features:x", entries=entries)
        first = memo.get_many(["1", "2", "1"], compute(["1", "2", "1"]), batch_size=2)
        again = memo.get_many(["2", "3"], compute(["2", "3"]))
        rows.close()
        out[name] = ([v.tolist() for v in first + again], dict(cache.stats.computed), dict(cache.stats.reused))
    assert out["files"] == out["rows"]
    assert out["rows"][1:] == ({"features:x": 4}, {"features:x": 1})
    assert not (tmp_path / "rows" / "features").exists() and (tmp_path / "rows" / "rows" / "ns").is_dir()


def test_workbench_features_go_to_the_row_store_and_close_flushes_it(tmp_path):
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.workbench import Workbench

    bench = Workbench(T2IOptions(model="python:fakegen:make", cache_dir=tmp_path, progress=False))
    refs = bench.images(["bag"], 3)[0]
    encoder = SimpleNamespace(fingerprint="enc:v1", encode_images=lambda ims: np.ones((len(ims), 4), np.float32))
    assert bench.features(encoder, refs).shape == (3, 4)
    bench.close()
    assert not (tmp_path / "features").exists() and list((tmp_path / "rows").rglob("*.rows"))
    again = Workbench(T2IOptions(model="python:fakegen:make", cache_dir=tmp_path, progress=False))
    broken = SimpleNamespace(fingerprint="enc:v1", encode_images=lambda ims: 1 / 0)
    assert again.features(broken, refs).tolist() == [[1.0] * 4] * 3 and again.cache.stats.reused == {"features:enc": 3}
    again.close()
