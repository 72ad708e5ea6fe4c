"""PNG encoding and cache writes overlap the next batch (ImageFactory's writer threads): same bytes,
same order and counts, a failed write names its path, a crash leaves no half-written entry."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.generators import GenerationSettings, GeneratorSource
from t2i_fairness.base.cache import Cache, decode_png
from t2i_fairness.spine.generation import ImageFactory
from t2i_fairness.base.memo import no_progress

PROMPTS = ["bag in Africa", "car in Europe", "dog in East Asia"]


class NoiseGenerator:
    """Distinct 48 px images per seed (smooth colour + seeded noise), with an optional wait per batch."""

    fingerprint = "noise:v1"

    def __init__(self, wait: float = 0.0, blank_seeds=()):
        self.wait, self.blank_seeds, self.calls = wait, set(blank_seeds), []

    def generate(self, prompts, seeds):
        self.calls.append(list(seeds))
        time.sleep(self.wait)
        out = []
        for s in seeds:
            rng = np.random.default_rng(int(s))
            pixels = rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)
            if s in self.blank_seeds:
                pixels[:] = 0
            out.append(Image.fromarray(pixels))
        return out


def factory(root: Path, gen: NoiseGenerator, write_threads=None, cache_cls=Cache, batch_size: int = 3) -> ImageFactory:
    settings = GenerationSettings(steps=1, height=48, width=48, batch_size=batch_size)
    source = GeneratorSource("noise", gen.fingerprint, settings, lambda: gen, gen)
    return ImageFactory(source, cache_cls(root), 0, no_progress, write_threads=write_threads)


def contents(refs) -> list[tuple[str, int, str, str]]:
    return [(r.prompt, r.index, r.path.name, hashlib.sha256(r.path.read_bytes()).hexdigest()) for row in refs for r in row]


def test_bytes_order_and_counts_are_the_same_with_and_without_the_overlap(tmp_path):
    # one blank image: the summary's blank list keeps batch order with the writes on threads too
    from t2i_fairness.spine.generation import derive_seed

    blank = derive_seed("car in Europe", 4)
    runs = {}
    for threads in (0, 1, 4):
        gen = NoiseGenerator(blank_seeds=[blank])
        f = factory(tmp_path / f"t{threads}", gen, write_threads=threads)
        refs = f.images(PROMPTS, 7)  # batches of 3, 3, 1 per prompt
        stats = f.cache.stats
        runs[threads] = (contents(refs), stats.generated, stats.regenerated, stats.from_cache, stats.blank, gen.calls)
    assert runs[0] == runs[1] == runs[4]
    assert runs[0][1:5] == (21, 0, 0, ["'car in Europe' (seed %d)" % blank])
    assert len({h for *_, h in runs[0][0]}) == 21
    # the one-batch path the generate command uses (make_batch, no writer) writes the same bytes
    serial = factory(tmp_path / "make_batch", NoiseGenerator(blank_seeds=[blank]))
    for prompt in PROMPTS:
        for start in range(0, 7, 3):
            serial.make_batch([serial.ref(prompt, i) for i in range(start, min(7, start + 3))])
    assert contents([[serial.ref(p, i) for i in range(7)] for p in PROMPTS]) == runs[0][0]
    assert not list((tmp_path / "t4" / "locks").glob("*.lock"))  # every batch lock released (and removed)


class SlowCache(Cache):
    """A cache whose writes take 0.1 s each and are logged, as a slow disk's would be."""

    log: list = []

    def write(self, path, data, checksum=False):
        time.sleep(0.1)
        super().write(path, data, checksum)
        self.log.append(("written", path.name))


@pytest.mark.parametrize("threads", [0, 2])
def test_writes_overlap_the_next_batch(tmp_path, threads):
    """With writer threads, batch k+1 starts generating before batch k's images are written; without, after."""
    SlowCache.log = log = []

    class Logging(NoiseGenerator):
        def generate(self, prompts, seeds):
            log.append(("generate", None))
            return super().generate(prompts, seeds)

    f = factory(tmp_path / "c", Logging(), write_threads=threads, cache_cls=SlowCache)
    refs = f.images(["bag in Africa"], 9)[0]
    names = [r.path.name for r in refs]
    starts = [i for i, (what, _) in enumerate(log) if what == "generate"]
    last_write = [max(i for i, (what, name) in enumerate(log) if name in names[b * 3:(b + 1) * 3]) for b in range(3)]
    assert len(starts) == 3 and len(log) == 12
    overlapped = [starts[b + 1] < last_write[b] for b in range(2)]
    assert overlapped == ([True, True] if threads else [False, False]), log
    assert all(decode_png(r.path.read_bytes()) for r in refs)


class FailingCache(Cache):
    """A cache whose write of one chosen image fails, as a full disk would."""

    fail_name = None

    def write(self, path, data, checksum=False):
        if path.name == self.fail_name:
            raise OSError(28, "No space left on device")
        super().write(path, data, checksum)


@pytest.mark.parametrize("threads", [0, 2])
def test_a_failed_write_fails_the_run_naming_its_path(tmp_path, threads):
    gen = NoiseGenerator()
    f = factory(tmp_path / "c", gen, write_threads=threads, cache_cls=FailingCache)
    victim = f.ref("car in Europe", 1)
    FailingCache.fail_name = victim.path.name
    try:
        with pytest.raises(OSError) as err:
            f.images(PROMPTS, 6)
    finally:
        FailingCache.fail_name = None
    assert str(victim.path) in str(err.value) and "No space left on device" in str(err.value)
    assert err.value.errno == 28
    # what was made before the failure is kept, sound; the failing batch's lock is released
    written = sorted((tmp_path / "c" / "images").rglob("*.png"))
    assert all(decode_png(p.read_bytes()) for p in written)
    assert {r.path for r in [f.ref("bag in Africa", i) for i in range(6)]} <= set(written)
    assert victim.path not in written
    assert not list((tmp_path / "c" / "locks").glob("*.lock"))
    # the next run makes only what is missing, with the same bytes as a clean run
    again = factory(tmp_path / "c", NoiseGenerator(), write_threads=threads)
    refs = again.images(PROMPTS, 6)
    clean = factory(tmp_path / "clean", NoiseGenerator()).images(PROMPTS, 6)
    assert [c[3] for c in contents(refs)] == [c[3] for c in contents(clean)]
    assert again.cache.stats.from_cache >= 6


CRASH_SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_generation_overlap import NoiseGenerator, factory, PROMPTS
import t2i_fairness.base.files as files

slow_write = files.atomic_write_bytes
def write(path, data, **kw):  # slow writes: the kill lands while some are under way
    time.sleep(0.05)
    return slow_write(path, data, **kw)
import t2i_fairness.base.cache as cache
cache.atomic_write_bytes = write
print("start", flush=True)
factory(Path({root!r}), NoiseGenerator(wait=0.05), write_threads=4, batch_size=4).images(PROMPTS * 1, 40)
print("done", flush=True)
"""


def test_a_crash_mid_run_leaves_no_half_written_entry(tmp_path, subprocess_env):
    root = tmp_path / "c"
    script = CRASH_SCRIPT.format(tests=str(Path(__file__).parent), root=str(root))
    child = subprocess.Popen([sys.executable, "-c", script], env=subprocess_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(root.rglob("*.png"))) < 10:
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    out, err = child.communicate(timeout=60)
    assert "done" not in out, "the run ended before it was killed: nothing was tested"
    pngs = list((root / "images").rglob("*.png"))
    assert 10 <= len(pngs) < 120, (len(pngs), err[-2000:])
    for p in pngs:
        decode_png(p.read_bytes())  # every entry there is whole (strays are hidden .tmp files)
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in (root / "images").rglob("*") if p.is_file()
               and p.suffix != ".png")
    # the next run completes the set, byte for byte a clean run's
    refs = factory(root, NoiseGenerator(), batch_size=4).images(PROMPTS, 40)
    clean = factory(tmp_path / "clean", NoiseGenerator(), batch_size=4).images(PROMPTS, 40)
    assert [c[3] for c in contents(refs)] == [c[3] for c in contents(clean)]


TWO_WORKERS_SCRIPT = """
import json, sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_generation_overlap import NoiseGenerator, factory

gen = NoiseGenerator(wait=0.3)
f = factory(Path({root!r}), gen, write_threads=2, batch_size=3)
while time.time() < {start}:
    time.sleep(0.005)
f.images({prompts!r}, 3)
s = f.cache.stats
print(json.dumps({{"generated": s.generated, "from_cache": s.from_cache}}))
"""


def test_two_workers_taking_batches_in_opposite_orders_do_not_wait_on_each_other(tmp_path, subprocess_env):
    """Each holds its first batch's lock while its writes finish; neither waits for the other's batch
    while holding one (a deadlock before), each batch is made once, the other counts it from the cache."""
    start = time.time() + 3
    children = [subprocess.Popen(
        [sys.executable, "-c", TWO_WORKERS_SCRIPT.format(tests=str(Path(__file__).parent), root=str(tmp_path / "c"),
                                                         start=start, prompts=order)],
        env=subprocess_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for order in (["bag in Africa", "car in Europe"], ["car in Europe", "bag in Africa"])]
    results = []
    for child in children:
        try:
            out, err = child.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for c in children:
                c.kill()
            pytest.fail("two workers on one cache waited on each other's batch locks (deadlock)")
        assert child.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["generated"] for r in results) == 6 and sum(r["from_cache"] for r in results) == 6
