"""Measured coverage of the interval methods in t2i_fairness.metrics.intervals, per indicator type.

Every cell is a synthetic world whose truth is known, sampled ``reps`` times at one of the
project's sample sizes; each sample goes through the public interval function with every
method, and a method covers when its interval holds the truth. The truth is what the module's
docstring calls the estimand: the expected statistic at the run's sample size over fresh draws of
the random units, everything else fixed.

Worlds
  coverage   real features N(0, I_16), k = 3 balls (radius: distance to the 3rd nearest other real
             point); generated features N(mu, s^2 I_16) with (mu, s) = (0, 1) "same", (0.5, 1)
             "shift", (1, 1) "far", (0.3, 0.5) "narrow"; and "modes-1dropped": real features from
             4 Gaussian modes (sd 0.7, centres 3 apart from the origin), generated ones from 3 of
             them (a dropped mode, the regression coverage exists to catch). The truth is exact: a
             generated point falls in ball j with probability p_j = sum over the generated modes of
             w * ncx2.cdf(r_j^2 / s^2, 16, |x_j - mu|^2 / s^2), and
             E coverage = mean_j 1 - (1 - p_j)^n_fake. Each cell fixes one reference set (as the
             suite does) and redraws the generated images. Cells whose truth lies within 0.01 of 0
             or 1 are "boundary" cells (a run almost always sees 0 or 1): reported on their own line.
  precision  per-image inside ~ Bernoulli(pi), pi in {0.05, 0.2, 0.5, 0.8, 0.95} (given the
             reference, that is exactly how images fall inside the manifold).
  precision with duplicates   a share q of the generated images is one and the same image (a
             collapsed mode), inside or outside the manifold; the rest are Bernoulli(pi); exact
             duplicate rows are removed (keep_one or drop_all) before scoring. Truth: the mean of the
             de-duplicated precision over 400,000 simulated runs.
  p10        K objects, each with its own score distribution (normal, skewed, or a 15% low tail):
             the indicator is mean_o percentile(scores_o, 10); truth E at the same n by 200,000
             simulated samples per object.
  cluster statistic   the same through the callable API (cluster_bootstrap_interval): a ratio,
             the share of eligible images (Bernoulli(0.6), independent of the rate) scoring 1.
  cluster    G sampled prompts, m images each (or unequal sizes), per-prompt rate ~ Beta, per-image
             score = Binomial(3, rate) / 3 (a CIS-like share of components found), or the 0/1 value
             "at least 2 of 3 found" ("-binary" worlds), or a CLIP-like cosine (prompt means
             N(0.3, 0.04), images N(prompt mean, 0.03), unequal sizes); truth: the prompt
             population's mean.
  stratified S fixed prompts, n images each, per-image scores Beta-distributed per prompt (and one
             prompt with scores piled against their bound, Beta(20, 1)); truth: the mean of the
             prompt means. (A 0/1 per-image share is a binomial proportion: precision_interval.)

Full run, 2026-11-23, AMD EPYC, 2 cores shared with other work (load average 4-9), 400
repetitions per cell, 500 resamples, 2545 s (the cluster family re-run after adding its 0/1 and
cosine worlds). "coverage" is pooled over the cells, mc_se its Monte-Carlo standard error, "min
cell"/"max cell" the extremes over the cells (each with an MC SE of about 0.011), width the mean
interval width. The methods t2i_fairness.metrics.intervals uses: coverage jackknife_wilson,
precision wilson, p10 jackknife_t, cluster means wilson (values in [0, 1]) or t, cluster
statistics t, stratified means t.

    indicator type                                       method               coverage  mc_se min cell max cell   width cells   reps
    --------------------------------------------------------------------------------------------------------------------------------
    coverage                                             jackknife_wilson        0.972  0.001    0.863    1.000  0.2591    37  14800
    coverage                                             jackknife               0.824  0.003    0.155    0.995  0.1671    37  14800
    coverage                                             half_sampling           0.872  0.003    0.352    0.998  0.1408    37  14800
    coverage                                             subsampling             0.247  0.004    0.000    0.608  0.0737    37  14800
    coverage                                             bootstrap_se            0.820  0.003    0.330    0.985  0.1216    37  14800
    coverage                                             percentile              0.367  0.004    0.022    0.750  0.1168    37  14800
    coverage                                             basic                   0.295  0.004    0.000    0.605  0.0889    37  14800
    coverage                                             bca                     0.159  0.003    0.000    0.748  0.0223    37  14800
    coverage (boundary: truth within 0.01 of 0 or 1)     jackknife_wilson        0.990  0.002    0.938    1.000  0.3058     8   3200
    coverage (boundary: truth within 0.01 of 0 or 1)     jackknife               0.211  0.007    0.000    1.000  0.0084     8   3200
    coverage (boundary: truth within 0.01 of 0 or 1)     half_sampling           0.679  0.008    0.005    1.000  0.0263     8   3200
    coverage (boundary: truth within 0.01 of 0 or 1)     subsampling             0.138  0.006    0.000    1.000  0.0009     8   3200
    coverage (boundary: truth within 0.01 of 0 or 1)     bootstrap_se            0.563  0.009    0.000    1.000  0.0160     8   3200
    coverage (boundary: truth within 0.01 of 0 or 1)     percentile              0.373  0.009    0.000    1.000  0.0195     8   3200
    coverage (boundary: truth within 0.01 of 0 or 1)     basic                   0.151  0.006    0.000    1.000  0.0009     8   3200
    coverage (boundary: truth within 0.01 of 0 or 1)     bca                     0.367  0.009    0.000    1.000  0.0172     8   3200
    precision                                            wilson                  0.951  0.003    0.927    0.973  0.1396    15   6000
    precision                                            agresti_coull           0.953  0.003    0.927    0.975  0.1437    15   6000
    precision                                            clopper_pearson         0.966  0.002    0.940    0.993  0.1498    15   6000
    precision                                            jeffreys                0.954  0.003    0.930    0.975  0.1376    15   6000
    precision                                            wald                    0.923  0.003    0.820    0.960  0.1350    15   6000
    precision                                            percentile              0.928  0.003    0.802    0.973  0.1338    15   6000
    precision, duplicates removed                        wilson                  0.954  0.002    0.927    0.985  0.2068    24   9600
    precision, duplicates removed                        agresti_coull           0.956  0.002    0.932    0.990  0.2092    24   9600
    precision, duplicates removed                        clopper_pearson         0.967  0.002    0.938    0.993  0.2257    24   9600
    precision, duplicates removed                        percentile              0.939  0.002    0.875    0.963  0.2102    24   9600
    p10 (object consistency)                             jackknife_t             0.978  0.001    0.935    1.000  0.0631    36  14400
    p10 (object consistency)                             jackknife               0.904  0.002    0.733    0.985  0.0344    36  14400
    p10 (object consistency)                             smoothed_se             0.904  0.002    0.777    0.973  0.0281    36  14400
    p10 (object consistency)                             bootstrap_se            0.918  0.002    0.775    0.988  0.0302    36  14400
    p10 (object consistency)                             smoothed_percentile     0.902  0.002    0.677    0.990  0.0272    36  14400
    p10 (object consistency)                             percentile              0.896  0.003    0.550    0.990  0.0288    36  14400
    p10 (object consistency)                             basic                   0.809  0.003    0.550    0.960  0.0288    36  14400
    p10 (object consistency)                             bca                     0.831  0.003    0.378    0.958  0.0259    36  14400
    p10 (object consistency)                             half_sampling           0.896  0.003    0.790    0.975  0.0275    36  14400
    cluster mean (sampled prompts)                       wilson                  0.951  0.002    0.912    0.988  0.2460    36  14400
    cluster mean (sampled prompts)                       t                       0.910  0.002    0.608    0.963  0.2566    36  14400
    cluster mean (sampled prompts)                       percentile              0.876  0.003    0.560    0.955  0.1972    36  14400
    cluster mean (sampled prompts)                       basic                   0.859  0.003    0.568    0.945  0.1972    36  14400
    cluster mean (sampled prompts)                       bootstrap_se            0.871  0.003    0.600    0.953  0.2036    36  14400
    cluster mean (sampled prompts)                       bca                     0.884  0.003    0.560    0.958  0.2061    36  14400
    cluster statistic (callable, ratio)                  t                       0.940  0.007    0.915    0.965  0.3959     3   1200
    cluster statistic (callable, ratio)                  percentile              0.904  0.008    0.858    0.953  0.3040     3   1200
    cluster statistic (callable, ratio)                  basic                   0.883  0.009    0.828    0.938  0.3040     3   1200
    cluster statistic (callable, ratio)                  bootstrap_se            0.901  0.009    0.848    0.955  0.3109     3   1200
    cluster statistic (callable, ratio)                  bca                     0.916  0.008    0.877    0.958  0.3074     3   1200
    stratified mean (fixed prompts)                      t                       0.942  0.003    0.915    0.963  0.1392    12   4800
    stratified mean (fixed prompts)                      percentile              0.902  0.004    0.800    0.955  0.0973    12   4800
    stratified mean (fixed prompts)                      basic                   0.892  0.004    0.760    0.953  0.0973    12   4800
    stratified mean (fixed prompts)                      bootstrap_se            0.903  0.004    0.787    0.965  0.0990    12   4800

The quick run (--quick: 100 repetitions, 200 resamples, the corner cells) took 100 s on the same
machine at load average 2-4.

Usage:  python bench/bench_interval_coverage.py [--quick] [--reps R] [--resamples B] [--family NAME]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin"))

from t2i_fairness.metrics import intervals as iv  # noqa: E402
from t2i_fairness.metrics.manifold import ball_membership, real_radii  # noqa: E402

DIM = 16
NEAREST_K = 3
CONFIDENCE = 0.95


@dataclass
class Tally:
    hits: int = 0
    total: int = 0
    widths: float = 0.0
    cells: list = field(default_factory=list)  # (label, coverage, reps)

    def add_cell(self, label: str, hits: int, reps: int, width: float) -> None:
        self.hits += hits
        self.total += reps
        self.widths += width
        self.cells.append((label, hits / reps, reps))


def _run_cell(tallies, methods, reps, sample, call, truth, label):
    hits = dict.fromkeys(methods, 0)
    width = dict.fromkeys(methods, 0.0)
    for r in range(reps):
        data = sample(r)
        for m in methods:
            res = call(data, m, r)
            hits[m] += res.low <= truth <= res.high
            width[m] += res.high - res.low
    for m in methods:
        tallies[m].add_cell(label, hits[m], reps, width[m])


# --------------------------------------------------------------------------------------------- worlds


def _mixture_centres(rng, n_modes, spread):
    centres = rng.standard_normal((n_modes, DIM))
    return spread * centres / np.linalg.norm(centres, axis=1, keepdims=True)


def _coverage_worlds(quick):
    """name -> (real sampler, generated mixture [(weight, centre (DIM,), sd)])."""
    zero = np.zeros(DIM)
    centres = _mixture_centres(np.random.default_rng(42), 4, 3.0)
    real_modes = lambda g, n: centres[g.integers(0, 4, n)] + 0.7 * g.standard_normal((n, DIM))  # noqa: E731
    real_gauss = lambda g, n: g.standard_normal((n, DIM))  # noqa: E731
    worlds = {
        "same": (real_gauss, [(1.0, zero, 1.0)]),
        "shift": (real_gauss, [(1.0, np.full(DIM, 0.5), 1.0)]),
        "far": (real_gauss, [(1.0, np.full(DIM, 1.0), 1.0)]),
        "narrow": (real_gauss, [(1.0, np.full(DIM, 0.3), 0.5)]),
        "modes-1dropped": (real_modes, [(1 / 3, centres[i], 0.7) for i in range(3)]),
    }
    if quick:
        worlds = {k: worlds[k] for k in ("same", "far", "modes-1dropped")}
    return worlds


def _sample_mixture(g, comps, n):
    which = g.choice(len(comps), size=n, p=[w for w, _, _ in comps])
    centres = np.stack([c for _, c, _ in comps])[which]
    sds = np.array([s for _, _, s in comps])[which]
    return centres + sds[:, None] * g.standard_normal((n, DIM))


def family_coverage(reps, b, quick):
    reals = (10, 50, 200)
    fakes = (36, 120, 360)
    if quick:
        reals, fakes = (10, 200), (36, 360)
    methods = iv.COVERAGE_METHODS
    inner = {m: Tally() for m in methods}
    edge = {m: Tally() for m in methods}
    for wi, (wname, (real_sampler, comps)) in enumerate(_coverage_worlds(quick).items()):
        for ri, n_real in enumerate(reals):
            real = real_sampler(np.random.default_rng(1000 * wi + ri), n_real)
            rad = real_radii(real, NEAREST_K, device="cpu")
            # exact: P(generated point in ball j) = sum_c w_c P(|c + s Z - x_j| < r_j), a noncentral chi-square
            p = sum(w * stats.ncx2.cdf(rad**2 / s**2, DIM, ((real - c) ** 2).sum(1) / s**2) for w, c, s in comps)
            for n_fake in fakes:
                truth = float(np.mean(1.0 - (1.0 - p) ** n_fake))
                seed = 7919 * (wi + 1) + 104729 * (ri + 1) + n_fake

                def sample(r, n_fake=n_fake, seed=seed, real=real, rad=rad, comps=comps):
                    return ball_membership(real, rad, _sample_mixture(np.random.default_rng([seed, r]), comps, n_fake))

                target = edge if (truth < 0.01 or truth > 0.99) else inner
                _run_cell(target, methods, reps, sample,
                          lambda m_, meth, r: iv.coverage_interval(m_, method=meth, n_resamples=b, seed=r),
                          truth, f"{wname} real={n_real} fake={n_fake} truth={truth:.3f}")
    return {"coverage": inner, "coverage (boundary: truth within 0.01 of 0 or 1)": edge}


def family_precision(reps, b, quick):
    pis = (0.05, 0.2, 0.5, 0.8, 0.95)
    sizes = (36, 120, 360)
    if quick:
        pis, sizes = (0.05, 0.5, 0.95), (36, 360)
    methods = iv.PRECISION_METHODS
    out = {m: Tally() for m in methods}
    for pi in pis:
        for n in sizes:
            seed = int(pi * 1000) * 7 + n

            def sample(r, n=n, pi=pi, seed=seed):
                return np.random.default_rng([seed, r]).random(n) < pi

            _run_cell(out, methods, reps, sample,
                      lambda x, meth, r: iv.precision_interval(x, method=meth, n_resamples=b, seed=r),
                      pi, f"pi={pi} n={n}")
    return {"precision": out}


def _dedupe_run(g, n, q, pi, atom_inside, mode):
    n_atom = g.binomial(n, q)
    n_cont = n - n_atom
    inside = g.random(n_cont) < pi
    keep_atom = (n_atom >= 1) if mode == "keep_one" else (n_atom == 1)
    if keep_atom:
        inside = np.r_[inside, atom_inside]
    return inside


def family_precision_dedupe(reps, b, quick):
    worlds = [(0.3, 0.6, True), (0.3, 0.6, False), (0.1, 0.9, False), (0.5, 0.3, True)]
    sizes = (36, 120, 360)
    if quick:
        worlds, sizes = worlds[:2] + worlds[3:], (36, 360)
    methods = ("wilson", "agresti_coull", "clopper_pearson", "percentile")
    out = {m: Tally() for m in methods}
    for wi, (q, pi, atom_inside) in enumerate(worlds):
        for mode in ("keep_one", "drop_all"):
            for n in sizes:
                # truth: E[k / rows] at this n, by simulation of the counts (vectorised)
                tg = np.random.default_rng([99, wi, n, mode == "drop_all"])
                runs = 400_000
                n_atom = tg.binomial(n, q, runs)
                k_cont = tg.binomial(n - n_atom, pi)
                keep = (n_atom >= 1) if mode == "keep_one" else (n_atom == 1)
                rows = n - n_atom + keep
                truth = float(np.mean((k_cont + keep * atom_inside) / rows))
                seed = 31 * wi + n + (7 if mode == "drop_all" else 0)

                def sample(r, n=n, q=q, pi=pi, a=atom_inside, mode=mode, seed=seed):
                    return _dedupe_run(np.random.default_rng([seed, r]), n, q, pi, a, mode)

                _run_cell(out, methods, reps, sample,
                          lambda x, meth, r: iv.precision_interval(x, method=meth, n_resamples=b, seed=r),
                          truth, f"q={q} pi={pi} atom_in={atom_inside} {mode} n={n} truth={truth:.3f}")
    return {"precision, duplicates removed": out}


def _score_draw(kind, mean, g, size):
    if kind == "normal":
        return g.normal(mean, 0.03, size)
    if kind == "skewed":
        return mean + 0.04 - g.gamma(2.0, 0.02, size)
    tail = g.random(size) < 0.15
    return np.where(tail, g.normal(mean - 0.1, 0.03, size), g.normal(mean, 0.02, size))


def family_p10(reps, b, quick):
    kinds = ("normal", "skewed", "tail")
    n_objects = (2, 6, 27)
    sizes = (6, 12, 30, 60)
    if quick:
        n_objects, sizes = (2, 6), (6, 30)
    methods = iv.PERCENTILE_METHODS
    out = {m: Tally() for m in methods}
    for kind in kinds:
        for k in n_objects:
            means = 0.22 + 0.1 * np.arange(k) / max(k - 1, 1)
            for n in sizes:
                tg = np.random.default_rng([5, n, k, len(kind)])
                truth = float(np.mean([np.percentile(_score_draw(kind, mu, tg, (200_000, n)), 10, axis=1).mean()
                                       for mu in means]))
                seed = 17 * k + n + 1000 * len(kind)

                def sample(r, kind=kind, means=means, n=n, seed=seed):
                    g = np.random.default_rng([seed, r])
                    return [_score_draw(kind, mu, g, n) for mu in means]

                _run_cell(out, methods, reps, sample,
                          lambda x, meth, r: iv.percentile_mean_interval(x, method=meth, n_resamples=b, seed=r),
                          truth, f"{kind} objects={k} n={n} truth={truth:.4f}")
    return {"p10 (object consistency)": out}


def _cluster_sample(g, n_prompts, m, a, bb, unequal, binary=False, cosine=False):
    sizes = g.integers(1, 2 * m, n_prompts) if unequal else np.full(n_prompts, m)
    labels = np.repeat(np.arange(n_prompts), sizes)
    if cosine:  # a CLIP-like cosine: prompt means N(0.3, 0.04), images N(prompt mean, 0.03)
        return g.normal(0.3, 0.04, n_prompts)[labels] + g.normal(0.0, 0.03, labels.size), labels
    rates = g.beta(a, bb, n_prompts)
    values = g.binomial(3, rates[labels]) / 3.0
    if binary:  # a 0/1 per-image value: at least 2 of the 3 components found
        values = (values > 0.5).astype(float)
    return values, labels


def _binary_truth(a, bb):
    """E P(Binomial(3, r) >= 2) = E[3 r^2 - 2 r^3] for r ~ Beta(a, bb), from the Beta moments."""
    m2 = a * (a + 1) / ((a + bb) * (a + bb + 1))
    m3 = m2 * (a + 2) / (a + bb + 2)
    return 3 * m2 - 2 * m3


def family_cluster(reps, b, quick):
    worlds = [("common", 4.0, 4.0, False), ("rare", 0.6, 4.0, False), ("unequal", 2.0, 3.0, True),
              ("rare-binary", 0.6, 4.0, False), ("common-binary", 4.0, 4.0, False), ("cosine", 0.0, 0.0, True)]
    prompts = (6, 12, 40)
    per = (2, 8)
    if quick:
        prompts, per = (6, 40), (4,)
    methods = tuple(m for m in iv.CLUSTER_METHODS if m != "auto")  # auto is wilson or t, measured as such
    out = {m: Tally() for m in methods}
    if quick:
        worlds = worlds[:4]
    for wi, (wname, a, bb, unequal) in enumerate(worlds):
        binary, cosine = wname.endswith("binary"), wname == "cosine"
        truth = 0.3 if cosine else _binary_truth(a, bb) if binary else a / (a + bb)
        for g_count in prompts:
            for m in per:
                seed = 100 * wi + 3 * g_count + m

                def sample(r, g_count=g_count, m=m, a=a, bb=bb, unequal=unequal, seed=seed, binary=binary,
                           cosine=cosine):
                    return _cluster_sample(np.random.default_rng([seed, r]), g_count, m, a, bb, unequal, binary, cosine)

                _run_cell(out, methods, reps, sample,
                          lambda x, meth, r: iv.cluster_mean_interval(x[0], x[1], method=meth, n_resamples=b, seed=r),
                          truth, f"{wname} prompts={g_count} images={m}")
    return {"cluster mean (sampled prompts)": out}


def family_cluster_statistic(reps, b, quick):
    """A ratio over sampled prompts: the share of 'eligible' images (a ~ Bernoulli(0.6)) whose
    score is 1 (y ~ Bernoulli(prompt rate)), through cluster_bootstrap_interval's callable API."""
    prompts = (6, 12, 40)
    if quick:
        prompts = (6, 40)
    methods = iv.CLUSTER_STATISTIC_METHODS
    out = {m: Tally() for m in methods}
    a_, b_ = 2.0, 3.0
    truth = a_ / (a_ + b_)  # eligibility is independent of the rate, so the ratio's limit is E rate
    for g_count in prompts:
        seed = 77 + g_count

        def sample(r, g_count=g_count, seed=seed):
            g = np.random.default_rng([seed, r])
            rates = g.beta(a_, b_, g_count)
            labels = np.repeat(np.arange(g_count), 6)
            y = (g.random(labels.size) < rates[labels]).astype(float)
            a = (g.random(labels.size) < 0.6).astype(float)
            a[::6] = 1.0  # every prompt has an eligible image
            return y, a, labels

        def call(x, meth, r):
            y, a, labels = x
            return iv.cluster_bootstrap_interval(lambda idx: float((y[idx] * a[idx]).sum() / a[idx].sum()), labels,
                                                 method=meth, n_resamples=min(b, 300), seed=r)

        _run_cell(out, methods, reps, sample, call, truth, f"ratio prompts={g_count} images=6")
    return {"cluster statistic (callable, ratio)": out}


def family_stratified(reps, b, quick):
    n_strata = (1, 6, 27)
    sizes = (4, 12, 60)
    if quick:
        n_strata, sizes = (1, 6), (4, 60)
    methods = iv.STRATIFIED_METHODS
    out = {m: Tally() for m in methods}
    for s_count in n_strata:
        params = [(2.0 + 6.0 * i / max(s_count - 1, 1), 2.0) for i in range(s_count)]
        for n in sizes:
            truth = float(np.mean([a / (a + bb) for a, bb in params]))
            seed = 11 * s_count + n

            def sample(r, params=params, n=n, seed=seed):
                g = np.random.default_rng([seed, r])
                vals = np.concatenate([g.beta(a, bb, n) for a, bb in params])
                return vals, np.repeat(np.arange(len(params)), n)

            _run_cell(out, methods, reps, sample,
                      lambda x, meth, r: iv.stratified_mean_interval(x[0], x[1], method=meth, n_resamples=b, seed=r),
                      truth, f"beta strata={s_count} n={n}")
    for n in sizes:  # one prompt, scores piled up against their upper bound (Beta(20, 1), skewed)
        seed = 5 + n

        def sample(r, n=n, seed=seed):
            return np.random.default_rng([seed, r]).beta(20.0, 1.0, n), np.zeros(n, int)

        _run_cell(out, methods, reps, sample,
                  lambda x, meth, r: iv.stratified_mean_interval(x[0], x[1], method=meth, n_resamples=b, seed=r),
                  20.0 / 21.0, f"beta(20,1) strata=1 n={n}")
    return {"stratified mean (fixed prompts)": out}


FAMILIES = {
    "coverage": family_coverage,
    "precision": family_precision,
    "precision_dedupe": family_precision_dedupe,
    "p10": family_p10,
    "cluster": family_cluster,
    "cluster_statistic": family_cluster_statistic,
    "stratified": family_stratified,
}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cells and repetitions (under 3 minutes on 2 cores)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per cell (default 100 quick, 400 full)")
    parser.add_argument("--resamples", type=int, default=None, help="bootstrap resamples (default 200 quick, 500 full)")
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES), help="only these families")
    parser.add_argument("--cells", action="store_true", help="also print every cell's coverage")
    args = parser.parse_args(argv)
    reps = args.reps or (100 if args.quick else 400)
    b = args.resamples or (200 if args.quick else 500)
    t0 = time.time()
    print(f"# interval coverage at {CONFIDENCE:.0%} nominal; {'quick' if args.quick else 'full'} run, "
          f"{reps} repetitions per cell, {b} resamples")
    print(f"# machine: {platform.machine()} {_cpu_model()} {os.cpu_count()} cpus, "
          f"python {platform.python_version()}, numpy {np.__version__}; load average before {os.getloadavg()}")
    header = f"{'indicator type':<52} {'method':<20} {'coverage':>8} {'mc_se':>6} {'min cell':>8} {'max cell':>8} {'width':>7} {'cells':>5} {'reps':>6}"
    print(header)
    print("-" * len(header))
    for name in args.family or list(FAMILIES):
        t1 = time.time()
        for label, tallies in FAMILIES[name](reps, b, args.quick).items():
            for method, t in tallies.items():
                if not t.total:
                    continue
                cov = t.hits / t.total
                se = math.sqrt(cov * (1 - cov) / t.total)
                covs = [c for _, c, _ in t.cells]
                print(f"{label:<52} {method:<20} {cov:8.3f} {se:6.3f} {min(covs):8.3f} {max(covs):8.3f} "
                      f"{t.widths / t.total:7.4f} {len(t.cells):5d} {t.total:6d}")
            if args.cells:
                for method, t in tallies.items():
                    for cell, c, n in t.cells:
                        print(f"    {label} | {method:<20} {cell:<60} {c:.3f} (n={n})")
        print(f"# {name}: {time.time() - t1:.1f} s", flush=True)
    print(f"# total {time.time() - t0:.1f} s; load average after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
