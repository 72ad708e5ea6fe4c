"""Components Inclusion Score (CIS): the pure math of Foong et al., arXiv:2311.13620.

A prompt names ``K`` components (ImageNet class names); CLIP scores each generated image against a
lookup table of every subset of them, and the best entry says how many components the image shows.
The package holds one module per job: :mod:`.prompts` (template and sampling), :mod:`.scoring`
(lookup table, scores, component rates), :mod:`.order` (the order test) and :mod:`.fidelity`
(composites, degradation slope, IS, FID). docs/cis.md records the conventions.
"""

from __future__ import annotations

from t2i_fairness.metrics.cis.fidelity import (
    degradation_slope, frechet_distance, frechet_inception_distance, gaussian_statistics, inception_score,
    inception_score_splits, tile_composite,
)
from t2i_fairness.metrics.cis.order import (
    ChiSquareResult, ORDER_EFFECT, ORDER_POSITION_RESAMPLES, OrderArrays, OrderEffect, OrderPositionResult,
    OrderPower, order_arrays, order_component_permutation_test, order_effect,
    order_invariance_permutation_test, order_invariance_test, order_invariance_test_by_component,
    order_position_power, order_position_test, order_resamples, simulate_order_study, _balanced_masks,
    _linear_effect,
)
from t2i_fairness.metrics.cis.prompts import (
    DEFAULT_KS, PROMPT_STYLES, check_token_lengths, imagenet_classnames, indefinite_article, render_prompt,
    sample_component_prompts, sample_fitting_prompts, sample_prompt_suite, shuffle_components,
    shuffled_prompts,
)
from t2i_fairness.metrics.cis.scoring import (
    ComponentRate, component_generation_rates, component_rate_intervals, components_inclusion_score,
    counted_components, detected_subsets, extreme_components, image_scores, lookup_subsets, lookup_table,
)

__all__ = [
    "DEFAULT_KS",
    "PROMPT_STYLES",
    "check_token_lengths",
    "imagenet_classnames",
    "indefinite_article",
    "render_prompt",
    "sample_component_prompts",
    "sample_fitting_prompts",
    "sample_prompt_suite",
    "shuffle_components",
    "shuffled_prompts",
    "ComponentRate",
    "component_generation_rates",
    "component_rate_intervals",
    "components_inclusion_score",
    "counted_components",
    "detected_subsets",
    "extreme_components",
    "image_scores",
    "lookup_subsets",
    "lookup_table",
    "ChiSquareResult",
    "ORDER_EFFECT",
    "ORDER_POSITION_RESAMPLES",
    "OrderArrays",
    "OrderEffect",
    "OrderPositionResult",
    "OrderPower",
    "order_arrays",
    "order_component_permutation_test",
    "order_effect",
    "order_invariance_permutation_test",
    "order_invariance_test",
    "order_invariance_test_by_component",
    "order_position_power",
    "order_position_test",
    "order_resamples",
    "simulate_order_study",
    "degradation_slope",
    "frechet_distance",
    "frechet_inception_distance",
    "gaussian_statistics",
    "inception_score",
    "inception_score_splits",
    "tile_composite",
]
