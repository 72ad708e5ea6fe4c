"""The docs the code checks (issue 22, item 3).

- ``docs/options.md``'s options table is generated from the ``Option`` records; a stale committed
  table fails here and names the command that rewrites it (``make docs``).
- Defaults live once, in the records: ``T2IOptions()`` is what the resolver makes of an empty command
  line, field by field; no ``getattr(options, name, default)`` states one a second time.
- Every relative link of ``README.md`` and ``docs/*.md`` points to an existing file (and heading).
- The commands of the docs' fenced shell blocks use options that exist and parse (through the real
  parsers); those that can run offline at smoke size run, reduced (``--collect-only``, ``make -n``, the
  plan command); those that need real data, a GPU or a cluster are listed as skipped with the reason.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shlex
import subprocess
import sys
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
