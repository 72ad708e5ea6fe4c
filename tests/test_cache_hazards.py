"""Cache findings of the new-user issue: lock files, checksums, what the summary counts, factory imports.

- Lock files are removed by their last holder (the ``locks/`` folder no longer grows per batch).
- Every cached value but images (masks, captions, tables, manifolds, features kept one file per
  entry) carries a CRC-32 trailer: a ``.npy`` with flipped data bytes loads "fine" with numpy
  (values near 1e26) and must instead be found corrupt and computed again.
- After part of the cache is deleted, ``generated`` counts the images the generator made (whole
  canonical batches, which a paid API bills), not just the missing ones.
- ``python:module:factory`` imports a module in the project root with ``python -m pytest`` and with
  the ``pytest`` script alike.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from t2i_fairness.base.cache import Cache, CorruptEntry, EntryLock, add_checksum, decode_array, encode_array, strip_checksum
from t2i_fairness.base.memo import Memo, namespace_of


def _factory(fake_source, root: Path):
    from t2i_fairness.spine.generation import ImageFactory
    from t2i_fairness.base.memo import no_progress

    return ImageFactory(fake_source, Cache(root), 0, no_progress)


# -- locks ---------------------------------------------------------------------------------------------

def test_generation_leaves_no_lock_file(fake_source, tmp_path):
    factory = _factory(fake_source, tmp_path)
    factory.images([f"bag in region {i}" for i in range(5)], 6)  # 10 batches of up to 4
    assert (tmp_path / "locks").is_dir() and list((tmp_path / "locks").iterdir()) == []


def test_an_entry_lock_excludes_while_held_and_its_file_goes_with_the_last_holder(tmp_path):
    path = tmp_path / "locks" / "x.lock"
    path.parent.mkdir()
    inside, overlaps = [0], []

    def work():
        for _ in range(20):
            with EntryLock(path):
                inside[0] += 1
                overlaps.append(inside[0])
                time.sleep(0.001)
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(overlaps) == 60 and not path.exists()
    assert max(overlaps) <= 2  # a waiter on a removed file may overlap one holder: duplicated work, never corruption
    lock = EntryLock(path)
    with lock:
        with lock:  # re-entrant: the inner release keeps the file
            pass
        assert path.exists()
    assert not path.exists()


# -- checksums -----------------------------------------------------------------------------------------

def _memo(root: Path) -> Memo:
    return Memo(Cache(root), "features", namespace_of(encoder="e:1"), ".npy", encode_array, decode_array, "features:e")


def test_a_flipped_data_byte_in_a_cached_array_is_detected_and_recomputed(tmp_path):
    calls = []

    def compute(idx):
        calls.append(list(idx))
        return [np.full(4, float(i + 1), dtype=np.float32) for i in idx]

    first = _memo(tmp_path).get_many(["a", "b"], compute)
    path = _memo(tmp_path).path("b")
    data = bytearray(path.read_bytes())
    data[-len(b"\nt2i-crc32:") - 8 - 2] ^= 0x40  # a byte of the float data, not of the .npy header
    path.write_bytes(bytes(data))
    raw = np.load(path.open("rb"), allow_pickle=False)  # what numpy alone makes of it: no error, a wrong value
    assert raw.shape == (4,) and not np.array_equal(raw, first[1])
    memo = _memo(tmp_path)
    again = memo.get_many(["a", "b"], compute)
    assert calls == [[0, 1], [1]] and np.array_equal(again[1], first[1])
    assert memo.cache.stats.corrupt == [str(path)]
    assert (memo.cache.stats.computed["features:e"], memo.cache.stats.reused["features:e"]) == (1, 1)


def test_an_entry_without_a_checksum_is_made_again_once(tmp_path):
    memo = _memo(tmp_path)
    path = memo.path("a")
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_array(np.zeros(3)))  # as entries were written before they carried checksums
    value = memo.get_many(["a"], lambda idx: [np.ones(3) for _ in idx])[0]
    assert value.tolist() == [1.0, 1.0, 1.0] and memo.cache.stats.corrupt == [str(path)]
    assert strip_checksum(path.read_bytes()) == encode_array(np.ones(3))


@pytest.mark.parametrize("damage", ["truncate", "flip_trailer", "append"])
def test_checksum_refuses_any_damage(damage):
    good = add_checksum(b"payload bytes")
    bad = {"truncate": good[:-3], "flip_trailer": good[:-1] + b"0" if good[-1:] != b"0" else good[:-1] + b"1",
           "append": good + b"x"}[damage]
    with pytest.raises(CorruptEntry):
        strip_checksum(bad)


# -- what the summary counts ---------------------------------------------------------------------------

def test_after_half_the_cache_is_deleted_generated_counts_what_the_generator_made(fake_source, tmp_path):
    from fakegen import CALLS

    prompts = [f"bag in region {i}" for i in range(6)]
    refs = _factory(fake_source, tmp_path).images(prompts, 8)  # batches of 4
    flat = [r for row in refs for r in row]
    for r in flat[::2]:  # every other image: every batch loses two
        r.path.unlink()
    before = CALLS["images"]
    again = _factory(fake_source, tmp_path)
    again.images(prompts, 8)
    made = CALLS["images"] - before
    assert made == 48  # every batch had a hole, so every batch was made again
    assert (again.cache.stats.generated, again.cache.stats.regenerated, again.cache.stats.from_cache) == (48, 24, 24)


def test_the_summary_line_explains_regenerated_batches():
    from t2i_fairness.gating.session import GateSession
    from t2i_fairness.report.terminal import GateReport

    s = GateSession(Path("t.yaml"))
    s.merge_cache_stats({"generated": 68, "regenerated": 32, "from_cache": 32})
    assert GateReport(s).lines()[0] == (
        "images: 68 generated, 32 from cache (32 of the generated were still cached: their canonical batch was made "
        "again whole, as a paid API bills it; the cached copies were kept)")


# -- python:module:factory -----------------------------------------------------------------------------

FACTORY = '''
from PIL import Image

class Gen:
    fingerprint = "rootgen:1"
    def generate(self, prompts, seeds):
        return [Image.new("RGB", (8, 8), (s % 256, 0, 0)) for s in seeds]

def make():
    return Gen()
'''

TEST = '''
def test_brightness(t2i, gate):
    refs = t2i.images(["bag in Africa"], 2)[0]
    gate(0.5, n=len(refs))
'''


@pytest.mark.parametrize("how", ["pytest script", "python -m pytest", "pytest script from a subfolder"])
def test_a_factory_in_the_project_root_imports_however_pytest_starts(pytester, subprocess_env, how):
    pytester.makepyfile(rootgen=FACTORY)
    pytester.makeini("[pytest]\n")  # the project root is the rootdir
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_one.py").write_text(TEST)
    script = Path(sys.executable).parent / "pytest"
    cmd = [sys.executable, str(script)] if how.startswith("pytest script") else [sys.executable, "-m", "pytest"]
    cwd = pytester.path / "tests" if how.endswith("subfolder") else pytester.path
    env = {k: v for k, v in subprocess_env.items() if k != "PYTHONPATH"}  # the installed package, not the project
    done = subprocess.run([*cmd, "-p", "no:cacheprovider", "--t2i-model", "python:rootgen:make", "--t2i-no-progress",
                           "--t2i-update-thresholds"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


# -- issue #30: every image and feature segment is checked when read, and what was made again is said --------


def test_an_image_is_checked_against_its_index_entry_and_older_images_are_adopted(fake_source, tmp_path):
    """The bytes written have an entry (size, SHA-256): read back intact they need no decode; damaged ones
    match no entry and do not decode (corrupt); an image from before the index decodes and gets its entry."""
    from t2i_fairness.base.rowstore import ImageIndex

    factory = _factory(fake_source, tmp_path)
    refs = factory.images(["bag"], 3)[0]
    assert factory.states(refs) == [True, True, True]
    entries = factory.index.check([r.key for r in refs], [r.path.read_bytes() for r in refs])
    assert entries == [True, True, True]  # written with the images
    data = refs[0].path.read_bytes()
    refs[0].path.write_bytes(data[:len(data) // 2])
    flipped = bytearray(refs[1].path.read_bytes())
    flipped[len(flipped) // 2] ^= 0x10
    refs[1].path.write_bytes(bytes(flipped))
    assert factory.states(refs) == [False, False, True]
    # an image written before the index (no entry): decoded once, then its entry is written
    fresh = ImageIndex.of(Cache(tmp_path / "other"))
    older = _factory(fake_source, tmp_path / "other")
    older._index = fresh
    (tmp_path / "other" / "images" / refs[2].key[:2]).mkdir(parents=True)
    moved = older.ref("bag", 2)
    moved.path.write_bytes(refs[2].path.read_bytes())
    assert fresh.check([moved.key], [moved.path.read_bytes()]) == [None]
    assert older.states([moved]) == [True]
    assert fresh.check([moved.key], [moved.path.read_bytes()]) == [True]


def test_a_png_truncated_to_100_bytes_with_its_features_cached_is_regenerated_and_counted(tmp_path, in_process):
    """Issue #30 (Done when): the image is found corrupt on read, made again (the same bytes: its canonical batch
    is generated whole) and the summary counts it; its features, of the same bytes, are read from the cache.
    (The built-in procedural generator: fast, deterministic, real-sized PNGs.)
    Then a feature segment cut in the middle of a row: said in the summary, the rows past the cut computed again."""
    args = ["--pyargs", "t2i_fairness.fairness_tests", "-q", "-p", "no:cacheprovider",
            "-k", "test_region_coverage and object_in_region-africa", "--t2i-model", "procedural",
            "--t2i-objects", "bag", "--t2i-images-per-prompt", "2", "--t2i-no-progress",
            "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml"),
            "--t2i-artifacts", str(tmp_path / "art")]

    def run():
        out = in_process.pytest(args, cwd=tmp_path)
        assert "INTERNALERROR" not in out.stdout + out.stderr, out.stdout[-3000:] + out.stderr[-3000:]
        return out.stdout

    first = run()
    assert "corrupt" not in first and "cut short" not in first, first[-3000:]
    pngs = sorted((tmp_path / "cache" / "images").rglob("*.png"))
    victim = pngs[len(pngs) // 2]
    data = victim.read_bytes()
    assert len(data) > 1000  # the procedural world's 64 px images
    victim.write_bytes(data[:100])

    second = run()
    assert f"1 corrupt image regenerated (its bytes matched no index entry and did not decode):\n  {victim}\n" in second, \
        second[-3000:]
    assert victim.read_bytes() == data  # made again, the same bytes
    features = {kind: (int(made), int(cached)) for kind, made, cached in
                __import__("re").findall(r"^(features:\S+): (\d+) computed, (\d+) from cache$", second, __import__("re").M)}
    assert features and all(made == 0 for made, _ in features.values()), second[-3000:]

    # a feature segment cut in the middle of its last row, its writer gone
    segments = [p for p in (tmp_path / "cache" / "rows").rglob("seg-*.rows") if p.parent.name != "images"]
    segment = max(segments, key=lambda p: p.stat().st_size)
    segment.write_bytes(segment.read_bytes()[:-7])
    third = run()
    assert f"1 cache segment found cut short; the rows past the cut are computed again:\n  {segment}@" in third, third[-3000:]
    recomputed = {kind: int(made) for kind, made in
                  __import__("re").findall(r"^(features:\S+): (\d+) computed", third, __import__("re").M)}
    assert sum(recomputed.values()) >= 1, third[-3000:]
    assert "corrupt image" not in third
