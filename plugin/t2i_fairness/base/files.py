"""The one atomic file write every part of the package uses (cache entries, thresholds, reports);
standard library only, so the pure layers may use it too.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "current_umask", "disk_full_in", "raise_if_full"]


def current_umask() -> int:
    """The process umask: read from ``/proc`` where the OS says it (Linux), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, skip_if_same: bool = False, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one; returns the path
    written (a symlink's target).

    A temporary file in the same folder, fsync'd, then ``os.replace``: a crash leaves at worst a
    stray ``.<name>.*.tmp``. The file keeps the replaced one's permissions (a new one gets ``0o666``
    less the umask, so a shared cache stays readable); a symlink is written through.

    Args:
        skip_if_same: leave the file alone when it already holds exactly ``data``.
        fsync: flush to disk before the rename (off only for throwaway files).

    Raises:
        DiskFullError: no space left on the disk (naming the folder and its free space).
        OSError: the folder is not writable, or the target is a directory.
    """
    target = Path(os.path.realpath(path))
    if skip_if_same:
        try:
            if target.read_bytes() == data:
                return target
        except OSError:
            pass
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _raise_if_full(target, exc)
        raise
    try:
        st = os.stat(target)
        mode, gid = stat.S_IMODE(st.st_mode), st.st_gid
    except FileNotFoundError:
        mode, gid = 0o666 & ~current_umask(), None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        _raise_if_full(target, exc)
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_all(fh, data, fsync)
        if gid is not None and hasattr(os, "chown"):
            try:
                os.chown(tmp, -1, gid)
            except OSError:
                pass  # not a member of the file's group: the new file gets ours
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            _raise_if_full(target, exc)
        raise
    if fsync:
        try:
            dir_fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            pass  # not supported (Windows, some network filesystems): the rename itself is still atomic
    return target


def _write_all(fh, data: bytes, fsync: bool) -> None:
    """The bytes to the temporary file, flushed (and fsync'd): where a full disk shows."""
    fh.write(data)
    fh.flush()
    if fsync:
        os.fsync(fh.fileno())


def _raise_if_full(target: Path, exc: OSError) -> None:
    raise_if_full(target, exc)


FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", -1))


def raise_if_full(target: str | os.PathLike, exc: OSError, folder: str | os.PathLike | None = None,
                  what: str = "") -> None:
    """Raise ``exc`` as a :class:`~t2i_fairness.errors.DiskFullError` when the disk or quota is full: writing
    ``target``, named within ``folder`` (default: its own folder) as the user knows it (``what``)."""
    if exc.errno not in FULL:
        return
    raise _full_error(Path(target), exc.errno, folder, what) from exc


def _full_error(target: Path, code: int, folder=None, what: str = ""):
    from t2i_fairness.errors import DiskFullError

    try:
        free = shutil.disk_usage(target.parent).free
    except OSError:
        free = None
    return DiskFullError(target, folder if folder is not None else target.parent, free, what, errno_=code)


def disk_full_in(exc: BaseException | None):
    """The :class:`~t2i_fairness.errors.DiskFullError` behind ``exc`` (itself, a cause or context), one made
    from a bare ``ENOSPC``/``EDQUOT`` ``OSError`` a library raised, or ``None``.

    Example:
        >>> e = OSError(errno.ENOSPC, "No space left on device", "/nonexistent/x.bin")
        >>> str(disk_full_in(RuntimeError("wrapped").with_traceback(None))), disk_full_in(e).folder
        ('None', '/nonexistent')
    """
    from t2i_fairness.errors import DiskFullError

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFullError):
            return exc
        if isinstance(exc, OSError) and exc.errno in FULL:
            if exc.filename is None:  # a library's write that named no file
                return DiskFullError("a file it did not name", "a folder the library did not name", None,
                                     errno_=exc.errno)
            return _full_error(Path(os.fsdecode(exc.filename)), exc.errno)
        exc = exc.__cause__ or exc.__context__
    return None
