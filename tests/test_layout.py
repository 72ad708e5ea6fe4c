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


def test_every_suite_function_is_at_most_15_lines():
    """A suite file reads like its paper's claims: every function in ``fairness_tests/`` (fixtures and nested
    functions too) is at most 15 lines from its ``def`` to its end, decorators excluded; tables, figures and the
    paper's figures live in the family's ``report.py``."""
    import ast

    long = {}
    for path in sorted((REPO / "fairness_tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 15:
                long[f"{path.name}:{node.lineno} {node.name}"] = node.end_lineno - node.lineno + 1
    assert not long, f"suite functions over 15 lines: {long}"


def test_no_suite_file_reaches_into_an_indicators_study():
    """A gate test hands its indicator to its family's report functions (``report_*(ind, ..., t2i_report)``),
    which read the study it was measured on; the suite itself never reads ``ind.at``."""
    import ast

    found = [f"{path.name}:{node.lineno}" for path in sorted((REPO / "fairness_tests").glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute) and node.attr == "at"]
    assert not found, found


def _gate_tests(family) -> dict[str, "object"]:
    import ast

    out = {}
    for module in family.suite_modules:
        tree = ast.parse((REPO / "fairness_tests" / f"{module}.py").read_text())
        out.update({f.name: f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")
                    and "gate" in [a.arg for a in f.args.args]})
    return out


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_every_gate_test_reads_its_studys_indicator_of_its_name_and_carries_no_sequential_machinery(family):
    """A gate's number comes from its study (one home): ``test_<method>`` calls ``<fixture>.<method>(...)``, an
    indicator method (``families.base.indicator``) whose kind the study declares; the round loop of
    ``--t2i-sequential`` finds it by that name, so no table keyed by test names exists, and a gate test
    passes no sequential argument (``sweeps=``) and knows nothing of rounds."""
    import ast

    from t2i_fairness.families.base import indicator_methods

    assert family.study_type is not None, family.name
    methods = indicator_methods(family.study_type())
    for name, fn in _gate_tests(family).items():
        method = name.removeprefix("test_")
        assert method in methods, f"{family.name}: {name} has no indicator method {method!r}"
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == method and isinstance(n.func.value, ast.Name) and n.func.value.id == family.fixture]
        assert calls, f"{family.name}: {name} does not read {family.fixture}.{method}(...)"
        names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {
            n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)} | {
            k.arg for n in ast.walk(fn) if isinstance(n, ast.Call) for k in n.keywords}
        banned = {"sweeps", "sequential", "round_loop", "rounds", "look", "probing", "Probed", "stopped"}
        assert not names & banned, (name, names & banned)


def test_a_family_with_look_plans_its_studys_looks_unless_it_gives_rounds():
    from types import SimpleNamespace

    from t2i_fairness.families.base import Family, indicator

    with pytest.raises(ValueError, match="needs look= with rounds="):
        Family("x", "X", "p", (), "x", lambda b, o: None, rounds=lambda s: ([1, 2], "images"))
    study = SimpleNamespace(planned_looks=lambda: ([2, 4], "prompts"))
    assert Family("x", "X", "p", (), "x", lambda b, o: None, look=lambda s, n: s).rounds(study) == ([2, 4], "prompts")
    given = Family("x", "X", "p", (), "x", lambda b, o: None, look=lambda s, n: s, rounds=lambda s: ([1, 2], "images"))
    assert given.rounds(study) == ([1, 2], "images") and Family("x", "X", "p", study=print).rounds is None
    with pytest.raises(ValueError, match="unknown indicator kind"):
        indicator("mean")


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
    text = text[text.index("### Presets"):]  # the presets table (a flag without a metavar has a row above too)
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


# -- the house: layers only point down; adding a paper touches its folder, its suite module, its
# -- thresholds and one registration line ---------------------------------------------------------

def test_no_room_imports_a_room_above_it_and_every_room_is_on_a_floor():
    """bench/house.py's map (grimp over the package and the suite's two folders, read from the source
    tree) against the layers contract of pyproject.toml: every room has a floor, no arrow runs up, and
    the suite's fixtures and gate modules are in the graph (an editable install hides them)."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import house
    finally:
        sys.path.remove(str(REPO / "bench"))
    layers = house.layers_of_contract()
    assert layers and layers[0] == ["fairness_tests"] and layers[-1] == ["errors"], layers
    floor = {name: depth for depth, layer in enumerate(layers) for name in layer}
    arrows = house.arrows(set())
    rooms = {room for pair in arrows for room in pair}
    assert {"fixtures", "fairness_tests", "base", "spine", "canaries", "runstate"} <= rooms, sorted(rooms)
    assert rooms <= set(floor), sorted(rooms - set(floor))
    up = [f"{a} -> {b}: {examples[0]}" for (a, b), examples in arrows.items() if floor[b] < floor[a]]
    assert not up, up
    assert ("fixtures", "plugin") not in arrows  # the fixtures read the run's state from runstate, not the plugin


THROWAWAY = {
    "families/brightness/__init__.py": '''"""Brightness (a throwaway paper made by tests/test_layout.py): mean image brightness per colour word."""

from t2i_fairness.families.base import Family, Parameters
from t2i_fairness.families.brightness.options import OPTIONS, resolve


def _study(bench, options):
    from t2i_fairness.families.brightness.study import BrightnessStudy

    return BrightnessStudy(bench, options)


def _parameters(names, core, options):
    if "colour" not in names:
        return []
    return [Parameters(("colour",), [(c,) for c in options.colours], list(options.colours))]


FAMILY = Family(name="brightness", title="Brightness", paper="A throwaway paper (tests/test_layout.py)",
                suite_modules=("test_brightness",), fixture="brightness", study=_study, options=OPTIONS,
                resolve=resolve, parameters=_parameters)
''',
    "families/brightness/options.py": '''from dataclasses import dataclass

from t2i_fairness.spine.options import Option

OPTIONS = (Option("--t2i-brightness-colours", "colour words to prompt", default="red,blue"),)


@dataclass(frozen=True)
class BrightnessOptions:
    colours: tuple


def resolve(values, core):
    return BrightnessOptions(tuple(values("--t2i-brightness-colours").split(",")))
''',
    "families/brightness/study.py": '''import numpy as np

from t2i_fairness.families.base import Study


class BrightnessStudy(Study):
    def __init__(self, bench, options):
        super().__init__(bench)
        self.options = options

    def brightness(self, colour):
        def make():
            rows = self.bench.images([f"a {colour} bag"])
            return [float(np.asarray(ref.load()).mean()) / 255 for row in rows for ref in row]

        return self._once(("brightness", colour), make)
''',
    "families/brightness/report.py": '''def line(values):
    return f"{len(values)} images, mean brightness {sum(values) / len(values):.3f}"
''',
    "fairness_tests/test_brightness.py": '''"""Brightness: an image of a colour is not too dark."""

from t2i_fairness.families.brightness.report import line


def test_brightness(brightness, colour, gate, t2i_report):
    values = brightness.brightness(colour)
    t2i_report.section(f"brightness of {colour}", [line(values)])
    gate(sum(values) / len(values), n=len(values))
''',
}


def test_adding_a_paper_is_its_folder_its_suite_module_its_thresholds_and_one_registration_line(tmp_path):
    """A copy of the repository gets a throwaway family (docs/adding-a-paper.md's recipe): the files it
    touches outside its folder are counted, the wheel is built from the copy (pyproject.toml lists no
    package: the new folder ships by discovery) and installed, and its gates run, propose, update and pass."""
    import difflib
    import shutil

    repo = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in ("plugin", "fixtures", "fairness_tests"):
        shutil.copytree(REPO / folder, repo / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, repo / name)
    before = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    pkg = repo / "plugin" / "t2i_fairness"
    for rel, text in THROWAWAY.items():
        path = repo / rel if rel.startswith("fairness_tests/") else pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    registry = pkg / "families" / "__init__.py"
    old = registry.read_text()
    registry.write_text(old.replace('    "indic_tti",\n', '    "indic_tti",\n    "brightness",\n'))  # the one line

    after = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    own = ("plugin", "t2i_fairness", "families", "brightness")
    touched = sorted(str(p) for p in after if before.get(p) != after[p] and p.parts[:4] != own)
    assert touched == ["fairness_tests/test_brightness.py", "plugin/t2i_fairness/families/__init__.py"], touched
    diff = [d for d in difflib.unified_diff(old.splitlines(), registry.read_text().splitlines(), lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    assert diff == ['+    "brightness",'], diff

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(repo)], check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("t2i_fairness-*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    pkg = site / "t2i_fairness"
    assert {"__init__.py", "options.py", "study.py", "report.py"} <= {p.name for p in (pkg / "families" / "brightness").iterdir()}
    assert (pkg / "fairness_tests" / "test_brightness.py").is_file()

    work = tmp_path / "team-repo"
    work.mkdir()
    (work / "flatgen.py").write_text(
        "from PIL import Image\n\n\nclass Flat:\n    fingerprint = 'layoutfake:v1'\n\n"
        "    def generate(self, prompts, seeds):\n"
        "        return [Image.new('RGB', (16, 16), (len(p) * 9 % 256, s % 251, 90)) for p, s in zip(prompts, seeds)]\n\n\n"
        "def make():\n    return Flat()\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(work)]), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    args = [sys.executable, "-m", "pytest", "--pyargs", "t2i_fairness.fairness_tests.test_brightness", "-p",
            "no:cacheprovider", "-q", "--t2i-model", "python:flatgen:make", "--t2i-images-per-prompt", "4",
            "--t2i-no-progress", "--t2i-thresholds", "thresholds/flat.yaml"]

    def run(*extra):
        return subprocess.run(args + list(extra), cwd=work, env=env, capture_output=True, text=True, timeout=600)

    where = subprocess.run([sys.executable, "-c", "import t2i_fairness.families as f; print(f.__file__, f.REGISTERED[-1])"],
                           cwd=work, env=env, capture_output=True, text=True)
    assert where.stdout.startswith(str(pkg)) and where.stdout.split()[-1] == "brightness", where.stdout + where.stderr
    first = run()
    out = first.stdout + first.stderr
    assert first.returncode == 1 and "2 failed" in out and "2 gates, 2 failed" in out, out[-3000:]
    update = run("--t2i-update-thresholds")
    assert update.returncode == 0, (update.stdout + update.stderr)[-3000:]
    written = (work / "thresholds" / "flat.yaml").read_text()
    assert "test_brightness[red]:" in written and "test_brightness[blue]:" in written, written
    again = run("--t2i-brightness-colours", "red,blue")
    assert again.returncode == 0 and "2 passed" in again.stdout and "2 gates, 0 failed" in again.stdout, again.stdout[-3000:]


def test_no_bench_defines_a_function_under_a_metrics_functions_name():
    """A bench measures the product's rules by calling them (``t2i_fairness.metrics``); a function of its own under
    a public name of ``metrics`` is a second copy of that rule (or reads as one)."""
    import ast

    metrics = REPO / "plugin" / "t2i_fairness" / "metrics"

    def defined(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}

    public = {name for path in metrics.glob("*.py") for name in defined(path) if not name.startswith("_")}
    shadows = {path.name: sorted(defined(path) & public) for path in sorted((REPO / "bench").glob("*.py"))}
    assert not {k: v for k, v in shadows.items() if v}, shadows


#: what reads a sequential record by string key (a look is a typed record: read its attributes)
_LOOK_KEYS = ("reason", "alpha_share", "p_sequential", "earlier_looks_p", "share_of_planned", "gate_level",
              "futility_limit", "futility_miss", "futility_beta", "conditional_power", "curtail_miss", "curtail_gamma",
              "open_groups", "cleared_groups")
STRING_KEYED_LOOK = re.compile(r"""\bseq\[|\bseq\.get\(|sequential["']\]\[|sequential["']\)\.get\(|"""
                               r"""\[["'](""" + "|".join(_LOOK_KEYS) + r""")["']\]|\.get\(["'](""" + "|".join(_LOOK_KEYS)
                               + r""")["']""")


def test_no_sequential_record_is_read_by_string_key():
    """Reports, fixtures and benches read a sequential look's attributes (gating.sequential.look.Look); only its
    serialization to and from run.json (gating/sequential/look.py) names its keys."""
    offenders = []
    for root in (PKG, REPO / "fixtures", REPO / "bench"):
        for path in sorted(root.rglob("*.py")):
            if path == PKG / "gating" / "sequential" / "look.py":
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if STRING_KEYED_LOOK.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_gating_imports_no_family_and_names_none():
    """Gating is shared by every paper: what is a paper's own (its null image shares, its test's effect) is declared
    on its Family record or in a data file in its folder, never keyed by a family's name in gating."""
    quoted = "|".join(re.escape(f.name) for f in FAMILIES)
    names = re.compile(rf"""^\s*(from|import)\s+t2i_fairness\.(families|metrics\.cis)\b|["']({quoted})["']""")
    offenders = []
    for path in sorted((PKG / "gating").rglob("*.py")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if names.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)

# -- one job per module: none over 1,000 lines -----------------------------------------------------

MAX_MODULE_LINES = 1000


def test_no_module_of_the_plugin_is_over_a_thousand_lines():
    sizes = {str(p.relative_to(PKG)): len(p.read_text(encoding="utf-8").splitlines()) for p in PKG.rglob("*.py")}
    over = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (give each job its own module): {over}"


#: history in code: an issue number, a stop, a commit id, a measurement's date and machine (they belong in git and docs/)
HISTORY = re.compile(r"""(?i)\bissues?\s+#?\d+|(?<![\w&"'=:-])#[1-9]\d?\b(?![0-9a-f])|\bstops?\s+\d+\b|\bfinding\s+\d+\s+of\b"""
                     r"""|\b(?:commit|main|at|on)\s+(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b""")


def test_no_history_in_code():
    """Code says what and why; which issue, stop or commit it came from lives in git and docs/."""
    offenders = []
    for root in (PKG, REPO / "fixtures", REPO / "fairness_tests"):
        for path in sorted(root.rglob("*.py")):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if HISTORY.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_docstrings_are_at_most_a_fifth_of_the_plugin():
    """Docstrings say what and why in a few lines, with Args and an example where they teach; essays and
    rationale go to docs/. Counted as the lines of every module, class and function docstring."""
    import ast

    total = doc = 0
    for path in PKG.rglob("*.py"):
        source = path.read_text()
        total += len(source.splitlines())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                    doc += first.end_lineno - first.lineno + 1
    assert doc <= 0.2 * total, f"docstrings are {doc} of {total} plugin lines ({doc / total:.1%} > 20%)"
