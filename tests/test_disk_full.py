"""A full disk is one clear error naming the folder, its free space and what was kept.

The write is made to fail with ``ENOSPC`` by monkeypatching the one place bytes reach the disk
(``base.files._write_all``), as a full disk does on ``write`` or ``fsync``.
"""

from __future__ import annotations

import errno
import threading

import pytest

from demo_gates import DemoProject
from t2i_fairness.errors import DiskFullError
from t2i_fairness.base import cache as cache_module
from t2i_fairness.base import files
from t2i_fairness.base.cache import Cache


def _full(fh, data, fsync):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_keeps_the_old_file_leaves_no_temporary_and_names_the_folder(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "x.bin"
    files.atomic_write_bytes(target, b"old")
    monkeypatch.setattr(files, "_write_all", _full)
    with pytest.raises(DiskFullError) as info:
        files.atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"  # the file already written is kept whole
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.bin"]  # no stray temporary
    e = info.value
    assert isinstance(e, OSError) and e.errno == errno.ENOSPC and e.folder == str(target.parent)
    assert str(e).startswith(f"No space left on the disk holding {target.parent} while writing x.bin (")
    assert " free); everything written before is kept" in str(e) and "Errno" not in str(e)


def test_other_write_errors_are_left_as_they_are(tmp_path, monkeypatch):
    def denied(fh, data, fsync):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(files, "_write_all", denied)
    with pytest.raises(PermissionError) as info:
        files.atomic_write_bytes(tmp_path / "x", b"1")
    assert not isinstance(info.value, DiskFullError) and info.value.__cause__ is None


def test_a_cache_entry_on_a_full_disk_names_the_cache_folder_and_its_option(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "my-cache")
    path = cache.path("images", "abcdef", ".png", "ns")
    monkeypatch.setattr(files, "_write_all", _full)
    with pytest.raises(DiskFullError) as info:
        cache.write(path, b"png")
    message = str(info.value)
    assert message.startswith(f"No space left on the disk holding {tmp_path / 'my-cache'} (--t2i-cache-dir) "
                              "while writing images/ns/ab/abcdef.png (")
    assert "or point --t2i-cache-dir at a larger one" in message


def test_a_run_on_a_full_disk_says_so_in_one_line_stops_and_the_next_run_reads_what_was_kept(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("FAKEGEN_BATCH", "4")
    project = DemoProject(pytester, "--t2i-model", "python:fakegen:make", "--t2i-objects", "bag,car",
                          "--t2i-images-per-prompt", "3")
    real, real_write_all = cache_module.atomic_write_bytes, files._write_all
    state, lock, local = {"images": 0, "full": False}, threading.Lock(), threading.local()

    # Images are written by the generation's writer threads, several at a time: each image's fate is
    # decided when it is counted (the disk fills after 8 images, the second test's third); every
    # write after that (features, bounds) finds the disk full too.
    def write_all(fh, data, fsync):
        full = getattr(local, "full", None)
        if state["full"] if full is None else full:
            _full(fh, data, fsync)
        real_write_all(fh, data, fsync)

    def writes_until_full(path, data, **kw):
        if "/images/" in str(path):
            with lock:
                state["images"] += 1
                state["full"] = state["full"] or state["images"] > 8
                local.full = state["full"]
        try:
            return real(path, data, **kw)
        finally:
            local.full = None

    monkeypatch.setattr(files, "_write_all", write_all)
    monkeypatch.setattr(cache_module, "atomic_write_bytes", writes_until_full)
    result = project.run("--t2i-update-thresholds")
    out = result.stdout.str()
    result.assert_outcomes(passed=1, failed=1)  # the run stops: the 4 other tests would fail the same way
    # the bounds asked for could not be written either: said in one line, the run fails, no INTERNALERROR
    assert result.ret == pytest.ExitCode.TESTS_FAILED and "INTERNALERROR" not in out
    result.stdout.fnmatch_lines([f"bounds not written: No space left on the disk holding {pytester.path} while writing t.yaml*"])
    assert not project.thresholds.exists()
    cache = project.cache
    # the failure is that one line (no traceback), named again in the verdict's list of tests
    message = f"t2i-fairness: No space left on the disk holding {cache} (--t2i-cache-dir) while writing images/"
    assert sum(line.startswith(message) for line in result.stdout.lines) == 1
    assert "Traceback" not in out and "Errno 28" not in out and "base/files.py" not in out
    result.stdout.fnmatch_lines(["verdict: FAILED: * stopped early (disk full: *)*"])
    kept = sorted(p for p in (cache / "images").rglob("*") if p.is_file())
    assert len(kept) == 8 and not [p for p in kept if p.name.endswith(".tmp")]
    before = {p: p.read_bytes() for p in kept}

    # space again (not monkeypatch.undo(): pytester's working folder is set through the same monkeypatch)
    monkeypatch.setattr(files, "_write_all", real_write_all)
    monkeypatch.setattr(cache_module, "atomic_write_bytes", real)
    again = project.run("--t2i-update-thresholds")
    again.assert_outcomes(passed=6)
    assert all(p.read_bytes() == data for p, data in before.items())  # what was kept is read, not lost
    again.stdout.fnmatch_lines(["images: * generated, * from cache*"])
    assert "0 from cache" not in again.stdout.str()
