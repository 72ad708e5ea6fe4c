"""Every error and warning class of the package, in one place.

Adapters raise :class:`ModelLoadError` (never a bare ``RuntimeError``) so a missing checkpoint
stops the run within seconds with a fix; :class:`OptionError` becomes ``pytest.UsageError`` (exit
status 2 on the command line); :class:`DiskFullError` and :class:`NotEnoughMemoryError` end a run
in one line. :class:`GateFailed` and :class:`GateSkipped` carry a verdict from the gating layer,
which knows nothing of pytest; like pytest's outcomes they derive from ``BaseException``, so a
test's ``except Exception`` cannot swallow them.
"""

from __future__ import annotations

__all__ = [
    "DiskFullError",
    "GateFailed",
    "GateOutcome",
    "GateSkipped",
    "IndicModelWarning",
    "ModelLoadError",
    "NotEnoughMemoryError",
    "OptionError",
    "T2IError",
    "T2IIdentityWarning",
    "T2IInconclusiveWarning",
    "T2IProvenanceWarning",
    "T2ISmallSampleWarning",
    "T2ITruncationWarning",
    "Terminated",
]


class T2IError(Exception):
    """Base class of the package's own errors."""


class ModelLoadError(T2IError, RuntimeError):
    """A model could not be loaded; the message names it and says how to fix it."""


class NotEnoughMemoryError(ModelLoadError, MemoryError):
    """A model would not fit in the memory free now; raised before it is loaded, with one line saying
    what to change (:func:`t2i_fairness.base.memory.refusal`).
    """


class OptionError(T2IError, ValueError):
    """A command-line option has a bad value; the message starts with the option's name.

    Example:
        >>> str(OptionError("--t2i-seed", "must be an integer, got 'x'"))
        "--t2i-seed: must be an integer, got 'x'"
    """

    def __init__(self, option: str, message: str):
        self.option = option
        self.message = message
        super().__init__(f"{option}: {message}" if option else message)


class DiskFullError(T2IError, OSError):
    """No space left on the disk (or quota) while writing ``path``: one message naming the folder, its
    free space and what was kept (writes are atomic, so earlier files are whole).

    Args:
        folder: the folder to name (the cache folder when a cache entry was written).
        free: bytes free on its disk (``None`` when it cannot be read).
        what: how the user names the folder (``--t2i-cache-dir``), or "".
        errno_: ``errno.ENOSPC`` or ``errno.EDQUOT``.

    Example:
        >>> str(DiskFullError("/c/images/ab/x.png", "/c", 0, "--t2i-cache-dir")).split(";")[0]
        'No space left on the disk holding /c (--t2i-cache-dir) while writing images/ab/x.png (0 B free)'
    """

    def __init__(self, path, folder, free: int | None, what: str = "", errno_: int = 28):
        import errno
        import os

        self.path, self.folder, self.free, self.what = str(path), str(folder), free, what
        rel = os.path.relpath(self.path, self.folder) if self.path.startswith(self.folder.rstrip(os.sep) + os.sep) else self.path
        kind = "Disk quota exceeded" if errno_ == getattr(errno, "EDQUOT", None) else "No space left"
        self.message = (
            f"{kind} on the disk holding {self.folder}{f' ({what})' if what else ''} while writing {rel} "
            f"({_size(free)} free); everything written before is kept: each file is written whole or not at all, "
            "so the files already there are intact and the next run reads them instead of making them again, and "
            f"{rel} was not written. Free space on that disk"
            + (f", or point {what} at a larger one," if what else "") + " and run again")
        super().__init__(self.message)
        self.errno, self.filename = errno_, self.path

    def __str__(self) -> str:
        return self.message

    def within(self, folder, what: str) -> "DiskFullError":
        """The same error naming ``folder`` as the user knows it (the cache folder and its option)."""
        return DiskFullError(self.path, folder, self.free, what, self.errno)


def _size(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"  # pragma: no cover


class GateOutcome(BaseException):
    """A gate's verdict as an exception (the plugin turns it into pytest's): not an error of the code."""


class GateFailed(GateOutcome):
    """The gate failed; the message is its verdict (pytest shows it without a traceback)."""


class GateSkipped(GateOutcome):
    """The gate does not apply here (pytest skips the test with the message)."""


class Terminated(KeyboardInterrupt):
    """The run was sent SIGTERM (a CI job's timeout, ``kill``): raised in the main thread by the plugin's
    handler, so the run ends as after Ctrl-C, every output saying interrupted."""


class T2IProvenanceWarning(UserWarning):
    """A gate's bound was set under other settings (model, scorers, sample sizes, versions, device).

    Kept importable; a run states what differs once, at the top of the summary.
    """


class T2IInconclusiveWarning(UserWarning):
    """A gate's estimate misses its bound, but the evidence does not decide at this sample size."""


class T2ISmallSampleWarning(UserWarning):
    """A figure rests on too few values to be stable (a percentile of few images, a tiny group)."""


class IndicModelWarning(UserWarning):
    """An IndicTTI model fell back to another one (say, the sentence encoder), so values are not comparable."""


class T2IIdentityWarning(UserWarning):
    """A model's identity cannot be trusted to change with its weights (a ``python:`` factory whose
    fingerprint is a method, or names no version), so the cache may serve another model's images."""


class T2ITruncationWarning(UserWarning):
    """The generator's tokenizer truncates prompts: some images come from part of their prompt."""
