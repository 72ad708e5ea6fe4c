"""Models held only while a gate needs them, and checked against the free memory before they load (issue #30).

- The parameters a model's need counts from its config (on torch's meta device) are those of the model built.
- A model that does not fit is refused before it is built, with one line naming it, its need, what is free
  and what to change.
- A released scorer's memory is freed even though studies keep its handle, and the handle builds it again
  when used; its plain attributes (the fingerprint) are read without building it.
- An address-space limit (``ulimit -v``) is one of the bounds of what is free.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import pytest

from t2i_fairness.base.devices import RunContext
from t2i_fairness.base.memory import GiB, Free, MemoryNeed, check_fits, free_memory
from t2i_fairness.errors import NotEnoughMemoryError
from t2i_fairness.models.memory import count_parameters, scorer_need


def _floating(*modules) -> int:
    return sum(t.numel() for m in modules for t in [*m.parameters(), *m.buffers()] if t.is_floating_point())


def _modules(kind, model):
    return {"inception": lambda: [model.model], "vit": lambda: [model.model], "clip": lambda: [model.model],
            "segmenter": lambda: [model.detector, model.sam], "captioner": lambda: [model._blip2.model],
            "masked_lm": lambda: [model.model], "sentence": lambda: [model.model]}[kind]()


@pytest.mark.parametrize("kind", ["inception", "vit", "clip", "segmenter", "captioner", "masked_lm", "sentence"])
def test_the_parameters_counted_from_a_config_are_those_of_the_model_built(kind):
    from t2i_fairness.models.registry import scorer_kind

    need = scorer_need(kind, "tiny", "cpu", "float32")
    model = scorer_kind(kind).build("tiny", RunContext("cpu"))
    assert need.parameters == _floating(*_modules(kind, model)) > 0
    assert need.weights == need.parameters * 4 and need.total > need.weights


def test_the_generator_parameters_counted_from_its_config_are_those_of_the_pipeline():
    from t2i_fairness.generators import GenerationSettings
    from t2i_fairness.generators.diffusers_pipe import build_tiny_pipeline, diffusers_need

    pipe, _ = build_tiny_pipeline("tiny-sd")
    need = diffusers_need("tiny", GenerationSettings(height=64, width=64, batch_size=4), "cpu", "bfloat16",
                          config_name="tiny-sd")
    assert need.parameters == _floating(pipe.unet, pipe.vae, pipe.text_encoder)
    assert need.weights == need.parameters * 2 and need.built_in_float32  # built in float32, then cast
    assert need.total >= need.parameters * 4


def test_counting_builds_nothing():
    import torch

    assert count_parameters(lambda: torch.nn.Linear(100_000, 100_000)) == 100_000 * 100_000 + 100_000  # 40 GB: meta


def test_a_need_at_another_batch_or_precision():
    need = MemoryNeed("generator x", parameters=10**9, activations=int(2.5 * GiB), batch=8, per_item=int(0.25 * GiB))
    assert need.at(batch=2).activations == int(0.5 * GiB) + int(0.5 * GiB)  # the fixed part stays
    assert need.at(precision="bfloat16").weights == 2 * 10**9


def test_a_model_that_does_not_fit_is_refused_before_it_is_built(tmp_path, monkeypatch):
    from t2i_fairness.base import memory
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.workbench import Workbench

    bench = Workbench(T2IOptions(model="procedural", cache_dir=tmp_path, device="cpu", progress=False))
    built = []

    def build(profile, run):
        built.append(profile)
        return type("Enc", (), {"fingerprint": "enc:v1"})()

    build.kind = "vit"  # it builds a ViT: the need is that kind's
    monkeypatch.setattr(memory, "free_memory", lambda device="cpu": [Free(GiB // 100, "RAM available")])
    with pytest.raises(NotEnoughMemoryError) as info:
        bench.scorer("my_vit", build)
    message = str(info.value)
    assert built == [] and "\n" not in message
    assert message.startswith("not enough memory to load the scorer my_vit (vit, tiny) on cpu: it needs ")
    assert "and 0.01 GB is free (RAM available). To fit: " in message and "a narrower -k" in message
    assert "--t2i-fixed-n" not in message  # a fixed-N run released its generator before the scorers (generation first)
    # a run in rounds (the paper preset's default) keeps the generator beside the scorers: the refusal names the way out
    rounds = Workbench(T2IOptions(model="procedural", cache_dir=tmp_path / "rounds", device="cpu", progress=False,
                                  sequential=True))
    with pytest.raises(NotEnoughMemoryError) as info:
        rounds.scorer("my_vit", build)
    assert built == [] and ("To fit: --t2i-device cuda (on a machine with a GPU), --t2i-fixed-n (every image made "
                            "first and the generator released before the scorers load), or a narrower -k") in str(info.value)


def test_check_fits_names_the_bound_that_is_missed():
    need = MemoryNeed("scorer big", parameters=2 * 10**9)
    check_fits(need, bounds=[Free(20 * GiB, "RAM available")])
    with pytest.raises(NotEnoughMemoryError, match=r"is free \(the cgroup's memory limit of 16.0 GB\)"):
        check_fits(need, bounds=[Free(5 * GiB, "the cgroup's memory limit of 16.0 GB"), Free(20 * GiB, "RAM available")])


def test_a_released_scorer_is_freed_although_its_handle_is_kept_and_is_built_again_when_used(tmp_path):
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.workbench import Workbench

    bench = Workbench(T2IOptions(model="procedural", cache_dir=tmp_path, device="cpu", progress=False))
    built = []

    class Scorer:
        fingerprint = "scorer:v1"

        def encode_images(self, images):
            return [0.0 for _ in images]

    def build(profile, run):
        built.append((profile, run))
        return Scorer()

    handle = bench.scorer("mine", build)  # a study keeps this
    first = weakref.ref(handle.model)
    assert bench.release(generator=False, keep={"mine"}) == [] and first() is not None
    assert bench.release(generator=False, keep=()) == ["scorer mine"]
    gc.collect()
    assert first() is None  # nothing holds the model any more
    assert handle.fingerprint == "scorer:v1" and len(built) == 1  # read without building it again
    assert handle.encode_images([1, 2]) == [0.0, 0.0] and len(built) == 2
    assert built[0] == ("tiny", bench.run)  # the builder got the run's context
    assert isinstance(handle, Scorer)
    assert bench.use.events == ["+scorer mine", "-scorer mine", "+scorer mine"]
    assert bench.scorer("mine", build) is handle  # the same builder: the same handle
    # one name, one model: asked again with another build (Decomposed-DIG's --t2i-masks after the scorer
    # check built the registered segmenter), the session would serve the first model; it is refused
    with pytest.raises(ValueError, match="scorer 'mine' is built by builder .*build in this session; asked again with kind mine"):
        bench.scorer("mine")
    bench.scorer("segmenter")
    with pytest.raises(ValueError, match="asked again with builder"):
        bench.scorer("segmenter", build)


def test_an_address_space_limit_is_a_bound_of_what_is_free():
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30)); "
            "from t2i_fairness.base.memory import free_memory; "
            "print([b.what for b in free_memory()][0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("the address-space limit of 6.0 GB (ulimit -v) less this process's"), out.stdout
    assert all(b.bytes > 0 for b in free_memory())
