"""The small region-parametrized gate file that the plugin tests write into pytester projects, and
the project those tests build around it."""

from pathlib import Path

import pytest

GATE_FILE = """
import numpy as np
import pytest

from t2i_fairness.vocab.geode import GEODE_REGIONS, geode_prompts


@pytest.mark.parametrize("region", [r.slug for r in GEODE_REGIONS],
                         ids=[f"object_in_region-{r.slug}" for r in GEODE_REGIONS])
def test_brightness(region, t2i, gate):
    prompts = [p.text for p in geode_prompts("object_in_region", t2i.options.objects, [region])]
    values = [float(np.asarray(ref.load()).mean()) / 255 for row in t2i.images(prompts) for ref in row]
    gate(sum(values) / len(values), n=len(values))
"""

#: flags every in-process demo run needs
RUN_FLAGS = ["--t2i-no-progress", "-p", "no:cacheprovider",
             # its gc.collect() at exit walks all of torch's objects: ~1 s per in-process run
             "-p", "no:unraisableexception",
             # in-process runs import t2i_fairness before the inner session marks the plugin for assertion rewriting
             "-W", "ignore::pytest.PytestAssertRewriteWarning"]


class DemoProject:
    """A pytester folder with the gate file, the fake generator (``python:fakegen:make``), a cache and a
    thresholds file; ``args`` are the run's own options (model, objects, sizes, selection)."""

    def __init__(self, pytester: pytest.Pytester, *args: str):
        self.pytester = pytester
        pytester.makepyfile(test_gates_demo=GATE_FILE)
        pytester.makepyfile(fakegen=(Path(__file__).resolve().parent / "fakegen.py").read_text())
        pytester.syspathinsert()
        self.thresholds = pytester.path / "t.yaml"
        self.cache = pytester.path / "cache"
        self.args = [*args, "--t2i-thresholds", str(self.thresholds), "--t2i-cache-dir", str(self.cache), *RUN_FLAGS]

    def run(self, *extra: str) -> pytest.RunResult:
        return self.pytester.runpytest(*self.args, *extra)
