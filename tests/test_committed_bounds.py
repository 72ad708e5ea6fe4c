"""A fresh clone's own bounds are current: every gate of the committed ``thresholds/tiny.yaml`` names the
settings the default run (``make gate``, no flags) measures under, so that run prints no "set under other
settings" warning. The default run's provenance is computed as the run computes it (the workbench's, then
each family study's own, :func:`t2i_fairness.gating.gate.gate_provenance`), without generating an image."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

from t2i_fairness.families import FAMILIES, family_of_module
from t2i_fairness.gating.gate import gate_provenance
from t2i_fairness.gating.thresholds import ThresholdFile
from t2i_fairness.gating.verdicts import provenance_diff
from t2i_fairness.spine.options import resolve_options

REPO = Path(__file__).resolve().parents[1]


def _default_options(cache: Path):
    import dataclasses

    options = resolve_options(lambda flag: {"--t2i-reference": []}.get(flag), rootdir=REPO, invocation_dir=REPO,
                              families=FAMILIES)
    return dataclasses.replace(options, cache_dir=cache)  # planning's look-only cache: nothing is written


def _family_of_gate() -> dict[str, str]:
    """Test function name -> the family whose suite module defines it."""
    out = {}
    for path in (REPO / "fairness_tests").glob("test_*.py"):
        family = family_of_module(f"fairness_tests.{path.stem}")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and family is not None:
                out[node.name] = family.name
    return out


def test_the_committed_tiny_bounds_name_the_default_runs_settings(tmp_path):
    from t2i_fairness.base import identity
    from t2i_fairness.spine.workbench import Workbench

    options = _default_options(tmp_path / "cache")
    assert options.model == "tiny" and Path(options.thresholds) == REPO / "thresholds" / "tiny.yaml"
    bench = Workbench(options, read_only=True)
    if identity.device_class(bench.device) != "cpu":
        pytest.skip(f"the committed bounds are the CPU smoke run's; this machine's default device is {bench.device}")
    studies = {f.name: f.study(bench, options.family(f.name)) for f in FAMILIES}
    own = {name: (s.provenance() if hasattr(s, "provenance") else None) for name, s in studies.items()}
    thresholds = ThresholdFile.load(options.thresholds)
    families = _family_of_gate()
    differing: collections.Counter = collections.Counter()
    for gate, bound in thresholds.gates.items():
        family = families.get(gate.split("[", 1)[0])
        assert family is not None, f"{gate}: no gate function of fairness_tests/ has this name"
        current = gate_provenance(bench.provenance(), own[family])
        for name, (old, new) in provenance_diff(thresholds.provenances.get(bound.provenance), current).items():
            differing[f"{name}: {old} -> {new}"] += 1
    assert not differing, (
        f"{sum(1 for _ in thresholds.gates)} gates in {options.thresholds}; settings that differ from the default "
        f"run's (gates): {dict(differing)}; re-measure them with `make gate ARGS=--t2i-update-thresholds` and review")
