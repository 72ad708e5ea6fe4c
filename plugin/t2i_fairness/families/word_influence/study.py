"""Orchestration of "Word-Level Explanations for Analyzing Bias in Text-to-Image Models".

Plain Python over callables (transmuter, generator, group classifier), so the pipeline runs on a
synthetic generator. It plans which prompts to generate, turns per-image group labels into
``p(g | T)`` and assembles influences, Hoeffding half-widths and bootstrap intervals per word and
per prompt; the math is in :mod:`t2i_fairness.metrics.word_influence`. The definitions (the paper's
text lost its formulas) and the sampling design are in docs/indicators.md, "Word-level explanations".
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from t2i_fairness.families.base import Study, indicator
from t2i_fairness.gating.indicator import Indicator
from t2i_fairness.metrics.consistency import zero_shot_labels
from t2i_fairness.metrics.stats import hoeffding_half_width, hoeffding_half_width_combination, percentile_bootstrap
from t2i_fairness.metrics.word_influence import (
    WORKED_EXAMPLES,
    average_word_influence,
    group_probabilities,
    influence_bootstrap_intervals,
    influence_half_widths,
    influence_scores,
    influence_weights,
    large_scale_prompts,
    prompt_words,
    representation_gap,
    required_sets,
)

__all__ = [
    "SUITES",
    "Distribution",
    "PromptPlan",
    "Representation",
    "WordInfluence",
    "WordInfluenceStudy",
    "WordLevelResult",
    "analyse",
    "check_template",
    "counts_summary",
    "observe",
    "parse_groups",
    "parse_levels",
    "label_calls",
    "plan_prompts",
    "representation_ids",
    "run",
    "slug",
    "suite_levels",
    "suite_prompts",
    "word_ids",
    "word_weights",
    "zero_shot_labels",
]

#: ``replace_set(words, indices, m) -> up to m prompts as word lists`` (MaskedLMReplacer.replace_set).
Replacer = Callable[[Sequence[str], Sequence[int], int], Sequence[Sequence[str]]]
#: ``labeller(texts, n) -> per text, n (image key, group index) pairs``.  Image ``i`` of a text must
#: be the same image (same key, same label) whatever ``n`` is asked for.
Labeller = Callable[[Sequence[str], int], Sequence[Sequence[tuple[str, int]]]]


def slug(text: str) -> str:
    """A readable, lower-case id fragment: runs of anything but letters and digits become ``_``.

    Example:
        >>> slug("a respected doctor at the hospital"), slug("500"), slug("Light-skinned")
        ('a_respected_doctor_at_the_hospital', '500', 'light_skinned')
    """
    out = re.sub(r"[^0-9a-z]+", "_", str(text).lower()).strip("_")
    return out or "_"


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer, but got {value!r}")
    return int(value)


# ----------------------------------------------------------------------------- settings

#: Prompt suites: the paper's two worked examples (Table 1, Figure 2) and its 150 prompts (Figure 3).
SUITES: tuple[str, ...] = ("examples", "paper", "all")


def suite_prompts(name: str) -> list[str]:
    """The prompts of a suite: ``examples``, ``paper`` (150 prompts) or ``all``; ValueError naming the suites.

    Example:
        >>> suite_prompts("examples")
        ['a respected doctor at the hospital', 'the ceo of a fortune 500 company']
    """
    if name == "examples":
        return list(WORKED_EXAMPLES)
    if name == "paper":
        return large_scale_prompts()
    if name == "all":
        return list(dict.fromkeys([*WORKED_EXAMPLES, *large_scale_prompts()]))
    raise ValueError(f"unknown prompt suite {name!r}; choose from {', '.join(SUITES)}")


#: The levels the paper reports per worked example: Table 1 (k = 1) and Figure 2 (k = 1 and 2).
WORKED_EXAMPLE_LEVELS: dict[str, tuple[int, ...]] = {WORKED_EXAMPLES[0]: (1,), WORKED_EXAMPLES[1]: (1, 2)}


def suite_levels(suite: str, levels: Sequence[int] | None = None) -> dict[str, tuple[int, ...]]:
    """The influence levels of every prompt of a suite: ``levels`` for all when given, else the paper's.

    Levels longer than a prompt are dropped for that prompt.

    Example:
        >>> suite_levels("examples")
        {'a respected doctor at the hospital': (1,), 'the ceo of a fortune 500 company': (1, 2)}
    """
    prompts = suite_prompts(suite)
    if levels is None:
        return {p: WORKED_EXAMPLE_LEVELS.get(p, (1,)) for p in prompts}
    chosen = tuple(sorted(set(levels)))
    return {p: tuple(k for k in chosen if k <= len(prompt_words(p))) for p in prompts}


def parse_groups(text: str) -> tuple[str, ...]:
    """Comma-separated group names, at least two, distinct once made into ids (else ValueError).

    Example:
        >>> parse_groups(" male, female ")
        ('male', 'female')
    """
    groups = tuple(g.strip() for g in str(text).split(",") if g.strip())
    if len(groups) < 2:
        raise ValueError(f"expected at least 2 comma-separated groups (e.g. male,female), got {text!r}")
    slugs = [slug(g) for g in groups]
    clash = sorted({g for g, s in zip(groups, slugs) if slugs.count(s) > 1})
    if clash:
        raise ValueError(f"groups {clash} give the same test id; name them apart")
    return groups


def check_template(template: str, groups: Sequence[str] = ("female",)) -> str:
    """A group-label template: must hold ``{group}`` and no other field (else ValueError)."""
    if "{group}" not in str(template):
        raise ValueError(f"the template must contain {{group}}, e.g. 'a photo of a {{group}}', got {template!r}")
    try:
        for g in groups:
            template.format(group=g)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"the template {template!r} must have {{group}} as its only field ({type(exc).__name__}: {exc})") from None
    return template


def parse_levels(text: str, prompts: Sequence[str]) -> tuple[int, ...]:
    """Comma-separated influence levels ``k >= 1``, sorted; ValueError for a bad level or one longer than every prompt.

    Example:
        >>> parse_levels("2, 1", ["a respected doctor at the hospital"])
        (1, 2)
    """
    try:
        levels = tuple(sorted({int(x) for x in str(text).split(",") if x.strip()}))
    except ValueError:
        raise ValueError(f"expected comma-separated integers >= 1 such as 1,2, got {text!r}") from None
    if not levels or levels[0] < 1:
        raise ValueError(f"expected comma-separated integers >= 1 such as 1,2, got {text!r}")
    longest = max(len(prompt_words(p)) for p in prompts)
    if levels[-1] > longest:
        raise ValueError(f"k={levels[-1]} needs prompts of at least {levels[-1]} words; the longest has {longest}")
    return levels


# ----------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class Distribution:
    """The images behind ``p(g | T)``: ``images_per_text`` images of each of ``texts``."""

    prompt: str
    replaced: frozenset[int]
    texts: tuple[str, ...]
    images_per_text: int

    @property
    def n_images(self) -> int:
        return len(self.texts) * self.images_per_text


@dataclass(frozen=True)
class PromptPlan:
    """What to generate for one prompt: a distribution per replaced set the levels need."""

    prompt: str
    words: tuple[str, ...]
    levels: tuple[int, ...]
    distributions: dict[frozenset[int], Distribution]


def plan_prompts(
    prompts: Sequence[str],
    levels: Sequence[int] | Mapping[str, Sequence[int]],
    replace_set: Replacer,
    m: int,
    images_per_text: int,
) -> list[PromptPlan]:
    """The distributions to generate for every prompt and level.

    The original prompt is always planned with ``m * images_per_text`` images; each replaced set ``T``
    gets the ``m`` transmuted prompts with ``images_per_text`` images each. Levels longer than a prompt
    are skipped for it.

    Args:
        levels: influence levels ``k``, for every prompt or as ``{prompt: levels}``.
        replace_set: the transmuter, ``(words, positions, m) -> m word lists``.
        m: candidates per replaced set.
        images_per_text: images per candidate prompt (``N``).

    Raises:
        ValueError: on empty or repeated prompts, bad levels or counts, or a set with no candidate.

    Example:
        >>> fake = lambda words, idx, m: [[w + f"~{j}" if i in idx else w for i, w in enumerate(words)] for j in range(m)]
        >>> plan = plan_prompts(["a nurse"], [1], fake, m=2, images_per_text=3)[0]
        >>> [(sorted(t), d.texts, d.images_per_text) for t, d in plan.distributions.items()]
        [([], ('a nurse',), 6), ([0], ('a~0 nurse', 'a~1 nurse'), 3), ([1], ('a nurse~0', 'a nurse~1'), 3)]
    """
    m = _positive_int("m", m)
    images_per_text = _positive_int("images_per_text", images_per_text)
    prompts = list(prompts)
    if not prompts:
        raise ValueError("`prompts` must hold at least one prompt, but got none")
    repeated = sorted({p for p in prompts if prompts.count(p) > 1})
    if repeated:
        raise ValueError(f"`prompts` must be distinct, but got repeats {repeated}")
    per_prompt = _levels_by_prompt(prompts, levels)
    plans = []
    for prompt in prompts:
        words = tuple(prompt_words(prompt))
        usable = tuple(k for k in per_prompt[prompt] if k <= len(words))
        sets: dict[frozenset[int], None] = {frozenset(): None}  # the original, for representation, always
        for k in usable:
            sets.update(dict.fromkeys(required_sets(len(words), k)))
        dists = {}
        for t in sets:
            if not t:
                dists[t] = Distribution(prompt, t, (prompt,), m * images_per_text)
                continue
            texts = tuple(dict.fromkeys(" ".join(ws) for ws in replace_set(list(words), sorted(t), m)))
            if not texts:
                raise ValueError(f"the transmuter returned no prompt replacing words {sorted(t)} of {prompt!r}")
            dists[t] = Distribution(prompt, t, texts, images_per_text)
        plans.append(PromptPlan(prompt, words, usable, dists))
    if not any(p.levels for p in plans):
        longest = max(len(p.words) for p in plans)
        asked = sorted({k for ks in per_prompt.values() for k in ks})
        raise ValueError(f"`levels` {asked} exceed every prompt's number of words (at most {longest})")
    return plans


def _levels_by_prompt(prompts: Sequence[str], levels) -> dict[str, tuple[int, ...]]:
    if isinstance(levels, Mapping):
        missing = [p for p in prompts if p not in levels]
        if missing:
            raise ValueError(f"`levels` has no entry for prompt(s) {missing}")
        out = {p: tuple(sorted({_positive_int("levels[]", k) for k in levels[p]})) for p in prompts}
    else:
        chosen = tuple(sorted({_positive_int("levels[]", k) for k in levels}))
        out = {p: chosen for p in prompts}
    if not any(out.values()):
        raise ValueError("`levels` must hold at least one influence level k >= 1, but got none")
    return out


# ----------------------------------------------------------------------------- observing


Observations = dict[tuple[str, frozenset[int]], list[tuple[str, int]]]


def observe(plans: Sequence[PromptPlan], labeller: Labeller) -> Observations:
    """Label every image of every distribution: ``{(prompt, T): [(image key, group index), ...]}``.

    The labeller is called once per images-per-text count; ValueError if it returns the wrong counts.
    """
    labelled: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for n, texts in label_calls(plans):
        rows = labeller(texts, n)
        if len(rows) != len(texts):
            raise ValueError(f"the labeller returned {len(rows)} rows for {len(texts)} texts")
        for text, row in zip(texts, rows):
            row = [(str(key), int(g)) for key, g in row]
            if len(row) != n:
                raise ValueError(f"the labeller returned {len(row)} images for {text!r}, expected {n}")
            labelled[(text, n)] = row
    return {
        (plan.prompt, t): [x for text in d.texts for x in labelled[(text, d.images_per_text)]]
        for plan in plans
        for t, d in plan.distributions.items()
    }


def label_calls(plans: Sequence[PromptPlan]) -> list[tuple[int, list[str]]]:
    """The ``labeller(texts, n)`` calls :func:`observe` makes: per images-per-text count (ascending),
    every distinct text needing it, in plan order.

    Example:
        >>> fake = lambda words, idx, m: [[w + f"~{j}" if i in idx else w for i, w in enumerate(words)] for j in range(m)]
        >>> label_calls(plan_prompts(["a nurse"], [1], fake, m=2, images_per_text=3))
        [(3, ['a~0 nurse', 'a~1 nurse', 'a nurse~0', 'a nurse~1']), (6, ['a nurse'])]
    """
    wanted: dict[int, list[str]] = defaultdict(list)
    for plan in plans:
        for d in plan.distributions.values():
            wanted[d.images_per_text].extend(d.texts)
    return [(n, list(dict.fromkeys(texts))) for n, texts in sorted(wanted.items())]


# ----------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class WordInfluence:
    """One influence estimate, of a word in one prompt or averaged over the prompts holding it, with its
    Hoeffding half-width, bootstrap interval (``None`` when off) and distinct images.
    """

    word: str
    group: str
    k: int
    influence: float
    hoeffding: float
    bootstrap: tuple[float, float] | None
    n_images: int
    prompts: tuple[str, ...]

    @property
    def interval(self) -> tuple[float, float]:
        """The Hoeffding interval ``influence +- hoeffding``, clipped to [-1, 1]."""
        return max(-1.0, self.influence - self.hoeffding), min(1.0, self.influence + self.hoeffding)

    @property
    def abs_interval(self) -> tuple[float, float]:
        """The Hoeffding interval of ``|influence|`` (what the gate bounds)."""
        lo, hi = self.interval
        low = 0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))
        return low, max(abs(lo), abs(hi))


@dataclass(frozen=True)
class Representation:
    """``p(g)`` of an original prompt, its distance from parity and the Hoeffding half-width of ``p``."""

    prompt: str
    group: str
    p: float
    gap: float
    hoeffding: float
    n_images: int
    n_groups: int

    @property
    def interval(self) -> tuple[float, float]:
        """The Hoeffding interval of the gap, from ``p +- hoeffding`` clipped to [0, 1]."""
        lo, hi = max(0.0, self.p - self.hoeffding), min(1.0, self.p + self.hoeffding)
        parity = 1.0 / self.n_groups
        low = 0.0 if lo <= parity <= hi else min(abs(lo - parity), abs(hi - parity))
        return low, max(abs(lo - parity), abs(hi - parity))


@dataclass
class WordLevelResult:
    """Everything the gates and the report need, as plain data."""

    groups: tuple[str, ...]
    levels: tuple[int, ...]
    confidence: float
    per_prompt: list[WordInfluence] = field(default_factory=list)
    words: list[WordInfluence] = field(default_factory=list)
    representation: list[Representation] = field(default_factory=list)
    probabilities: dict[str, dict[frozenset[int], dict[str, float]]] = field(default_factory=dict)
    texts: dict[str, dict[frozenset[int], tuple[str, ...]]] = field(default_factory=dict)

    def word(self, word: str, group: str, k: int) -> WordInfluence:
        """The averaged (Figure 3) row of a word; KeyError names the known words, groups and levels."""
        for row in self.words:
            if (row.word, row.group, row.k) == (word, group, k):
                return row
        raise KeyError(
            f"no influence for word {word!r}, group {group!r}, k={k}; words: {sorted({r.word for r in self.words})}, "
            f"groups: {list(self.groups)}, levels: {list(self.levels)}"
        )

    def prompt_representation(self, prompt: str, group: str) -> Representation:
        for row in self.representation:
            if (row.prompt, row.group) == (prompt, group):
                return row
        raise KeyError(f"no representation for prompt {prompt!r}, group {group!r}")

    def to_json(self) -> dict:
        def row(r: WordInfluence) -> dict:
            return {"word": r.word, "group": r.group, "k": r.k, "influence": r.influence, "hoeffding": r.hoeffding,
                    "hoeffding_interval": list(r.interval), "bootstrap": None if r.bootstrap is None else list(r.bootstrap),
                    "n_images": r.n_images,
                    "prompts": list(r.prompts)}

        return {
            "groups": list(self.groups),
            "levels": list(self.levels),
            "confidence": self.confidence,
            "words": [row(r) for r in self.words],
            "per_prompt": [row(r) for r in self.per_prompt],
            "representation": [
                {"prompt": r.prompt, "group": r.group, "p": r.p, "gap": r.gap, "hoeffding": r.hoeffding,
                 "gap_interval": list(r.interval), "n_images": r.n_images}
                for r in self.representation
            ],
            "distributions": {
                prompt: [
                    {"replaced": sorted(t), "texts": list(self.texts[prompt][t]), "p": ps}
                    for t, ps in sets.items()
                ]
                for prompt, sets in self.probabilities.items()
            },
        }


def _indicators(obs: Observations, plan: PromptPlan, g: int) -> dict[frozenset[int], list[float]]:
    return {t: [1.0 if label == g else 0.0 for _, label in obs[(plan.prompt, t)]] for t in plan.distributions}


def _combination(
    terms: Iterable[tuple[list[tuple[str, int]], float]], g: int, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float, tuple[float, float] | None, int]:
    """Value, Hoeffding half-width, bootstrap interval and distinct images of ``sum w * mean(stratum)``."""
    strata, weights = [], []
    per_image: dict[str, float] = defaultdict(float)
    for images, w in terms:
        strata.append(np.array([1.0 if label == g else 0.0 for _, label in images]))
        weights.append(w)
        if w != 0.0:  # zero-weight strata only keep the bootstrap's draws aligned with the metrics module's
            for key, _ in images:
                per_image[key] += w / len(images)
    coef = np.array(weights)
    value = float(np.array([s.mean() for s in strata]) @ coef)
    half = hoeffding_half_width_combination(list(per_image.values()), [1] * len(per_image), 1.0 - confidence)

    def stat(*resampled: np.ndarray) -> np.ndarray:
        return np.stack([r.mean(axis=-1) for r in resampled], axis=-1) @ coef

    boot = None
    if n_resamples > 0:
        boot = percentile_bootstrap(strata, stat, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return value, half, boot, len(per_image)


def analyse(
    plans: Sequence[PromptPlan],
    observations: Observations,
    groups: Sequence[str],
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> WordLevelResult:
    """Influences per prompt and per word (averaged), with Hoeffding and bootstrap, and representation.

    Args:
        observations: from :func:`observe`; group indices index ``groups``.
        confidence: of the Hoeffding bounds and bootstrap intervals.
        n_resamples: bootstrap resamples; 0 skips the bootstrap.

    Raises:
        ValueError: fewer than 2 groups, a label out of range, bad ``confidence`` or ``n_resamples``.
        KeyError: a planned distribution has no observations.
    """
    groups = tuple(str(g) for g in groups)
    if len(groups) < 2 or len(set(groups)) != len(groups):
        raise ValueError(f"`groups` must hold at least 2 distinct groups, but got {list(groups)}")
    for plan in plans:
        for t in plan.distributions:
            if (plan.prompt, t) not in observations:
                raise KeyError(f"`observations` has no images for prompt {plan.prompt!r} with words {sorted(t)} replaced")
            bad = {lab for _, lab in observations[(plan.prompt, t)] if not 0 <= lab < len(groups)}
            if bad:
                raise ValueError(f"group labels must be in range({len(groups)}) for groups {list(groups)}, but got {sorted(bad)}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"`confidence` must be in (0, 1), but got {confidence!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 0:
        raise ValueError(f"`n_resamples` must be a non-negative integer, but got {n_resamples!r}")
    delta = 1.0 - float(confidence)
    levels = tuple(sorted({k for p in plans for k in p.levels}))
    result = WordLevelResult(groups, levels, float(confidence))
    for plan in plans:
        n = len(plan.words)
        result.texts[plan.prompt] = {t: d.texts for t, d in plan.distributions.items()}
        result.probabilities[plan.prompt] = {t: {} for t in plan.distributions}
        for g, group in enumerate(groups):
            ind = _indicators(observations, plan, g)
            probs = group_probabilities(ind)
            for t, p in probs.items():
                result.probabilities[plan.prompt][t][group] = p
            base = ind[frozenset()]
            result.representation.append(Representation(
                plan.prompt, group, probs[frozenset()], representation_gap(probs[frozenset()], len(groups)),
                hoeffding_half_width(len(base), delta), len(base), len(groups),
            ))
            for k in plan.levels:
                counts = {t: len(v) for t, v in ind.items()}
                values = influence_scores(probs, n, k)
                halves = influence_half_widths(counts, n, k, delta)
                boots = (influence_bootstrap_intervals(ind, n, k, confidence=confidence, n_resamples=n_resamples, seed=seed)
                         if n_resamples > 0 else [None] * n)
                for i, word in enumerate(plan.words):
                    used = sum(counts[t] for t in influence_weights(n, k, i))
                    result.per_prompt.append(
                        WordInfluence(word, group, k, values[i], halves[i], boots[i], used, (plan.prompt,))
                    )
    result.words = _averaged(plans, observations, groups, levels, result.per_prompt, confidence, n_resamples, seed)
    # rows read best with a word's groups side by side: level, then word (first appearance), then group
    order = {w: i for i, w in enumerate(dict.fromkeys(w for p in plans for w in p.words))}
    rank = {g: i for i, g in enumerate(groups)}
    result.words.sort(key=lambda r: (r.k, order[r.word], rank[r.group]))
    position = {(p.prompt, w): i for p in plans for i, w in reversed(list(enumerate(p.words)))}
    prompt_rank = {p.prompt: i for i, p in enumerate(plans)}
    result.per_prompt.sort(key=lambda r: (prompt_rank[r.prompts[0]], r.k, position[(r.prompts[0], r.word)], rank[r.group]))
    return result


def _averaged(plans, observations, groups, levels, per_prompt, confidence, n_resamples, seed) -> list[WordInfluence]:
    """Figure 3: each word's influence averaged over the prompts containing it, with its own bounds."""
    out = []
    for k in levels:
        with_k = [p for p in plans if k in p.levels]
        for g, group in enumerate(groups):
            rows = [r for r in per_prompt if r.k == k and r.group == group]
            values = [[r.influence for r in rows if r.prompts == (p.prompt,)] for p in with_k]
            means = average_word_influence([list(p.words) for p in with_k], values)
            for word, mean in means.items():
                holding = [p for p in with_k if word in p.words]
                weights = word_weights(holding, word, k)
                # strata in each prompt's required_sets order, so one prompt reproduces influence_bootstrap_intervals
                order = [(p.prompt, t) for p in holding for t in required_sets(len(p.words), k)]
                terms = [(observations[key], weights.get(key, 0.0)) for key in order]
                _, half, boot, n_img = _combination(terms, g, confidence, n_resamples, seed)
                out.append(WordInfluence(word, group, k, mean, half, boot, n_img, tuple(p.prompt for p in holding)))
    return out


def word_weights(plans: Sequence[PromptPlan], word: str, k: int) -> dict[tuple[str, frozenset[int]], float]:
    """``{(prompt, replaced set): w}``: the word's ``k``-level influence averaged over the prompts of ``plans`` holding
    it at level ``k`` (and over its positions in each) is ``sum w p(group | prompt, set)`` (Figure 3's average, as one
    linear form)."""
    holding = [p for p in plans if k in p.levels and word in p.words]
    weights: dict[tuple[str, frozenset[int]], float] = defaultdict(float)
    for p in holding:
        positions = [i for i, w in enumerate(p.words) if w == word]
        for i in positions:
            for t, w in influence_weights(len(p.words), k, i).items():
                weights[(p.prompt, t)] += w / len(positions) / len(holding)
    return dict(weights)


def run(
    prompts: Sequence[str],
    groups: Sequence[str],
    levels: Sequence[int],
    replace_set: Replacer,
    labeller: Labeller,
    *,
    m: int = 3,
    images_per_text: int = 2,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> WordLevelResult:
    """The whole pipeline: plan, generate and label, analyse.

    Example:
        A synthetic generator: replacing "doctor" makes half the images female.

        >>> fake = lambda words, idx, m: [[w + f"~{j}" if i in idx else w for i, w in enumerate(words)] for j in range(m)]
        >>> def labeller(texts, n):  # group 1 ("female") for every other image when "doctor" is gone
        ...     return [[(f"{t}#{i}", int("doctor" not in t.split() and i % 2 == 1)) for i in range(n)] for t in texts]
        >>> res = run(["a doctor"], ["male", "female"], [1], fake, labeller, m=3, images_per_text=2)
        >>> row = res.word("doctor", "female", 1)
        >>> row.influence, round(row.hoeffding, 4), row.n_images
        (0.5, 0.7841, 12)
        >>> res.word("a", "female", 1).influence
        0.0
    """
    plans = plan_prompts(prompts, levels, replace_set, m, images_per_text)
    return analyse(plans, observe(plans, labeller), groups, confidence=confidence, n_resamples=n_resamples, seed=seed)


def word_ids(
    prompts: Sequence[str], groups: Sequence[str], levels: Sequence[int] | Mapping[str, Sequence[int]]
) -> list[tuple[str, str, int, str]]:
    """``(word, group, k, id)`` of every averaged-word gate, in first-appearance order.

    The id is ``<word>-<group>``, plus ``-k<k>`` for ``k > 1``; equal slugs get ``_2``, ``_3`` suffixes.

    Example:
        >>> word_ids(["a doctor", "the 500"], ["male", "female"], [1, 2])[:3]
        [('a', 'male', 1, 'a-male'), ('a', 'female', 1, 'a-female'), ('doctor', 'male', 1, 'doctor-male')]
    """
    out = []
    per_prompt = _levels_by_prompt(prompts, levels)
    word_slugs = _unique_slugs(dict.fromkeys(w for p in prompts for w in prompt_words(p)))
    for k in sorted({k for ks in per_prompt.values() for k in ks}):
        words = dict.fromkeys(
            w for p in prompts if k in per_prompt[p] and len(prompt_words(p)) >= k for w in prompt_words(p)
        )
        for w in words:
            for g in groups:
                out.append((w, g, k, f"{word_slugs[w]}-{slug(g)}" + ("" if k == 1 else f"-k{k}")))
    return out


def _unique_slugs(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    used: dict[str, int] = {}
    for item in items:
        s = slug(item)
        used[s] = used.get(s, 0) + 1
        out[item] = s if used[s] == 1 else f"{s}_{used[s]}"
    return out


def representation_ids(prompts: Sequence[str], groups: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(prompt, group, id)`` of every representation gate: ``<prompt slug>-<group slug>``."""
    prompt_slugs = _unique_slugs(prompts)
    return [(p, g, f"{prompt_slugs[p]}-{slug(g)}") for p in prompts for g in groups]


def counts_summary(plans: Sequence[PromptPlan]) -> dict[str, int]:
    """How much a plan costs: prompts to generate (distinct texts) and images."""
    pairs = {(text, d.images_per_text) for p in plans for d in p.distributions.values() for text in d.texts}
    best: dict[str, int] = {}
    for text, n in pairs:
        best[text] = max(best.get(text, 0), n)
    return {"texts": len(best), "images": sum(best.values()),
            "distributions": sum(len(p.distributions) for p in plans)}


class WordInfluenceStudy(Study):
    """The session's word-level analysis, per slice of prompts, computed on first use.

    :attr:`result` analyses every prompt, :meth:`for_word` only the prompts holding a word and
    :meth:`for_prompt` one prompt, so ``-k doctor`` generates only what it needs; rows are the same
    whichever slice computes them (bootstrap seeded per prompt and per word).
    """

    def __init__(self, bench, settings):
        super().__init__(bench)
        self.settings = settings
        self._measured: set[str] = set()
        self._judged: dict[str, tuple[str, object, int]] = {}  # image key -> (its text, its ref, the group CLIP picked)
        self._observed: Observations = {}  # what CLIP said of each distribution's images, in text order

    @property
    def result(self) -> WordLevelResult:
        """Every prompt of the suite."""
        return self.subset(self.settings.prompts)

    @property
    def truncation(self):
        """How the generator's tokenizer truncates every prompt sent to it so far (originals and candidates
        of the prompts measured: :attr:`measured`; :class:`~t2i_fairness.metrics.truncation.Truncation`),
        warned about when any is truncated."""

        measured = self.measured

        def make():
            from t2i_fairness.generators.tokens import prompt_truncation, warn_truncation
            from t2i_fairness.metrics.truncation import Truncation

            texts = list(dict.fromkeys(t for by_set in measured.texts.values() for ts in by_set.values() for t in ts))
            source = getattr(self.bench, "source", None)
            if source is None:
                return Truncation.not_counted("no generator source", len(texts))
            found = prompt_truncation(source, texts)
            warn_truncation(found, "word influence")
            return found

        return self._once(("truncation", tuple(sorted(measured.texts))), make)

    # -- the gated indicators (each read by the gate test of its name: test_<method>) ---------------------
    def at_images(self, n: int) -> "WordInfluenceStudy":
        """This analysis on the first ``n`` images per candidate prompt (``m n`` of each original), the same
        candidates (``--t2i-sequential``'s looks)."""
        import dataclasses

        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= self.settings.images_per_text:
            raise ValueError(f"a look at {n!r} images per candidate prompt: must be 1..{self.settings.images_per_text}")
        return WordInfluenceStudy(self.bench, dataclasses.replace(self.settings, images_per_text=n))

    def planned_looks(self) -> tuple[list[int], str]:
        from t2i_fairness.metrics.sequential import round_sizes

        return (round_sizes(int(self.settings.images_per_text), int(self.bench.factory.batch_size)),
                "images per candidate prompt")

    @indicator("hoeffding")
    def word_influence(self, word_case: tuple) -> Indicator:
        """``|I_k(w)| <= x`` for a word and group: Hoeffding's interval (Theorem 1) and its p-value."""
        from t2i_fairness.metrics.evidence import Hoeffding

        word, group, k = word_case
        result = self.for_word(word, group, k)  # the prompts holding the word, alone
        row = result.word(word, group, k)
        per_prompt = {r.prompts[0]: r.influence for r in result.per_prompt if (r.word, r.group, r.k) == (word, group, k)}
        return Indicator(abs(row.influence), row.n_images, "hoeffding", Hoeffding.from_half_width(
            abs(row.influence), row.hoeffding, row.abs_interval, row.n_images, confidence=result.confidence,
            method="Hoeffding (|influence|)"), higher_is_better=False,
            judged=self.judged_share(word_weights(self.plans(self.word_prompts(word, k)), word, k), group, 0.0),
            details={
            "word": word, "group": group, "k": k, "influence": row.influence,
            "hoeffding_half_width": row.hoeffding, "hoeffding_interval": list(row.interval),
            "bootstrap_interval": None if row.bootstrap is None else list(row.bootstrap),
            "confidence": result.confidence, "influence_by_prompt": per_prompt})

    @indicator("hoeffding")
    def representation(self, prompt_case: tuple) -> Indicator:
        """``|p(g) - 1/|groups|| <= y`` for a prompt and group (HEIM's imbalance), by Hoeffding."""
        from t2i_fairness.metrics.evidence import Hoeffding

        prompt, group = prompt_case
        result = self.for_prompt(prompt, group)
        r = result.prompt_representation(prompt, group)
        return Indicator(r.gap, r.n_images, "hoeffding", Hoeffding.from_half_width(
            r.gap, r.hoeffding, r.interval, r.n_images, confidence=result.confidence, upper=1.0 - 1.0 / r.n_groups,
            method="Hoeffding (|p - parity|)"), higher_is_better=False,
            judged=self.judged_share({(prompt, frozenset()): 1.0}, group, 1.0 / r.n_groups), details={
            "prompt": prompt, "group": group, "p": r.p, "parity": 1 / r.n_groups,
            "hoeffding_half_width_of_p": r.hoeffding, "confidence": result.confidence})

    def for_word(self, word: str, group: str, k: int) -> WordLevelResult:
        """The prompts holding ``word`` at level ``k`` (all of them when none does: the error names the known words)."""
        return self.subset(self.word_prompts(word, k))

    def for_prompt(self, prompt: str, group: str | None = None) -> WordLevelResult:
        """One prompt (its representation, its per-prompt influences)."""
        return self.subset([prompt])

    @property
    def measured(self) -> WordLevelResult:
        """The prompts measured so far (every prompt before any was): what the summary tables show."""
        done = [p for p in self.settings.prompts if p in self._measured]
        return self.subset(done or self.settings.prompts)

    def word_prompts(self, word: str, k: int) -> list[str]:
        s = self.settings
        holding = [p for p in s.prompts if k in s.levels[p] and word in prompt_words(p)]
        return holding or list(s.prompts)

    def subset(self, prompts) -> WordLevelResult:
        """The analysis of ``prompts`` (a slice of the suite, in suite order)."""
        chosen = tuple(p for p in self.settings.prompts if p in set(prompts))
        if not chosen:
            raise ValueError(f"no prompt of the suite among {list(prompts)}; the suite: {list(self.settings.prompts)}")
        self._measured.update(chosen)
        everything = ("result", tuple(self.settings.prompts))
        if everything in self._memo:  # the whole suite's rows are the slice's rows
            return self._memo[everything]
        return self._once(("result", chosen), lambda: self._run(chosen))

    def judged_share(self, weights: Mapping[tuple[str, frozenset[int]], float], group: str, centre: float):
        """A gate's value ``|sum w p(group | prompt, set) - centre|`` as CLIP's judgements of each image (does it show
        the group?), one audit group per prompt text (its images independent draws), for ``t2i-fairness audit``."""
        from t2i_fairness.audit import JudgedShare, JudgedUnit

        s = self.settings
        g = s.groups.index(group)
        question = f"Does the image show {s.template.format(group=group)}?"
        asked = "CLIP picked the closest of: " + " | ".join(repr(s.template.format(group=x)) for x in s.groups)
        by_text: dict[str, float] = {}
        units: list = []
        for (prompt, t), w in weights.items():
            d = self.plans([prompt])[0].distributions[t]
            rows = self._observed[(prompt, t)]
            for i, text in enumerate(d.texts):
                if text not in by_text:
                    units += [JudgedUnit(f"{key}#{group}", str(getattr(self._judged[key][1], "path", "")), text, question, asked,
                                         int(label == g), text, j)
                              for j, (key, label) in enumerate(rows[i * d.images_per_text:(i + 1) * d.images_per_text])]
                by_text[text] = by_text.get(text, 0.0) + w / len(d.texts)
        return JudgedShare("CLIP", tuple(units), form="distance", weights=tuple(by_text.items()), centre=centre)

    def judgements(self, prompts: Sequence[str] | None = None, group: str | None = None) -> list:
        """CLIP's zero-shot group judgements (:class:`~t2i_fairness.metrics.agreement.Judgement`) of the images
        judged so far (of ``prompts``' distributions when given): per image and group (``group`` only, when
        given), ``Does the image show a photo of a {group}?``, yes for the group CLIP picked among the
        templates; labelled where the image carries what it shows and shows one of the groups."""
        from t2i_fairness.metrics.agreement import Judgement

        s = self.settings
        texts = None if prompts is None else {t for plan in self.plans(list(prompts))
                                              for d in plan.distributions.values() for t in d.texts}
        out = []
        for key, (text, ref, label) in self._judged.items():
            if texts is not None and text not in texts:
                continue
            shown = _groups_shown(ref, s.groups)
            for i, g in enumerate(s.groups):
                if group is None or g == group:
                    out.append(Judgement(key, str(ref.path), f"Does the image show {s.template.format(group=g)}? "
                                         f"(CLIP picks one of: {', '.join(s.template.format(group=x) for x in s.groups)})",
                                         g, "test_word_influence", label == i, None if shown is None else g in shown))
        return out

    def _models(self):
        return self.bench.scorer("masked_lm"), self.bench.scorer("clip")

    def plans(self, prompts: Sequence[str]) -> list[PromptPlan]:
        """The distributions of ``prompts`` (the masked LM's candidates; nothing generated)."""
        s = self.settings
        replacer, _ = self._models()
        return self._once(("plans", tuple(prompts)), lambda: plan_prompts(
            list(prompts), {p: s.levels[p] for p in prompts}, replacer.replace_set, s.m, s.images_per_text))

    def requests(self, prompts: Sequence[str]) -> list:
        """The image requests the analysis of ``prompts`` makes (:func:`label_calls`; nothing generated)."""
        from t2i_fairness.spine.plan import requests_of

        chosen = [p for p in self.settings.prompts if p in set(prompts)]
        return [r for n, texts in label_calls(self.plans(chosen)) for r in requests_of(texts, n)]

    def _run(self, prompts: tuple[str, ...]) -> WordLevelResult:
        s, bench = self.settings, self.bench
        _, clip = self._models()
        group_features = bench.text_features(clip, [s.template.format(group=g) for g in s.groups])

        def labeller(texts, n):
            refs = bench.images(list(texts), n, desc=f"word influence: {len(texts)} prompts x {n}")
            flat = [r for row in refs for r in row]
            labels = zero_shot_labels(bench.features(clip, flat, desc="CLIP word influence"), group_features)
            offset = 0
            for text, row in zip(texts, refs):  # what CLIP said of each image, for judgements()
                self._judged.update((r.key, (text, r, int(labels[offset + i]))) for i, r in enumerate(row))
                offset += len(row)
            it = iter(zip((r.key for r in flat), labels.tolist()))
            return [[next(it) for _ in row] for row in refs]

        plans = self.plans(prompts)
        o = bench.options
        observed = observe(plans, labeller)
        self._observed.update(observed)
        return analyse(plans, observed, s.groups, confidence=o.confidence, n_resamples=o.bootstrap, seed=o.seed)


def _groups_shown(ref, groups: Sequence[str]) -> frozenset[str] | None:
    """The groups an image shows by its attached truth; None without a truth or when it shows none of them
    (an image of no group has no right answer to a forced choice among groups)."""
    from PIL import Image

    from t2i_fairness.base.truth import truth_of

    with Image.open(ref.path) as im:
        truth = truth_of(im)
    if truth is None:
        return None
    shown = frozenset(g for g in groups if g.casefold() in {c.casefold() for c in truth["concepts"]})
    return shown or None


def needs(call, study: WordInfluenceStudy) -> list:
    """What a word-level test reads: a word's prompts (``word_case``), one prompt (``prompt_case``),
    or every prompt (the report, any other test)."""
    from t2i_fairness.spine.plan import Need

    p = call.params
    if "word_case" in p:
        word, group, k = p["word_case"]
        return [Need("for_word", (word, group, k), tuple(study.requests(study.word_prompts(word, k))))]
    if "prompt_case" in p:
        prompt, group = p["prompt_case"]
        return [Need("for_prompt", (prompt, group), tuple(study.requests([prompt])))]
    return [Need("subset", (tuple(study.settings.prompts),), tuple(study.requests(study.settings.prompts)))]
