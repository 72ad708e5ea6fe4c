"""The house rules of the layout: one folder per paper with the same shape, one registration list,
every option registered by the plugin, one preset table, the plugin switchable off."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from t2i_fairness.families import FAMILIES, REGISTERED, family_of_module
from t2i_fairness.plugin import all_options
from t2i_fairness.spine.options import CORE_OPTIONS, preset_table

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "plugin" / "t2i_fairness"


@pytest.mark.parametrize("name", REGISTERED)
def test_every_family_folder_has_the_same_shape(name):
    folder = PKG / "families" / name
    assert {"__init__.py", "options.py", "study.py", "report.py"} <= {p.name for p in folder.glob("*.py")}
    family = importlib.import_module(f"t2i_fairness.families.{name}").FAMILY
    assert family.name == name and family.fixture and family.title and family.paper
    for module in family.suite_modules:
        assert (REPO / "fairness_tests" / f"{module}.py").is_file(), f"{name}: no fairness_tests/{module}.py"
        assert family_of_module(f"fairness_tests.{module}") is family


def test_every_gate_module_of_the_suite_belongs_to_one_family():
    modules = sorted(p.stem for p in (REPO / "fairness_tests").glob("test_*.py"))
    owners = {m: [f.name for f in FAMILIES if m in f.suite_modules] for m in modules}
    assert all(len(names) == 1 for names in owners.values()), owners


def test_family_study_fixtures_are_distinct_and_options_are_unique():
    fixtures = [f.fixture for f in FAMILIES]
    assert len(set(fixtures)) == len(fixtures)
    flags = [o.flag for o in all_options()]
    assert len(set(flags)) == len(flags), sorted({f for f in flags if flags.count(f) > 1})


def test_no_default_depends_on_the_model_name_outside_the_preset_table():
    """The five ``== "tiny"`` switches of old are gone: a default that depends on the run's scale is a
    preset value of its option, nowhere else."""
    offenders = []
    for path in list(PKG.rglob("*.py")) + list((REPO / "fixtures").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r'(model|--t2i-model"\)) == "tiny"', text):
            offenders.append(f"{path.relative_to(REPO)}:{text[:match.start()].count(chr(10)) + 1}")
    # preset_of, and the smoke-model banners of the header and the HTML report (not defaults)
    allowed = {"plugin/t2i_fairness/spine/options.py", "plugin/t2i_fairness/plugin.py", "plugin/t2i_fairness/report/html.py"}
    assert all(o.split(":")[0] in allowed for o in offenders), offenders


def test_readme_preset_table_is_the_code_s():
    """The preset table (moved from the README to docs/options.md, where ``make docs`` writes it)."""
    text = (REPO / "docs" / "options.md").read_text(encoding="utf-8")
    for flag, smoke, paper in preset_table(all_options()):
        row = re.search(rf"^\| `{re.escape(flag)}` \| ([^|]*) \| ([^|]*) \|", text, flags=re.M)
        assert row, f"docs/options.md's preset table lacks {flag} (run `make docs`)"
        assert (row.group(1).strip(), row.group(2).strip()) == (smoke, paper), (flag, row.groups())


def test_every_option_is_in_pytest_help_and_in_the_readme():
    out = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=REPO,
                         capture_output=True, text=True, timeout=300).stdout
    readme = (REPO / "docs" / "options.md").read_text(encoding="utf-8")  # the options table left the README
    missing_help = [o.flag for o in all_options() if o.flag not in out]
    missing_doc = [o.flag for o in all_options() if f"`{o.flag}" not in readme]
    assert not missing_help and not missing_doc, (missing_help, missing_doc)
    assert all(o.flag.startswith("--t2i-") for o in CORE_OPTIONS)


def test_the_plugin_can_be_switched_off():
    """``-p no:t2i_fairness`` runs unrelated tests without an internal error (and ``--help`` still works)."""
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:t2i_fairness", "-p", "no:cacheprovider", "-q",
                          "tests/test_stats.py", "-k", "hoeffding"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "INTERNALERROR" not in run.stdout + run.stderr and " passed" in run.stdout
    helped = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:t2i_fairness", "--help"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert helped.returncode == 0 and "--t2i-model" not in helped.stdout
