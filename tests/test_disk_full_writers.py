"""A full disk at each writer of a run: one ``DiskFullError`` naming the folder and what was being written,
nothing half-written left to be read as valid, and a run that stops at once, fails in one line, and on
a rerun with space reuses what was complete and gives the same verdicts as a clean run.

ENOSPC is simulated where bytes reach the disk: ``base.files._write_all`` (every atomic write: images,
masks and other memo entries, thresholds, artifacts, run.json, the HTML report) and the row store's
``_write_all`` (feature rows and the image index, appended to segment files), as a full disk fails a
``write`` part way.
"""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

from demo_gates import DemoProject
from t2i_fairness.base import files
from t2i_fairness.base.cache import Cache
from t2i_fairness.base.files import disk_full_in
from t2i_fairness.base.memo import Memo
from t2i_fairness.base.rowstore import FeatureRows
from t2i_fairness.base.rowstore import store as store_module
from t2i_fairness.errors import DiskFullError


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _half_then_full(fd: int, data: bytes) -> None:
    """Half the bytes reach the file, then the disk is full (a torn record if it stayed)."""
    os.write(fd, data[: len(data) // 2])
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_feature_row_batch_on_a_full_disk_leaves_no_half_record_and_names_the_cache_folder(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "cache")
    rows = FeatureRows(cache)
    rows.put_many("clip", ["a", "b"], np.ones((2, 4)))
    (segment,) = (tmp_path / "cache" / "rows" / "clip").glob("seg-*.rows")
    size = segment.stat().st_size
    monkeypatch.setattr(store_module, "_write_all", _half_then_full)
    with pytest.raises(DiskFullError) as info:
        rows.put_many("clip", ["c", "d"], np.zeros((2, 4)))
    message = str(info.value)
    assert message.startswith(f"No space left on the disk holding {tmp_path / 'cache'} (--t2i-cache-dir) while "
                              f"writing rows/clip/{segment.name} (")
    assert "Errno" not in message and info.value.errno == errno.ENOSPC
    assert segment.stat().st_size == size  # the half record was cut off
    monkeypatch.undo()
    again = FeatureRows(Cache(tmp_path / "cache"))  # another process reading the folder
    got = again.get_many("clip", ["a", "b", "c", "d"])
    assert [g is not None for g in got] == [True, True, False, False] and np.array_equal(got[0], np.ones(4))
    assert again.cache.stats.corrupt == [] and again.store.stats.torn == []  # nothing read as damaged or torn
    again.put_many("clip", ["c", "d"], np.zeros((2, 4)))  # space again: the rows are written
    assert all(r is not None for r in FeatureRows(Cache(tmp_path / "cache")).get_many("clip", ["c", "d"]))


def test_a_new_segment_on_a_full_disk_is_the_same_one_line(tmp_path, monkeypatch):
    rows = FeatureRows(Cache(tmp_path / "cache"))
    real_open = os.open

    def no_new_file(path, flags, *args):
        if flags & os.O_CREAT:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(store_module.os, "open", no_new_file)
    with pytest.raises(DiskFullError) as info:
        rows.put_many("clip", ["a"], np.ones((1, 4)))
    assert str(info.value).startswith(f"No space left on the disk holding {tmp_path / 'cache'} (--t2i-cache-dir) while writing rows/clip (")


@pytest.mark.parametrize("writer", ["mask", "artifact", "thresholds"])
def test_each_atomic_writer_on_a_full_disk_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch, writer):
    from t2i_fairness.gating.thresholds import write_back
    from t2i_fairness.report.artifacts import Artifacts

    record = {"gate": "g", "status": "written", "direction": "min", "write": 0.5, "provenance": {"seed": 0}}

    def masks():
        return Memo(Cache(tmp_path / "cache"), "masks", "ns", ".mask", lambda a: np.asarray(a).tobytes(), np.frombuffer)

    write = {  # a second value (a new mask entry, the same artifact and bound rewritten) on a full disk
        "mask": lambda v: masks().get_many([f"k{v}"], lambda idx: [np.full(3, v)]),
        "artifact": lambda v: Artifacts(tmp_path / "art", "test_x").text("note", str(v)),
        "thresholds": lambda v: write_back(tmp_path / "t.yaml", [{**record, "write": v}]),
    }[writer]
    write(0.25)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.setattr(files, "_write_all", _full)
    with pytest.raises(Exception) as info:  # the thresholds file's own error, the full disk its cause
        write(0.75)
    full = disk_full_in(info.value)
    assert full is not None and "No space left on the disk holding" in str(full)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # old files whole, no temporary
    monkeypatch.undo()
    if writer == "mask":  # the mask computed but not stored is not there to be read as stored
        assert masks().lookup(["k0.75", "k0.25"])[0] is None and masks().lookup(["k0.25"])[0].tolist() == [0.25] * 3


def test_a_bare_enospc_behind_another_error_is_found():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/nonexistent/dir/f.bin")
        except OSError as exc:
            raise RuntimeError("a library's wrapper") from exc
    except RuntimeError as wrapped:
        full = disk_full_in(wrapped)
    assert full is not None and full.folder == "/nonexistent/dir" and str(full).startswith(
        "No space left on the disk holding /nonexistent/dir while writing f.bin")
    assert disk_full_in(OSError(errno.EACCES, "Permission denied")) is None
    unnamed = disk_full_in(OSError(errno.ENOSPC, "No space left on device"))  # a library that named no file
    assert str(unnamed).startswith("No space left on the disk holding a folder the library did not name while writing")


def _verdicts(path) -> list[tuple]:
    return sorted((g["gate"], g["status"], g["value"]) for g in json.loads(path.read_text())["gates"])


def test_rows_on_a_full_disk_stop_the_run_in_one_line_and_a_rerun_gives_a_clean_runs_verdicts(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("FAKEGEN_BATCH", "4")
    project = DemoProject(pytester, "--t2i-model", "python:fakegen:make", "--t2i-objects", "bag,car",
                          "--t2i-images-per-prompt", "3")
    clean = pytester.path / "clean-cache"
    project.run("--t2i-update-thresholds", "--t2i-cache-dir", str(clean)).assert_outcomes(passed=6)
    project.run("--t2i-cache-dir", str(clean), "--t2i-artifacts", "art-clean").assert_outcomes(passed=6)

    real, calls = store_module._write_all, []

    def fills_up(fd, data):  # the image index takes two batches of rows, then the disk is full
        calls.append(len(data))
        (real if len(calls) <= 2 else _half_then_full)(fd, data)

    monkeypatch.setattr(store_module, "_write_all", fills_up)
    result = project.run("--t2i-artifacts", "art-full", "--t2i-report", "report-full")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED and "INTERNALERROR" not in out
    message = f"t2i-fairness: No space left on the disk holding {project.cache} (--t2i-cache-dir) while writing rows/images/seg-"
    assert sum(line.startswith(message) for line in result.stdout.lines) == 1, out
    assert "Traceback" not in out and "Errno 28" not in out
    result.stdout.fnmatch_lines(["verdict: FAILED: * stopped early (disk full: *)*"])
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("errors", outcomes.get("error", 0)) == 1  # the run stopped there
    stored = len([p for p in (project.cache / "images").rglob("*.png")])
    # generation stopped at once: at most the batch in flight and the one being made past the failed write
    assert 0 < stored <= 4 * 4, stored

    monkeypatch.setattr(store_module, "_write_all", real)  # space again
    again = project.run("--t2i-artifacts", "art-again")
    again.assert_outcomes(passed=6)
    again.stdout.fnmatch_lines(["images: * generated, * from cache*"])
    assert "0 from cache" not in again.stdout.str()
    assert _verdicts(pytester.path / "art-again" / "run.json") == _verdicts(pytester.path / "art-clean" / "run.json")


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (root only: skipped where it cannot be mounted), unmounted afterwards."""
    import shutil
    import subprocess

    folder = tmp_path / "small"
    folder.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_cache_on_a_small_filesystem_ends_the_run_in_one_line_and_a_rerun_with_space_gives_a_clean_runs_verdicts(
        pytester, monkeypatch, small_disk):
    import subprocess

    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    project = DemoProject(pytester, "--t2i-model", "python:fakegen:make", "--t2i-objects", "bag,car",
                          "--t2i-images-per-prompt", "3")
    clean = pytester.path / "clean-cache"
    project.run("--t2i-update-thresholds", "--t2i-cache-dir", str(clean)).assert_outcomes(passed=6)
    project.run("--t2i-cache-dir", str(clean), "--t2i-artifacts", "art-clean").assert_outcomes(passed=6)

    cache = small_disk / "cache"
    full = project.run("--t2i-cache-dir", str(cache), "--t2i-artifacts", "art-full")
    out = full.stdout.str()
    assert full.ret == pytest.ExitCode.TESTS_FAILED and "INTERNALERROR" not in out, out[-3000:]
    lines = [line for line in full.stdout.lines
             if line.startswith(f"t2i-fairness: No space left on the disk holding {cache} (--t2i-cache-dir) while writing ")]
    assert len(lines) == 1 and "Traceback" not in out and "Errno 28" not in out, out[-3000:]
    full.stdout.fnmatch_lines(["verdict: FAILED: * stopped early (disk full: *)*"])
    assert not [p for p in cache.rglob("*.tmp")]  # no temporary left behind

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)  # space again
    again = project.run("--t2i-cache-dir", str(cache), "--t2i-artifacts", "art-again")
    again.assert_outcomes(passed=6)
    assert "0 from cache" not in again.stdout.str()  # what was complete is read, not made again
    assert _verdicts(pytester.path / "art-again" / "run.json") == _verdicts(pytester.path / "art-clean" / "run.json")
