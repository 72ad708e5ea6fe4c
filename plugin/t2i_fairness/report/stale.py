"""An earlier run's outputs never look current: when a run starts, the files it will write at the end
(JUnit XML, ``run.json``, the HTML report, Allure's ``environment.properties``) that an earlier run
left at those paths are replaced by a placeholder saying this run has not finished. The run's end
writes over them; a run killed before (SIGKILL, a power cut) leaves the placeholder, never an earlier
green.
"""

from __future__ import annotations

import json
import time
from html import escape
from pathlib import Path
from xml.sax.saxutils import quoteattr

from t2i_fairness.base.files import atomic_write_bytes

__all__ = ["INCOMPLETE", "mark_stale"]

INCOMPLETE = "INCOMPLETE"


def _headline(started: float) -> str:
    at = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started))
    return (f"{INCOMPLETE}: the run started at {at} has not finished (still running, or killed before it wrote "
            "its results); an earlier run's results were here")


def _junit(headline: str) -> bytes:
    message = quoteattr(headline)
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="pytest tests"><testsuite name="pytest" '
            f'errors="1" failures="0" skipped="0" tests="1"><properties><property name="t2i_verdict" value={message} />'
            f'</properties><testcase classname="t2i-fairness" name="run verdict"><error message={message} />'
            f'</testcase></testsuite></testsuites>\n').encode("utf-8")


def _run_json(headline: str) -> bytes:
    return (json.dumps({"verdict": INCOMPLETE, "headline": headline, "passed": False, "exitstatus": None,
                        "gates": []}, indent=1) + "\n").encode("utf-8")


def _html(headline: str) -> bytes:
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>t2i-fairness: run not finished'
            f'</title></head><body><h1>t2i-fairness</h1><div id="verdict" data-verdict="{INCOMPLETE}">'
            f'{escape(headline)}</div></body></html>\n').encode("utf-8")


def _allure(headline: str) -> bytes:
    return f"t2i.verdict={headline}\n".encode("latin-1", "replace")


def mark_stale(*, junit=None, run_json=None, report=None, allure=None, started: float | None = None) -> list[Path]:
    """Replace each of these files that exists (an earlier run's) by a placeholder saying this run has not
    finished; returns the files replaced. A file that cannot be written is left (the run's end tries again).

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "run.json").write_text('{"verdict": "PASSED"}')
        >>> [p.name for p in mark_stale(run_json=d / "run.json", report=d / "index.html")]
        ['run.json']
        >>> json.loads((d / "run.json").read_text())["verdict"]
        'INCOMPLETE'
    """
    headline = _headline(time.time() if started is None else started)
    done = []
    for path, render in ((junit, _junit), (run_json, _run_json), (report, _html), (allure, _allure)):
        if path is None or not Path(path).is_file():
            continue
        try:
            done.append(atomic_write_bytes(path, render(headline)))
        except OSError:
            pass
    return done
