"""Markers the plugin registers from the Family records: family, region, language and template.

``-m`` selects exactly where ``-k`` matches substrings: ``-k east_asia`` also selects
``southeast_asia``, ``-m region_east_asia`` does not; ``-k cis`` also selects ``*precision*``,
``-m family_cis`` does not.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


# Every selection these tests check, collected in one child Python (one start-up and one import of the
# suite instead of one per selection): pytest.main once per selection, the node ids it kept printed as JSON.
SELECTIONS = {
    "all": [], "east_asia_dig_in": ["-m", "region_east_asia and family_dig_in"], "k_east_asia": ["-k", "east_asia"],
    "family_cis": ["-m", "family_cis"], "k_cis": ["-k", "cis"], "hin": ["-m", "language_hin_deva"],
    "country": ["-m", "template_object_in_country"],
}
COLLECTOR = """
import json, sys
import pytest

class Kept:
    ids = None
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]

found = {}
for name, args in json.loads(sys.argv[1]).items():
    kept = Kept()
    rc = pytest.main(["fairness_tests", "--collect-only", "-q", "-p", "no:cacheprovider", "--strict-markers", *args],
                     plugins=[kept])
    found[name] = [int(rc), kept.ids]
print("T2I-IDS " + json.dumps(found))
"""


def collect_all() -> dict[str, list[str]]:
    """Node ids the repository's suite collects with each of SELECTIONS (no test runs)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", COLLECTOR, json.dumps(SELECTIONS)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=env)
    line = next((x for x in done.stdout.splitlines() if x.startswith("T2I-IDS ")), None)
    assert done.returncode == 0 and line, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(line[len("T2I-IDS "):])
    for name, (rc, ids) in found.items():
        assert rc in (0, 5) and ids is not None, (name, rc, done.stdout[-3000:])
    return {name: ids for name, (rc, ids) in found.items()}


@pytest.fixture(scope="module")
def selections() -> dict[str, list[str]]:
    return collect_all()


@pytest.fixture(scope="module")
def suite(selections) -> list[str]:
    return selections["all"]


def test_region_and_family_markers_select_exactly(suite, selections):
    picked = selections["east_asia_dig_in"]
    expected = [n for n in suite if n.startswith("fairness_tests/test_dig_in_")
                and re.search(r"[\[-]east_asia[\]-]", n)]
    assert picked == expected and len(picked) > 10
    assert not any("southeast_asia" in n for n in picked)
    assert any("southeast_asia" in n for n in selections["k_east_asia"])  # what -k would have added


def test_family_marker_is_the_paper_not_a_substring(suite, selections):
    picked = selections["family_cis"]
    assert picked == [n for n in suite if n.startswith("fairness_tests/test_cis.py::")] and picked
    assert any("precision" in n for n in selections["k_cis"])  # -k cis matches *precision*


def test_language_and_template_markers(suite, selections):
    hin = selections["hin"]
    assert hin and all("[hin_deva" in n.lower() or "-hin_deva" in n.lower() for n in hin)
    assert hin == [n for n in suite if re.search(r"[\[-]hin_deva[\]-]", n.lower())]
    country = selections["country"]
    assert country and all("object_in_country" in n for n in country)


def test_markers_are_registered_under_strict_markers():
    done = subprocess.run([sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    for name in ("family_dig_in", "family_indic_tti", "region_africa", "region_southeast_asia", "language_hin_deva",
                 "template_regional_adjective"):
        assert f"@pytest.mark.{name}:" in done.stdout
