"""Markers the plugin registers from the Family records: family, region, language and template.

``-m`` selects exactly where ``-k`` matches substrings: ``-k east_asia`` also selects
``southeast_asia``, ``-m region_east_asia`` does not; ``-k cis`` also selects ``*precision*``,
``-m family_cis`` does not.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def collect(*args: str) -> list[str]:
    """Node ids the repository's suite collects with these arguments (no test runs)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "fairness_tests", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--strict-markers", *args], cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.fixture(scope="module")
def suite() -> list[str]:
    return collect()


def test_region_and_family_markers_select_exactly(suite):
    picked = collect("-m", "region_east_asia and family_dig_in")
    expected = [n for n in suite if n.startswith("fairness_tests/test_dig_in_")
                and re.search(r"[\[-]east_asia[\]-]", n)]
    assert picked == expected and len(picked) > 10
    assert not any("southeast_asia" in n for n in picked)
    assert any("southeast_asia" in n for n in collect("-k", "east_asia"))  # what -k would have added


def test_family_marker_is_the_paper_not_a_substring(suite):
    picked = collect("-m", "family_cis")
    assert picked == [n for n in suite if n.startswith("fairness_tests/test_cis.py::")] and picked
    assert any("precision" in n for n in collect("-k", "cis"))  # -k cis matches *precision*


def test_language_and_template_markers(suite):
    hin = collect("-m", "language_hin_deva")
    assert hin and all("[hin_deva" in n.lower() or "-hin_deva" in n.lower() for n in hin)
    assert hin == [n for n in suite if re.search(r"[\[-]hin_deva[\]-]", n.lower())]
    country = collect("-m", "template_object_in_country")
    assert country and all("object_in_country" in n for n in country)


def test_markers_are_registered_under_strict_markers():
    done = subprocess.run([sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    for name in ("family_dig_in", "family_indic_tti", "region_africa", "region_southeast_asia", "language_hin_deva",
                 "template_regional_adjective"):
        assert f"@pytest.mark.{name}:" in done.stdout
