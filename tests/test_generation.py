"""Seeds, the tiny generator's determinism, canonical batches, and the lazy ImageFactory."""

from __future__ import annotations

import csv
import doctest
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

import fakegen
from t2i_fairness.spine import generation
from t2i_fairness.base.cache import Cache, encode_png
from t2i_fairness.spine.generation import ImageFactory, derive_seed
from t2i_fairness.generators import GenerationSettings, GeneratorSource, ModelLoadError, model_slug, resolve_generator
from t2i_fairness.generators.manifest import ManifestGenerator
from t2i_fairness.base.memo import no_progress as _no_progress


def sha(image: Image.Image) -> str:
    return hashlib.sha256(encode_png(image.convert("RGB"))).hexdigest()


def file_hashes(refs) -> dict[tuple[str, int], str]:
    return {(r.prompt, r.index): hashlib.sha256(r.path.read_bytes()).hexdigest() for row in refs for r in row}


def test_doctests_run():
    from t2i_fairness import generators

    for module in (generation, generators):
        assert doctest.testmod(module, raise_on_error=False).failed == 0


# ------------------------------------------------------------------------------- seeds


def test_derive_seed_is_a_pure_function_of_prompt_index_and_base_seed():
    # Pinned: seeds must not change between processes, machines or releases (sha256, not hash()).
    assert derive_seed("bag in Africa", 0) == 2510209344
    assert derive_seed("bag in Africa", 0, 0) == derive_seed("bag in Africa", 0)
    seeds = {derive_seed(p, i, b) for p in ("bag in Africa", "bag in Europe") for i in range(50) for b in (0, 1)}
    assert len(seeds) == 200
    assert all(0 <= s < 2**32 for s in seeds)


def test_derive_seed_is_the_same_in_another_process(subprocess_env):
    code = "from t2i_fairness.spine.generation import derive_seed; print(derive_seed('cooking pot in Japan', 3, 7))"
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == derive_seed("cooking pot in Japan", 3, 7)


# ------------------------------------------------------------------------------- the tiny generator

DETERMINISM_SCRIPT = """
import hashlib, torch
torch.set_num_threads(1)
from t2i_fairness.base.cache import encode_png
from t2i_fairness.generators.diffusers_pipe import DiffusersGenerator
g = DiffusersGenerator.tiny(device="cpu")
print(g.fingerprint)
for im in g.generate(["bag in Africa", "car in Europe"], [7, 8]):
    print(hashlib.sha256(encode_png(im.convert("RGB"))).hexdigest())
"""


def test_tiny_generator_gives_the_same_bytes_in_another_process(tiny_generator, subprocess_env):
    child = subprocess.Popen([sys.executable, "-c", DETERMINISM_SCRIPT], env=subprocess_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    images = tiny_generator.generate(["bag in Africa", "car in Europe"], [7, 8])
    again = tiny_generator.generate(["bag in Africa", "car in Europe"], [7, 8])
    out, err = child.communicate(timeout=180)
    assert child.returncode == 0, err
    assert out.split() == [tiny_generator.fingerprint] + [sha(im) for im in images]
    assert [sha(im) for im in again] == [sha(im) for im in images]
    # A real model, not a constant: the two prompts/seeds give different, non-flat images.
    assert images[0].size == (64, 64) and sha(images[0]) != sha(images[1])
    assert len(set(images[0].tobytes())) > 100


def test_tiny_fingerprint_names_model_settings_and_precision(tiny_generator):
    source = resolve_generator("tiny", GenerationSettings(), "cpu", lambda p, i: derive_seed(p, i))
    assert source.fingerprint == tiny_generator.fingerprint  # known without building the model
    assert not source.loaded
    assert source.fingerprint.startswith("diffusers:tiny-sd-")
    other = resolve_generator("tiny", GenerationSettings(steps=5), "cpu", lambda p, i: derive_seed(p, i))
    assert other.fingerprint != source.fingerprint
    assert resolve_generator("tiny", GenerationSettings(), "cuda", derive_seed).fingerprint != source.fingerprint


# ------------------------------------------------------------------------------- canonical batches


def tiny_factory(generator, cache_dir: Path, batch_size: int = 2) -> ImageFactory:
    settings = GenerationSettings(**{**generator.settings.__dict__, "batch_size": batch_size})
    source = GeneratorSource("tiny", generator.fingerprint, settings, lambda: generator, generator)
    return ImageFactory(source, Cache(cache_dir), 0, _no_progress)


def test_bytes_do_not_depend_on_order_or_what_else_was_requested(tiny_generator, tmp_path):
    """A then B and B then A, each into a fresh cache, give identical files (3 images/prompt, batches of 2)."""
    a = ["bag in Africa", "car in Europe"]
    b = ["car in Europe", "dog in East Asia"]
    first = tiny_factory(tiny_generator, tmp_path / "ab")
    refs_ab = first.images(a, 3) + first.images(b, 3)
    second = tiny_factory(tiny_generator, tmp_path / "ba")
    refs_ba = second.images(b, 3) + second.images(a, 3)
    assert first.cache.stats.generated == second.cache.stats.generated == 9
    assert first.cache.stats.from_cache == second.cache.stats.from_cache == 3  # "car in Europe" the second time
    assert file_hashes(refs_ab) == file_hashes(refs_ba)
    assert len(set(file_hashes(refs_ab).values())) == 9

    # Cache state: with one image truncated, its canonical batch [0, 1] is generated again whole (as a paid API
    # bills it: 2 generated, 1 of them still cached) and only the truncated file is rewritten, with the same bytes.
    victim = refs_ab[1][1]  # "car in Europe", index 1: the middle of canonical batch [0, 1]
    before = victim.path.read_bytes()
    victim.path.write_bytes(before[: len(before) // 3])
    again = tiny_factory(tiny_generator, tmp_path / "ab")
    refs_again = again.images(a, 3)
    assert (again.cache.stats.generated, again.cache.stats.regenerated) == (2, 1)
    assert again.cache.stats.from_cache == 5
    assert again.cache.stats.corrupt == [str(victim.path)]
    assert victim.path.read_bytes() == before
    assert file_hashes(refs_again) == file_hashes(refs_ab[:2])


# ------------------------------------------------------------------------------- the lazy factory


@pytest.fixture
def calls():
    fakegen.CALLS.update(calls=0, images=0)
    return fakegen.CALLS


def test_factory_generates_only_what_is_missing_in_canonical_batches(fake_source, tmp_path, calls):
    factory = ImageFactory(fake_source, Cache(tmp_path), 0, _no_progress)
    refs = factory.images(["bag in Africa", "car in Europe"], 5)  # batches [0..3] and [4] per prompt
    assert calls == {"calls": 4, "images": 10}
    assert factory.cache.stats.generated == 10
    assert [[(r.prompt, r.index) for r in row] for row in refs] == [
        [("bag in Africa", i) for i in range(5)],
        [("car in Europe", i) for i in range(5)],
    ]
    assert all(r.seed == derive_seed(r.prompt, r.index) for row in refs for r in row)
    seed = refs[0][2].seed
    assert refs[0][2].load().getpixel((0, 0)) == (seed % 256, (seed >> 8) % 256, (seed >> 16) % 256)

    again = ImageFactory(fake_source, Cache(tmp_path), 0, _no_progress)
    assert again.images(["car in Europe", "bag in Africa", "car in Europe"], 5) == [refs[1], refs[0], refs[1]]
    assert calls == {"calls": 4, "images": 10}  # nothing new
    assert (again.cache.stats.generated, again.cache.stats.from_cache) == (0, 10)

    refs[1][4].path.unlink()  # a missing image regenerates its canonical batch ([4]) only
    refs[0][1].path.write_bytes(b"\x89PNG broken")  # a corrupt one regenerates [0..3], writes only it
    third = ImageFactory(fake_source, Cache(tmp_path), 0, _no_progress)
    third.images(["bag in Africa", "car in Europe"], 5)
    assert calls == {"calls": 6, "images": 15}
    # generated counts what the model made (5 images: [0..3] whole and [4]), 3 of them still cached and kept
    assert (third.cache.stats.generated, third.cache.stats.regenerated, third.cache.stats.from_cache) == (5, 3, 8)
    assert third.cache.stats.corrupt == [str(refs[0][1].path)]


def test_keys_depend_on_seed_settings_and_model_but_not_batch_size(fake_source, tmp_path):
    base = ImageFactory(fake_source, Cache(tmp_path)).ref("bag in Africa", 0)
    other_seed = ImageFactory(fake_source, Cache(tmp_path), base_seed=1).ref("bag in Africa", 0)
    assert other_seed.key != base.key and other_seed.seed == derive_seed("bag in Africa", 0, 1)

    def source(**changes):
        gen = fakegen.FakeGenerator()
        gen.fingerprint = changes.pop("fingerprint", gen.fingerprint)
        return GeneratorSource("python:fakegen:make", gen.fingerprint, GenerationSettings(**changes), lambda: gen, gen)

    assert ImageFactory(source(batch_size=1), Cache(tmp_path)).ref("bag in Africa", 0).key == base.key
    assert ImageFactory(source(batch_size=4, steps=9), Cache(tmp_path)).ref("bag in Africa", 0).key != base.key
    assert ImageFactory(source(batch_size=4, fingerprint="fakegen:v2"), Cache(tmp_path)).ref("bag in Africa", 0).key != base.key


def test_factory_errors(fake_source, tmp_path):
    factory = ImageFactory(fake_source, Cache(tmp_path), 0, _no_progress)
    with pytest.raises(ValueError, match="images per prompt must be >= 1, got 0"):
        factory.images(["bag"], 0)

    class Short(fakegen.FakeGenerator):
        def generate(self, prompts, seeds):
            return super().generate(prompts, seeds)[:-1]

    gen = Short()
    bad = GeneratorSource("python:short:make", gen.fingerprint, GenerationSettings(batch_size=4), lambda: gen, gen)
    with pytest.raises(RuntimeError, match=r"generator 'python:short:make' returned 3 images for 4 prompts"):
        ImageFactory(bad, Cache(tmp_path / "short"), 0, _no_progress).images(["bag"], 4)


# ------------------------------------------------------------------------------- resolving --t2i-model


def test_python_spec_errors_name_the_option(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "badgens.py").write_text(
        "def boom():\n    raise RuntimeError('no GPU here')\n\ndef empty():\n    return object()\n"
    )
    cases = {
        "python:nosuchmodule_t2i:make": "cannot import nosuchmodule_t2i.make",
        "python:badgens:missing": "cannot import badgens.missing",
        "python:badgens:boom": "the factory raised RuntimeError: no GPU here",
        "python:badgens:empty": r"lacks \['fingerprint', 'generate'\]",
        "python:justmodule": "expected python:module:factory",
    }
    for spec, match in cases.items():
        with pytest.raises(ModelLoadError, match=match) as info:
            resolve_generator(spec, GenerationSettings(), "cpu", derive_seed)
        assert f"--t2i-model {spec!r}" in str(info.value)


def test_a_local_path_without_a_pipeline_fails_at_once(tmp_path):
    start = time.monotonic()
    with pytest.raises(ModelLoadError, match="no diffusers pipeline at .*model_index.json not found"):
        resolve_generator(str(tmp_path / "no-such-model"), GenerationSettings(), "cpu", derive_seed)
    with pytest.raises(ModelLoadError, match="model_index.json not found"):
        resolve_generator("./relative/missing", GenerationSettings(), "cpu", derive_seed)
    assert time.monotonic() - start < 20  # no hub retries: the path is checked before anything loads


def test_model_slug():
    assert model_slug("runwayml/stable-diffusion-v1-5") == "runwayml-stable-diffusion-v1-5"
    assert model_slug("images:/data/DALLE3/") == "images-dalle3"


# ------------------------------------------------------------------------------- images: manifests


def write_manifest(folder: Path, rows: list[dict], header=("prompt", "index", "path")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "manifest.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(header))
        w.writeheader()
        w.writerows(rows)
    return folder / "manifest.csv"


def test_manifest_serves_images_by_index_or_seed(tmp_path, calls):
    for i, colour in enumerate([(255, 0, 0), (0, 255, 0), (0, 0, 255)]):
        Image.new("RGB", (8, 8), colour).save(tmp_path / f"{i}.png")
    write_manifest(tmp_path, [
        {"prompt": "bag in Africa", "index": 0, "path": "0.png", "seed": ""},
        {"prompt": "bag in Africa", "index": 1, "path": "1.png", "seed": ""},
        {"prompt": "car in Europe", "index": "", "path": "2.png", "seed": derive_seed("car in Europe", 0)},
    ], header=("prompt", "index", "seed", "path"))
    source = resolve_generator(f"images:{tmp_path}", GenerationSettings(), "cpu", lambda p, i: derive_seed(p, i))
    assert source.fingerprint.startswith("images:")
    factory = ImageFactory(source, Cache(tmp_path / "cache"), 0, _no_progress)
    bag, car = factory.images(["bag in Africa", "car in Europe"], 1)
    assert bag[0].load().getpixel((0, 0)) == (255, 0, 0)
    assert car[0].load().getpixel((0, 0)) == (0, 0, 255)
    with pytest.raises(ValueError, match=r"lacks images for 1 prompt\(s\) the suite asks for: 'dog in East Asia'"):
        factory.images(["bag in Africa", "dog in East Asia"], 2)


@pytest.mark.parametrize(
    "rows, header, match",
    [
        ([], ("prompt", "file"), r"needs columns prompt, path and seed or index; found \['file', 'prompt'\]"),
        ([{"prompt": "bag", "index": 0, "path": "gone.png"}], ("prompt", "index", "path"), r"1 image file\(s\) not found: line 2: gone.png"),
        ([{"prompt": "bag", "index": "x", "path": "a.png"}], ("prompt", "index", "path"), "line 2: seed/index must be an integer"),
    ],
)
def test_manifest_errors_name_the_file_and_line(tmp_path, rows, header, match):
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    manifest = write_manifest(tmp_path, rows, header)
    with pytest.raises(ValueError, match=match) as info:
        ManifestGenerator(manifest, derive_seed)
    assert str(manifest) in str(info.value)


def test_manifest_folder_without_csv(tmp_path):
    with pytest.raises(ModelLoadError, match=r"images:.*: no manifest.csv or images.csv in that folder"):
        resolve_generator(f"images:{tmp_path}", GenerationSettings(), "cpu", derive_seed)
    shutil.rmtree(tmp_path)
    with pytest.raises(ModelLoadError, match="manifest not found"):
        resolve_generator(f"images:{tmp_path}", GenerationSettings(), "cpu", derive_seed)
