"""The tests a selection picks, found by pytest's own collection (``--collect-only`` in this
process), and the run's resolved options: ``-k``, ``-m`` and ``--t2i-*`` mean what they mean to pytest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from t2i_fairness.spine.options import T2IOptions
from t2i_fairness.spine.plan import GateCall

__all__ = ["Selection", "SelectionError", "collect", "default_paths", "selected_tests", "selection_of"]


class SelectionError(RuntimeError):
    """pytest could not collect the selection (a usage error, a broken test module); the message has pytest's output."""


@dataclass
class SelectedTest:
    """A selected test: what a plan needs of it."""

    call: GateCall
    module: str
    fixtures: tuple[str, ...]


@dataclass
class Selection:
    """The tests a selection picks (after ``-k``/``-m``/``--deselect``), in pytest's order, and the
    options they run under (``families`` a plain dict); ``collected`` counts before deselection.
    """

    options: T2IOptions
    tests: list[SelectedTest] = field(default_factory=list)
    collected: int = 0
    args: tuple[str, ...] = ()


def selected_tests(items) -> list[SelectedTest]:
    """pytest items as a plan sees them (their function names, parameters, modules and fixtures), in order."""
    tests = []
    for item in items:
        params = dict(getattr(getattr(item, "callspec", None), "params", {}) or {})
        name = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
        module = getattr(getattr(item, "module", None), "__name__", "") or ""
        tests.append(SelectedTest(GateCall(name, params, item.nodeid), module, tuple(getattr(item, "fixturenames", ()))))
    return tests


class _Collector:
    """A plugin object that keeps the selected items' names and parameters when collection ends."""

    def __init__(self):
        self.selection: Selection | None = None
        self.deselected = 0

    def pytest_deselected(self, items) -> None:
        self.deselected += len(items)

    def pytest_collection_finish(self, session) -> None:
        from t2i_fairness.runstate import OPTIONS

        self.selection = selection_of(session.items, session.config.stash[OPTIONS], self.deselected)


def selection_of(items, options: T2IOptions, deselected: int = 0) -> Selection:
    """The :class:`Selection` of pytest items (:func:`selected_tests`) under ``options``."""
    return Selection(dataclasses.replace(options, families=dict(options.families)), selected_tests(items),
                     len(items) + deselected)


def default_paths() -> list[str]:
    """The suite, as ``pytest`` finds it: ``fairness_tests/`` in this folder, else the installed one."""
    return ["fairness_tests"] if Path("fairness_tests").is_dir() else ["--pyargs", "t2i_fairness.fairness_tests"]


def collect(args: Sequence[str]) -> Selection:
    """Collect ``args`` (paths default to :func:`default_paths`) as ``pytest --collect-only`` would.

    Raises:
        SelectionError: pytest reported an error; the message holds its output.
    """
    import pytest

    args = list(args)
    collector = _Collector()
    out = io.StringIO()
    full = [*args, "--collect-only", "-q", "-p", "no:cacheprovider"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = pytest.main(full, plugins=[collector])
    if rc not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) or collector.selection is None:
        text = out.getvalue().strip()
        lines = [line for line in text.splitlines() if line.strip()]
        raise SelectionError(f"pytest {' '.join(args)} --collect-only failed (exit {int(rc)}):\n"
                             + "\n".join(lines[-30:]))
    collector.selection.args = tuple(args)
    return collector.selection
