"""What a gate test is about, read from its name: indicator family, template, regions, languages.

The HTML report groups by family, Allure by family, template and tags. The family is the test
function's name; the rest are parameter-id tokens that name a template, region or language the
families handed over, so new indicators are labelled without new code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from t2i_fairness.report.power import power_cell, verdict_suffix
from t2i_fairness.report.sequential import junit_sequential


@dataclass(frozen=True)
class Vocabulary:
    """The label tokens gate ids may contain, as the families hand them over (the report imports none).

    ``languages`` maps lower-case codes to codes as written (``hin_deva`` -> ``hin_Deva``).
    """

    regions: frozenset = frozenset()
    languages: dict = field(default_factory=dict)
    templates: frozenset = frozenset()

    @classmethod
    def from_tokens(cls, tokens: Iterable[Mapping[str, Iterable[str]]]) -> "Vocabulary":
        """Merge the families' ``{kind: tokens}`` (kinds ``region``, ``language``, ``template``)."""
        regions, languages, templates = set(), {}, set()
        for part in tokens:
            regions.update(part.get("region", ()))
            languages.update({code.lower(): code for code in part.get("language", ())})
            templates.update(part.get("template", ()))
        return cls(frozenset(regions), languages, frozenset(templates))


EMPTY = Vocabulary()


@dataclass(frozen=True)
class GateLabels:
    """Labels of one test item: ``family`` is the test function without ``test_``, ``params`` its
    parameter id (empty when not parametrized).
    """

    function: str
    params: str = ""
    template: str | None = None
    regions: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()  # language codes as written in the registry: hin_Deva
    other: tuple[str, ...] = field(default=())  # remaining id tokens (reference names, objects)

    @property
    def family(self) -> str:
        return self.function[len("test_"):] if self.function.startswith("test_") else self.function

    @property
    def family_title(self) -> str:
        """``region_precision`` -> ``Region precision``; acronyms (``clgc``) in capitals."""
        words = self.family.split("_")
        if len(words) == 1 and len(words[0]) <= 5:
            return words[0].upper()
        text = " ".join(words)
        return text[:1].upper() + text[1:]

    @property
    def title(self) -> str:
        return f"{self.family_title} [{self.params}]" if self.params else self.family_title

    @property
    def tags(self) -> list[str]:
        return [f"region:{r}" for r in self.regions] + [f"language:{c}" for c in self.languages]


def split_name(name: str) -> tuple[str, str]:
    """A test name or node id -> (function, parameter id).

    Example:
        >>> split_name("fairness_tests/test_dig_in_region.py::test_region_precision[synthetic-object-africa]")
        ('test_region_precision', 'synthetic-object-africa')
    """
    name = name.rsplit("::", 1)[-1]
    m = re.fullmatch(r"([^\[]*)(?:\[(.*)\])?", name, flags=re.S)
    assert m is not None  # the pattern matches every string
    return m.group(1), m.group(2) or ""


def gate_labels(name: str, params: dict[str, Any] | None = None, vocabulary: Vocabulary | None = None) -> GateLabels:
    """Labels of a test from its name (or node id) and, when known, its ``callspec.params``.

    Tokens are the parameter id split on ``-`` plus the string values of ``params`` (a ``template``
    parameter wins); ``vocabulary`` says which are regions, languages and templates.

    Example:
        >>> v = Vocabulary.from_tokens([{"region": ["africa"], "template": ["object_in_region"]}])
        >>> lab = gate_labels("test_region_coverage[synthetic-object_in_region-africa]", vocabulary=v)
        >>> lab.family, lab.template, lab.regions, lab.other
        ('region_coverage', 'object_in_region', ('africa',), ('synthetic',))
    """
    vocab = vocabulary or EMPTY
    function, pid = split_name(name)
    values = [v for v in (params or {}).values() if isinstance(v, str)]
    tokens = _unique(t for t in pid.split("-") + values if t)
    template = (params or {}).get("template")
    if not isinstance(template, str) or template not in vocab.templates:
        template = next((t for t in tokens if t in vocab.templates), None)
    regions = tuple(t for t in tokens if t in vocab.regions)
    languages = tuple(vocab.languages[t.lower()] for t in tokens if t.lower() in vocab.languages)
    known = set(regions) | {template} | {t for t in tokens if t.lower() in vocab.languages}
    other = tuple(t for t in tokens if t not in known)
    return GateLabels(function, pid, template, regions, _unique(languages), other)


# -- markers (``-m "region_africa and family_dig_in"``) ------------------------------------------------

def marker_token(text: str) -> str:
    """A label as a marker-name part: lower case, anything but letters, digits and ``_`` as ``_``."""
    return re.sub(r"[^0-9a-z_]+", "_", text.lower()).strip("_")


def markers_of(labels: GateLabels, family: str | None = None) -> list[str]:
    """The marker names of a gate test: ``family_<name>``, ``region_<slug>``, ``language_<code>``,
    ``template_<id>`` (exact names: ``-m region_east_asia`` never selects ``southeast_asia``).

    Example:
        >>> v = Vocabulary.from_tokens([{"region": ["africa"], "template": ["object_in_region"]}])
        >>> markers_of(gate_labels("test_region_coverage[synthetic-object_in_region-africa]", vocabulary=v), "dig_in")
        ['family_dig_in', 'region_africa', 'template_object_in_region']
    """
    out = [f"family_{marker_token(family)}"] if family else []
    out += [f"region_{marker_token(r)}" for r in labels.regions]
    out += [f"language_{marker_token(c)}" for c in labels.languages]
    if labels.template:
        out.append(f"template_{marker_token(labels.template)}")
    return out


def marker_lines(vocabulary: Vocabulary, families: Iterable[tuple[str, str]] = ()) -> list[str]:
    """``markers`` ini lines registering every marker :func:`markers_of` can give (``pytest --markers``).

    Example:
        >>> marker_lines(Vocabulary.from_tokens([{"region": ["africa"]}]), [("cis", "CIS")])
        ['family_cis: gates of the CIS family (t2i-fairness)', 'region_africa: gates about region africa (t2i-fairness)']
    """
    out = [f"family_{marker_token(n)}: gates of the {t} family (t2i-fairness)" for n, t in families]
    out += [f"region_{marker_token(r)}: gates about region {r} (t2i-fairness)" for r in sorted(vocabulary.regions)]
    out += [f"language_{marker_token(c)}: gates about language {c} (t2i-fairness)" for c in sorted(vocabulary.languages.values())]
    out += [f"template_{marker_token(t)}: gates of prompt template {t} (t2i-fairness)" for t in sorted(vocabulary.templates)]
    return list(dict.fromkeys(out))


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


# -- Allure (allure-pytest active with --alluredir) ---------------------------------------------------

# Shown with every gate test but left out of Allure's history id, so a new seed or sample size
# continues a gate's history instead of starting another one. The model is shown and kept in the
# history id: two models gated into one Allure history would read as one gate's ups and downs.
HISTORY_NEUTRAL = ("scorers", "images_per_prompt", "seed")
HISTORY_KEPT = ("model",)


class _Bare:
    """A parameter value Allure shows as it is (allure-commons quotes every ``str`` it is given)."""

    def __init__(self, text: str):
        self.text = str(text)

    def __repr__(self) -> str:
        return self.text


def allure_active(config) -> bool:
    return config.pluginmanager.hasplugin("allure_pytest") and bool(getattr(config.option, "allure_report_dir", None))


def allure_label(node, options, vocabulary: Vocabulary | None = None, family: str | None = None) -> None:
    """Allure labels of a gate test, at fixture setup: epic (the suite module's first docstring line),
    feature (the family's title), story (the test function), tags (regions, languages, template), and
    the run's settings as parameters (only the model in the history id).
    """
    import allure

    params = getattr(getattr(node, "callspec", None), "params", {})
    lab = gate_labels(node.name, params, vocabulary)
    doc = (getattr(getattr(node, "module", None), "__doc__", None) or "").strip().splitlines()
    allure.dynamic.epic(doc[0].rstrip(".") if doc else getattr(node, "module", node).__name__)
    allure.dynamic.feature(family or lab.family_title)
    allure.dynamic.story(lab.family_title)
    tags = lab.tags + ([f"template:{lab.template}"] if lab.template else [])
    if tags:
        allure.dynamic.tag(*tags)
    for name, value in params.items():  # allure-pytest would add them as repr(): 'africa' in quotes
        allure.dynamic.parameter(name, _Bare(value) if isinstance(value, str) else value)
    for name in HISTORY_KEPT:
        allure.dynamic.parameter(name, _Bare(getattr(options, name)))
    for name in HISTORY_NEUTRAL:
        allure.dynamic.parameter(name, _Bare(getattr(options, name)), excluded=True)


def allure_measurement(record: dict, vocabulary: Vocabulary | None = None) -> None:
    """The gate's Allure title (verdict, estimate, interval, bound) and its measurement as JSON; under
    ``--t2i-sequential`` also its sequential record as parameters and a ``sequential:<reason>`` tag.
    """
    import json

    import allure

    lab = gate_labels(record["gate"], vocabulary=vocabulary)
    iv = record.get("interval")
    interval = f" [{iv[0]:.4f}, {iv[1]:.4f}]" if iv else ""
    bound = "no bound" if record.get("bound") is None else f"{record['direction']} {record['bound']:.4f}"
    allure.dynamic.title(f"{lab.title}: {record['value']:.4f}{interval} vs {bound}{verdict_suffix(record)}")
    if record.get("power"):  # against the kind's meaningful miss at the run's level (gating.power)
        allure.dynamic.parameter("power", _Bare(power_cell(record)), excluded=True)
        if verdict_suffix(record):
            allure.dynamic.tag("underpowered")
    sequential = junit_sequential(record)  # --t2i-sequential only: reason, round r/R, images n/N, kind
    for key, value in sequential:  # shown, but out of the history id: a gate's history spans rounds and runs
        allure.dynamic.parameter(key.replace("t2i_sequential_", "sequential "), _Bare(value), excluded=True)
    if sequential:
        allure.dynamic.tag(f"sequential:{sequential[0][1]}")
    allure.attach(json.dumps(record, indent=2, sort_keys=True, default=str), name="measurement.json",
                  attachment_type=allure.attachment_type.JSON)


def allure_interrupted(config, nodeid: str, reason: str) -> bool:
    """Mark the Allure result of a test an interruption cut off as ``broken``, with the reason, before
    allure-pytest writes it; returns whether a result was marked (through the ``allure_listener``).
    """
    listener = config.pluginmanager.getplugin("allure_listener")
    cache, logger = getattr(listener, "_cache", None), getattr(listener, "allure_logger", None)
    if cache is None or logger is None:
        return False
    try:
        from allure_commons.model2 import Status, StatusDetails

        uuid = cache.get(nodeid)
        result = logger.get_test(uuid) if uuid else None
    except Exception:  # noqa: BLE001  (a listener of another version: leave its result alone)
        return False
    if result is None:
        return False
    result.status = Status.BROKEN
    result.statusDetails = StatusDetails(message=f"interrupted: {reason}",
                                         trace=f"{nodeid} was running when the run was interrupted ({reason}); "
                                               "it has no result, and the tests after it did not run")
    return True
