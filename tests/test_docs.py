"""The docs the code checks (issue 22, item 3).

- ``docs/options.md``'s options table is generated from the ``Option`` records; a stale committed
  table fails here and names the command that rewrites it (``make docs``).
- Defaults live once, in the records: ``T2IOptions()`` is what the resolver makes of an empty command
  line, field by field; no ``getattr(options, name, default)`` states one a second time.
- Every relative link of ``README.md`` and ``docs/*.md`` points to an existing file (and heading), and the
  README stays short (at most 1,500 words).
- The commands of the docs' fenced shell blocks use options that exist and parse (through the real
  parsers); those that can run offline at smoke size run, reduced (``--collect-only``, ``make -n``, the
  plan command); those that need real data, a GPU or a cluster are listed as skipped with the reason.
  Inline ``pytest``/``make``/``t2i-fairness`` commands parse too, every ``--t2i-*`` flag the docs name
  exists, and every ``make`` target they name is the Makefile's.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from t2i_fairness.cli import build_parser, main, options_markdown
from t2i_fairness.plugin import all_options
from t2i_fairness.spine.options import (CORE_OPTIONS, DOCS_COMMAND, OPTIONS_BEGIN, OPTIONS_END, T2IOptions,
                                        replace_generated, resolve_options)

REPO = Path(__file__).resolve().parents[1]
OPTIONS_DOC = REPO / "docs" / "options.md"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


# ------------------------------------------------------------------------------ the options table


def test_the_options_table_is_generated_from_the_option_records():
    text = OPTIONS_DOC.read_text(encoding="utf-8")
    expected = replace_generated(text, options_markdown(), where="docs/options.md")
    if text != expected:
        diff = "\n".join(list(difflib.unified_diff(text.splitlines(), expected.splitlines(), "committed", "generated",
                                                   lineterm=""))[:60])
        pytest.fail(f"docs/options.md's options table differs from the Option records: run `{DOCS_COMMAND}` "
                    f"(t2i-fairness options --write docs/options.md) and commit it\n{diff}")


def test_every_option_has_one_row_with_its_default():
    text = OPTIONS_DOC.read_text(encoding="utf-8")
    table = text[text.index(OPTIONS_BEGIN):text.index("### Presets")]  # the preset table repeats some flags
    for option in all_options():
        rows = [line for line in table.splitlines() if line.startswith(f"| `{option.flag}")
                and line[len(option.flag) + 3] in " `"]
        assert len(rows) == 1, (option.flag, rows)
    # the findings of issue 22, each a row of the generated table now
    assert "| `--t2i-gate significant\\|point` | `significant` |" in table
    for flag in ("--t2i-alpha", "--t2i-multiplicity", "--t2i-inconclusive", "--t2i-bound-level", "--t2i-canary",
                 "--t2i-plan-samples"):
        assert f"| `{flag} " in table, flag
    update = next(line for line in table.splitlines() if line.startswith("| `--t2i-update-thresholds`"))
    assert "write measured values" not in update and "estimate minus" in update
    batch = next(line for line in table.splitlines() if line.startswith("| `--t2i-batch-size"))
    assert "32 for images: manifests" in batch


def test_a_stale_table_is_found_and_rewritten_by_the_docs_command(tmp_path, capsys):
    stale = tmp_path / "options.md"
    stale.write_text(f"intro\n{OPTIONS_BEGIN}\n| `--t2i-gate point` | `point` | old |\n{OPTIONS_END}\nafter\n")
    assert main(["options", "--check", str(stale)]) == 1
    assert f"run `{DOCS_COMMAND}`" in capsys.readouterr().err
    assert main(["options", "--write", str(stale)]) == 0
    assert main(["options", "--check", str(stale)]) == 0
    rewritten = stale.read_text()
    assert rewritten.startswith("intro\n") and rewritten.endswith("\nafter\n") and "`point` | old" not in rewritten
    no_markers = tmp_path / "plain.md"
    no_markers.write_text("no table here\n")
    assert main(["options", "--write", str(no_markers)]) == 2  # a usage error naming the file
    assert "plain.md: no generated options table" in capsys.readouterr().err


def test_the_make_target_runs_the_docs_command():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    target = re.search(r"^docs:.*;(.*)$", makefile, flags=re.M)
    assert target and "t2i_fairness.cli options --write docs/options.md" in target.group(1)
    assert re.search(r"^\.PHONY:.*\bdocs\b", makefile, flags=re.M)  # docs/ is a folder: make needs to be told


# ------------------------------------------------------------------------------ defaults live once


def test_t2i_options_defaults_are_the_records():
    """``T2IOptions()`` equals the resolver's reading of an empty command line, field by field (the defaults
    are stated once, in the Option records; any field that states its own default differently fails here)."""
    made = resolve_options(lambda flag: None, rootdir=".", invocation_dir=".")
    default = T2IOptions()
    differ = {f.name: (getattr(default, f.name), getattr(made, f.name)) for f in dataclasses.fields(T2IOptions)
              if f.name != "families" and getattr(default, f.name) != getattr(made, f.name)}
    assert not differ, f"T2IOptions() vs the records' defaults: {differ}"
    # the two fallbacks issue 22 found disagreeing with the records
    assert (default.balance_per_group, default.balance_seed) == (180, 42)


def test_no_getattr_fallback_on_the_options():
    """``getattr(options, name, default)`` states a default a second time (two disagreed with the records)."""
    pattern = re.compile(r"getattr\(\s*(options|o|opts|core|self\.options|self\.bench\.options|bench\.options)\s*,"
                         r"\s*\"[a-z_]+\"\s*,")
    offenders = []
    for path in list((REPO / "plugin" / "t2i_fairness").rglob("*.py")) + list((REPO / "fixtures").glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, offenders


# ------------------------------------------------------------------------------ links


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*|_(?=\w)|(?<=\w)_", lambda m: "_" if m.group(0) == "_" else "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _links(path: Path) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    out = []
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        out += [(number, target) for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line)]
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_to_an_existing_file(doc):
    broken = []
    for number, target in _links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        where = f"{doc.relative_to(REPO)}:{number}: ({target})"
        if not path.exists():
            broken.append(f"{where}: no file {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{where}: no heading #{anchor} in {path.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def test_the_link_checker_sees_a_broken_link(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("# A `code` heading, with punctuation!\n\nsee [this](#a-code-heading-with-punctuation), "
                   "[gone](missing.md) and `[not a link](nowhere.md)`\n```bash\n[in code](nowhere.md)\n```\n")
    assert _anchors(doc) == {"a-code-heading-with-punctuation"}
    assert [t for _, t in _links(doc)] == ["#a-code-heading-with-punctuation", "missing.md"]


README_MAX_WORDS = 1500


def test_the_readme_is_short_enough_to_read_in_five_minutes():
    """README.md holds what a newcomer needs (what it checks, the two commands, a real model, the two designs,
    the honesty banners) in at most 1,500 words, counted as ``wc -w`` counts them; statistics, figures and
    caveats live in docs/, linked from it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    words = len(text.split())
    assert words <= README_MAX_WORDS, (f"README.md has {words} words (at most {README_MAX_WORDS}): move details, "
                                       "figures and caveats to a docs/ page and link it")
    for says in ("make gate", "make test", "mean nothing about fairness", "--t2i-sequential", "--t2i-fixed-n",
                 "docs/sequential.md", "docs/running.md"):
        assert says in text, says


MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home)/")  # a folder of one machine, not of the project


def machine_paths(text: str, where: str) -> list[str]:
    """``where:line: text`` for each line of ``text`` that names an absolute path of one machine."""
    return [f"{where}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if MACHINE_PATH.search(line)]


def test_no_doc_or_code_names_a_folder_of_one_machine():
    """The docs, the code, the tests and the benchmarks name no absolute path that exists on one machine
    only (a folder under /work, /root or /home): a reader elsewhere cannot follow it."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    files = [REPO / f for f in tracked if f.endswith((".py", ".md", ".toml", ".yaml", ".json", ".cfg", ".txt"))
             or f in ("Makefile", ".ci/run")] if tracked else [*DOCS, *(REPO / "plugin").rglob("*.py")]
    found = [hit for path in files if path.is_file()
             for hit in machine_paths(path.read_text(encoding="utf-8", errors="replace"), str(path.relative_to(REPO)))]
    assert not found, "\n".join(found)
    planted = "see " + "/work" + "/shared/x.md"  # (written in two parts, so that this file does not name it)
    assert machine_paths(f"{planted}\nor ~/home/x and /data/geode", "x.md") == [f"x.md:1: {planted}"]


# ------------------------------------------------------------------------------ the docs' commands

SHELL_FENCES = ("bash", "sh", "shell", "console")
NEEDS = (  # (test on the argument list, why the command cannot run here)
    (lambda a: any(re.search(r"(^|=)/(data|shared|models)/", t) for t in a), "needs files that are not here (a /data/, /shared/ or /models/ path)"),
    (lambda a: _value(a, "--t2i-scorers") == "paper", "downloads the papers' scorer weights (--t2i-scorers paper)"),
    (lambda a: (_value(a, "--t2i-device") or "").startswith("cuda"), "needs a CUDA GPU (--t2i-device cuda)"),
    (lambda a: _is_hub(_value(a, "--t2i-model")), "downloads a hub model (--t2i-model ORG/NAME)"),
    (lambda a: _value(a, "--engine") == "ray", "needs a Ray cluster (--engine ray)"),
    (lambda a: any("s3://" in t or "gs://" in t for t in a), "needs an object store (s3://, gs://)"),
    (lambda a: "..." in a, "elided options ('...'): a pattern, not a command"),
    (lambda a: a[:1] in (["history"], ["compare"]), "reads a run history that gate runs write (tests/test_history_suite.py)"),
)


@dataclasses.dataclass(frozen=True)
class DocCommand:
    """One ``pytest``, ``t2i-fairness`` or ``make`` command of a fenced shell block of the docs."""

    doc: str
    line: int
    kind: str  # pytest | cli | make
    argv: tuple[str, ...]  # after the program's name, $VARS of the block expanded

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _value(args, flag: str):
    for i, token in enumerate(args):
        if token == flag and i + 1 < len(args):
            return args[i + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


def _is_hub(model) -> bool:
    from t2i_fairness.generators import spec_kind

    return bool(model) and spec_kind(model).hub


def shell_commands(text: str, doc: str = "<doc>") -> list[DocCommand]:
    """The ``pytest``/``t2i-fairness``/``make`` commands of ``text``'s fenced shell blocks.

    Continuation lines are joined, comments dropped, and a block's ``NAME="..."`` assignments expanded
    where a later command says ``$NAME`` (as the shell would, word-split).
    """
    commands = []
    for block in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        if block.group(1) not in SHELL_FENCES:
            continue
        first = text[:block.start(2)].count("\n") + 1
        env: dict[str, str] = {}
        lines: list[tuple[int, str]] = []  # (line number in the doc, the logical line: continuations joined)
        pending: tuple[int, str] | None = None
        for number, raw in enumerate(block.group(2).split("\n"), first):
            number, text_so_far = pending if pending else (number, "")
            joined = text_so_far + raw
            if raw.endswith("\\"):
                pending = (number, joined[:-1] + " ")
                continue
            pending = None
            lines.append((number, joined))
        i = 0
        while i < len(lines):
            line, buffer = lines[i]
            while True:
                try:
                    tokens = shlex.split(buffer, comments=True)
                    break
                except ValueError:  # a quote closes on a later line
                    i += 1
                    if i >= len(lines):
                        raise AssertionError(f"{doc}:{line}: unclosed quote in a shell block") from None
                    buffer += "\n" + lines[i][1]
            i += 1
            if not tokens:
                continue
            if len(tokens) == 1 and re.match(r"^[A-Za-z_]\w*=", tokens[0]):
                name, value = tokens[0].split("=", 1)
                env[name] = value
                continue
            expanded = []
            for token in tokens:
                name = token[1:] if token.startswith("$") else None
                expanded += shlex.split(env[name]) if name in env else [token]
            program, args = expanded[0], tuple(expanded[1:])
            if program in ("make",):
                kind = "make"
            elif program == "t2i-fairness" or program.endswith("/t2i-fairness"):
                kind = "cli"
            elif program == "pytest" or program.endswith("/pytest"):
                kind = "pytest"
            else:
                continue
            commands.append(DocCommand(doc, line, kind, args))
    return commands


def doc_commands() -> list[DocCommand]:
    return [c for path in DOCS for c in shell_commands(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))]


def _make_args(cmd: DocCommand) -> list[str]:
    """The pytest arguments a ``make gate ARGS=...`` passes on (ARGS word-split, as make does)."""
    return [t for a in cmd.argv if a.startswith("ARGS=") for t in shlex.split(a[5:])]


def t2i_part(cmd: DocCommand) -> list[str]:
    """The arguments that reach the ``--t2i-*`` parser."""
    args = _make_args(cmd) if cmd.kind == "make" else list(cmd.argv)
    return [a for a in args if a != "..."]


def _t2i_parser():
    import argparse

    from t2i_fairness.spine.options import add_options

    parser = argparse.ArgumentParser(prog="pytest", exit_on_error=False, add_help=False)
    add_options(parser.add_argument, all_options())
    return parser


def check_options(cmd: DocCommand) -> list[str]:
    """What is wrong with the command's ``--t2i-*`` options (empty: they exist and parse)."""
    import argparse

    args = t2i_part(cmd)
    problems = []
    try:
        if cmd.kind == "cli":
            ns, extra = build_parser().parse_known_args(args)
        else:
            ns, extra = _t2i_parser().parse_known_args(args)
    except (argparse.ArgumentError, SystemExit) as exc:
        return [f"{cmd.id}: {exc}"]
    problems += [f"{cmd.id}: unknown option {a}" for a in extra if a.startswith("--t2i-")]
    return problems


def why_not_run(cmd: DocCommand) -> str | None:
    args = list(cmd.argv) + _make_args(cmd)
    return "; ".join(reason for needs, reason in NEEDS if needs(args)) or None


COMMANDS = doc_commands()


def test_the_docs_hold_the_commands_to_check():
    """The collector finds the commands (so the checks below cannot pass by finding none)."""
    seen = {(c.kind, c.argv[:1]) for c in COMMANDS}
    assert {("make", ("gate",)), ("make", ("test",))} <= seen, seen
    assert any(c.kind == "pytest" and why_not_run(c) is None for c in COMMANDS)
    assert any(c.kind == "pytest" and why_not_run(c) for c in COMMANDS)
    assert any(c.kind == "cli" for c in COMMANDS)


def test_the_command_checks_see_a_wrong_option():
    text = ("```bash\nOPTS=\"--t2i-objects bag\n  --t2i-seed 3\"\npytest fairness_tests $OPTS \\\n"
            "    --t2i-gate interval   # a comment\nmake gate ARGS=\"--t2i-nonsense 1\"\n"
            "t2i-fairness plan --t2i-objcts bag\nnpx something --t2i-ignored\n```\n")
    commands = shell_commands(text, "x.md")
    assert [(c.kind, c.line) for c in commands] == [("pytest", 4), ("make", 6), ("cli", 7)]
    assert commands[0].argv == ("fairness_tests", "--t2i-objects", "bag", "--t2i-seed", "3", "--t2i-gate", "interval")
    assert "invalid choice: 'interval'" in " ".join(check_options(commands[0]))
    assert check_options(commands[1]) == ["x.md:6: unknown option --t2i-nonsense"]
    assert check_options(commands[2]) == ["x.md:7: unknown option --t2i-objcts"]
    assert why_not_run(shell_commands("```bash\npytest --t2i-reference g=/data/geode\n```\n")[0]).startswith("needs")


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c.id)
def test_doc_command_options_exist_and_parse(cmd):
    assert not check_options(cmd), check_options(cmd)


def _offline_env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    return env


def _redirected(args: list[str], tmp_path: Path) -> list[str]:
    """The command's outputs (JUnit, Allure, report, artifacts) written under ``tmp_path``, not the repository."""
    out = list(args)
    for i, token in enumerate(out[:-1]):
        if token in ("--junitxml", "--alluredir", "--t2i-report", "--t2i-artifacts", "--output"):
            out[i + 1] = str(tmp_path / Path(out[i + 1]).name)
    return out


def _collect(args: list[str], tmp_path: Path, in_process) -> subprocess.CompletedProcess:
    return in_process.pytest([*_redirected(args, tmp_path), "--collect-only", "-q", "-p", "no:cacheprovider",
                              "--t2i-no-progress"], cwd=REPO)


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c.id)
def test_doc_command_runs_offline_at_smoke_size(cmd, tmp_path, in_process):
    """Reduced runs: a pytest command collects (its options resolved by the plugin, its -k/-m selecting
    something); ``make X`` is dry-run through the Makefile and a gate's pytest line collected; ``t2i-fairness
    plan`` plans. Commands that need real data, a GPU, a download or a cluster are skipped with the reason."""
    reason = why_not_run(cmd)
    if reason:
        pytest.skip(f"{cmd.id}: {reason}")
    if cmd.kind == "make":
        env = {k: v for k, v in _offline_env().items() if k not in ("ARGS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}  # the caller's make variables (make test ARGS=... exports ARGS), not the docs'
        dry = subprocess.run(["make", "-n", *cmd.argv], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=120)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        # the pytest command itself: what follows `||` is the Makefile's exit-5 message
        pytest_lines = [shlex.split(line.split(" || ")[0]) for line in dry.stdout.splitlines() if " -m pytest " in line]
        assert pytest_lines, f"make -n {' '.join(cmd.argv)} runs no pytest:\n{dry.stdout}"
        if cmd.argv[0] == "test":  # the project's own tests: running them is `make test` itself
            assert pytest_lines[0][pytest_lines[0].index("pytest") + 1:][:2] == ["tests", "plugin/t2i_fairness"]
            return
        for words in pytest_lines:
            run = _collect(words[words.index("pytest") + 1:], tmp_path, in_process)
            assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
            assert "collected" in run.stdout, run.stdout[-2000:]
        return
    if cmd.kind == "pytest":
        run = _collect(list(cmd.argv), tmp_path, in_process)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert re.search(r"\d+(/\d+)? tests? collected", run.stdout), run.stdout[-2000:]
        return
    assert cmd.argv[0] == "plan", f"{cmd.id}: only `t2i-fairness plan` runs offline here: {cmd.argv}"
    run = in_process.cli([*_redirected(list(cmd.argv), tmp_path), "--t2i-cache-dir", str(tmp_path / "cache"),
                          "--t2i-no-progress"], cwd=REPO)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "images" in run.stdout, run.stdout


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_option_the_docs_name_exists(doc):
    """Prose and inline code too: a ``--t2i-...`` flag the docs mention is a registered option."""
    flags = {o.flag for o in all_options()}
    text = doc.read_text(encoding="utf-8")
    unknown = sorted({f"{m.group(0)} (line {text[:m.start()].count(chr(10)) + 1})"
                      for m in re.finditer(r"--t2i-[a-z][a-z0-9-]*[a-z0-9]", text) if m.group(0) not in flags})
    assert not unknown, f"{doc.relative_to(REPO)} names options that do not exist: {unknown}"


def inline_commands(path: Path) -> list[DocCommand]:
    """The ``pytest``/``make``/``t2i-fairness`` commands of a doc's inline code (patterns with ``|`` or ``...`` left out)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for m in re.finditer(r"`((?:\.venv/bin/)?(pytest|make|t2i-fairness) [^`]+)`", text):
        if "|" in m.group(1) or "..." in m.group(1):
            continue
        words = shlex.split(m.group(1))
        kind = {"pytest": "pytest", "make": "make", "t2i-fairness": "cli"}[m.group(2)]
        found.append(DocCommand(str(path.relative_to(REPO)), text[:m.start()].count("\n") + 1, kind, tuple(words[1:])))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_inline_commands_options_parse(doc):
    problems = [p for cmd in inline_commands(doc) for p in check_options(cmd)]
    assert not problems, problems


def test_every_make_target_the_docs_name_exists():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", makefile, flags=re.M))
    named = {(c.id, c.argv[0]) for path in DOCS for c in inline_commands(path) + shell_commands(
        path.read_text(encoding="utf-8"), str(path.relative_to(REPO))) if c.kind == "make" and c.argv}
    missing = sorted(f"{where}: make {target}" for where, target in named if target not in targets)
    assert not missing, f"targets the docs name that the Makefile lacks: {missing}"


def test_the_meaningful_miss_table_is_the_codes():
    """docs/decisions.md's table of each kind's meaningful miss holds exactly gating.power.MEANINGFUL_MISS
    (the kinds every gate test declares, less the unused alias `bounded`)."""
    import re

    from t2i_fairness.gating.power import MEANINGFUL_MISS

    text = (REPO / "docs" / "decisions.md").read_text()
    table = text.split("<!-- meaningful-miss:begin", 1)[1].split("<!-- meaningful-miss:end", 1)[0]
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\| `(\w+)` \|[^|]*\| ([0-9.]+) \|$", table, re.M)}
    assert rows == {k: v for k, v in MEANINGFUL_MISS.items() if k != "bounded"}
    from t2i_fairness.families import FAMILIES
    from t2i_fairness.families.base import indicator_methods

    declared = {m.indicator_kind for f in FAMILIES if f.study_type
                for m in indicator_methods(f.study_type()).values()} - {"test"}
    assert declared <= set(rows), declared - set(rows)
