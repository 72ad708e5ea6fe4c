"""Rounds of images and the gates they decide: the sequential design's controller (plain, no pytest).

:func:`run_rounds` is the decision loop a sequential run makes (``docs/sequential.md``): images come
in rounds of :func:`~t2i_fairness.metrics.sequential.round_sizes` per prompt (multiples of the batch
size, so the images of round ``r`` are the first ``n_r`` images of the fixed-N run, byte for byte);
after each round every open gate is decided or left open; a gate that reaches ``N`` gets the fixed-N
verdict of :func:`~t2i_fairness.gating.gate.judge`. The caller supplies the data through callbacks,
so the same loop serves the simulation bench (``bench/bench_sequential.py``) and, once the suite
makes its images in rounds, the plugin (what remains for that is listed in ``docs/sequential.md``).

Error control (the run's ``alpha``, family-wise): ``alpha / 2`` for early fails, either per gate
(``control="bonferroni"``, what the suite's ``--t2i-sequential`` does: a gate fails early when its own
e-process reaches :func:`e_threshold` ``= m / (alpha / 2)``) or by closed testing on the share gates'
e-processes at every look (``control="e-holm"``,
:func:`~t2i_fairness.metrics.sequential.e_closed_rejections`; at every look it rejects every gate
Bonferroni rejects, and possibly more); ``alpha / 2`` for the fixed-N
verdicts of the gates that reach ``N`` (``judge`` with ``alpha / 2`` and the run's gate count, then
the session's Holm step-down as in a fixed-N run). Passing early (bound met, futility, nested
coverage) is non-binding: it cannot add a false alarm.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.sequential import (
    KINDS,
    REASONS,
    Look,
    Sweeps,
    coverage_settled,
    e_closed_rejections,
    look,
    mixture_e_process,
    round_sizes,
)

__all__ = ["CONTROLS", "NULL_SHARES", "NULL_SHARES_SOURCE", "PromptUse", "SequentialGate", "SequentialOutcome", "Sweeps",
           "decide_look", "e_threshold", "image_range", "look_record", "null_share", "run_rounds", "sequential_images",
           "stopped_verdict"]

#: early-fail rules of :func:`run_rounds`: per-gate Bonferroni (the suite's) and e-Holm closed testing
CONTROLS = ("bonferroni", "e-holm")


@dataclass(frozen=True)
class SequentialGate:
    """A gate as the sequential design sees it.

    Attributes:
        gate: the gate id (a key of the thresholds file).
        kind: a key of :data:`~t2i_fairness.metrics.sequential.KINDS` (``share``, ``coverage``, ...).
        prompts: the prompts whose images feed it (a key per prompt; gates sharing a prompt share its images).
        planned: images per prompt of the fixed-N run (``N``).
    """

    gate: str
    kind: str
    prompts: tuple[str, ...]
    planned: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"gate {self.gate}: unknown sequential kind {self.kind!r}; one of {sorted(KINDS)}")
        if not self.prompts or self.planned < 1:
            raise ValueError(f"gate {self.gate}: needs at least one prompt and planned >= 1")


@dataclass
class SequentialOutcome:
    """Per gate: why and when it stopped; for the run: images made against the fixed-N plan.

    Attributes:
        records: gate -> the record reports carry (reason, round, images used and planned, wealth,
            sequence at stopping, conditional power, verdict).
        images: images made (per prompt, the largest round any of its gates needed), summed over prompts.
        planned_images: the fixed-N run's images over the same prompts.
        method: the error-control method, for the summary.
    """

    records: dict = field(default_factory=dict)
    images: int = 0
    planned_images: int = 0
    method: str = ""

    def summary_lines(self) -> list[str]:
        """The terminal summary's lines: one per gate (verdict, reason, round, images used of N,
        sequence at stopping), then the run's images against the fixed-N plan and the method.

        Example:
            >>> o = SequentialOutcome({"g": {"verdict": "pass", "reason": "pass: futility", "round": 1, "rounds": 3,
            ...     "images_per_prompt": 4, "planned_per_prompt": 16, "sequence": [0.61, 0.74]}}, 400, 1600, "e-Holm")
            >>> print("\\n".join(o.summary_lines()))
            g: pass (pass: futility) at round 1 of 3, 4 of 16 images per prompt, sequence [0.6100, 0.7400]
            sequential: 400 images of the fixed-N plan's 1600 (25%); e-Holm
        """
        out = []
        for gate, r in self.records.items():
            seq = r.get("sequence")
            tail = f", sequence [{seq[0]:.4f}, {seq[1]:.4f}]" if seq else ""
            out.append(f"{gate}: {r['verdict']} ({r['reason']}) at round {r['round']} of {r['rounds']}, "
                       f"{r['images_per_prompt']} of {r['planned_per_prompt']} images per prompt{tail}")
        share = self.images / self.planned_images if self.planned_images else 0.0
        out.append(f"sequential: {self.images} images of the fixed-N plan's {self.planned_images} ({share:.0%}); "
                   f"{self.method}")
        return out


def run_rounds(gates: list[SequentialGate], thresholds, options, *, batch: int,
               scores: Callable[[str, int], np.ndarray], coverage: Callable[[str, int], float],
               full_measurement: Callable[[str], object], family_size: int | None = None,
               gamma: float = 0.01, growth: float = 2.0, control: str = "e-holm",
               decide: str = "sweeps") -> SequentialOutcome:
    """Decide ``gates`` in rounds; return their records and the run's image totals.

    Args:
        gates: the run's gates (every kind; those without a valid early stop run to ``N``).
        thresholds: the run's :class:`~t2i_fairness.gating.thresholds.ThresholdFile` (every gate has a bound).
        options: the run's :class:`~t2i_fairness.spine.options.T2IOptions` (``alpha`` and the gate settings).
        batch: the generation batch size (rounds are its multiples).
        scores: ``scores(gate, n)`` -> ``(prompts, n)`` per-image scores in [0, 1] of a ``share`` /
            ``bounded`` gate, the first ``n`` images of every prompt.
        coverage: ``coverage(gate, n)`` -> the coverage of a ``coverage`` gate on the first ``n``
            images per prompt.
        full_measurement: ``full_measurement(gate)`` -> the gate's fixed-N
            :class:`~t2i_fairness.gating.verdicts.Measurement` (called only for gates that reach ``N``).
        family_size: Holm's ``m`` (default: the number of gates).
        gamma: the futility level.
        growth: round size factor.
        control: the early-fail rule at ``alpha / 2`` (:data:`CONTROLS`): ``"e-holm"`` (default; closed
            testing over the share gates' e-processes at each look) or ``"bonferroni"`` (a gate fails
            when its own e-process reaches :func:`e_threshold` ``(alpha, m)``: the rule of the suite's
            ``--t2i-sequential``, which decides each gate without waiting for the others). At the same
            look Bonferroni never rejects a gate e-Holm does not (a mean over any set holding a gate
            with ``e >= m / a`` is at least ``e / m >= 1 / a``).
        decide: how a share gate's look is decided: ``"sweeps"`` (default;
            :func:`~t2i_fairness.metrics.sequential.look` on the observed sweeps, an e-process fail possible
            at ``N`` too) or ``"suite"`` (:func:`decide_look` on the gate's value at the look, exactly what
            the suite's ``--t2i-sequential`` calls: its futility spread is a share's at the current mean,
            and a gate at ``N`` gets the fixed-N test alone); ``"suite"`` needs ``control="bonferroni"``.

    Raises:
        ValueError: a gate without a bound in ``thresholds`` (named), ``batch < 1``, an unknown ``control`` or
            ``decide``, ``decide="suite"`` with e-Holm.

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.gate import measure
        >>> from t2i_fairness.gating.thresholds import Bound, ThresholdFile
        >>> from t2i_fairness.spine.options import T2IOptions
        >>> rng = np.random.default_rng(0)
        >>> data = {"low": rng.random((200, 16)) < 0.3, "high": rng.random((200, 16)) < 0.9}
        >>> t = ThresholdFile(Path("t.yaml"), {"low": Bound("min", 0.5), "high": Bound("min", 0.5)})
        >>> gates = [SequentialGate(g, "share", tuple(f"{g}{i}" for i in range(200)), 16) for g in data]
        >>> out = run_rounds(gates, t, T2IOptions(), batch=4, scores=lambda g, n: data[g][:, :n],
        ...                  coverage=None, full_measurement=None)
        >>> [(g, r["reason"], r["images_per_prompt"], r["verdict"]) for g, r in sorted(out.records.items())]
        [('high', 'pass: bound met with certainty', 4, 'pass'), ('low', 'fail: bound excluded', 4, 'fail')]
        >>> out.images, out.planned_images
        (1600, 6400)
        >>> run_rounds(gates, t, T2IOptions(), batch=4, scores=lambda g, n: data[g][:, :n], coverage=None,
        ...            full_measurement=None, control="bonferroni").records["low"]["e_threshold"]
        80.0
    """
    from t2i_fairness.gating.gate import judge

    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive integer, but got {batch!r}")
    if control not in CONTROLS:
        raise ValueError(f"`control` must be one of {list(CONTROLS)}, but got {control!r}")
    if decide not in ("sweeps", "suite") or (decide == "suite" and control != "bonferroni"):
        raise ValueError(f"`decide` must be 'sweeps' or 'suite' (with control='bonferroni'), but got {decide!r} "
                         f"with control={control!r}")
    for g in gates:
        if g.gate not in thresholds.gates:
            raise ValueError(f"gate {g.gate}: no bound in {thresholds.path}; a sequential run needs every gate's bound")
    alpha = float(options.alpha)
    m = int(family_size or len(gates))
    z_fail = float(-_special.ndtri(alpha / 2 / m))
    threshold = e_threshold(alpha, m)
    schedules = {g.gate: round_sizes(g.planned, batch, first=batch, growth=growth) for g in gates}
    betting = [g for g in gates if KINDS[g.kind] == "betting"]
    wealth = {g.gate: 1.0 for g in betting}
    stopped: dict[str, tuple[str, int, int, object]] = {}  # gate -> (reason, round, n, look)
    rounds = max(len(s) for s in schedules.values())
    for r in range(rounds):
        current = {}
        for g in betting:
            if g.gate in stopped:
                continue
            n = schedules[g.gate][min(r, len(schedules[g.gate]) - 1)]
            x = np.asarray(scores(g.gate, n), dtype=np.float64)
            if x.shape != (len(g.prompts), n):
                raise ValueError(f"gate {g.gate}: scores must have shape ({len(g.prompts)}, {n}), got {x.shape}")
            y = x.mean(axis=0)
            b = thresholds.gates[g.gate]
            wealth[g.gate] = float(mixture_e_process(y, b.value, b.direction, prompts=len(g.prompts),
                                                     n_target=max(1.0, g.planned / 4))[-1])
            current[g.gate] = (g, y, n)
        names = [g.gate for g in betting]
        if control == "e-holm":
            rejected = dict(zip(names, e_closed_rejections([wealth[k] for k in names], alpha / 2))) if names else {}
        else:  # per gate: its own wealth against m / (alpha / 2)
            rejected = {k: wealth[k] >= threshold for k in names}
        for name, (g, y, n) in current.items():
            b = thresholds.gates[name]
            if decide == "suite":
                lk = decide_look(g.kind, float(y.mean()), Sweeps(len(g.prompts), n, g.planned), b, alpha=alpha,
                                 family_size=m, rounds=len(schedules[name]), gamma=gamma)
                if lk.reason == "full":
                    stopped[name] = ("full", r + 1, n, None)
                    continue
            else:
                lk = look(y, g.planned, b.value, b.direction, prompts=len(g.prompts), e_threshold=math.inf,
                          z_fail=z_fail, gamma=gamma, looks=len(schedules[name]), rejected=rejected[name])
            if lk.stopped:
                stopped[name] = (lk.reason, r + 1, n, lk)
        for g in gates:
            if g.gate in stopped or KINDS[g.kind] == "betting":
                continue
            n = schedules[g.gate][min(r, len(schedules[g.gate]) - 1)]
            b = thresholds.gates[g.gate]
            if n == g.planned:
                stopped[g.gate] = ("full", r + 1, n, None)
            elif KINDS[g.kind] == "nested" and coverage_settled(coverage(g.gate, n), b.value, b.direction):
                stopped[g.gate] = ("met", r + 1, n, None)
    level = dataclasses.replace(options, alpha=alpha / 2)
    early = (f"e-Holm (closed testing, mean of e-processes) at alpha/2 = {alpha / 2:g}" if control == "e-holm" else
             f"per-gate Bonferroni (e-process >= m / (alpha/2) = {threshold:g}) at alpha/2 = {alpha / 2:g}")
    out = SequentialOutcome(method=f"{early} for early fails; fixed-N test at alpha/2 over {m} gates for gates that "
                                   "ran to N")
    for g in gates:
        reason, rnd, n, lk = stopped[g.gate]
        verdict = {"fail": "fail", "met": "pass", "futility": "pass"}.get(reason)
        record = {"reason": REASONS[reason], "round": rnd, "rounds": len(schedules[g.gate]),
                  "images_per_prompt": n, "planned_per_prompt": g.planned, "kind": g.kind,
                  "images": n * len(g.prompts), "planned_images": g.planned * len(g.prompts)}
        if lk is not None:
            record.update(wealth=lk.wealth, sequence=[lk.lower, lk.upper], conditional_power=lk.conditional_power)
            if control == "bonferroni":
                record["e_threshold"] = threshold
        if reason == "full":
            rec, _ = judge(full_measurement(g.gate), thresholds, {}, level, family_size=m)
            verdict = rec.status
            record["p_value"], record["interval"] = rec.p_value, rec.interval
        if KINDS[g.kind] == "fixed":
            record["note"] = "no valid early stop for this kind: runs to N"
        record["verdict"] = verdict
        out.records[g.gate] = record
    need: dict[str, int] = {}
    planned: dict[str, int] = {}
    for g in gates:
        for p in g.prompts:
            need[p] = max(need.get(p, 0), out.records[g.gate]["images_per_prompt"])
            planned[p] = max(planned.get(p, 0), g.planned)
    out.images, out.planned_images = sum(need.values()), sum(planned.values())
    return out


def image_range(requests, batch: int, *, images_per_hour: float | None = None) -> dict:
    """Best and worst case images of a sequential run over a plan's requests (the ``plan`` command's hook).

    Worst case: the fixed-N plan itself (no gate uses more than ``N`` images per prompt). Best case:
    every gate decided after the first round, one batch per prompt (``min(batch, n)``), whatever the
    gates' kinds: :func:`sequential_images` counts per gate (kinds that run to ``N``, the first round
    of each family's look) and adds the null-model expectation (``t2i-fairness plan --t2i-sequential``
    uses it). GPU hours: pass
    ``images_per_hour`` (the rate lookup the plan's cost estimate uses, when one exists).

    Args:
        requests: :class:`~t2i_fairness.spine.plan.ImageRequest` items (``prompt``, ``n``); a prompt
            asked twice counts at its largest ``n``.
        batch: the generation batch size (>= 1).
        images_per_hour: a generation rate (> 0), or ``None`` for no hours.

    Raises:
        ValueError: ``batch < 1`` or a rate that is not positive.

    Example:
        >>> from t2i_fairness.spine.plan import ImageRequest
        >>> image_range([ImageRequest("a", 16), ImageRequest("b", 16), ImageRequest("a", 8)], 4)
        {'best_images': 8, 'worst_images': 32}
        >>> image_range([ImageRequest("a", 16)], 4, images_per_hour=8280.0)["worst_hours"]
        0.0019
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive integer, but got {batch!r}")
    per_prompt: dict[str, int] = {}
    for r in requests:
        per_prompt[r.prompt] = max(per_prompt.get(r.prompt, 0), int(r.n))
    out = {"best_images": sum(min(batch, n) for n in per_prompt.values()), "worst_images": sum(per_prompt.values())}
    if images_per_hour is not None:
        if not images_per_hour > 0:
            raise ValueError(f"`images_per_hour` must be > 0, but got {images_per_hour!r}")
        out["best_hours"] = round(out["best_images"] / images_per_hour, 4)
        out["worst_hours"] = round(out["worst_images"] / images_per_hour, 4)
    return out


# -- what a sequential run of a plan costs (``t2i-fairness plan --t2i-sequential``) ----------------------

#: Images a gate used, as a share of its fixed N, in ``bench/bench_sequential.py``'s **null** scenario (a
#: model that did not regress, against bounds the update flow wrote at another seed), per (family, kind)
#: and batch size: the "null" rows of ``docs/sequential.md``. The bench's worlds: CIS-like share gates of
#: 100 prompts x 16 images; DIG In object-in-region groups of 9 objects x 24 images (coverage nested).
NULL_SHARES: dict[tuple[str, str], dict[int, float]] = {
    ("cis", "share"): {4: 0.33, 2: 0.29},
    ("dig_in", "share"): {4: 0.28, 2: 0.26},
    ("dig_in", "coverage"): {4: 0.80, 2: 0.80},
}
NULL_SHARES_SOURCE = ("bench/bench_sequential.py --runs 200 (--batch 4 and --batch 2), null scenario, "
                      "2026-11-25, docs/sequential.md")


def null_share(family: str, kind: str, batch: int) -> tuple[float, int | None]:
    """The null-model image share of one gate (:data:`NULL_SHARES`) and the bench batch size it was measured at.

    A kind with no early stop (``KINDS[kind] == "fixed"``) and a (family, kind) the bench did not
    measure give ``(1.0, None)``: they are counted at ``N``. A batch size the bench did not run takes
    the nearest one it did (the larger on a tie: larger batches stop later).

    Args:
        family: the family's name (``cis``, ``dig_in``, ...).
        kind: a key of :data:`~t2i_fairness.metrics.sequential.KINDS`.
        batch: the generation batch size (>= 1).

    Raises:
        ValueError: an unknown kind or a batch size below 1.

    Example:
        >>> null_share("cis", "share", 4), null_share("cis", "share", 1), null_share("dig_in", "share", 16)
        ((0.33, 4), (0.29, 2), (0.28, 4))
        >>> null_share("cis", "spread", 4), null_share("decomposed", "share", 4)
        ((1.0, None), (1.0, None))
    """
    if kind not in KINDS:
        raise ValueError(f"unknown sequential kind {kind!r}; one of {sorted(KINDS)}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive integer, but got {batch!r}")
    table = NULL_SHARES.get((family, kind))
    if KINDS[kind] == "fixed" or not table:
        return 1.0, None
    at = min(table, key=lambda b: (abs(b - batch), -b))
    return float(table[at]), at


@dataclass(frozen=True)
class PromptUse:
    """One gate's use of one prompt, for :func:`sequential_images`.

    Attributes:
        prompt: the prompt.
        planned: images of the prompt the gate reads in the fixed-N plan (its request's ``n``).
        first: images after the gate's first round (``planned`` when the gate runs to ``N``).
        share: the expected images as a share of ``planned`` (the null-model figure; 1.0 when the
            gate runs to ``N``).
    """

    prompt: str
    planned: int
    first: int
    share: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.first <= self.planned:
            raise ValueError(f"PromptUse {self.prompt!r}: first round {self.first} not in 1..{self.planned}")
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"PromptUse {self.prompt!r}: share {self.share!r} not in [0, 1]")


def sequential_images(uses, cached=None) -> dict:
    """Worst, expected and best case images of a sequential run over a plan (per prompt, then summed).

    Per prompt, every gate reading it is counted: the prompt's images are those of the gate that
    needs the most. **Worst**: ``planned`` (the fixed-N plan: no gate uses more than ``N``). **Best**:
    ``first`` (every gate that can stop early does so after its first round; a gate that runs to
    ``N`` holds its prompts at ``planned``). **Expected**: ``share * planned``, never below ``first``
    nor above ``planned`` (the null-model figure; a regressed or borderline model costs more, up to
    the worst case). Each case also counts the images still **to make** given ``cached`` (image
    indices already in the cache, per prompt; the expected case counts the fraction of its last image).

    Args:
        uses: :class:`PromptUse` items (a prompt may appear once per gate reading it).
        cached: prompt -> set of cached image indices (``None``: nothing cached).

    Returns:
        ``{"prompts", "early_prompts", "worst", "expected", "best", "worst_to_make", "expected_to_make",
        "best_to_make"}`` (``early_prompts``: prompts whose best case is below ``planned``; expected
        figures rounded to whole images).

    Example:
        >>> uses = [PromptUse("a", 16, 4, 0.33), PromptUse("a", 16, 4, 0.8), PromptUse("b", 16, 4, 0.33),
        ...         PromptUse("c", 16, 16, 1.0)]
        >>> r = sequential_images(uses)
        >>> r["worst"], r["expected"], r["best"]         # a: 12.8, b: 5.28, c: 16
        (48, 34, 24)
        >>> sequential_images(uses, cached={"c": set(range(16)), "a": {0, 1}})["best_to_make"]
        6
    """
    cached = cached or {}
    worst: dict[str, int] = {}
    best: dict[str, int] = {}
    expected: dict[str, float] = {}
    for u in uses:
        worst[u.prompt] = max(worst.get(u.prompt, 0), int(u.planned))
        best[u.prompt] = max(best.get(u.prompt, 0), int(u.first))
        e = max(float(u.first), min(float(u.planned), u.share * u.planned))
        expected[u.prompt] = max(expected.get(u.prompt, 0.0), e)

    def to_make(prompt: str, n: float) -> float:
        have = cached.get(prompt, ())
        whole = int(math.floor(n))
        missing = whole - sum(1 for i in have if 0 <= i < whole)  # per cached image, not per image asked for
        return missing + ((n - whole) if n > whole and whole not in have else 0.0)

    return {"prompts": len(worst), "early_prompts": sum(1 for p in worst if best[p] < worst[p]),
            "worst": sum(worst.values()), "expected": int(round(sum(expected.values()))),
            "best": sum(best.values()),
            "worst_to_make": sum(int(to_make(p, n)) for p, n in worst.items()),
            "expected_to_make": int(round(sum(to_make(p, n) for p, n in expected.items()))),
            "best_to_make": sum(int(to_make(p, n)) for p, n in best.items())}


# -- one gate of the suite, look by look (the plugin's --t2i-sequential) ----------------------------------


def e_threshold(alpha: float, family_size: int) -> float:
    """The wealth at which one gate fails early: ``m / (alpha / 2)`` (Bonferroni over the run's ``m`` gates
    with the early-fail half of ``alpha``; Ville's inequality makes each gate's chance of ever reaching
    it under its null at most ``alpha / (2 m)``, at any stopping time, without waiting for other gates).

    Example:
        >>> e_threshold(0.05, 475)
        19000.0
    """
    return float(max(1, int(family_size)) / (float(alpha) / 2))


def decide_look(kind: str, value: float, sweeps: Sweeps, bound, *, alpha: float, family_size: int, rounds: int,
                gamma: float = 0.01) -> Look:
    """One gate of the suite at one look: ``fail``, ``met``, ``futility``, ``full`` or ``open``.

    ``share`` / ``bounded``: the normal-mixture e-process and confidence sequence of the sweeps
    (:func:`~t2i_fairness.metrics.sequential.look`). With only the gate's value at each look, the
    sweeps are given as ``images`` copies of it: the e-process and the sequence depend on the sweeps'
    sum alone, and the futility spread becomes the share's at the current mean, the largest a mean of
    ``prompts`` [0, 1] scores with that mean can have (conservative: fewer futility stops). ``coverage``:
    the nested early pass only (:func:`~t2i_fairness.metrics.sequential.coverage_settled`), when the
    images are nested. Every other kind, and any gate at ``N``: ``full`` (the fixed-N test decides).
    An undefined (nan) value is ``open``.

    Args:
        kind: a key of :data:`~t2i_fairness.metrics.sequential.KINDS`.
        value: the gate's value at this look.
        sweeps: how it was made.
        bound: the gate's :class:`~t2i_fairness.gating.thresholds.Bound`.
        alpha: the run's family-wise level.
        family_size: the run's number of gates (Bonferroni's ``m`` for early fails, Holm's for the rest).
        rounds: the gate's number of looks (the futility bound's split).
        gamma: the futility level.

    Example:
        >>> from t2i_fairness.gating.thresholds import Bound
        >>> s = Sweeps(prompts=200, images=4, planned=64)
        >>> decide_look("share", 0.30, s, Bound("min", 0.5), alpha=0.05, family_size=475, rounds=5).reason
        'fail'
        >>> decide_look("share", 0.80, s, Bound("min", 0.5), alpha=0.05, family_size=475, rounds=5).reason
        'met'
        >>> decide_look("coverage", 0.70, Sweeps(9, 4, 16), Bound("min", 0.6), alpha=0.05, family_size=9, rounds=3).reason
        'met'
        >>> decide_look("ratio", 0.2, Sweeps(9, 4, 16), Bound("min", 0.6), alpha=0.05, family_size=9, rounds=3).reason
        'full'
        >>> decide_look("share", 0.2, s, Bound("min", -0.04), alpha=0.05, family_size=475, rounds=5).reason
        'met'
    """
    if kind not in KINDS:
        raise ValueError(f"unknown sequential kind {kind!r}; one of {sorted(KINDS)}")
    n, N = int(sweeps.images), int(sweeps.planned)
    nan = float("nan")
    if n >= N or KINDS[kind] == "fixed":
        return Look("full", n, N, 1.0, nan, nan, nan)
    if not math.isfinite(float(value)):
        return Look("open", n, N, 1.0, nan, nan, nan)
    if KINDS[kind] == "nested":
        met = sweeps.nested and coverage_settled(float(value), bound.value, bound.direction)
        return Look("met" if met else "open", n, N, 1.0, nan, nan, nan)
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"a {kind} gate's value must be in [0, 1], but got {value!r}")
    b = float(bound.value)
    if not 0.0 <= b <= 1.0:  # a share's bound outside [0, 1]: met for certain on its passing side
        passing = b < 0.0 if bound.direction == "min" else b > 1.0
        return Look("met" if passing else "full", n, N, 1.0, nan, nan, nan)
    m = max(1, int(family_size))
    z_fail = float(-_special.ndtri(float(alpha) / 2 / m))
    return look(np.full(n, float(value)), N, bound.value, bound.direction, prompts=int(sweeps.prompts),
                e_threshold=e_threshold(alpha, m), z_fail=z_fail, gamma=gamma, looks=max(1, int(rounds)))


def look_record(lk: Look, kind: str, *, at_round: int, rounds: int, sweeps: Sweeps | None, threshold: float | None,
                note: str | None = None) -> dict:
    """The ``details["sequential"]`` record of a gate (what every report shows).

    Example:
        >>> from t2i_fairness.metrics.sequential import Look
        >>> r = look_record(Look("futility", 4, 16, 0.02, 0.61, 0.74, 0.001), "share", at_round=1, rounds=3,
        ...                 sweeps=Sweeps(30, 4, 16), threshold=19000.0)
        >>> r["reason"], r["early"], r["images"], r["planned_images"], r["share_of_planned"]
        ('pass: futility', True, 120, 480, 0.25)
    """
    prompts = sweeps.prompts if sweeps is not None else None
    rec = {"kind": kind, "reason": REASONS[lk.reason], "early": lk.reason in ("fail", "met", "futility"),
           "round": int(at_round), "rounds": int(rounds), "images_per_prompt": int(lk.n), "planned_per_prompt": int(lk.N),
           "prompts": prompts, "images": None if prompts is None else int(lk.n) * prompts,
           "planned_images": None if prompts is None else int(lk.N) * prompts,
           "share_of_planned": round_share(lk.n, lk.N)}
    if math.isfinite(lk.lower):
        rec.update(wealth=lk.wealth, e_threshold=threshold, sequence=[lk.lower, lk.upper],
                   conditional_power=lk.conditional_power)
    if note or KINDS.get(kind) == "fixed":
        rec["note"] = note or f"no valid early stop for a {kind} gate: runs to N"
    return rec


def round_share(n: int, N: int) -> float:
    """``n / N`` rounded for reports."""
    return round(float(n) / float(N), 4) if N else 0.0


def stopped_verdict(gate: str, value: float, record: dict, bound) -> tuple[str, str, float | None]:
    """Status, message and anytime-valid p-value (``min(1, 1 / wealth)``) of a gate that stopped early.

    Example:
        >>> from t2i_fairness.gating.thresholds import Bound
        >>> rec = {"reason": "fail: bound excluded", "round": 1, "rounds": 3, "images_per_prompt": 4,
        ...        "planned_per_prompt": 16, "wealth": 5.0e4, "e_threshold": 1.9e4, "sequence": [0.2, 0.4]}
        >>> status, message, p = stopped_verdict("g", 0.3, rec, Bound("min", 0.5))
        >>> status, p
        ('fail', 2e-05)
        >>> print(message)
        g: 0.3000 is below its bound 0.5000 at round 1 of 3 (4 of 16 images per prompt): e-process 5e+04 >= 1.9e+04, the sequence [0.2000, 0.4000] excludes the bound at any stopping time
    """
    reason = record["reason"]
    where = (f"at round {record['round']} of {record['rounds']} ({record['images_per_prompt']} of "
             f"{record['planned_per_prompt']} images per prompt)")
    wealth = record.get("wealth")
    p = None if wealth is None else float(min(1.0, 1.0 / max(float(wealth), 1e-300)))
    seq = record.get("sequence")
    seq_text = f"[{seq[0]:.4f}, {seq[1]:.4f}]" if seq else None
    side = "below" if bound.direction == "min" else "above"
    if reason == REASONS["fail"]:
        return "fail", (f"{gate}: {value:.4f} is {side} its bound {bound.value:.4f} {where}: e-process "
                        f"{wealth:.3g} >= {record['e_threshold']:.3g}, the sequence {seq_text} excludes the bound "
                        "at any stopping time"), p
    if reason == REASONS["met"]:
        why = (f"the sequence {seq_text} lies on the passing side of {bound.value:.4f}" if seq_text else
               f"coverage {value:.4f} already meets {bound.value:.4f} and cannot fall as images are added")
        return "pass", f"{gate}: {value:.4f} passes {where}: {why}", p
    if reason == REASONS["futility"]:
        return "pass", (f"{gate}: {value:.4f} passes by futility {where}: the full-N test would fail with "
                        f"conditional power {record['conditional_power']:.2g} < the futility level"), p
    raise ValueError(f"{gate}: not an early stop: {reason!r}")
