"""Benchmark of feature row storage: the old one-``.npy``-per-row cache vs the row store, side by side.

Run: ``python bench/bench_rowstore.py [--quick]`` (``--quick``: fewer rows and repetitions, under 2 minutes).

Rows are 512-d float32 (a CLIP ViT-B image feature), keys are 40-hex image keys, written in batches of
32 (``Workbench.features``' chunk). Each repetition runs every method once, in a rotating order, each
in a fresh folder; the table shows medians over repetitions and the ratio to the old path.

Local (one folder):

  * old ``.npy``: ``Cache.write(path, encode_array(row))`` per row (temporary file, fsync, rename),
    as ``Workbench.features`` does today; read: ``Cache.read(path, decode_array)`` per row;
  * row store, default (``fsync_interval=1`` s: every row survives a process crash once ``put_many``
    returns; fsync at most once a second and at close); read: a fresh ``RowStore`` (so the time
    includes building its index from the segment) and ``get_many`` of 512 keys at a time;
  * row store, ``fsync_interval=0``: one fsync per batch (the old guarantee against power loss);
  * ``FeatureRows.rows``: the adapter ``Workbench.features`` would call (lookups, stats, writes),
    with an encoder that costs nothing;
  * SQLite (reference, not used): WAL mode, ``synchronous=FULL``, one transaction per batch, one
    row per key as a BLOB; read with ``SELECT ... WHERE key IN (...)`` (512 keys a query).

Shared tier (``file://`` folder standing in for an object store; every object is one PUT or GET there):
old ``Cache(remote=url)`` (each row also put as one object; a second machine fetches one object per row)
vs ``RowStore(remote=url)`` (rows uploaded as pack + index objects at close; a second machine fetches
rows by byte ranges of the packs). The object counts are what an S3/GCS bucket would be billed for.

Load average is printed at the start and the end: the machine is shared, so compare ratios
measured in the same run, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin"))

FULL = {"rows": 10000, "remote_rows": 2000, "repeats": 5}
QUICK = {"rows": 1000, "remote_rows": 300, "repeats": 3}
DIM, BATCH, READ_CHUNK, NAMESPACE = 512, 32, 512, "0123456789abcdef"


def make_rows(n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    keys = [f"{i:08x}{int(x):032x}" for i, x in enumerate(rng.integers(0, 2**62, size=n))]
    return keys, rng.standard_normal((n, DIM)).astype(np.float32)


def batches(n: int):
    return [(a, min(n, a + BATCH)) for a in range(0, n, BATCH)]


# -- the methods: each returns (write seconds, read seconds, rows read back bit-identical) -----------------
def old_npy(root: Path, keys, rows):
    from t2i_fairness.base.cache import Cache, decode_array, encode_array

    cache = Cache(root)
    t0 = time.perf_counter()
    for a, b in batches(len(keys)):
        for k, r in zip(keys[a:b], rows[a:b]):
            cache.write(cache.path("features", k, ".npy", NAMESPACE), encode_array(r))
    t1 = time.perf_counter()
    reader = Cache(root)
    got = [reader.read(reader.path("features", k, ".npy", NAMESPACE), decode_array) for k in keys]
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, _same(got, rows)


def row_store(root: Path, keys, rows, fsync_interval: float):
    from t2i_fairness.base.rowstore import RowStore

    store = RowStore(root, fsync_interval=fsync_interval)
    t0 = time.perf_counter()
    for a, b in batches(len(keys)):
        store.put_many(NAMESPACE, zip(keys[a:b], rows[a:b]))
    store.close()
    t1 = time.perf_counter()
    reader = RowStore(root)
    got = []
    for a in range(0, len(keys), READ_CHUNK):
        got += reader.get_many(NAMESPACE, keys[a : a + READ_CHUNK])
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, _same(got, rows)


def feature_rows(root: Path, keys, rows):
    """The adapter's whole loop: get_many (all missing), compute (free), put_many per batch, stats."""
    from t2i_fairness.base.cache import Cache
    from t2i_fairness.base.rowstore import FeatureRows

    cache = Cache(root)
    adapter = FeatureRows(cache, legacy=False)
    t0 = time.perf_counter()
    adapter.rows(NAMESPACE, keys, lambda idx: rows[idx], kind="features:bench", batch_size=BATCH)
    adapter.close()
    t1 = time.perf_counter()
    again = FeatureRows(Cache(root), legacy=False)
    got = again.rows(NAMESPACE, keys, lambda idx: 1 / 0, kind="features:bench")
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, _same(list(got), rows)


def sqlite_wal(root: Path, keys, rows):
    root.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(root / "rows.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS rows (key TEXT PRIMARY KEY, row BLOB NOT NULL) WITHOUT ROWID")
    t0 = time.perf_counter()
    for a, b in batches(len(keys)):
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT OR IGNORE INTO rows VALUES (?, ?)", [(k, r.tobytes()) for k, r in zip(keys[a:b], rows[a:b])])
        db.execute("COMMIT")
    db.close()
    t1 = time.perf_counter()
    db = sqlite3.connect(root / "rows.sqlite")
    got = []
    for a in range(0, len(keys), READ_CHUNK):
        chunk = keys[a : a + READ_CHUNK]
        found = dict(db.execute(f"SELECT key, row FROM rows WHERE key IN ({','.join('?' * len(chunk))})", chunk))
        got += [np.frombuffer(found[k], np.float32) if k in found else None for k in chunk]
    db.close()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, _same(got, rows)


def _same(got, rows) -> bool:
    return len(got) == len(rows) and all(g is not None and g.tobytes() == r.tobytes() for g, r in zip(got, rows))


# -- shared tier -----------------------------------------------------------------------------------------
def count_objects(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file())


def old_remote(root: Path, keys, rows):
    from t2i_fairness.base.cache import Cache, decode_array, encode_array

    url = f"file://{root / 'shared'}"
    cache = Cache(root / "machine1", remote=url)
    t0 = time.perf_counter()
    for k, r in zip(keys, rows):
        cache.write(cache.path("features", k, ".npy", NAMESPACE), encode_array(r))
    t1 = time.perf_counter()
    other = Cache(root / "machine2", remote=url)
    got = [other.read(other.path("features", k, ".npy", NAMESPACE), decode_array) for k in keys]
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, _same(got, rows), count_objects(root / "shared")


def new_remote(root: Path, keys, rows):
    from t2i_fairness.base.rowstore import RowStore

    url = f"file://{root / 'shared'}"
    store = RowStore(root / "machine1", url)
    t0 = time.perf_counter()
    for a, b in batches(len(keys)):
        store.put_many(NAMESPACE, zip(keys[a:b], rows[a:b]))
    store.close()  # uploads the pack and its index
    t1 = time.perf_counter()
    other = RowStore(root / "machine2", url)
    got = []
    for a in range(0, len(keys), READ_CHUNK):
        got += other.get_many(NAMESPACE, keys[a : a + READ_CHUNK])
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, _same(got, rows), count_objects(root / "shared")


# -- driver ------------------------------------------------------------------------------------------------
def run(methods: dict, n: int, repeats: int, scratch: Path) -> dict[str, dict[str, list]]:
    keys, rows = make_rows(n)
    results: dict[str, dict[str, list]] = {name: {"write": [], "read": [], "ok": [], "objects": []} for name in methods}
    names = list(methods)
    for rep in range(repeats):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            folder = scratch / f"{name.replace(' ', '_')}-{rep}"
            out = methods[name](folder, keys, rows)
            results[name]["write"].append(n / out[0])
            results[name]["read"].append(n / out[1])
            results[name]["ok"].append(out[2])
            if len(out) > 3:
                results[name]["objects"].append(out[3])
            shutil.rmtree(folder, ignore_errors=True)
        print(f"  repetition {rep + 1}/{repeats} done (load {os.getloadavg()[0]:.2f})", flush=True)
    return results


def table(title: str, results: dict, n: int, baseline: str) -> None:
    base_w = statistics.median(results[baseline]["write"])
    base_r = statistics.median(results[baseline]["read"])
    print(f"\n[{title}] {n} rows of {DIM} float32, batches of {BATCH}; rows/s, median of {len(results[baseline]['write'])}"
          f" repetitions (min-max); ratio = / {baseline}")
    extra = any(r["objects"] for r in results.values())
    print(f"    {'method':34s}{'write rows/s':>24s}{'ratio':>8s}{'read rows/s':>24s}{'ratio':>8s}"
          + (f"{'objects':>9s}" if extra else "") + "  read back")
    for name, r in results.items():
        w, rd = statistics.median(r["write"]), statistics.median(r["read"])
        span_w = f"{w:8.0f} ({min(r['write']):.0f}-{max(r['write']):.0f})"
        span_r = f"{rd:8.0f} ({min(r['read']):.0f}-{max(r['read']):.0f})"
        objects = f"{int(statistics.median(r['objects'])):9d}" if r["objects"] else ""
        print(f"    {name:34s}{span_w:>24s}{w / base_w:8.1f}{span_r:>24s}{rd / base_r:8.1f}{objects}  "
              f"{'bit-identical' if all(r['ok']) else 'MISMATCH'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rows and repetitions (under 2 minutes)")
    parser.add_argument("--rows", type=int, help="rows per repetition (local)")
    parser.add_argument("--repeats", type=int, help="repetitions")
    parser.add_argument("--scratch", help="folder for the stores (default: a temporary folder)")
    args = parser.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    if args.rows:
        cfg["rows"] = args.rows
    if args.repeats:
        cfg["repeats"] = args.repeats
    started = time.perf_counter()
    print(f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min), "
          f"mode={'quick' if args.quick else 'full'}, python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory(prefix="bench-rowstore-", dir=args.scratch) as tmp:
        scratch = Path(tmp)
        print(f"scratch folder: {scratch} (same filesystem for every method)")
        local = {
            "old .npy per row (Cache.write)": old_npy,
            "row store (fsync_interval=1s)": lambda f, k, r: row_store(f, k, r, 1.0),
            "row store (fsync every batch)": lambda f, k, r: row_store(f, k, r, 0.0),
            "FeatureRows.rows (adapter)": feature_rows,
            "SQLite WAL, FULL (reference)": sqlite_wal,
        }
        print("\nlocal:")
        results = run(local, cfg["rows"], cfg["repeats"], scratch)
        print("\nshared tier (file:// URL):")
        shared = run({"old: one object per row": old_remote, "row store: packs + index": new_remote},
                     cfg["remote_rows"], cfg["repeats"], scratch)
    table("local", results, cfg["rows"], "old .npy per row (Cache.write)")
    table("shared tier: write = machine 1 writes (and uploads); read = machine 2 fetches every row",
          shared, cfg["remote_rows"], "old: one object per row")
    print(f"\n    load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min); "
          f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
