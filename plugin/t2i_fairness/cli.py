"""``t2i-fairness``: plan a selection's images, and make them before the gate run (console script).

::

    t2i-fairness plan     [PYTEST ARGS] [-k EXPR] [-m EXPR] [--t2i-* ...] [--output plan.json]
    t2i-fairness generate [PYTEST ARGS] [-k EXPR] [-m EXPR] [--t2i-* ...] --engine local|ray
                          [--address ADDR] [--workers N] [--num-cpus N] [--stage images|features]
    t2i-fairness options  [--markdown | --write FILE | --check FILE]
    t2i-fairness audit    RUN [--width W] [--confidence C] [--per-group N] [--seed S] [--output DIR] [--from-truth]
    t2i-fairness history  [-k EXPR] [--model NAME] [--since TIME] [--t2i-history FILE] ...
    t2i-fairness compare  [A [B]] [-k EXPR] [--alpha X] [--fail-on-regression] [--t2i-history FILE] ...

``plan`` and ``generate`` take the plugin's ``--t2i-*`` options and select tests as ``pytest``
would. ``plan`` prints the prompts and images the selected gates ask for and how many are cached;
``generate`` makes the missing ones in the pytest path's batches (same bytes, same cache), here
or on Ray; ``--stage features`` also computes the study slices. ``options`` prints the options
table. ``audit`` draws a seeded sample of a run's judged images (RUN: its ``--t2i-artifacts`` folder) and writes
the labelling page whose CSV ``--t2i-audit`` reads (docs/decisions.md). ``history`` and ``compare`` read the run history
(:mod:`t2i_fairness.history.cli`, docs/history.md). docs/distributed.md has the details. Exit status: 0 done, 1 some jobs failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from t2i_fairness.spine.options import CORE_OPTIONS, add_options

# gate-run outputs, not images (--t2i-update-thresholds and --t2i-audit are forwarded: they make the run fixed N)
NOT_FORWARDED = ("--t2i-report", "--t2i-allow-loosen")


def _options():
    from t2i_fairness.families import FAMILIES

    return tuple(CORE_OPTIONS) + tuple(o for f in FAMILIES for o in f.options)


def build_parser() -> argparse.ArgumentParser:
    """The ``t2i-fairness`` argument parser (``plan`` and ``generate``), with every ``--t2i-*`` option of the plugin."""
    parser = argparse.ArgumentParser(prog="t2i-fairness", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="print (or write) the images a selection of gates will ask for")
    gen = sub.add_parser("generate", help="make a selection's missing images (and features) before the gate run")
    docs = sub.add_parser("options", help="every --t2i-* option, its default per preset and its meaning, from the "
                          "Option records (the table of docs/options.md)")
    docs.add_argument("--markdown", action="store_true", help="print the Markdown table of docs/options.md")
    docs.add_argument("--write", metavar="FILE", help="rewrite the generated table in FILE in place (make docs)")
    docs.add_argument("--check", metavar="FILE", help="exit 1 when the table in FILE differs from the generated one")
    audit = sub.add_parser("audit", help="draw a seeded sample of a run's judged images and write the labelling page "
                           "(audit.html, offline) whose saved CSV --t2i-audit reads")
    audit.add_argument("run", metavar="RUN", help="the run's --t2i-artifacts folder (it holds judged/*.json.gz)")
    audit.add_argument("--width", type=float, default=0.1, help="the widest two-sided interval of a group's share "
                       "from its labels alone, at --confidence (default 0.1); sizes the sample per group")
    audit.add_argument("--confidence", type=float, default=0.95, help="confidence of --width (default 0.95)")
    audit.add_argument("--per-group", type=int, metavar="N", help="units per group instead of the size --width needs")
    audit.add_argument("--seed", type=int, help="seed of the draw (default: the run's --t2i-seed)")
    audit.add_argument("--from-truth", action="store_true", help="also write labels.csv answered from the images' "
                       "procedural truth (a --t2i-model procedural run only): an audit whose truth is known")
    audit.add_argument("--output", metavar="DIR", help="where audit.html and audit-sample.csv go (default RUN/audit)")
    from t2i_fairness.history.cli import add_parsers

    add_parsers(sub)
    for p in (plan, gen):
        p.add_argument("paths", nargs="*", help="test paths or node ids, as for pytest (default: the suite)")
        p.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest's -k expression")
        p.add_argument("-m", dest="markexpr", metavar="EXPR", help="pytest's -m expression")
        p.add_argument("--output", metavar="FILE", help="also write the plan as JSON")
        group = p.add_argument_group("t2i-fairness options (as for pytest)")
        add_options(group.add_argument, _options())
    gen.add_argument("--engine", choices=("local", "ray"), default="local",
                     help="local: in this process; ray: Ray Data actors, one per GPU (pip install 't2i-fairness[ray]')")
    gen.add_argument("--address", metavar="ADDR", help="Ray cluster address ('auto': the cluster this machine is in); "
                     "default: start a local Ray instance")
    gen.add_argument("--workers", type=int, metavar="N", help="Ray actors (default: one per GPU; without GPUs one per CPU)")
    gen.add_argument("--num-cpus", type=int, metavar="N", help="CPUs of a local Ray instance (default: all)")
    gen.add_argument("--stage", choices=("images", "features"), default="images",
                     help="images: the missing images; features: those, then the gates' features, masks, "
                          "captions and radii")
    return parser


def pytest_args(ns: argparse.Namespace, extra: Sequence[str]) -> list[str]:
    """The pytest arguments that select what ``ns`` asks for (paths, -k, -m, --t2i-* values given, the rest).

    Example:
        >>> ns = build_parser().parse_args(["plan", "-k", "africa", "--t2i-objects", "bag", "--t2i-no-progress"])
        >>> pytest_args(ns, ["--deselect", "x"])[-6:]
        ['--deselect', 'x', '-k', 'africa', '--t2i-objects', 'bag']
    """
    from t2i_fairness.distributed.selection import default_paths

    args = list(ns.paths) if ns.paths else ([] if "--pyargs" in extra else default_paths())
    args += list(extra)
    if ns.keyword:
        args += ["-k", ns.keyword]
    if ns.markexpr:
        args += ["-m", ns.markexpr]
    for option in _options():
        if option.flag in NOT_FORWARDED or option.flag == "--t2i-no-progress":
            continue
        value = getattr(ns, option.dest, None)
        default = option.addoption_kwargs().get("default")
        if option.action == "store_true":
            args += [option.flag] if value else []
        elif option.action == "append":
            for v in value or ():
                args += [option.flag, str(v)]
        elif value is not None and value != default:
            args += [option.flag, str(value)]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``t2i-fairness`` on ``argv`` (default ``sys.argv[1:]``); returns the exit status.

    Raises:
        SystemExit: from argparse, for ``--help`` and malformed arguments (status 2).
    """
    parser = build_parser()
    ns, extra = parser.parse_known_args(argv)
    if ns.command in ("options", "history", "compare") and extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    unknown = [a for a in extra if a.startswith("--t2i-")]
    if unknown:
        parser.error(f"unknown option(s) {unknown}; see t2i-fairness {ns.command} --help")
    if ns.command in ("history", "compare"):
        from t2i_fairness.history.cli import main as history_main

        return history_main(ns)
    try:
        if ns.command == "audit":
            if extra:
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
            return _audit_command(ns)
        return _options_command(ns) if ns.command == "options" else _run(ns, extra)
    except _Usage as exc:
        print(f"t2i-fairness: {exc}", file=sys.stderr)
        return 2


class _Usage(Exception):
    pass


def _run(ns: argparse.Namespace, extra: Sequence[str]) -> int:
    from t2i_fairness.distributed.engines import EngineUnavailable
    from t2i_fairness.distributed.planner import build_plan, plan_json, plan_lines
    from t2i_fairness.distributed.selection import SelectionError, collect
    from t2i_fairness.errors import ModelLoadError, OptionError

    show = not ns.t2i_no_progress
    generate_on = None
    ray = None
    if ns.command == "generate" and ns.engine == "ray":
        from t2i_fairness.distributed.engines import cluster_gpus, init_ray

        try:
            ray = init_ray(ns.address, ns.num_cpus)
        except EngineUnavailable as exc:
            raise _Usage(str(exc)) from None
        from t2i_fairness.base.devices import RunContext

        device = ns.t2i_device or "auto"  # the workers' device: decided for the cluster's GPUs, not this machine's
        generate_on = (RunContext.decide(device, count=cluster_gpus(ray)).device if device == "auto" else device).split(":")[0]
    try:
        from t2i_fairness.base.devices import RunContext

        selection = collect(pytest_args(ns, extra))
        run = RunContext.decide(selection.options.device, selection.options.precision)  # this machine's, once
        plan = build_plan(selection, generate_on=generate_on, read_only=ns.command == "plan", run=run)  # planning writes nothing
    except (SelectionError, OptionError, ModelLoadError, OSError) as exc:
        raise _Usage(str(exc)) from None
    for line in plan_lines(plan, sequential=ns.command == "plan"):  # generate makes the fixed-N plan
        print(line)
    if ns.command == "generate" and selection.options.sequential:  # cost shown before it is paid
        print("generate makes the fixed-N plan's images: a run in rounds (--t2i-sequential, the paper preset's "
              "default) makes only those its gates ask for (`t2i-fairness plan` counts them); --t2i-fixed-n says "
              "the run will decide at N")
    weak = []
    if ns.command == "plan":  # the selected gates the last run found underpowered, with the images for 80%
        from t2i_fairness.report.power import plan_power_lines
        from t2i_fairness.runstate import gate_id_of

        ids = [gate_id_of(t.call.nodeid.rsplit("::", 1)[-1]) for t in selection.tests]
        weak = plan_power_lines(selection.options.artifacts, ids, limit=10**9 if ns.output else 30)
        for line in (weak if not ns.output else weak[:31]):
            print(line)
        from t2i_fairness.report.judged import audit_plan_lines

        for line in audit_plan_lines(selection.options.artifacts, ids):
            print(line)
    if ns.output:
        data = plan_json(plan)
        if weak:
            data["power"] = weak
        Path(ns.output).write_text(json.dumps(data, indent=1) + "\n")
        print(f"plan written to {ns.output}")
    if ns.command == "plan":
        return 0
    return _generate(ns, plan, show)


def options_markdown() -> str:
    """The generated options table of ``docs/options.md``: the core options, then each family's."""
    from t2i_fairness.families import FAMILIES
    from t2i_fairness.spine import options as spine_options

    sections = [("Core", CORE_OPTIONS)] + [(f.title, f.options) for f in FAMILIES]
    return spine_options.options_markdown(sections)


def _options_command(ns: argparse.Namespace) -> int:
    from t2i_fairness.spine.options import DOCS_COMMAND, default_cell, option_usage, replace_generated

    generated = options_markdown()
    if ns.write or ns.check:
        path = Path(ns.write or ns.check)
        try:
            text = path.read_text(encoding="utf-8")
            new = replace_generated(text, generated, where=str(path))
        except (OSError, ValueError) as exc:
            raise _Usage(str(exc)) from None
        if ns.check:
            if new != text:
                print(f"{path}: the options table differs from the Option records; run `{DOCS_COMMAND}` "
                      f"(t2i-fairness options --write {path})", file=sys.stderr)
                return 1
            print(f"{path}: the options table is the Option records'")
            return 0
        if new != text:
            path.write_text(new, encoding="utf-8")
        print(f"{path}: options table {'rewritten' if new != text else 'already up to date'}")
        return 0
    if ns.markdown:
        print(generated, end="")
        return 0
    for option in _options():
        print(f"{option_usage(option)}  [default: {default_cell(option).replace('`', '')}]\n    {option.help}")
    return 0


def _audit_command(ns: argparse.Namespace) -> int:
    """``t2i-fairness audit``: the sample of the run's judged units and its labelling page."""
    import time

    from t2i_fairness.audit import draw_sample, judged_units
    from t2i_fairness.audit.page import write_page
    from t2i_fairness.metrics.ppi import labels_for_width

    start = time.perf_counter()
    try:
        per_group = ns.per_group if ns.per_group is not None else labels_for_width(ns.width, ns.confidence)
        seed, shares = judged_units(ns.run)
        drawn = draw_sample(shares, per_group, seed if ns.seed is None else ns.seed)
        page, sample = write_page(drawn, seed, Path(ns.output) if ns.output else Path(ns.run) / "audit",
                                  title=str(ns.run))
        if ns.from_truth:
            from t2i_fairness.audit.from_truth import write_truth_labels

            truth = write_truth_labels(drawn, seed, page.parent)
    except (ValueError, OSError) as exc:
        raise _Usage(str(exc)) from None
    groups = {(d.gate, d.unit.group) for d in drawn}
    print(f"audit: {len(drawn)} units of {sum(len(s.units) for s in shares.values())} judged, {len(groups)} group(s) "
          f"of {len(shares)} gate(s), up to {per_group} per group and one per prompt (seed {seed}; "
          f"{time.perf_counter() - start:.1f} s)")
    print(f"labelling page: {page}: {len({d.unit.unit for d in drawn})} questions (one drawn for several gates is "
          "asked once; open it in a browser, offline; keys y / n / s; save the CSV)")
    print(f"sample: {sample}")
    if ns.from_truth:
        print(f"labels from the procedural truth: {truth}")
    print(f"then: pytest ... --t2i-seed {seed} --t2i-audit labels.csv (the same settings as the run)")
    return 0


def _generate(ns, plan, show: bool) -> int:
    from t2i_fairness.distributed import engines

    cached = sum(rp.n_cached for rp in plan.roles)
    if ns.engine == "ray":
        outcome = engines.generate_ray(plan, ns.address, ns.workers, ns.num_cpus, show)
    else:
        outcome = engines.generate_local(plan, show)
    rate = outcome.written / outcome.seconds if outcome.seconds else 0.0
    print(f"images: {outcome.written} generated, {cached} already cached ({ns.engine}: {outcome.seconds:.1f} s, "
          f"{rate:.2f} images/s); {len(outcome.failures)} job(s) failed")
    failures = list(outcome.failures)
    if ns.stage == "features":
        feats = (engines.features_ray(plan, ns.address, ns.workers, ns.num_cpus, show) if ns.engine == "ray"
                 else engines.features_local(plan, show))
        counts = ", ".join(f"{k}: {v} computed" for k, v in sorted(feats.computed.items())) or "nothing computed"
        print(f"features: {feats.written} slice(s) of {sum(len(rp.needs) for rp in plan.roles)} ({feats.seconds:.1f} s); "
              f"{counts}; {len(feats.failures)} failed")
        failures += feats.failures
    if failures:
        print("failed (finished work is kept; run again to retry):")
        shown: dict[tuple[str, str], int] = {}
        for what, error in failures:
            shown[(what, error)] = shown.get((what, error), 0) + 1
        for (what, error), times in list(shown.items())[:50]:
            print(f"  {what}: {error}" + (f" (x{times})" if times > 1 else ""))
        return 1
    return 0


def console() -> None:  # pragma: no cover - the console script's entry point
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    console()
