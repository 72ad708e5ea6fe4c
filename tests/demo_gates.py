"""The small region-parametrized gate file that the plugin tests write into pytester projects."""

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
