"""Each expensive thing once per run, whatever the sharding: features, masks and scores (every
``Memo``) and weights digests are computed once by processes that share a cache, and the summary's
computed / reused counts are the same for ``-n 0`` and ``-n 2``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

MEMO_SCRIPT = """
import json, sys, time
sys.path.insert(0, {plugin!r})
import numpy as np
from t2i_fairness.base.cache import Cache
from t2i_fairness.base.memo import Memo
from t2i_fairness.base.rowstore import FeatureRows

cache = Cache({root!r})
keys = [f"k{{i:03d}}" for i in range(40)]
made = []

def compute(idx):
    time.sleep(0.04 * len(idx))  # an encoder's time: both processes are computing at once
    made.extend(keys[i] for i in idx)
    return [np.full(3, int(keys[i][1:]), np.float32) for i in idx]

while time.time() < {start}:  # both processes start together
    time.sleep(0.005)
if {rows}:
    rows = FeatureRows(cache)
    values = Memo(cache, "features", "enc", label="features:x", entries=rows.entries("enc")).get_many(keys, compute, batch_size=4)
    rows.close()
else:
    values = Memo(cache, "masks", "seg", ".npy", lambda v: v.tobytes(), lambda b: np.frombuffer(b, np.float32),
                  label="masks").get_many(keys, compute, batch_size=4)
assert [int(v[0]) for v in values] == list(range(40)), values
print(json.dumps({{"computed": sum(cache.stats.computed.values()), "reused": sum(cache.stats.reused.values()),
                  "made": made}}))
"""


def _run_twice_at_once(script: str, env) -> list[dict]:
    """Two Python processes running ``script`` at the same time; each one's last stdout line, as JSON."""
    children = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


@pytest.mark.parametrize("rows", [False, True], ids=["file-entries", "feature-rows"])
def test_two_processes_on_one_cache_compute_each_value_once(tmp_path, subprocess_env, rows):
    plugin = str(Path(__file__).resolve().parents[1] / "plugin")
    script = MEMO_SCRIPT.format(plugin=plugin, root=str(tmp_path / "cache"), start=time.time() + 3, rows=rows)
    results = _run_twice_at_once(script, subprocess_env)
    made = [k for r in results for k in r["made"]]
    assert sorted(made) == sorted(set(made)) and len(made) == 40  # every value computed once, by one of them
    assert all(r["made"] for r in results), "one process did everything: the test did not run them at once"
    assert sum(r["computed"] for r in results) == 40 and sum(r["reused"] for r in results) == 40
    assert not list((tmp_path / "cache" / "locks").glob("memo-*.lock"))  # every lock file removed by its holder


DIGEST_SCRIPT = """
import json, sys, time, hashlib
sys.path.insert(0, {plugin!r})
from t2i_fairness.base import identity

real = hashlib.sha256
class Slow:  # a big checkpoint: reading it takes a while, both processes at once
    def __init__(self):
        self.h = real()
    def update(self, b):
        time.sleep(0.05)
        self.h.update(b)
    def hexdigest(self):
        return self.h.hexdigest()
identity.hashlib = type("H", (), {{"sha256": staticmethod(lambda *a: Slow() if not a else real(*a))}})
identity.BLOCK = 1 << 16
while time.time() < {start}:
    time.sleep(0.005)
index = identity.DigestIndex({folder!r})
digest = index.folder({model!r})
print(json.dumps({{"digest": digest, "read": index.stats["read"], "bytes": index.stats["bytes"]}}))
"""


def test_a_checkpoint_is_digested_once_by_processes_sharing_a_cache(tmp_path, subprocess_env):
    """Two workers starting together on one cache: one reads the weights, the other waits and reuses its digest."""
    model = tmp_path / "model"
    (model / "unet").mkdir(parents=True)
    (model / "unet" / "diffusion_pytorch_model.safetensors").write_bytes(os.urandom(1 << 20))  # 16 blocks
    (model / "model_index.json").write_text("{}")
    plugin = str(Path(__file__).resolve().parents[1] / "plugin")
    script = DIGEST_SCRIPT.format(plugin=plugin, folder=str(tmp_path / "cache" / "identity"), model=str(model),
                                  start=time.time() + 3)
    results = _run_twice_at_once(script, subprocess_env)
    assert results[0]["digest"] == results[1]["digest"]
    assert sorted(r["read"] for r in results) == [0, 2]  # the two files read once, by one process
    assert sum(r["bytes"] for r in results) == (1 << 20) + 2
