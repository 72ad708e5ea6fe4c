"""The one atomic file write every part of the package uses (cache entries, thresholds, reports).

Standard library only, so the pure layers (:mod:`t2i_fairness.metrics`) may use it too.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "current_umask"]


def current_umask() -> int:
    """The process's umask (read without changing it for longer than the call)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, skip_if_same: bool = False, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one.

    - A temporary file in the same folder, flushed (and fsync'd), then ``os.replace``: a crash
      leaves at worst a stray ``.<name>.*.tmp``, never a half-written ``path``.
    - The new file gets the mode an ordinary ``open(path, "w")`` would give: the existing file's
      mode when it is replaced, else ``0o666`` less the umask (``mkstemp``'s private ``0o600`` would
      make a cache shared by several users or runners unreadable to the others).
    - A symbolic link is written through: its target is replaced and the link stays a link.

    Args:
        path: the destination.
        data: the new content.
        skip_if_same: leave the file alone when it already holds exactly ``data``.
        fsync: flush to disk before the rename (off only for throwaway files).

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = pathlib.Path(d) / "a" / "x.txt"
        ...     atomic_write_bytes(p, b"one"); atomic_write_bytes(p, b"two")
        ...     p.read_bytes(), oct(p.stat().st_mode & 0o777) == oct(0o666 & ~current_umask())
        (b'two', True)
    """
    target = Path(path)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    if skip_if_same:
        try:
            if target.read_bytes() == data:
                return
        except OSError:
            pass
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~current_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
