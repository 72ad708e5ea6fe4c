"""The feature row store: crash safety, concurrent processes, checksums, compaction, the fsspec tier, umask."""

from __future__ import annotations

import contextlib
import doctest
import multiprocessing
import os
import signal
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from t2i_fairness.base import rowstore as rowstore_module
from t2i_fairness.base.rowstore import (
    MAGIC,
    FeatureRows,
    RowStore,
    RowStoreError,
    decode_record,
    encode_record,
    migrate_legacy_features,
)

FORK = multiprocessing.get_context("fork")
DIM = 16


def row_of(i: int, dim: int = DIM) -> np.ndarray:
    """The one true row of key number i (what every process computes for it)."""
    return np.random.default_rng(i).standard_normal(dim).astype(np.float32)


def key_of(i: int) -> str:
    return f"k{i:06d}"


def items(numbers, dim: int = DIM) -> list[tuple[str, np.ndarray]]:
    return [(key_of(i), row_of(i, dim)) for i in numbers]


def segments(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".rows")


def all_found(got) -> bool:
    return all(g is not None for g in got)


def assert_rows_correct(got, numbers, dim: int = DIM) -> None:
    """Every returned row is bit-identical to the true one (None allowed); returns nothing."""
    for i, row in zip(numbers, got):
        if row is not None:
            assert row.dtype == np.float32 and row.tobytes() == row_of(i, dim).tobytes(), key_of(i)


def test_doctests_run():
    assert doctest.testmod(rowstore_module, raise_on_error=False).failed == 0


# ------------------------------------------------------------------------------- records and API


@pytest.mark.parametrize("row", [
    np.arange(5, dtype=np.float32),
    np.arange(12, dtype=">f8").reshape(3, 4),
    np.array(3, dtype=np.int64),
    np.zeros((0, 7), np.uint8),
    np.array([1 + 2j], np.complex64),
    np.array([True, False]),
], ids=["f32", "big-endian-2d", "scalar", "empty", "complex", "bool"])
def test_records_round_trip_bit_identical_with_dtype_and_shape(tmp_path, row):
    key, back = decode_record(encode_record("é-key", row))
    assert key == "é-key" and back.dtype == row.dtype and back.shape == row.shape
    assert back.tobytes() == np.asarray(row, order="C").tobytes()
    store = RowStore(tmp_path)
    store.put_many("ns", [("a", row)])
    got = RowStore(tmp_path).get_many("ns", ["a"])[0]
    assert got.dtype == row.dtype and got.shape == row.shape and got.tobytes() == np.asarray(row, order="C").tobytes()
    assert got.flags.writeable


def test_every_single_byte_flip_in_a_record_is_detected():
    rec = encode_record("key", row_of(1))
    for i in range(len(rec)):
        bad = bytearray(rec)
        bad[i] ^= 0x5A
        with pytest.raises(RowStoreError, match="not one intact record"):
            decode_record(bytes(bad))


@pytest.mark.parametrize("call, match", [
    (lambda s: s.put_many("../up", items([1])), "namespace must be .* got '../up'"),
    (lambda s: s.get_many(".hidden", ["a"]), "namespace must be .* got '.hidden'"),
    (lambda s: s.get_many("ns", [""]), "key must be a non-empty str, got ''"),
    (lambda s: s.get_many("ns", [7]), "key must be a non-empty str, got 7"),
    (lambda s: s.put_many("ns", [("x" * 300, row_of(1))]), "300 bytes of UTF-8, at most 255"),
    (lambda s: s.put_many("ns", [("a", np.array([object()]))]), "row for key 'a': dtype object is not numeric"),
    (lambda s: s.put_many("ns", [("a", np.array(["s"]))]), "row for key 'a': dtype <U1 is not numeric"),
])
def test_bad_arguments_are_named(tmp_path, call, match):
    with pytest.raises(RowStoreError, match=match):
        call(RowStore(tmp_path))
    assert not (tmp_path / "ns").exists() or segments(tmp_path / "ns") == []


@pytest.mark.parametrize("option, value", [("fsync_interval", -1), ("upload_rows", 0), ("segment_bytes", "big"), ("pack_bytes", True)])
def test_bad_options_are_named(tmp_path, option, value):
    with pytest.raises(RowStoreError, match=f"{option} must be a number"):
        RowStore(tmp_path, **{option: value})


def test_a_bad_remote_url_is_a_clear_error(tmp_path):
    with pytest.raises(OSError, match="row store remote 'nosuchproto://x'"):
        RowStore(tmp_path, "nosuchproto://x")


def test_a_batch_with_one_bad_row_writes_nothing(tmp_path):
    store = RowStore(tmp_path)
    with pytest.raises(RowStoreError):
        store.put_many("ns", items([1, 2]) + [("bad", np.array([object()]))])
    assert store.get_many("ns", [key_of(1), key_of(2)]) == [None, None]


def test_rows_are_written_once_and_never_replaced(tmp_path):
    first, second = RowStore(tmp_path), RowStore(tmp_path)
    assert first.put_many("ns", items(range(10))) == 10
    # another process (here: another instance) asks to store the same keys: nothing is written
    assert second.put_many("ns", items(range(5, 15))) == 5
    assert second.stats.skipped == 5
    assert first.put_many("ns", [(key_of(3), np.zeros(DIM, np.float32))]) == 0  # never replaced
    assert_rows_correct(RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(15)]), range(15))


def test_namespaces_are_separate(tmp_path):
    store = RowStore(tmp_path)
    store.put_many("a", items([1]))
    assert store.get_many("b", [key_of(1)]) == [None]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_a_process_segment_rotates_at_segment_bytes(tmp_path):
    store = RowStore(tmp_path, segment_bytes=1000)
    for i in range(0, 40, 4):
        store.put_many("ns", items(range(i, i + 4)))
    assert len(segments(tmp_path / "ns")) > 3
    assert_rows_correct(RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(40)]), range(40))
    assert all_found(RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(40)]))


# ------------------------------------------------------------------------------- crash safety


def _writer_until_killed(root: str, start: int, batch: int, dim: int, conn) -> None:
    """Child: write batches forever; after each put_many returns, report its keys as acknowledged."""
    store = RowStore(root)
    i = start
    while True:
        store.put_many("ns", items(range(i, i + batch), dim))
        conn.send(list(range(i, i + batch)))
        i += batch


@pytest.mark.parametrize("trial", range(6))
def test_sigkill_mid_write_loses_nothing_acknowledged_and_returns_nothing_torn(tmp_path, trial):
    """A child appends big batches (so the kill usually lands inside a write); SIGKILL after some acks."""
    dim, batch = 2048, 64  # 8 KiB rows, 512 KiB per write()
    parent, child = FORK.Pipe()
    proc = FORK.Process(target=_writer_until_killed, args=(str(tmp_path), 0, batch, dim, child))
    proc.start()
    acked: list[int] = []
    want = 2 + 3 * trial
    while len(acked) < want * batch:
        assert parent.poll(60), "the writer stopped acknowledging"
        acked += parent.recv()
    if trial % 2:
        time.sleep(0.001 * trial)  # vary where in the next write the kill lands
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL
    while parent.poll(0):  # acks sent before the kill count too
        acked += parent.recv()

    store = RowStore(tmp_path)
    candidates = range(0, max(acked) + 10 * batch)
    got = store.get_many("ns", [key_of(i) for i in candidates])
    assert_rows_correct(got, candidates, dim)  # nothing torn or foreign
    assert all(got[i] is not None for i in acked), "an acknowledged row was lost"
    assert store.stats.corrupt == []  # a torn tail is not damage: it was never acknowledged
    # a new writer after the crash: the torn tail is never appended to, everything still reads back
    store.put_many("ns", items(range(10**6, 10**6 + 5), dim))
    again = RowStore(tmp_path).get_many("ns", [key_of(i) for i in list(acked) + list(range(10**6, 10**6 + 5))])
    assert all_found(again)
    report = RowStore(tmp_path).compact("ns")
    assert report["rows"] >= len(acked) and len(segments(tmp_path / "ns")) <= 2


def test_a_segment_cut_at_any_byte_yields_only_whole_rows(tmp_path):
    """What a power loss or a full disk can leave: every prefix of a segment reads as exactly the whole records in it."""
    src = tmp_path / "src"
    store = RowStore(src)
    for i in range(0, 12, 3):
        store.put_many("ns", items(range(i, i + 3)))
    store.close()
    (seg,) = segments(src / "ns")
    data = seg.read_bytes()
    ends = []  # byte offset where each record ends
    pos = 0
    for i in range(12):
        pos += len(encode_record(key_of(i), row_of(i)))
        ends.append(pos)
    assert ends[-1] == len(data)
    numbers = list(range(12))
    for cut in sorted(set(range(0, len(data), 7)) | {e - 1 for e in ends} | set(ends)):
        root = tmp_path / f"cut{cut}"
        (root / "ns").mkdir(parents=True)
        (root / "ns" / seg.name).write_bytes(data[:cut])
        reader = RowStore(root)
        got = reader.get_many("ns", [key_of(i) for i in numbers])
        assert_rows_correct(got, numbers)
        assert [g is not None for g in got] == [e <= cut for e in ends], cut
        assert reader.stats.corrupt == []


def test_a_failed_write_is_never_appended_to(tmp_path, monkeypatch):
    """Disk full in the middle of a batch: the batch is not acknowledged; later batches go to a new segment."""
    store = RowStore(tmp_path)
    store.put_many("ns", items(range(0, 4)))
    real_write = os.write

    def half_then_full(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rowstore_module.os, "write", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        store.put_many("ns", items(range(4, 8)))
    monkeypatch.undo()
    store.put_many("ns", items(range(8, 12)))
    assert len(segments(tmp_path / "ns")) == 2
    got = RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(12)])
    assert_rows_correct(got, range(12))
    assert all(got[i] is not None for i in list(range(4)) + list(range(8, 12)))
    assert got[7] is None  # the torn record is not returned


# ------------------------------------------------------------------------------- checksums


def _record_offsets(path: Path) -> list[int]:
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        assert data[pos : pos + 4] == MAGIC
        out.append(pos)
        pos = data.index(MAGIC, pos + 1) if MAGIC in data[pos + 1 :] else len(data)
    return out


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("when", ["before the index is built", "after the index is built"])
def test_a_flipped_data_byte_is_reported_and_the_row_recomputed(tmp_path, when):
    writer = RowStore(tmp_path)
    writer.put_many("ns", items(range(6)))
    writer.close()
    (seg,) = segments(tmp_path / "ns")
    offsets = _record_offsets(seg)
    reports: list[str] = []
    reader = RowStore(tmp_path, on_corrupt=reports.append)
    if when == "after the index is built":
        assert all_found(reader.get_many("ns", [key_of(0)] + [key_of(i) for i in range(6)]))
    _flip(seg, offsets[3] + len(encode_record(key_of(3), row_of(3))) - 9)  # a byte of row 3's floats
    got = reader.get_many("ns", [key_of(i) for i in range(6)])
    assert got[3] is None and all(g is not None for i, g in enumerate(got) if i != 3)
    assert_rows_correct(got, range(6))
    assert len(reader.stats.corrupt) == 1 and reports == reader.stats.corrupt
    assert seg.name in reports[0] and "payload checksum mismatch" in reports[0] and key_of(3) in reports[0]
    # the caller recomputes and stores it; every reader then finds the good copy
    assert reader.put_many("ns", items([3])) == 1
    assert_rows_correct(reader.get_many("ns", [key_of(3)]), [3])
    reader.close()
    fresh = RowStore(tmp_path)
    assert_rows_correct(fresh.get_many("ns", [key_of(i) for i in range(6)]), range(6))
    assert all_found(fresh.get_many("ns", [key_of(i) for i in range(6)]))
    # compaction drops the damaged copy and keeps the good one
    report = fresh.compact("ns")
    assert report["rows"] == 6 and report["damaged"] == 1
    assert all_found(RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(6)]))


@pytest.mark.parametrize("where", [4, 9, 13, 17, 21], ids=["version", "payload-length", "payload-crc", "header-crc", "key"])
def test_a_flipped_header_byte_costs_one_row_and_the_scan_resyncs(tmp_path, where):
    writer = RowStore(tmp_path)
    writer.put_many("ns", items(range(6)))
    writer.close()
    (seg,) = segments(tmp_path / "ns")
    _flip(seg, _record_offsets(seg)[2] + where)
    reader = RowStore(tmp_path)
    got = reader.get_many("ns", [key_of(i) for i in range(6)])
    assert [g is None for g in got] == [False, False, True, False, False, False]
    assert_rows_correct(got, range(6))
    assert len(reader.stats.corrupt) == 1


def test_garbage_between_records_is_skipped(tmp_path):
    writer = RowStore(tmp_path)
    writer.put_many("ns", items(range(2)))
    writer.close()
    (seg,) = segments(tmp_path / "ns")
    a, b = (encode_record(key_of(i), row_of(i)) for i in (2, 3))
    with open(seg, "ab") as fh:
        fh.write(b"\x00" * 100 + a + os.urandom(333) + b)
    got = RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(4)])
    assert all_found(got)
    assert_rows_correct(got, range(4))


# ------------------------------------------------------------------------------- concurrency


def _concurrent_writer(root: str, numbers: list[int], seed: int, out) -> None:
    try:
        rng = np.random.default_rng(seed)
        order = list(numbers)
        rng.shuffle(order)
        written = skipped = 0
        for part in range(0, len(order), 68):  # a new store (a new segment) every 4 batches: dead segments to merge
            store = RowStore(root, fsync_interval=0 if seed % 2 else 1.0)
            for start in range(part, min(part + 68, len(order)), 17):
                store.put_many("ns", items(order[start : start + 17]))
            store.close()
            written, skipped = written + store.stats.written, skipped + store.stats.skipped
        out.put(("writer", written, skipped))
    except BaseException as exc:
        out.put(("writer failed", repr(exc), 0))
        raise


def _concurrent_reader(root: str, total: int, stop, out) -> None:
    try:
        store = RowStore(root)
        seen, looks = 0, 0
        numbers = list(range(total))
        while not stop.is_set() or looks == 0:
            got = store.get_many("ns", [key_of(i) for i in numbers])
            assert_rows_correct(got, numbers)
            seen = max(seen, sum(g is not None for g in got))
            looks += 1
        out.put(("reader", seen, looks))
    except BaseException as exc:
        out.put(("reader failed", repr(exc), 0))
        raise


def _concurrent_compactor(root: str, stop, out) -> None:
    try:
        store = RowStore(root)
        merges = 0
        while not stop.is_set():
            merges += store.compact("ns")["inputs"] >= 2
            time.sleep(0.01)
        out.put(("compactor", merges, store.stats.corrupt))
    except BaseException as exc:
        out.put(("compactor failed", repr(exc), 0))
        raise


def test_writers_readers_and_a_compactor_in_parallel(tmp_path):
    """Three writers (overlapping keys), a reader checking every row it gets, a compactor merging meanwhile."""
    total = 600
    ranges = [list(range(0, 400)), list(range(200, 600)), list(range(100, 500))]
    out, stop = FORK.Queue(), FORK.Event()
    writers = [FORK.Process(target=_concurrent_writer, args=(str(tmp_path), r, s, out)) for s, r in enumerate(ranges)]
    others = [FORK.Process(target=_concurrent_reader, args=(str(tmp_path), total, stop, out)),
              FORK.Process(target=_concurrent_compactor, args=(str(tmp_path), stop, out))]
    try:
        for p in others + writers:
            p.start()
        for p in writers:
            p.join(300)
        stop.set()
        for p in others:
            p.join(120)
        results = [out.get(timeout=10) for _ in range(5)]
    finally:
        stop.set()
        for p in others + writers:
            if p.is_alive():
                p.kill()
    assert not [r for r in results if r[0].endswith("failed")], results
    assert [p.exitcode for p in others + writers] == [0] * 5
    written = sum(r[1] for r in results if r[0] == "writer")
    assert total <= written <= sum(map(len, ranges))
    (compactor,) = [r for r in results if r[0] == "compactor"]
    assert compactor[1] >= 1 and compactor[2] == []  # it merged segments while the others read and wrote
    got = RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(total)])
    assert all_found(got)
    assert_rows_correct(got, range(total))
    RowStore(tmp_path).compact("ns")
    (pack,) = segments(tmp_path / "ns")
    assert pack.stat().st_size == sum(len(encode_record(key_of(i), row_of(i))) for i in range(total))  # no duplicate left


def test_a_live_writers_segment_is_never_compacted(tmp_path):
    live = RowStore(tmp_path)
    live.put_many("ns", items(range(3)))
    for part in (range(3, 6), range(6, 9)):
        done = RowStore(tmp_path)
        done.put_many("ns", items(part))
        done.close()
    report = RowStore(tmp_path).compact("ns")
    assert report["inputs"] == 2 and report["rows"] == 6
    live.put_many("ns", items(range(9, 12)))  # still appending to its own, untouched segment
    assert len(segments(tmp_path / "ns")) == 2
    got = RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(12)])
    assert all_found(got)
    assert_rows_correct(got, range(12))


@pytest.mark.parametrize("stage", ["fsync", "replace"])
def test_a_compaction_that_fails_midway_loses_nothing(tmp_path, monkeypatch, stage):
    for part in (range(0, 5), range(3, 10)):
        w = RowStore(tmp_path)
        w.put_many("ns", items(part))
        w.close()
    before = {p.name: p.read_bytes() for p in segments(tmp_path / "ns")}
    real = getattr(os, stage)
    monkeypatch.setattr(rowstore_module.os, stage, lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError, match="No space left"):
        RowStore(tmp_path).compact("ns")
    monkeypatch.setattr(rowstore_module.os, stage, real)
    assert {p.name: p.read_bytes() for p in (tmp_path / "ns").iterdir()} == before  # inputs intact, no temp file
    got = RowStore(tmp_path).get_many("ns", [key_of(i) for i in range(10)])
    assert all_found(got)
    assert_rows_correct(got, range(10))


def test_a_reader_with_a_stale_index_finds_rows_after_compaction(tmp_path):
    for part in (range(0, 5), range(5, 10)):
        w = RowStore(tmp_path)
        w.put_many("ns", items(part))
        w.close()
    reader = RowStore(tmp_path)
    assert all_found(reader.get_many("ns", [key_of(i) for i in range(10)]))
    RowStore(tmp_path).compact("ns")
    got = reader.get_many("ns", [key_of(i) for i in range(10)])  # its index names removed segments
    assert all_found(got)
    assert_rows_correct(got, range(10))


def test_many_segments_are_compacted_when_a_process_opens_the_namespace(tmp_path):
    for i in range(7):
        w = RowStore(tmp_path)
        w.put_many("ns", items([i, i + 1]))  # overlapping: duplicates once merged
        w.close()
    assert len(segments(tmp_path / "ns")) == 7
    reader = RowStore(tmp_path, auto_compact_segments=4)
    got = reader.get_many("ns", [key_of(i) for i in range(8)])
    assert all_found(got)
    assert reader.stats.compactions == 1
    assert len(segments(tmp_path / "ns")) == 1
    size = segments(tmp_path / "ns")[0].stat().st_size
    assert size == sum(len(encode_record(key_of(i), row_of(i))) for i in range(8))  # no duplicate left


# ------------------------------------------------------------------------------- shared tier


@pytest.fixture(params=["memory", "file"])
def shared_url(request, tmp_path):
    if request.param == "memory":
        import fsspec

        url = f"memory://t2i-rowstore-{tmp_path.name}"
        yield url
        with contextlib.suppress(FileNotFoundError):
            fsspec.filesystem("memory").rm(url.split("://", 1)[1], recursive=True)
    else:
        yield f"file://{tmp_path / 'shared'}"


def _objects(url: str) -> list[str]:
    import fsspec

    fs, base = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    try:
        return sorted(p[len(base.rstrip("/")) + 1 :] for p in fs.find(base))
    except FileNotFoundError:
        return []


def test_a_second_machine_reads_what_the_first_wrote_from_few_objects(tmp_path, shared_url):
    first = RowStore(tmp_path / "machine1", shared_url)
    for start in range(0, 300, 32):
        first.put_many("ns", items(range(start, min(300, start + 32))))
    first.close()
    objects = _objects(shared_url)
    assert len(objects) == 2 and objects[0].startswith("ns/index/") and objects[1].startswith("ns/packs/")
    assert first.stats.uploaded == 300 and first.stats.objects_put == 2

    second = RowStore(tmp_path / "machine2", shared_url)
    numbers = list(range(310))
    got = second.get_many("ns", [key_of(i) for i in numbers])
    assert [g is None for g in got] == [i >= 300 for i in numbers]
    assert_rows_correct(got, numbers)
    assert second.stats.fetched == 300
    again = RowStore(tmp_path / "machine2", shared_url)  # now from the local mirror
    assert all_found(again.get_many("ns", [key_of(i) for i in range(300)]))
    assert again.stats.fetched == 0
    second.close()
    assert len(_objects(shared_url)) == 2  # rows fetched from the shared tier are not uploaded back


def test_uploads_batch_rows_into_packs(tmp_path, shared_url):
    store = RowStore(tmp_path / "m", shared_url, upload_rows=100)
    for start in range(0, 250, 10):
        store.put_many("ns", items(range(start, start + 10)))
    assert store.stats.uploaded == 200 and len(_objects(shared_url)) == 4  # two automatic syncs
    store.close()
    assert store.stats.uploaded == 250 and len(_objects(shared_url)) == 6


def test_two_machines_writing_at_once_lose_nothing(tmp_path, shared_url):
    """Interleaved writes and syncs of overlapping rows from two mirrors; a third sees the union."""
    a = RowStore(tmp_path / "a", shared_url, upload_rows=25)
    b = RowStore(tmp_path / "b", shared_url, upload_rows=25)
    for start in range(0, 200, 10):
        a.put_many("ns", items(range(start, start + 10)))
        b.put_many("ns", items(range(start + 100, start + 110)))
    a.close()
    b.close()
    third = RowStore(tmp_path / "c", shared_url)
    got = third.get_many("ns", [key_of(i) for i in range(300)])
    assert all_found(got)
    assert_rows_correct(got, range(300))
    report = third.compact_remote("ns")
    assert report["rows"] == 300 and report["packs"] > 2
    assert len(_objects(shared_url)) == 2
    fourth = RowStore(tmp_path / "d", shared_url)
    assert all_found(fourth.get_many("ns", [key_of(i) for i in range(300)]))


def _machine(mirror: str, url: str, numbers: list[int], out) -> None:
    store = RowStore(mirror, url, upload_rows=40)
    for start in range(0, len(numbers), 10):
        store.put_many("ns", items(numbers[start : start + 10]))
    store.close()
    out.put(store.stats.uploaded)


def test_two_machine_processes_syncing_at_once_to_a_file_url(tmp_path):
    url = f"file://{tmp_path / 'shared'}"
    out = FORK.Queue()
    procs = [FORK.Process(target=_machine, args=(str(tmp_path / f"m{i}"), url, list(range(150 * i, 150 * i + 300)), out))
             for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert sum(out.get(timeout=10) for _ in procs) >= 450
    got = RowStore(tmp_path / "reader", url).get_many("ns", [key_of(i) for i in range(450)])
    assert all_found(got)
    assert_rows_correct(got, range(450))


def _write_and_die(mirror: str, url: str, conn) -> None:
    store = RowStore(mirror, url)
    store.put_many("ns", items(range(20)))
    conn.send("written")
    time.sleep(60)


def test_rows_of_a_killed_process_are_uploaded_by_the_next_sync_on_that_machine(tmp_path, shared_url):
    if shared_url.startswith("memory"):
        pytest.skip("memory:// is per process")
    parent, child = FORK.Pipe()
    proc = FORK.Process(target=_write_and_die, args=(str(tmp_path / "m1"), shared_url, child))
    proc.start()
    assert parent.poll(60) and parent.recv() == "written"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert _objects(shared_url) == []
    assert RowStore(tmp_path / "m1", shared_url).sync("ns") == 20
    got = RowStore(tmp_path / "m2", shared_url).get_many("ns", [key_of(i) for i in range(20)])
    assert all_found(got)


def test_a_damaged_shared_row_is_reported_and_replaced(tmp_path):
    url = f"file://{tmp_path / 'shared'}"
    first = RowStore(tmp_path / "m1", url)
    first.put_many("ns", items(range(5)))
    first.close()
    (pack,) = (tmp_path / "shared" / "ns" / "packs").iterdir()
    _flip(pack, _record_offsets(pack)[1] + 40)
    second = RowStore(tmp_path / "m2", url)
    got = second.get_many("ns", [key_of(i) for i in range(5)])
    assert [g is None for g in got] == [False, True, False, False, False]
    assert_rows_correct(got, range(5))
    assert len(second.stats.corrupt) == 1 and "damaged row in the shared tier" in second.stats.corrupt[0]
    second.put_many("ns", items([1]))  # recomputed
    second.close()  # uploaded, as the shared copy is known damaged
    got = RowStore(tmp_path / "m3", url).get_many("ns", [key_of(i) for i in range(5)])
    assert all_found(got)
    assert_rows_correct(got, range(5))


def test_a_reader_whose_listed_pack_was_merged_away_lists_again(tmp_path, shared_url):
    for part, mirror in ((range(0, 5), "a"), (range(5, 10), "b")):
        w = RowStore(tmp_path / mirror, shared_url)
        w.put_many("ns", items(part))
        w.close()
    reader = RowStore(tmp_path / "r", shared_url)
    assert reader.get_many("ns", [key_of(0)])[0] is not None  # lists both indexes
    RowStore(tmp_path / "c", shared_url).compact_remote("ns")
    got = reader.get_many("ns", [key_of(i) for i in range(10)])
    assert all_found(got)
    assert_rows_correct(got, range(10))


# ------------------------------------------------------------------------------- files and modes


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_files_follow_the_umask_and_no_lock_or_temp_files_remain(tmp_path, umask):
    old = os.umask(umask)
    try:
        url = f"file://{tmp_path / 'shared'}"
        for part in (range(0, 5), range(5, 10)):
            store = RowStore(tmp_path / "local", url)
            store.put_many("ns", items(part))
            store.close()
        RowStore(tmp_path / "local", url).compact("ns")
        other = RowStore(tmp_path / "other", url)
        assert all_found(other.get_many("ns", [key_of(i) for i in range(10)]))
        other.close()
    finally:
        os.umask(old)
    paths = [p for p in tmp_path.rglob("*")]
    files = [p for p in paths if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask for p in files), \
        {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o777 & ~umask for p in paths if p.is_dir())
    names = sorted(p.name for p in files)
    assert all(n.endswith((".rows", ".idx")) for n in names), names  # no lock, temp or probe files
    assert not [n for n in names if "lock" in n or n.startswith(".")]


# ------------------------------------------------------------------------------- the Workbench adapter


class _Encoder:
    """Counts what it is asked to encode; features are key-derived."""

    def __init__(self):
        self.encoded = 0

    def compute(self, keys):
        def run(indices):
            self.encoded += len(indices)
            return np.stack([row_of(int(keys[i][1:])) for i in indices])

        return run


def test_feature_rows_reuse_stored_rows_and_count_them(tmp_path):
    from t2i_fairness.base.cache import Cache

    cache = Cache(tmp_path)
    rows = FeatureRows(cache)
    keys = [key_of(i) for i in (3, 1, 2, 1)]  # repeats allowed, as refs may repeat
    enc = _Encoder()
    feats = rows.rows("enc", keys, enc.compute(keys), kind="features:clip", batch_size=2)
    assert feats.shape == (4, DIM) and feats.dtype == np.float32
    assert enc.encoded == 4 and cache.stats.computed == {"features:clip": 4} and cache.stats.reused.get("features:clip", 0) == 0  # (the one Memo loop counts only non-zero)
    more = [key_of(i) for i in (1, 2, 3, 4)]
    feats2 = rows.rows("enc", more, enc.compute(more), kind="features:clip")
    assert enc.encoded == 5 and cache.stats.reused == {"features:clip": 3}
    assert all(f.tobytes() == row_of(int(k[1:])).tobytes() for f, k in zip(feats2, more))
    rows.close()
    assert not (tmp_path / "features").exists()  # no per-row files any more
    assert [p.parent.name for p in segments(tmp_path / "rows" / "enc")] == ["enc"]


def test_feature_rows_read_and_import_old_npy_entries(tmp_path):
    from t2i_fairness.base.cache import Cache, encode_array

    cache = Cache(tmp_path)
    for i in range(3):
        cache.write(cache.path("features", key_of(i), ".npy", "enc"), encode_array(row_of(i)))
    bad = cache.path("features", key_of(3), ".npy", "enc")
    cache.write(bad, encode_array(row_of(3))[:-7])  # truncated old entry
    keys = [key_of(i) for i in range(5)]
    enc = _Encoder()
    rows = FeatureRows(cache)
    feats = rows.rows("enc", keys, enc.compute(keys), kind="features:x")
    assert enc.encoded == 2 and cache.stats.reused == {"features:x": 3}
    assert [f.tobytes() for f in feats] == [row_of(i).tobytes() for i in range(5)]
    assert len(cache.stats.corrupt) == 1 and cache.stats.corrupt[0].startswith(f"{bad}: ") and not bad.exists()
    rows.close()
    # the imported rows now come from the row store even without the old files
    for p in (tmp_path / "features").rglob("*.npy"):
        p.unlink()
    again = FeatureRows(Cache(tmp_path), legacy=False).get_many("enc", keys)
    assert all_found(again)


def test_feature_rows_read_old_entries_from_an_old_shared_tier(tmp_path):
    from t2i_fairness.base.cache import Cache, encode_array

    url = f"memory://t2i-rowstore-legacy-{tmp_path.name}"
    old_machine = Cache(tmp_path / "old", remote=url)
    for i in range(4):
        old_machine.write(old_machine.path("features", key_of(i), ".npy", "enc"), encode_array(row_of(i)))
    new_machine = Cache(tmp_path / "new", remote=url)
    rows = FeatureRows(new_machine)
    got = rows.get_many("enc", [key_of(i) for i in range(6)])
    assert [g is None for g in got] == [False] * 4 + [True] * 2
    assert_rows_correct(got, range(6))
    rows.close()
    assert any(o.startswith("rows/enc/packs/") for o in _objects(url))  # now also in the new layout
    import fsspec

    fsspec.filesystem("memory").rm(url.split("://", 1)[1], recursive=True)


def test_a_non_finite_old_entry_is_rejected(tmp_path):
    from t2i_fairness.base.cache import Cache, encode_array

    cache = Cache(tmp_path)
    row = row_of(0)
    row[3] = np.inf
    cache.write(cache.path("features", key_of(0), ".npy", "enc"), encode_array(row))
    assert FeatureRows(cache).get_many("enc", [key_of(0)]) == [None]
    assert len(cache.stats.corrupt) == 1 and "non-finite" in cache.stats.corrupt[0]


def test_migrate_legacy_features(tmp_path):
    from t2i_fairness.base.cache import Cache, encode_array

    cache = Cache(tmp_path)
    for ns in ("enc1", "enc2"):
        for i in range(5):
            cache.write(cache.path("features", key_of(i), ".npy", ns), encode_array(row_of(i)))
    assert migrate_legacy_features(cache) == 10
    assert migrate_legacy_features(cache, delete=True) == 0  # already there; now the files go
    assert list((tmp_path / "features").rglob("*.npy")) == []
    rows = FeatureRows(Cache(tmp_path), legacy=False)
    for ns in ("enc1", "enc2"):
        got = rows.get_many(ns, [key_of(i) for i in range(5)])
        assert all_found(got)
        assert_rows_correct(got, range(5))


def test_a_failing_shared_tier_is_warned_about_and_rows_stay_local(tmp_path, monkeypatch):
    url = f"file://{tmp_path / 'shared'}"
    store = RowStore(tmp_path / "m", url, upload_rows=5)

    def down(*args, **kwargs):
        raise ConnectionError("bucket unreachable")

    monkeypatch.setattr(store.remote.fs, "pipe_file", down)
    with pytest.warns(RuntimeWarning, match="upload of the shared tier 'file://.*' failed: ConnectionError: bucket unreachable"):
        assert store.put_many("ns", items(range(6))) == 6
    with pytest.warns(RuntimeWarning, match="bucket unreachable"):
        store.close()
    assert len(store.stats.remote_errors) == 2
    with pytest.raises(ConnectionError):
        store.sync("ns")  # an explicit sync raises
    monkeypatch.undo()
    assert all_found(RowStore(tmp_path / "m").get_many("ns", [key_of(i) for i in range(6)]))
    assert RowStore(tmp_path / "m", url).sync("ns") == 6  # uploaded once the tier is back
    reader = RowStore(tmp_path / "other", url)
    monkeypatch.setattr(reader.remote.fs, "cat_file", down)
    with pytest.warns(RuntimeWarning, match="read of the shared tier"):
        assert reader.get_many("ns", [key_of(0)]) == [None]


def test_big_syncs_are_split_into_packs_of_pack_bytes(tmp_path, shared_url):
    store = RowStore(tmp_path / "m", shared_url, pack_bytes=1000)  # about 10 rows of 16 floats a pack
    store.put_many("ns", items(range(50)))
    assert store.sync("ns") == 50
    packs = [o for o in _objects(shared_url) if "/packs/" in o]
    assert 5 <= len(packs) <= 6 and len(_objects(shared_url)) == 2 * len(packs)
    got = RowStore(tmp_path / "other", shared_url).get_many("ns", [key_of(i) for i in range(50)])
    assert all_found(got)
    assert_rows_correct(got, range(50))


def test_feature_rows_check_what_compute_returns(tmp_path):
    from t2i_fairness.base.cache import Cache

    rows = FeatureRows(Cache(tmp_path))
    with pytest.raises(RowStoreError, match="compute returned 1 rows for 2 keys"):
        rows.rows("enc", ["a", "b"], lambda idx: np.zeros((1, 4)), kind="features:x")
    with pytest.raises(RowStoreError, match="put_many: 2 keys but 1 rows"):
        rows.put_many("enc", ["a", "b"], np.zeros((1, 4)))


def test_a_segment_cut_short_is_said_once_its_writer_is_gone(tmp_path):
    """Issue #30: a truncated segment was repaired without a word. A cut-short tail is not damage (nothing
    acknowledged was there, unless the file was cut), so it stays out of ``corrupt``; but once its writer is
    gone the rows past the cut are computed again, and ``torn`` (the summary) says so. A live writer's
    partial tail is its write in progress: not reported."""
    writer = RowStore(tmp_path)
    writer.put_many("ns", items(range(4)))
    (seg,) = segments(tmp_path / "ns")
    whole = seg.read_bytes()
    partial = encode_record(key_of(99), row_of(99))[:-5]
    with seg.open("ab") as fh:  # as if the live writer were mid-write
        fh.write(partial)
    live = RowStore(tmp_path)
    assert all_found(live.get_many("ns", [key_of(i) for i in range(4)])) and live.stats.torn == []
    writer.close()
    seg.write_bytes(whole[:-3])  # the file cut, its writer gone
    said = []
    reader = RowStore(tmp_path, on_torn=said.append)
    got = reader.get_many("ns", [key_of(i) for i in range(4)])
    assert [g is not None for g in got] == [True, True, True, False]
    assert reader.stats.corrupt == [] and len(reader.stats.torn) == 1 == len(said)
    assert said[0].startswith(f"{seg}@") and "cut short" in said[0]
    reader.get_many("ns", [key_of(3)])  # looked at again: said once
    assert len(reader.stats.torn) == 1
