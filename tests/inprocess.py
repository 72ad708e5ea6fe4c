"""Run ``t2i-fairness`` or ``pytest`` in this process, as a child would run them, for tests that read their output.

A child Python pays 8-10 s of imports (torch, scipy, diffusers, open_clip) before its first line of work;
most of the project's end-to-end tests only read what a command printed and wrote, so they run it here,
where those modules are already imported (``in_process`` in ``tests/conftest.py``). What a child would
not share with this process is reset around each run: the working directory, the environment (the
xdist worker's variables removed, ``HF_HUB_OFFLINE=1``), torch's thread count (one, as
``subprocess_env``'s ``OMP_NUM_THREADS``), warnings' once-registries, ``sys.path`` and the modules first
imported by the run (its test files and conftests, which would clash with the next run's; third-party
modules and ``t2i_fairness``'s own stay, so their classes are not made twice). Tests of what only a
process shows (signals, exit codes of the console script, a killed run, memory limits, a clean import
state) keep running a child.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path
from typing import Callable, Mapping, Sequence

#: where third-party modules live: those first imported by a run stay imported after it
_SITE = tuple(str(Path(p).resolve()) for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                                sysconfig.get_paths()["stdlib"]})
#: variables of the parent run that a child started by a test would not see
_PARENT_ONLY = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")


def _keep(name: str, module) -> bool:
    """Whether a module first imported during a run stays imported after it."""
    if name.startswith("t2i_fairness.fairness_tests"):
        return False  # the suite's test modules: each run imports its own
    if name == "t2i_fairness" or name.startswith("t2i_fairness."):
        return True
    path = getattr(module, "__file__", None)
    return not path or str(Path(path).resolve()).startswith(_SITE)  # no file: builtins, namespace packages


def run(main: Callable[[list[str]], int | None], argv: Sequence[str], *, cwd: Path, monkeypatch,
        env: Mapping[str, str] | None = None, name: str = "t2i-fairness") -> subprocess.CompletedProcess:
    """``main(argv)`` in this process as a child would run it: its exit status, stdout and stderr.

    ``env`` adds or overrides variables for the run (as ``subprocess.run(env=...)`` would replace them, the
    parent's own run variables removed). ``SystemExit`` (argparse's usage errors) gives its code; any other
    exception propagates, with its traceback, as the failure of the test.
    """
    import torch

    with monkeypatch.context() as mp:
        mp.chdir(cwd)
        for var in _PARENT_ONLY:
            mp.delenv(var, raising=False)
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")
        for key, value in (env or {}).items():
            if key == "PYTHONPATH":  # a child's import path: the same entries, put in front here
                for entry in reversed([e for e in value.split(os.pathsep) if e]):
                    mp.syspath_prepend(entry)
                continue
            if key in _PARENT_ONLY or key in ("OMP_NUM_THREADS", "PYTHONHASHSEED"):
                continue
            if os.environ.get(key) != value:
                mp.setenv(key, value)
        modules, path, meta = dict(sys.modules), list(sys.path), list(sys.meta_path)
        threads = torch.get_num_threads()
        out, err = io.StringIO(), io.StringIO()
        torch.set_num_threads(1)
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                warnings.filterwarnings("default", category=UserWarning)  # a child prints each once: so does this run
                try:
                    code = main(list(argv))
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                    if not isinstance(exc.code, (int, type(None))):
                        print(exc.code, file=sys.stderr)
        finally:
            torch.set_num_threads(threads)
            for key in [k for k in sys.modules if k not in modules]:
                if not _keep(key, sys.modules[key]):
                    del sys.modules[key]
            sys.path[:], sys.meta_path[:] = path, meta
    return subprocess.CompletedProcess([name, *argv], int(code or 0), out.getvalue(), err.getvalue())


class InProcess:
    """``cli(args, cwd=...)`` and ``pytest(args, cwd=...)``: ``t2i-fairness`` and ``pytest`` run here (see the module)."""

    def __init__(self, monkeypatch):
        self._monkeypatch = monkeypatch

    def cli(self, args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        from t2i_fairness.cli import main

        return run(main, args, cwd=cwd, env=env, monkeypatch=self._monkeypatch)

    def pytest(self, args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        import pytest

        return run(lambda argv: int(pytest.main(argv)), args, cwd=cwd, env=env, monkeypatch=self._monkeypatch,
                   name="pytest")
