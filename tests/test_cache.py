"""The cache: atomic writes, corrupt entries, the per-batch lock across processes, stable keys."""

from __future__ import annotations

import doctest
import multiprocessing
import os
import time

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.base import cache as cache_module
from t2i_fairness.base.cache import (
    Cache,
    CorruptEntry,
    atomic_write_bytes,
    content_key,
    decode_array,
    decode_png,
    encode_array,
    encode_png,
)

FORK = multiprocessing.get_context("fork")


def png_bytes(colour=(10, 20, 30), size=(16, 16)) -> bytes:
    return encode_png(Image.new("RGB", size, colour))


def test_doctests_run():
    assert doctest.testmod(cache_module, raise_on_error=False).failed == 0


# ------------------------------------------------------------------------------- atomic writes


def test_atomic_write_replaces_the_whole_file(tmp_path):
    target = tmp_path / "a" / "b" / "entry.bin"
    atomic_write_bytes(target, b"old")
    atomic_write_bytes(target, b"new content")
    assert target.read_bytes() == b"new content"
    assert sorted(p.name for p in target.parent.iterdir()) == ["entry.bin"]


@pytest.mark.parametrize("stage", ["write", "fsync", "replace"])
def test_a_failure_mid_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch, stage):
    target = tmp_path / "entry.png"
    atomic_write_bytes(target, b"old")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if stage == "write":  # the temp file gets half the data, then the disk fills up
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, fh):
                self.fh = fh

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.fh.close()
                return False

            def write(self, data):
                self.fh.write(data[: len(data) // 2])
                boom()

            def __getattr__(self, name):
                return getattr(self.fh, name)

        monkeypatch.setattr(cache_module.os, "fdopen", lambda fd, mode: HalfWriter(real_fdopen(fd, mode)))
    else:
        monkeypatch.setattr(cache_module.os, stage, boom)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_bytes(target, b"new content that never lands")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["entry.png"]


def test_interrupted_write_of_a_new_entry_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "fresh.png"
    monkeypatch.setattr(cache_module.os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(target, png_bytes())
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    assert Cache(tmp_path).read(target, decode_png) is None


# ------------------------------------------------------------------------------- corrupt entries


def test_round_trips(tmp_path):
    c = Cache(tmp_path)
    p = c.path("images", "ab" * 20, ".png")
    c.write(p, png_bytes((1, 2, 3)))
    assert c.read(p, decode_png).getpixel((0, 0)) == (1, 2, 3)
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    q = c.path("features", "cd" * 20, ".npy", "ns")
    c.write(q, encode_array(arr))
    np.testing.assert_array_equal(c.read(q, decode_array), arr)
    assert p == tmp_path / "images" / "ab" / f"{'ab' * 20}.png"
    assert q == tmp_path / "features" / "ns" / "cd" / f"{'cd' * 20}.npy"
    assert c.stats.corrupt == []


@pytest.mark.parametrize(
    "make, decode",
    [
        (lambda: png_bytes()[:-20], decode_png),  # truncated PNG
        (lambda: png_bytes()[: len(png_bytes()) // 2], decode_png),
        (lambda: b"", decode_png),
        (lambda: b"not a png at all", decode_png),
        (lambda: encode_array(np.ones((4, 8), np.float32))[:-5], decode_array),
        (lambda: b"\x93NUMPY garbage", decode_array),
    ],
    ids=["png-tail", "png-half", "empty", "garbage", "npy-truncated", "npy-garbage"],
)
def test_a_corrupt_entry_reads_as_missing_is_reported_and_removed(tmp_path, make, decode):
    c = Cache(tmp_path)
    p = c.path("images", "ef" * 20, ".bin")
    c.write(p, make())
    assert c.read(p, decode) is None
    assert c.stats.corrupt == [str(p)]
    assert not p.exists()
    assert c.read(p, decode) is None  # now simply missing: reported once
    assert c.stats.corrupt == [str(p)]


def test_decoders_raise_corrupt_entry():
    with pytest.raises(CorruptEntry):
        decode_png(png_bytes()[:-20])
    with pytest.raises(CorruptEntry):
        decode_array(b"xx")


def test_check_writable_names_the_option(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(OSError, match="--t2i-cache-dir .*a-file.* is not writable"):
        Cache(blocker).check_writable()
    Cache(tmp_path / "new" / "dir").check_writable()
    assert list((tmp_path / "new" / "dir").iterdir()) == []  # the probe is cleaned up


# ------------------------------------------------------------------------------- keys


def test_content_key_is_stable_and_order_free():
    key = content_key(prompt="bag in Africa", seed=1, generator="g", settings={"steps": 4})
    # Pinned: a change here silently invalidates every user's cache, so it must be deliberate.
    assert key == "5859f35f61424ca918bbfdfbb139d16e6ed7bca9"
    assert key == content_key(settings={"steps": 4}, generator="g", seed=1, prompt="bag in Africa")
    assert key != content_key(prompt="bag in Africa", seed=2, generator="g", settings={"steps": 4})
    assert key != content_key(prompt="bag in Africa ", seed=1, generator="g", settings={"steps": 4})
    assert key != content_key(prompt="bag in Africa", seed=1, generator="g", settings={"steps": 5})


# ------------------------------------------------------------------------------- lock across processes


def _make_images(cache_dir: str, n: int, barrier, out) -> None:
    """Child: ask for the same images as the other child; report what it generated."""
    from fakegen import CALLS, FakeGenerator

    from t2i_fairness.spine.generation import ImageFactory
    from t2i_fairness.generators import GenerationSettings, GeneratorSource
    from t2i_fairness.base.memo import no_progress as _no_progress

    CALLS.update(calls=0, images=0)  # forked: start from zero whatever the parent counted
    gen = FakeGenerator(batch_size=2)
    source = GeneratorSource("python:fakegen:make", gen.fingerprint, GenerationSettings(batch_size=2), lambda: gen, gen)
    factory = ImageFactory(source, Cache(cache_dir), 0, _no_progress)
    if barrier is not None:
        barrier.wait(timeout=60)
    factory.images(["bag in Africa", "car in Europe", "dog in East Asia"], n)
    out.put((factory.cache.stats.generated, CALLS["images"]))


def test_two_processes_generate_each_image_once(tmp_path):
    n = 6  # 3 prompts x 3 canonical batches of 2
    barrier, out = FORK.Barrier(2), FORK.Queue()
    procs = [FORK.Process(target=_make_images, args=(str(tmp_path), n, barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sum(generated for generated, _ in results) == 3 * n
    # Each batch is generated by one process only: generate() saw each image exactly once overall.
    assert sum(images for _, images in results) == 3 * n
    assert len(list((tmp_path / "images").rglob("*.png"))) == 3 * n


def test_a_batch_locked_by_another_worker_is_not_generated_again(tmp_path, fake_source):
    """Hold the first batch's lock here, let a child make the rest, then finish that batch ourselves."""
    from t2i_fairness.spine.generation import ImageFactory

    cache = Cache(tmp_path)
    factory = ImageFactory(fake_source, cache)
    first_batch = [factory.ref("bag in Africa", i) for i in range(2)]
    lock = cache.lock(first_batch[0].path.with_suffix(".b2"))
    lock.acquire()
    out = FORK.Queue()
    child = FORK.Process(target=_make_images, args=(str(tmp_path), 6, None, out))
    try:
        child.start()
        others = [factory.ref(p, i) for p in ("bag in Africa", "car in Europe", "dog in East Asia") for i in range(6)]
        others = [r for r in others if r not in first_batch]
        deadline = time.monotonic() + 60
        while not all(r.path.exists() for r in others):  # wait for a condition, not for a duration
            assert child.is_alive() and time.monotonic() < deadline, "child stopped before making the other batches"
            time.sleep(0.02)
        assert child.is_alive(), "the child must be waiting for the locked batch"
        images = fake_source.get().generate([r.prompt for r in first_batch], [r.seed for r in first_batch])
        for r, im in zip(first_batch, images):
            cache.write(r.path, encode_png(im))
    finally:
        lock.release()
    generated, images_made = out.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert (generated, images_made) == (16, 16)  # 18 images minus the locked batch of 2
