"""--t2i-cache-dir as an fsspec URL: a local mirror in front of a shared store (local and in-memory fsspec)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.base.cache import Cache, decode_array, decode_png, encode_array, encode_png
from t2i_fairness.spine.generation import ImageFactory
from t2i_fairness.generators import GenerationSettings, GeneratorSource


class CountingGenerator:
    fingerprint = "counting:v1"

    def __init__(self):
        self.images = 0

    def generate(self, prompts, seeds):
        self.images += len(prompts)
        return [Image.new("RGB", (8, 8), (s % 256, 7, 9)) for s in seeds]


def _factory(cache: Cache, gen: CountingGenerator) -> ImageFactory:
    source = GeneratorSource("python:counting", gen.fingerprint, GenerationSettings(batch_size=2), lambda: gen, gen)
    return ImageFactory(source, cache, progress=lambda total, desc: _null())


class _null:
    def __enter__(self):
        return lambda n: None

    def __exit__(self, *exc):
        return False


@pytest.fixture(params=["memory", "file"])
def shared_url(request, tmp_path):
    if request.param == "memory":
        import fsspec

        url = f"memory://t2i-test-{tmp_path.name}"
        yield url
        fsspec.filesystem("memory").rm(url.split("://", 1)[1], recursive=True)
    else:
        yield f"file://{tmp_path / 'shared'}"


def test_a_second_machine_reuses_what_the_first_made(tmp_path, shared_url):
    """Two local mirrors (two CI shards) over one shared store: the second generates nothing."""
    first_gen, second_gen = CountingGenerator(), CountingGenerator()
    first = Cache(tmp_path / "machine1", remote=shared_url)
    refs = _factory(first, first_gen).images(["bag in Africa", "car in Europe"], 3)
    assert first_gen.images == 6 and first.stats.generated == 6
    first.write(first.path("features", refs[0][0].key, ".npy", "enc"), encode_array(np.arange(4.0)))

    second = Cache(tmp_path / "machine2", remote=shared_url)
    again = _factory(second, second_gen).images(["bag in Africa", "car in Europe"], 3)
    assert second_gen.images == 0 and second.stats.generated == 0 and second.stats.from_cache == 6
    assert [r.path.read_bytes() for row in again for r in row] == [r.path.read_bytes() for row in refs for r in row]
    got = second.read(second.path("features", refs[0][0].key, ".npy", "enc"), decode_array)
    assert got.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_local_paths_never_touch_a_remote(tmp_path):
    cache = Cache(tmp_path / "c")
    assert cache.remote is None and not cache.fetch(cache.path("images", "ab" * 20, ".png"))
    path = cache.path("images", "cd" * 20, ".png")
    cache.write(path, encode_png(Image.new("RGB", (2, 2))))
    assert decode_png(path.read_bytes()).size == (2, 2)


def test_a_bad_url_is_a_clear_error(tmp_path):
    from t2i_fairness.spine.workbench import _make_cache

    with pytest.raises(OSError, match="--t2i-cache-dir 'nosuchproto://x'"):
        _make_cache("nosuchproto://x", tmp_path)
