"""Map the house: every room -> room import arrow of t2i_fairness, from grimp's import graph.

A *room* is a sub-package of ``t2i_fairness`` (``t2i_fairness.gating``), a top-level module
(``t2i_fairness.plugin``), or one module of a package listed in ``SPLIT`` (the spine's and the base's
modules, which are rooms of their own). The suite's two folders, which the package maps in as
``t2i_fairness.fixtures`` and ``t2i_fairness.fairness_tests``, are read from the source tree (an
editable install hides them from grimp, which walks ``plugin/t2i_fairness`` only) and counted as the
rooms ``fixtures`` and ``fairness_tests``.

Run from the repository root::

    .venv/bin/python bench/house.py            # arrows, with the ones that run up marked
    .venv/bin/python bench/house.py --up       # only the arrows that run up (exit 1 if any)

"Up" is judged against the layers contract of ``pyproject.toml`` (the ``type = "layers"`` one).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]
ROOT = "t2i_fairness"
SUITE = ("fixtures", "fairness_tests")


def room_of(module: str, split: set[str]) -> str:
    """The room of a module: ``t2i_fairness.spine.plan`` -> ``spine.plan``, ``fixtures.core`` -> ``fixtures``."""
    parts = module.split(".")
    if parts[0] in SUITE:
        return parts[0]
    parts = parts[1:]
    if not parts:
        return "__init__"
    if parts[0] in split and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def layers_of_contract() -> list[list[str]]:
    """The layers of pyproject's layers contract, top first, each a list of rooms (names without the root)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract.get("type") == "layers":
            layers = []
            for layer in contract["layers"]:
                names = [n.strip(" ()") for n in layer.replace("|", ":").split(":")]
                layers.append([n[len(ROOT) + 1:] if n.startswith(ROOT + ".") else n for n in names])
            return layers
    return []


def arrows(split: set[str]) -> dict[tuple[str, str], list[str]]:
    """Room -> room arrows, each with one example import ``importer -> imported``."""
    sys.path.insert(0, str(REPO))  # the suite's folders, as top-level packages of the source tree
    try:
        graph = grimp.build_graph(ROOT, *SUITE, cache_dir=None)
    finally:
        sys.path.remove(str(REPO))
    found: dict[tuple[str, str], list[str]] = {}
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = room_of(importer, split), room_of(imported, split)
            if a != b and b != "__init__":
                found.setdefault((a, b), []).append(f"{importer} -> {imported}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--up", action="store_true", help="print only the arrows that run up; exit 1 if any")
    parser.add_argument("--split", default="spine,base", help="packages whose modules are rooms of their own")
    args = parser.parse_args(argv)
    split = set(args.split.split(","))
    layers = layers_of_contract()
    floor = {}
    for depth, layer in enumerate(layers):
        for name in layer:
            floor[name] = depth

    def depth(room: str) -> int | None:
        while room:
            if room in floor:
                return floor[room]
            room = room.rpartition(".")[0]
        return None

    up = 0
    for (a, b), examples in sorted(arrows(split).items()):
        da, db = depth(a), depth(b)
        mark = ""
        if da is not None and db is not None and db < da:
            mark, up = "  UP", up + 1
        elif da is None or db is None:
            mark = "  (room not in the layers contract)"
        if mark or not args.up:
            print(f"{a} -> {b}{mark}   e.g. {examples[0]}")
    print(f"{up} arrow(s) run up" + ("" if layers else " (no layers contract in pyproject.toml)"))
    return 1 if args.up and up else 0


if __name__ == "__main__":
    sys.exit(main())
