"""Artifacts a gate leaves for people: JSON, PNG plots, image grids and summary tables, one folder per
test under ``--t2i-artifacts``, attached to Allure when allure-pytest is active.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from t2i_fairness.base.files import atomic_write_bytes


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\[\]-]+", "_", text).strip("_")[:150]


def figure_png(fig) -> bytes:
    """A matplotlib figure as PNG bytes (closes the figure)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


class Artifacts:
    """Writes one test's artifacts and, when Allure is active, attaches them."""

    def __init__(self, root: Path, test_name: str, allure_active: bool = False):
        self.folder = Path(root) / safe_name(test_name)
        self.allure_active = allure_active
        self.written: list[Path] = []

    def _attach(self, name: str, data: bytes, kind: str) -> Path:
        path = self.folder / safe_name(name)
        atomic_write_bytes(path, data)
        self.written.append(path)
        if self.allure_active:
            import allure

            attachment_type = {"json": allure.attachment_type.JSON, "png": allure.attachment_type.PNG,
                               "txt": allure.attachment_type.TEXT}[kind]
            allure.attach(data, name=name, attachment_type=attachment_type)
        return path

    def json(self, name: str, obj: Any) -> Path:
        return self._attach(name if name.endswith(".json") else name + ".json",
                            json.dumps(obj, indent=2, sort_keys=True, default=float).encode(), "json")

    def png(self, name: str, data_or_figure) -> Path:
        data = data_or_figure if isinstance(data_or_figure, bytes) else figure_png(data_or_figure)
        return self._attach(name if name.endswith(".png") else name + ".png", data, "png")

    def text(self, name: str, text: str) -> Path:
        return self._attach(name if name.endswith(".txt") else name + ".txt", text.encode(), "txt")


from t2i_fairness.gating.session import ARTIFACT, SECTION  # noqa: E402  (the report properties' names)


class Reporter:
    """What a test shows people besides its verdict: summary tables and attached artifacts (carried to
    the controller in the item's ``user_properties``).
    """

    def __init__(self, node, artifacts: Artifacts):
        self._node = node
        self.artifacts = artifacts
        self._evidence: list[Callable[[], Mapping[str, bytes]]] = []

    def on_failure(self, make: Callable[[], Mapping[str, bytes]]) -> None:
        """Evidence drawn only if this test's gate fails: ``make()`` returns ``{file name: PNG bytes}``
        (or a JSON-able object for a ``.json`` name)
        (the gate calls :meth:`draw_evidence` before it fails the test), attached like :meth:`png`."""
        self._evidence.append(make)

    def draw_evidence(self) -> list[str]:
        """Draw and attach the registered evidence (once); returns the names written. A drawing that
        raises is recorded as ``evidence_error.json`` and never hides the gate's own failure."""
        makers, self._evidence = self._evidence, []
        names = []
        for make in makers:
            try:
                for name, data in make().items():
                    (self.json if name.endswith(".json") else self.png)(name, data)
                    names.append(name)
            except Exception as exc:  # noqa: BLE001  (evidence is a courtesy; the verdict stands without it)
                self.json("evidence_error", {"error": f"{type(exc).__name__}: {exc}"})
        return names

    def section(self, title: str, lines: list[str]) -> None:
        """A block printed in the terminal summary under ``title`` (the last one per title wins)."""
        self._node.user_properties.append((SECTION, json.dumps({"title": title, "lines": [str(x) for x in lines]})))

    def json(self, name: str, obj) -> None:
        self._written(self.artifacts.json(name, obj))

    def png(self, name: str, data_or_figure) -> None:
        self._written(self.artifacts.png(name, data_or_figure))

    def _written(self, path) -> None:  # the controller's HTML report inlines the files of this run
        self._node.user_properties.append((ARTIFACT, json.dumps({"nodeid": self._node.nodeid, "path": f"{path.parent.name}/{path.name}"})))
