"""Components Inclusion Score (CIS): pure math of Foong et al., arXiv:2311.13620.

A prompt names ``K`` components (ImageNet class names); a lookup table holds every subset of
them rendered with the same template, plus the empty string; CLIP scores each generated image
against the table and the argmax entry tells how many components the image shows.

Prompt template (paper, sections 1 and 4; the prototype zfoong/imggen_baseline for what the
paper does not show)
    ``A photo of <a|an> <c1>, <a|an> <c2>, ..., and <a|an> <cK>.``  One component:
    ``A photo of a crab.``; two: ``A photo of a crab, and a macaw.``; four:
    ``A photo of a crab, a macaw, a steel drum, and a red butterfly.``.  The items are joined
    with ``", "`` and the last one with ``", and "`` from two components on, as the prototype's
    prompt and lookup builders do (``wordGen.py`` lines 100-104, ``Iclip.py`` lines 56-62, at
    commit 788217d); the paper shows no one- or two-component prompt.
    Capitalisation: the paper quotes its prompts verbatim with a capital "A" ("the given prompt
    is 'A photo of an acoustic guitar, a balaclava ski mask, a sock, and a vase.'", section 4;
    Figure 1), so prompts start with "A" by default.  The prototype generates from the template
    ``a photo of {}.`` (lower case, ``template_prompts.txt`` line 1) and scores against
    ``A photo of {}.`` (``Iclip.py`` line 56): ``render_prompt(..., style="prototype")`` gives its
    lower-case generation prompt.  Lookup-table entries always start with "A" (paper silent;
    prototype and default agree).  CLIP's tokenizer lower-cases, so for CLIP text encoders
    (Stable Diffusion 1.x/2.x, the CIS scorer) the two styles encode identically; they differ
    for case-sensitive text encoders (T5, closed APIs).

Article rule (a documented heuristic)
    ``an`` when the component's first letter, lower-cased, is a vowel letter (a, e, i, o, u),
    ``a`` otherwise.  It follows spelling, not sound, so it is wrong for words such as
    "unicycle" (-> "an unicycle") or "hourglass" (-> "a hourglass").

Prompts longer than the text encoder's context (CLIP: 77 tokens)
    :func:`sample_fitting_prompts` draws prompts exactly as :func:`sample_component_prompts`
    does and replaces a prompt that does not fit by the next draw of the same generator, so the
    ``m`` prompts are the first ``m`` draws that fit and the number replaced is reported.  With
    ImageNet names this only happens from K = 8 on (the eight longest names make 83 CLIP
    tokens); it biases the sample slightly towards shorter names, which is why the count is
    reported.  Lookup-table entries are subsets of the prompt, never longer than it.

Lookup table order (the prototype's, ``Iclip.py`` lines 41-67)
    The non-empty subsets by size, each size in ``itertools.combinations`` order of the
    components' positions (components keep their prompt order inside an entry), so the full
    prompt comes second to last; then the empty string (count 0) last.  The order depends only
    on ``K``, so ``counts`` are identical for every prompt with ``K`` components and the logits of
    images of different prompts can be stacked row-wise.  ``numpy.argmax`` resolves exact ties
    (they happen with fp16 CLIP) to the first entry, as the prototype's ``np.argmax`` does: to
    the smaller non-empty subset, and to the empty string only when nothing else ties with it.
    For ``K = 2`` and all logits equal, ``S = 1/2`` (entry "A photo of a crab."), not 0.

Component names
    :func:`imagenet_classnames` reads ``t2i_fairness/data/imagenet_classnames_cis.txt``: the
    998 distinct ImageNet names in the wording of the prototype's ``imagenet_label.txt``
    ("baluster or handrail", where open_clip writes "baluster / handrail"); the file header
    records how it was made and checked.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "DEFAULT_KS",
    "PROMPT_STYLES",
    "ChiSquareResult",
    "ComponentRate",
    "check_token_lengths",
    "component_generation_rates",
    "component_rate_intervals",
    "components_inclusion_score",
    "counted_components",
    "degradation_slope",
    "detected_subsets",
    "extreme_components",
    "frechet_distance",
    "frechet_inception_distance",
    "gaussian_statistics",
    "image_scores",
    "imagenet_classnames",
    "indefinite_article",
    "inception_score",
    "inception_score_splits",
    "lookup_subsets",
    "lookup_table",
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
    "render_prompt",
    "sample_component_prompts",
    "sample_fitting_prompts",
    "sample_prompt_suite",
    "shuffle_components",
    "shuffled_prompts",
    "tile_composite",
]

#: The component counts the paper evaluates (K = 1, 2, 4, 8).
DEFAULT_KS: tuple[int, ...] = (1, 2, 4, 8)

#: Prompt prefix per style: the paper's verbatim prompts ("A photo of ...") or the prototype's
#: generation template ``a photo of {}.``.
PROMPT_STYLES: dict[str, str] = {"paper": "A photo of ", "prototype": "a photo of "}
#: Prefix of every lookup-table entry (the prototype's ``Iclip.py`` template ``A photo of {}.``).
_LOOKUP_PREFIX = "A photo of "
_VOWELS = frozenset("aeiou")


# ----------------------------------------------------------------------------- prompts


def _check_components(components: Sequence[str], name: str = "components") -> tuple[str, ...]:
    if isinstance(components, str):
        raise TypeError(f"`{name}` must be a sequence of strings, not a single string {components!r}")
    items = tuple(components)
    for i, c in enumerate(items):
        if not isinstance(c, str) or not c.strip():
            raise ValueError(f"`{name}[{i}]` must be a non-empty string, but got {c!r}")
    dupes = sorted(c for c, n in Counter(items).items() if n > 1)
    if dupes:
        raise ValueError(f"`{name}` must not repeat a component, but {dupes} appear more than once")
    return items


def indefinite_article(word: str) -> str:
    """``"an"`` if ``word`` starts with a vowel letter (case-insensitive), else ``"a"``.

    A spelling heuristic, not a pronunciation rule (see the module docstring).

    Args:
        word: a non-empty component name.

    Raises:
        ValueError: if ``word`` is empty or blank.

    Example:
        >>> indefinite_article("acoustic guitar"), indefinite_article("crab"), indefinite_article("Otterhound")
        ('an', 'a', 'an')
    """
    if not isinstance(word, str) or not word.strip():
        raise ValueError(f"`word` must be a non-empty string, but got {word!r}")
    return "an" if word.strip()[0].lower() in _VOWELS else "a"


def _render(items: Sequence[str], prefix: str = _LOOKUP_PREFIX) -> str:
    phrases = [f"{indefinite_article(c)} {c.strip()}" for c in items]
    listing = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + f", and {phrases[-1]}"
    return f"{prefix}{listing}."


def _prompt_prefix(style: str) -> str:
    if style not in PROMPT_STYLES:
        raise ValueError(f"`style` must be one of {sorted(PROMPT_STYLES)}, but got {style!r}")
    return PROMPT_STYLES[style]


def render_prompt(components: Sequence[str], style: str = "paper") -> str:
    """Render components with the CIS template ``A photo of a X, a Y, and an Z.``.

    Args:
        components: one or more distinct component names, in prompt order.
        style: ``"paper"`` (default): "A photo of ...", as the paper quotes its prompts;
            ``"prototype"``: "a photo of ...", the prototype's generation template.  Both put
            ``", and "`` before the last of two or more components.

    Returns:
        The prompt text (template and article rule in the module docstring).

    Raises:
        ValueError: if ``components`` is empty, holds an empty name, or repeats a name, or
            ``style`` is unknown.
        TypeError: if ``components`` is a single string.

    Example:
        >>> render_prompt(["crab"])
        'A photo of a crab.'
        >>> render_prompt(["crab", "macaw"])
        'A photo of a crab, and a macaw.'
        >>> render_prompt(["crab", "macaw", "steel drum", "red butterfly"])
        'A photo of a crab, a macaw, a steel drum, and a red butterfly.'
        >>> render_prompt(["acoustic guitar", "sock"], style="prototype")
        'a photo of an acoustic guitar, and a sock.'
    """
    prefix = _prompt_prefix(style)
    items = _check_components(components)
    if not items:
        raise ValueError("`components` must name at least one component, but got none")
    return _render(items, prefix)


_CLASSNAMES_FILE = "imagenet_classnames_cis.txt"


def imagenet_classnames() -> tuple[str, ...]:
    """The 998 distinct ImageNet class names, worded as the CIS prototype's label file.

    Read from ``t2i_fairness/data/imagenet_classnames_cis.txt`` (lines starting with ``#`` are
    the file's provenance header).  The names are open_clip's ``IMAGENET_CLASSNAMES`` in class
    order with the two repeats ("missile", "sunglasses": two classes share each name) removed,
    first occurrence kept, and five names worded with "or" as the prototype's
    ``imagenet_label.txt`` has them ("baluster or handrail" for open_clip's
    "baluster / handrail"); the list equals that file line for line.

    Raises:
        FileNotFoundError: if the package data file is missing (a broken install).
        ValueError: if the file does not hold 998 distinct non-empty names.

    Example:
        >>> names = imagenet_classnames()
        >>> len(names), names[0], names[421]
        (998, 'tench', 'baluster or handrail')
    """
    return _load_classnames()


@functools.lru_cache(maxsize=1)
def _load_classnames() -> tuple[str, ...]:
    from importlib.resources import files

    resource = files("t2i_fairness") / "data" / _CLASSNAMES_FILE
    lines = resource.read_text(encoding="utf-8").splitlines()
    names = tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    if len(names) != 998 or len(set(names)) != len(names):
        raise ValueError(
            f"data file {_CLASSNAMES_FILE} must hold 998 distinct class names, but holds "
            f"{len(names)} ({len(set(names))} distinct): reinstall t2i-fairness"
        )
    return names


def _check_pos_int(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an integer >= {minimum}, but got {value!r}")
    if value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, but got {value!r}")
    return int(value)


def _classname_pool(classnames: Sequence[str] | None) -> tuple[str, ...]:
    if classnames is None:
        return imagenet_classnames()
    if isinstance(classnames, str):
        raise TypeError(f"`classnames` must be a sequence of strings, not a single string {classnames!r}")
    pool = tuple(dict.fromkeys(classnames))
    for i, c in enumerate(pool):
        if not isinstance(c, str) or not c.strip():
            raise ValueError(f"`classnames` must hold non-empty strings, but entry {i} is {c!r}")
    return pool


def sample_component_prompts(
    k: int, m: int, seed: int | Sequence[int], classnames: Sequence[str] | None = None
) -> list[tuple[str, ...]]:
    """Sample ``m`` prompts of ``k`` distinct components each (without replacement per prompt).

    Draws use ``numpy.random.default_rng(seed)``: prompt ``j`` is
    ``rng.choice(len(pool), size=k, replace=False)`` after prompts ``0..j-1``, where ``pool`` is
    ``classnames`` with repeats removed (first occurrence kept).  Different prompts may share
    components.  Render each tuple with :func:`render_prompt`.

    Args:
        k: components per prompt (``1 <= k <= len(pool)``).
        m: number of prompts (``>= 1``).
        seed: seed of the generator (an int or a sequence of ints, as ``default_rng`` takes);
            equal arguments give equal prompts.  ``None`` is refused (it would not reproduce).
        classnames: component pool; default :func:`imagenet_classnames` (the package data file).

    Returns:
        ``m`` tuples of ``k`` component names, in prompt order.

    Raises:
        ValueError: if ``k`` or ``m`` is below 1, ``k`` exceeds the pool, or a name is empty.
        TypeError: if ``k`` or ``m`` is not an integer, or ``seed`` is None.

    Example:
        >>> pool = ["crab", "macaw", "steel drum", "red butterfly", "sock"]
        >>> prompts = sample_component_prompts(3, 2, seed=0, classnames=pool)
        >>> [len(set(p)) for p in prompts]
        [3, 3]
        >>> prompts == sample_component_prompts(3, 2, seed=0, classnames=pool)
        True
    """
    k = _check_pos_int("k", k)
    m = _check_pos_int("m", m)
    if seed is None:
        raise TypeError("`seed` must be an integer (or sequence of integers), but got None")
    pool = _classname_pool(classnames)
    if k > len(pool):
        raise ValueError(f"`k` must be at most the number of distinct class names ({len(pool)}), but got {k}")
    rng = np.random.default_rng(seed)
    return [tuple(pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)) for _ in range(m)]


def sample_prompt_suite(
    m: int, seed: int, ks: Sequence[int] = DEFAULT_KS, classnames: Sequence[str] | None = None
) -> dict[int, list[tuple[str, ...]]]:
    """``m`` component prompts for every ``k`` in ``ks`` (default K = 1, 2, 4, 8).

    Each ``k`` gets its own generator, seeded with ``[seed, k]``, so adding or removing a ``k``
    does not change the prompts of the others.

    Args:
        m: prompts per ``k``.
        seed: base seed.
        ks: component counts, distinct.
        classnames: component pool (default: de-duplicated ImageNet class names).

    Raises:
        ValueError: if ``ks`` is empty or repeats a value, or as :func:`sample_component_prompts`.
        TypeError: if ``seed`` is None.

    Example:
        >>> suite = sample_prompt_suite(2, seed=0, ks=(1, 2), classnames=["crab", "macaw", "sock"])
        >>> {k: [len(p) for p in v] for k, v in suite.items()}
        {1: [1, 1], 2: [2, 2]}
    """
    if seed is None:
        raise TypeError("`seed` must be an integer, but got None")
    ks = tuple(ks)
    if not ks or len(set(ks)) != len(ks):
        raise ValueError(f"`ks` must be a non-empty sequence of distinct integers, but got {ks}")
    pool = _classname_pool(classnames)
    out: dict[int, list[tuple[str, ...]]] = {}
    for k in ks:
        k = _check_pos_int("ks[...]", k)
        if k > len(pool):
            raise ValueError(f"`ks` values must be at most {len(pool)} (distinct class names), but got {k}")
        out[k] = sample_component_prompts(k, m, seed=[seed, k], classnames=pool)
    return out


def sample_fitting_prompts(
    k: int,
    m: int,
    seed: int | Sequence[int],
    fits: Callable[[tuple[str, ...]], bool],
    classnames: Sequence[str] | None = None,
    max_draws: int | None = None,
) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """Like :func:`sample_component_prompts`, but a prompt that does not ``fit`` is redrawn.

    The generator is ``numpy.random.default_rng(seed)`` and each draw is
    ``rng.choice(len(pool), size=k, replace=False)``, as in :func:`sample_component_prompts`;
    draws for which ``fits(components)`` is false are set aside and the next draw is taken.  When
    every draw fits, the result equals ``sample_component_prompts(k, m, seed, classnames)``.

    Args:
        k: components per prompt.
        m: prompts to return.
        seed: seed of the generator (the suite uses ``[seed, k]``, as :func:`sample_prompt_suite`).
        fits: ``components -> bool``, e.g. "the rendered prompt has at most 77 CLIP tokens".
        classnames: component pool (default: de-duplicated ImageNet class names).
        max_draws: give up after this many draws (default ``10 * m + 100``).

    Returns:
        ``(prompts, rejected)``: ``m`` component tuples that fit, and the draws set aside, in
        draw order.

    Raises:
        ValueError: if fewer than ``m`` of ``max_draws`` draws fit (the message shows one that
            did not), or as :func:`sample_component_prompts`.

    Example:
        >>> pool = ["crab", "macaw", "steel drum", "red butterfly", "sock"]
        >>> short = lambda comps: sum(len(c) for c in comps) <= 10
        >>> prompts, rejected = sample_fitting_prompts(2, 3, seed=0, fits=short, classnames=pool)
        >>> all(short(p) for p in prompts), len(prompts)
        (True, 3)
        >>> sample_fitting_prompts(2, 3, 0, lambda c: True, pool)[0] == sample_component_prompts(2, 3, 0, pool)
        True
    """
    k = _check_pos_int("k", k)
    m = _check_pos_int("m", m)
    if seed is None:
        raise TypeError("`seed` must be an integer (or sequence of integers), but got None")
    limit = 10 * m + 100 if max_draws is None else _check_pos_int("max_draws", max_draws)
    pool = _classname_pool(classnames)
    if k > len(pool):
        raise ValueError(f"`k` must be at most the number of distinct class names ({len(pool)}), but got {k}")
    rng = np.random.default_rng(seed)
    kept: list[tuple[str, ...]] = []
    rejected: list[tuple[str, ...]] = []
    for _ in range(limit):
        comps = tuple(pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False))
        (kept if fits(comps) else rejected).append(comps)
        if len(kept) == m:
            return kept, rejected
    example = render_prompt(rejected[-1]) if rejected else ""
    raise ValueError(
        f"only {len(kept)} of {limit} prompts with k={k} components fit (need m={m}); "
        f"e.g. {example!r} does not: use fewer components"
    )


def check_token_lengths(
    texts: Iterable[str], count_tokens: Callable[[str], int], limit: int = 77
) -> list[int]:
    """Check that every text fits the text encoder's context (CLIP: 77 tokens).

    ``count_tokens`` is injected so this module loads no tokenizer; it must return the length
    the encoder sees, *including* special tokens (CLIP's start/end tokens count toward 77).

    Args:
        texts: prompts or lookup-table entries.
        count_tokens: ``text -> number of tokens``.
        limit: largest allowed count.

    Returns:
        The token count of each text, in order.

    Raises:
        ValueError: naming the first text whose count exceeds ``limit`` (or ``limit < 1``).

    Example:
        >>> words_plus_two = lambda t: len(t.split()) + 2
        >>> check_token_lengths(["a photo of a crab."], words_plus_two)
        [7]
        >>> check_token_lengths(["a photo of a crab."], words_plus_two, limit=6)
        Traceback (most recent call last):
        ...
        ValueError: text 0 'a photo of a crab.' has 7 tokens, more than the limit of 6; shorten it or use fewer components
    """
    limit = _check_pos_int("limit", limit)
    counts: list[int] = []
    for i, text in enumerate(texts):
        n = int(count_tokens(text))
        if n > limit:
            raise ValueError(
                f"text {i} {text!r} has {n} tokens, more than the limit of {limit}; "
                "shorten it or use fewer components"
            )
        counts.append(n)
    return counts


# ----------------------------------------------------------------------------- lookup table


def lookup_subsets(components: Sequence[str]) -> list[tuple[str, ...]]:
    """The component subset behind each lookup-table entry, in :func:`lookup_table` order.

    Non-empty subsets by size (``itertools.combinations`` order within a size), the empty
    subset last, as the prototype builds its table.

    Args:
        components: the prompt's distinct components, in prompt order.

    Raises:
        ValueError: if ``components`` is empty, holds an empty name, or repeats a name.

    Example:
        >>> lookup_subsets(["crab", "macaw"])
        [('crab',), ('macaw',), ('crab', 'macaw'), ()]
    """
    items = _check_components(components)
    if not items:
        raise ValueError("`components` must name at least one component, but got none")
    positions = range(len(items))
    subsets = [
        tuple(items[i] for i in idx)
        for size in range(1, len(items) + 1)
        for idx in itertools.combinations(positions, size)
    ]
    return subsets + [()]


def lookup_table(components: Sequence[str]) -> list[tuple[str, int]]:
    """The CIS lookup table of a prompt: ``2**K`` ``(text, component count)`` entries.

    Every non-empty subset of the components, in prompt order, rendered as
    ``A photo of <a|an> c1, ..., and <a|an> cj.``, then ``("", 0)`` (no component present)
    last, in the prototype's order (module docstring), so exact ties go to the first non-empty
    entry.  :func:`lookup_subsets` gives the subset behind each entry.

    Args:
        components: the prompt's distinct components, in prompt order.

    Returns:
        ``[(text, count), ...]`` with ``count`` the number of components named in ``text``.

    Raises:
        ValueError: if ``components`` is empty, holds an empty name, or repeats a name.

    Example:
        >>> for text, count in lookup_table(["crab", "macaw"]):
        ...     print(count, repr(text))
        1 'A photo of a crab.'
        1 'A photo of a macaw.'
        2 'A photo of a crab, and a macaw.'
        0 ''
    """
    return [(_render(s, _LOOKUP_PREFIX) if s else "", len(s)) for s in lookup_subsets(components)]


# ----------------------------------------------------------------------------- score


def _check_logits_counts(logits: object, counts: object) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(logits, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(
            f"`logits` must have shape (images, table entries) with both > 0, but got shape {x.shape}"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError("`logits` must be finite, but contains NaN or infinity")
    c = np.asarray(counts)
    if c.ndim != 1 or c.shape[0] != x.shape[1]:
        raise ValueError(
            f"`counts` must have one entry per logits column ({x.shape[1]}), but got shape {c.shape}"
        )
    if c.dtype.kind not in "iu":
        if c.dtype.kind == "f" and np.all(np.isfinite(c)) and np.all(c == np.round(c)):
            c = c.astype(int)
        else:
            raise ValueError(f"`counts` must hold non-negative integers, but got {c.tolist()}")
    if np.any(c < 0) or c.max() < 1:
        raise ValueError(
            f"`counts` must be non-negative with max(counts) = K >= 1, but got {c.tolist()}"
        )
    return x, c.astype(int)


def image_scores(logits: object, counts: Sequence[int]) -> np.ndarray:
    """Per-image score ``S = counts[argmax(logits)] / K`` with ``K = max(counts)`` (paper Eq. 1).

    ``argmax`` of CLIP's softmax equals ``argmax`` of its logits, so logits suffice; ties go to
    the first entry (with :func:`lookup_table` order: the smallest tying non-empty subset).

    Args:
        logits: array ``(images, table entries)`` of image-text similarities.
        counts: components named in each table entry (see :func:`lookup_table`).

    Returns:
        Array ``(images,)`` of scores in [0, 1].

    Raises:
        ValueError: on a shape mismatch, non-finite logits, or counts that are not
            non-negative integers with a positive maximum.

    Example:
        >>> image_scores([[0.1, 0.2, 0.9, 0.3], [1.0, 1.0, 1.0, 5.0]], [1, 1, 2, 0]).tolist()
        [1.0, 0.0]
        >>> image_scores([[0.3, 0.3, 0.3, 0.3]], [1, 1, 2, 0]).tolist()  # exact tie: first entry
        [0.5]
    """
    x, c = _check_logits_counts(logits, counts)
    return c[np.argmax(x, axis=1)] / c.max()


def components_inclusion_score(logits: object, counts: Sequence[int]) -> float:
    """Components Inclusion Score ``CIS_K``: mean of :func:`image_scores` over all images.

    Paper Eq. 1-2: ``S_ij = L(argmax p_ij) / K`` and ``CIS_K = sum_ij S_ij / (N M)``.  Stack the
    logits of all ``N * M`` images of the ``M`` prompts with ``K`` components (each image scored
    against its own prompt's table; with :func:`lookup_table` order the counts are the same for
    every prompt), so every image weighs equally.

    Args:
        logits: array ``(images, table entries)``.
        counts: components named in each entry; ``K = max(counts)``.

    Returns:
        CIS in [0, 1].

    Raises:
        ValueError: as :func:`image_scores`.

    Example:
        >>> counts = [c for _, c in lookup_table(["crab", "macaw"])]
        >>> components_inclusion_score([[0, 0, 9, 0], [9, 0, 0, 0], [0, 0, 0, 9]], counts)
        0.5
    """
    return float(np.mean(image_scores(logits, counts)))


def detected_subsets(logits: object, components: Sequence[str]) -> list[tuple[str, ...]]:
    """Components present in each image: the subset of its argmax lookup-table entry.

    Args:
        logits: array ``(images, 2**K)`` against ``lookup_table(components)``, in that order.
        components: the prompt's components, in prompt order.

    Returns:
        One tuple of detected components per image (prompt order; empty if none).

    Raises:
        ValueError: if ``logits`` does not have ``2**K`` columns, or as :func:`lookup_subsets`.

    Example:
        >>> detected_subsets([[0, 9, 0, 0], [0, 0, 9, 0], [0, 0, 0, 9]], ["crab", "macaw"])
        [('macaw',), ('crab', 'macaw'), ()]
    """
    subsets = lookup_subsets(components)
    x, _ = _check_logits_counts(logits, [len(s) for s in subsets])
    return [subsets[int(j)] for j in np.argmax(x, axis=1)]


# ----------------------------------------------------------------------------- per component


@dataclass(frozen=True)
class ComponentRate:
    """How often a component was detected among the images whose prompt asked for it."""

    component: str
    requested: int  # images whose prompt named the component
    detected: int  # of those, images in which it was detected

    @property
    def rate(self) -> float:
        """``detected / requested`` (generation rate, paper section 8.2)."""
        return self.detected / self.requested


def component_generation_rates(
    requested: Sequence[Sequence[str]], detected: Sequence[Sequence[str]]
) -> dict[str, ComponentRate]:
    """Per-component generation rate (paper section 8.2, Figure 6).

    For every component, the share of images in which it was detected among the images whose
    prompt requested it.

    Args:
        requested: per image, the components its prompt named.
        detected: per image, the components detected (e.g. from :func:`detected_subsets`);
            each must be a subset of that image's requested components.

    Returns:
        ``{component: ComponentRate}`` in order of first request.

    Raises:
        ValueError: if the two sequences differ in length or an image has a detected component
            its prompt did not request.

    Example:
        >>> rates = component_generation_rates([("crab", "sock"), ("crab", "vase")], [("crab",), ()])
        >>> {c: r.rate for c, r in rates.items()}
        {'crab': 0.5, 'sock': 0.0, 'vase': 0.0}
    """
    if len(requested) != len(detected):
        raise ValueError(
            f"`requested` and `detected` must have one entry per image, but got {len(requested)} and {len(detected)}"
        )
    asked: Counter[str] = Counter()
    found: Counter[str] = Counter()
    for i, (req, det) in enumerate(zip(requested, detected)):
        req_items = _check_components(req, f"requested[{i}]")
        det_items = _check_components(det, f"detected[{i}]")
        extra = sorted(set(det_items) - set(req_items))
        if extra:
            raise ValueError(f"`detected[{i}]` has components not requested for that image: {extra}")
        asked.update(req_items)
        found.update(det_items)
    return {c: ComponentRate(c, n, found[c]) for c, n in asked.items()}


def component_rate_intervals(
    prompts: Sequence[Sequence[str]], detected: Sequence[Sequence[Sequence[str]]], *, min_requested: int = 1,
    confidence: float = 0.95,
) -> tuple[dict[str, "object"], list[str]]:
    """Each component's generation rate with its interval over the prompts that asked for it.

    The prompts are the sampled unit (M combinations drawn at random): a prompt's images share its other
    components, so they move together. A component's rate is the mean of its 0/1 detections over the
    images of every prompt naming it, with the cluster interval of
    :func:`t2i_fairness.metrics.intervals.cluster_mean_interval` (prompts resampled; Korn and Graubard's
    effective size with ``prompts - 1`` degrees of freedom). A component named by a single prompt has no
    between-prompt variation to measure: it is listed apart, not given an interval.

    Args:
        prompts: one component tuple per prompt (over every K).
        detected: per prompt, per image, the detected components.
        min_requested: components requested in fewer images are left out.
        confidence: of the intervals.

    Returns:
        ``({component: Interval}, [components named by one prompt only])``, both in order of first request.

    Raises:
        ValueError: lengths that differ, or a detected component the prompt did not name.

    Example:
        >>> ivs, single = component_rate_intervals([("crab", "sock"), ("crab", "vase")],
        ...                                        [[("crab",), ("crab", "sock")], [(), ("crab",)]])
        >>> round(ivs["crab"].estimate, 2), ivs["crab"].n_units, ivs["crab"].df, single
        (0.75, 2, 1.0, ['sock', 'vase'])
    """
    from t2i_fairness.metrics.intervals import cluster_mean_interval

    if len(prompts) != len(detected):
        raise ValueError(f"`prompts` and `detected` must have one entry per prompt, but got {len(prompts)} and "
                         f"{len(detected)}")
    hits: dict[str, list[float]] = {}
    labels: dict[str, list[int]] = {}
    for i, (comps, rows) in enumerate(zip(prompts, detected)):
        comps = _check_components(comps, f"prompts[{i}]")
        for j, det in enumerate(rows):
            det = set(_check_components(det, f"detected[{i}][{j}]"))
            if det - set(comps):
                raise ValueError(f"`detected[{i}][{j}]` has components not requested by its prompt: {sorted(det - set(comps))}")
            for c in comps:
                hits.setdefault(c, []).append(float(c in det))
                labels.setdefault(c, []).append(i)
    out, single = {}, []
    for c, values in hits.items():
        if len(values) < min_requested:
            continue
        if len(set(labels[c])) < 2:
            single.append(c)
            continue
        out[c] = cluster_mean_interval(values, labels[c], confidence=confidence)
    return out, single


def counted_components(
    prompts: Sequence[Sequence[str]], images_per_prompt: int, *, min_requested: int = 1
) -> tuple[list[str], list[str]]:
    """Which components :func:`component_rate_intervals` gives an interval (``counted``) and which it lists as named by
    a single prompt, from the prompts alone (no image, no detection): a component is requested in
    ``images_per_prompt`` images per prompt naming it; counted when requested in >= ``min_requested`` images by
    >= 2 prompts.

    Args:
        prompts: one component tuple per prompt (over every K).
        images_per_prompt: images of each prompt (>= 1).
        min_requested: components requested in fewer images are left out.

    Returns:
        ``(counted, single)``, both in order of first request.

    Raises:
        ValueError: ``images_per_prompt`` below 1.

    Example:
        >>> counted_components([("crab", "sock"), ("crab", "vase")], 2)
        (['crab'], ['sock', 'vase'])
        >>> counted_components([("crab", "sock"), ("crab", "vase")], 2, min_requested=3)
        (['crab'], [])
    """
    if isinstance(images_per_prompt, bool) or not isinstance(images_per_prompt, int) or images_per_prompt < 1:
        raise ValueError(f"`images_per_prompt` must be a positive integer, but got {images_per_prompt!r}")
    named: Counter[str] = Counter()
    for i, comps in enumerate(prompts):
        named.update(_check_components(comps, f"prompts[{i}]"))
    counted = [c for c, m in named.items() if m * images_per_prompt >= min_requested and m >= 2]
    single = [c for c, m in named.items() if m * images_per_prompt >= min_requested and m < 2]
    return counted, single


def extreme_components(
    rates: Mapping[str, ComponentRate], n: int = 10, min_requested: int = 1
) -> tuple[list[ComponentRate], list[ComponentRate]]:
    """The ``n`` most ignored and the ``n`` most prominent components.

    Components requested fewer than ``min_requested`` times are left out (their rate is noisy).
    Ties are broken by more requests first, then by name, so the result is deterministic.

    Args:
        rates: output of :func:`component_generation_rates`.
        n: how many of each to return.
        min_requested: minimum number of requesting images.

    Returns:
        ``(most_ignored, most_prominent)``: lowest rates ascending, highest rates descending.

    Raises:
        ValueError: if ``n`` or ``min_requested`` is below 1.

    Example:
        >>> rates = component_generation_rates([("crab", "sock"), ("crab", "vase")], [("crab",), ("crab",)])
        >>> low, high = extreme_components(rates, n=1)
        >>> low[0].component, high[0].component
        ('sock', 'crab')
    """
    n = _check_pos_int("n", n)
    min_requested = _check_pos_int("min_requested", min_requested)
    kept = [r for r in rates.values() if r.requested >= min_requested]
    ignored = sorted(kept, key=lambda r: (r.rate, -r.requested, r.component))[:n]
    prominent = sorted(kept, key=lambda r: (-r.rate, -r.requested, r.component))[:n]
    return ignored, prominent


# ----------------------------------------------------------------------------- order invariance


def shuffle_components(components: Sequence[str], rng: np.random.Generator | int) -> tuple[str, ...]:
    """A random reordering of a prompt's components (may equal the original order).

    Args:
        components: the components, in prompt order.
        rng: a ``numpy.random.Generator`` (advanced in place) or an integer seed.

    Example:
        >>> sorted(shuffle_components(["crab", "macaw", "sock"], 0))
        ['crab', 'macaw', 'sock']
    """
    items = _check_components(components)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return tuple(items[int(i)] for i in gen.permutation(len(items)))


def shuffled_prompts(prompts: Sequence[Sequence[str]], seed: int) -> list[tuple[str, ...]]:
    """Shuffle the component order of every prompt with one ``default_rng(seed)`` (paper 8.1).

    Example:
        >>> shuffled_prompts([("crab", "macaw")], seed=0) == shuffled_prompts([("crab", "macaw")], seed=0)
        True
    """
    rng = np.random.default_rng(seed)
    return [shuffle_components(p, rng) for p in prompts]


@dataclass(frozen=True)
class ChiSquareResult:
    """Pearson chi-square test of independence between two groups of images."""

    statistic: float
    dof: int
    pvalue: float
    table: np.ndarray  # 2 x columns contingency table actually tested (all-zero columns dropped)
    columns: tuple  # label of each kept column


def _two_group_chi_square(a: Counter, b: Counter, labels: Sequence) -> ChiSquareResult:
    from scipy.stats import chi2_contingency

    kept = [lab for lab in labels if a[lab] + b[lab] > 0]
    table = np.array([[a[lab] for lab in kept], [b[lab] for lab in kept]], dtype=float)
    if table.sum(axis=1).min() == 0:
        raise ValueError("both groups need at least one observation, but one group is empty")
    if len(kept) < 2:
        # One category only: the distributions are identical, chi-square has no degrees of freedom.
        return ChiSquareResult(0.0, 0, 1.0, table, tuple(kept))
    statistic, pvalue, dof, _ = chi2_contingency(table, correction=False)  # tuple form: scipy >= 1.10
    return ChiSquareResult(float(statistic), int(dof), float(pvalue), table, tuple(kept))


def _check_detected_counts(name: str, values: Sequence[int], k: int) -> list[int]:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D sequence of counts, but got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
        raise ValueError(f"`{name}` must hold integer counts in [0, {k}], but got dtype {arr.dtype}")
    bad = arr[(arr < 0) | (arr > k)]
    if bad.size:
        raise ValueError(f"`{name}` must hold counts in [0, {k}], but got {sorted(set(bad.tolist()))}")
    return arr.astype(int).tolist()


def order_invariance_test(
    original_counts: Sequence[int], shuffled_counts: Sequence[int], k: int
) -> ChiSquareResult:
    """Chi-square test: does shuffling component order change how many components appear?

    Contingency table ``2 x (K + 1)``: rows are original / shuffled prompts, column ``c`` counts
    the images with ``c`` detected components; all-zero columns are dropped and Pearson's
    statistic is computed without Yates' correction (``scipy.stats.chi2_contingency``).  With a
    single non-empty column the groups are identical: statistic 0, dof 0, p-value 1.

    The paper (section 8.1) reports ``chi2(996, N=175918)``: its 996 degrees of freedom
    indicate a table of 2 rows x 997 *components* (detection totals per ImageNet name); that
    variant is :func:`order_invariance_test_by_component`.

    Args:
        original_counts: detected-component count of each image from the original prompts.
        shuffled_counts: the same for the shuffled prompts.
        k: components per prompt; counts must lie in ``[0, k]``.

    Returns:
        :class:`ChiSquareResult` (statistic, dof, p-value, tested table and its column labels).

    Raises:
        ValueError: if a group is empty or holds a count outside ``[0, k]``.

    Example:
        >>> r = order_invariance_test([0, 1, 2, 2], [0, 1, 2, 2], k=2)
        >>> r.statistic, r.dof, r.pvalue
        (0.0, 2, 1.0)
    """
    k = _check_pos_int("k", k)
    a = Counter(_check_detected_counts("original_counts", original_counts, k))
    b = Counter(_check_detected_counts("shuffled_counts", shuffled_counts, k))
    return _two_group_chi_square(a, b, range(k + 1))


#: Monte Carlo resamples of :func:`order_invariance_permutation_test`: its p-value is at least
#: ``1 / (ORDER_RESAMPLES + 1) = 5e-5``, below a Holm first step of ``0.05 / 475 = 1.05e-4``.
ORDER_RESAMPLES = 19_999


@dataclass(frozen=True)
class PermutationResult:
    """A Monte Carlo permutation test of the order-invariance chi-square (:func:`order_invariance_permutation_test`).

    ``pvalue = (1 + #{resampled statistic >= observed}) / (1 + resamples)``: never 0, never below
    ``resolution = 1 / (1 + resamples)``; ``asymptotic_pvalue`` is the chi-square reference's, for
    comparison only (rough on small counts).
    """

    statistic: float
    dof: int
    pvalue: float
    resamples: int
    exceed: int  # resampled statistics at least the observed one
    asymptotic_pvalue: float
    table: np.ndarray
    columns: tuple
    method: str = "stratified permutation (Monte Carlo), Pearson chi-square statistic"

    @property
    def resolution(self) -> float:
        """The smallest p-value the test can report: ``1 / (1 + resamples)``."""
        return 1.0 / (1.0 + self.resamples)


def _pearson_rows(first: np.ndarray, totals: np.ndarray, n1: float, n2: float) -> np.ndarray:
    """Pearson's X^2 of 2 x C tables from their first rows (``first``: (..., C)) with fixed column totals."""
    n = n1 + n2
    e1, e2 = totals * (n1 / n), totals * (n2 / n)
    second = totals - first
    return ((first - e1) ** 2 / e1).sum(axis=-1) + ((second - e2) ** 2 / e2).sum(axis=-1)


def order_invariance_permutation_test(original_counts, shuffled_counts, k: int, *, n_resamples: int = ORDER_RESAMPLES,
                                      seed: int = 0) -> PermutationResult:
    """Exact-in-distribution test of "shuffling the order changes nothing", by Monte Carlo permutation, on
    the number of components detected per image: valid, but with **no power against an order effect**
    (the shuffles are uniform, so both groups expect the same counts whatever the position effect); the
    order gate uses :func:`order_position_test` since issue #28 and prints this one for comparison.

    ``original_counts`` and ``shuffled_counts`` are ``(prompts, images)`` arrays of detected-component
    counts; row ``j`` of both comes from prompt ``j`` and its shuffle. Under H0 (order has no effect)
    the ``2 x images`` values of a prompt are exchangeable between the two groups, so the test permutes
    group labels *within each prompt* (strata: a prompt's images move together, which pooling across
    prompts would ignore) and compares Pearson's X^2 on the ``2 x (K + 1)`` table of counts with its
    permutation distribution: ``p = (1 + #{X^2* >= X^2}) / (1 + B)`` (Davison & Hinkley 1997, 4.2; valid
    at any sample size, never 0). With a single non-empty column the statistic is 0 and ``p = 1``.

    Args:
        original_counts, shuffled_counts: integer counts in ``[0, k]`` of the same ``(prompts, images)`` shape.
        k: components per prompt.
        n_resamples: B (>= 1); the p-value's resolution is ``1 / (B + 1)``.
        seed: of the permutations (same arguments, same p-value).

    Raises:
        ValueError: shapes that differ or are not 2-D, counts outside ``[0, k]``, ``n_resamples < 1``.

    Example:
        >>> same = np.array([[0, 1], [2, 2]])
        >>> r = order_invariance_permutation_test(same, same, k=2, n_resamples=99)
        >>> r.statistic, r.pvalue, r.resolution
        (0.0, 1.0, 0.01)
        >>> r = order_invariance_permutation_test(np.zeros((8, 4), int), np.full((8, 4), 2), k=2, n_resamples=999)
        >>> r.pvalue == 1 / 1000 == r.resolution
        True
    """
    k = _check_pos_int("k", k)
    a, b = np.asarray(original_counts), np.asarray(shuffled_counts)
    if a.ndim != 2 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"`original_counts` and `shuffled_counts` must be non-empty (prompts, images) arrays of one "
                         f"shape, but got {a.shape} and {b.shape}")
    _check_detected_counts("original_counts", a.ravel(), k)
    _check_detected_counts("shuffled_counts", b.ravel(), k)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"`n_resamples` must be a positive integer, but got {n_resamples!r}")
    a, b = a.astype(int), b.astype(int)
    observed = _two_group_chi_square(Counter(a.ravel().tolist()), Counter(b.ravel().tolist()), range(k + 1))
    if observed.dof == 0:
        return PermutationResult(0.0, 0, 1.0, int(n_resamples), int(n_resamples), 1.0, observed.table, observed.columns)
    cols = np.asarray(observed.columns)
    pooled = np.concatenate([a, b], axis=1)  # (P, 2n): a prompt's images of both groups
    per_prompt = (pooled[..., None] == cols).sum(axis=1)  # (P, C): a prompt's images per column
    totals = per_prompt.sum(axis=0).astype(float)
    n = a.shape[1]
    stat = float(_pearson_rows(observed.table[0], totals, a.size, b.size))
    rng = np.random.default_rng(seed)
    # the first group's share of a prompt's 2n images is a uniform n-subset: its column counts are
    # multivariate hypergeometric; prompts with equal column counts are drawn together
    patterns, repeats = np.unique(per_prompt, axis=0, return_counts=True)
    rows = np.zeros((int(n_resamples), cols.size))
    for colors, times in zip(patterns, repeats):
        draws = rng.multivariate_hypergeometric(colors, n, size=(int(n_resamples), int(times)))
        rows += draws.sum(axis=1)
    tol = 1e-9 * max(1.0, stat)  # float ties count as extreme (conservative)
    exceed = int(np.count_nonzero(_pearson_rows(rows, totals, a.size, b.size) >= stat - tol))
    return PermutationResult(stat, observed.dof, (1.0 + exceed) / (1.0 + n_resamples), int(n_resamples), exceed,
                             observed.pvalue, observed.table, observed.columns)


def order_invariance_test_by_component(
    original_detected: Sequence[Sequence[str]], shuffled_detected: Sequence[Sequence[str]]
) -> ChiSquareResult:
    """Chi-square test on how often each component is detected, original vs shuffled prompts.

    The reading of the paper's section 8.1 that matches its reported degrees of freedom
    (``chi2(996, N=175918)`` for K = 8 over ImageNet names): a ``2 x components`` table whose
    cell is the number of images of that group in which the component was detected; components
    never detected in either group are dropped.  ``N`` is the table total.

    Args:
        original_detected: per image from the original prompts, the detected components.
        shuffled_detected: the same for the shuffled prompts.

    Raises:
        ValueError: if a group has no detected component at all or an image repeats one.

    Example:
        >>> r = order_invariance_test_by_component([("crab",), ("sock",)], [("crab",), ("sock",)])
        >>> r.statistic, r.dof, int(r.table.sum())
        (0.0, 1, 4)
    """
    a: Counter[str] = Counter()
    b: Counter[str] = Counter()
    for name, group, counter in (("original_detected", original_detected, a), ("shuffled_detected", shuffled_detected, b)):
        for i, det in enumerate(group):
            counter.update(_check_components(det, f"{name}[{i}]"))
    labels = list(dict.fromkeys([*a, *b]))
    return _two_group_chi_square(a, b, labels)


# ----------------------------------------------------------------------------- order test with power

#: The least Monte Carlo resamples of :func:`order_position_test` (:func:`order_resamples` raises it
#: with the run's level).
ORDER_POSITION_RESAMPLES = 9_999
#: The stated effect the order gate reports its power against: the first-named component's inclusion
#: this much above the last-named (linear in between, on the probability scale).
ORDER_EFFECT = 0.2


def order_resamples(level: float, floor: int = ORDER_POSITION_RESAMPLES) -> int:
    """Monte Carlo resamples ``B`` for a permutation p-value decided at ``level``: ``1 / (B + 1)`` at most
    ``level / 3`` (so a rejection may still count two resampled statistics at least the observed one),
    rounded up to a whole ``10,000 k - 1``, at least ``floor``.

    Args:
        level: the per-gate level the p-value is compared with, in (0, 1).
        floor: the least ``B``.

    Raises:
        ValueError: ``level`` outside (0, 1) or ``floor < 1``.

    Example:
        >>> order_resamples(0.05 / 1435), order_resamples(0.05 / 475), order_resamples(0.05 / 6)
        (89999, 29999, 9999)
    """
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1), but got {level!r}")
    floor = _check_pos_int("floor", floor)
    return max(floor, int(math.ceil(3.0 / level / 10_000.0)) * 10_000 - 1)


@dataclass(frozen=True)
class OrderArrays:
    """The order study as arrays (:func:`order_arrays`); component ``k`` is the ``k``-th of the ORIGINAL prompt.

    Attributes:
        original: ``(prompts, images, K)`` 0/1: component ``k`` detected in an image of the original prompt.
        shuffled: ``(prompts, images, K)`` 0/1: the same for the images of the shuffled prompt.
        order: ``(prompts, K)``: ``order[i, q]`` = the original index of the component the shuffled prompt
            names at position ``q`` (a permutation of ``0..K-1`` per row; the identity when the shuffle
            left the order as it was).
        components: ``(prompts, K)``: index into ``names`` of each original component.
        names: the distinct component names, in order of first appearance.
    """

    original: np.ndarray
    shuffled: np.ndarray
    order: np.ndarray
    components: np.ndarray
    names: tuple[str, ...]


def order_arrays(original_prompts: Sequence[Sequence[str]], shuffled_prompts: Sequence[Sequence[str]],
                 original_detected: Sequence[Sequence[Sequence[str]]],
                 shuffled_detected: Sequence[Sequence[Sequence[str]]]) -> OrderArrays:
    """The order study's prompts and detected subsets as the arrays the order tests read.

    Args:
        original_prompts: per prompt, its components in the original order.
        shuffled_prompts: per prompt, the same components in the shuffled order.
        original_detected: per prompt, per image of the original prompt, the detected components.
        shuffled_detected: the same for the shuffled prompt's images (as many per prompt).

    Raises:
        ValueError: prompts that differ in number or in their components, shuffles that are not
            permutations of the original, groups with different image counts, a detected component
            its prompt does not name.

    Example:
        >>> a = order_arrays([("crab", "sock")], [("sock", "crab")], [[("crab",), ()]], [[("sock",), ("crab", "sock")]])
        >>> a.original[0].tolist(), a.shuffled[0].tolist(), a.order.tolist(), a.names
        ([[1, 0], [0, 0]], [[0, 1], [1, 1]], [[1, 0]], ('crab', 'sock'))
    """
    m = len(original_prompts)
    if not m or m != len(shuffled_prompts) or m != len(original_detected) or m != len(shuffled_detected):
        raise ValueError(f"the original and shuffled prompts and their detections must be as many and at least one, "
                         f"but got {m}, {len(shuffled_prompts)}, {len(original_detected)} and {len(shuffled_detected)}")
    ks = {len(p) for p in original_prompts}
    images = {len(d) for d in original_detected} | {len(d) for d in shuffled_detected}
    if len(ks) != 1 or len(images) != 1 or 0 in images:
        raise ValueError(f"every prompt must name the same K components and every group hold the same number of "
                         f"images, but got K in {sorted(ks)} and images in {sorted(images)}")
    k, n = ks.pop(), images.pop()
    original = np.zeros((m, n, k), np.uint8)
    shuffled = np.zeros((m, n, k), np.uint8)
    order = np.zeros((m, k), np.int64)
    index: dict[str, int] = {}
    components = np.zeros((m, k), np.int64)
    for i, (p, s) in enumerate(zip(original_prompts, shuffled_prompts)):
        p = _check_components(p, f"original_prompts[{i}]")
        s = _check_components(s, f"shuffled_prompts[{i}]")
        if sorted(p) != sorted(s):
            raise ValueError(f"shuffled_prompts[{i}] {list(s)} is not a reordering of original_prompts[{i}] {list(p)}")
        where = {c: q for q, c in enumerate(p)}
        order[i] = [where[c] for c in s]
        components[i] = [index.setdefault(c, len(index)) for c in p]
        for name, rows, out in (("original_detected", original_detected, original),
                                ("shuffled_detected", shuffled_detected, shuffled)):
            for j, det in enumerate(rows[i]):
                det = _check_components(det, f"{name}[{i}][{j}]")
                extra = sorted(set(det) - set(p))
                if extra:
                    raise ValueError(f"`{name}[{i}][{j}]` has components its prompt does not name: {extra}")
                out[i, j, [where[c] for c in det]] = 1
    return OrderArrays(original, shuffled, order, components, tuple(index))


def _check_order_arrays(original, shuffled, order) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b, o = np.asarray(original), np.asarray(shuffled), np.asarray(order)
    if a.ndim != 3 or a.shape != b.shape or 0 in a.shape:
        raise ValueError(f"`original` and `shuffled` must be non-empty (prompts, images, K) arrays of one shape, "
                         f"but got {a.shape} and {b.shape}")
    if not (np.isin(a, (0, 1)).all() and np.isin(b, (0, 1)).all()):
        raise ValueError("`original` and `shuffled` must hold 0/1 detections")
    m, _, k = a.shape
    if o.shape != (m, k) or o.dtype.kind not in "iu" or not (np.sort(o, axis=1) == np.arange(k)).all():
        raise ValueError(f"`order` must be a ({m}, {k}) integer array whose rows are permutations of 0..{k - 1}, "
                         f"but got shape {o.shape}")
    return a.astype(np.float64), b.astype(np.float64), o.astype(np.int64)


def _check_resamples(n_resamples: object) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 0:
        raise ValueError(f"`n_resamples` must be an integer >= 0, but got {n_resamples!r}")
    return int(n_resamples)


def _monte_carlo_p(exceed: int, n_resamples: int) -> float:
    """``(1 + exceed) / (1 + B)``; NaN without resamples (the statistic alone was asked for)."""
    return (1.0 + exceed) / (1.0 + n_resamples) if n_resamples else float("nan")


def _popcount(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(x)
    table = np.array([bin(i).count("1") for i in range(256)], np.uint8)
    return table[x.view(np.uint8)].reshape(x.shape + (x.itemsize,)).sum(axis=-1)


def _balanced_masks(rng: np.random.Generator, count: int, n: int) -> np.ndarray:
    """``count`` independent uniform ``n``-subsets of ``2n`` items as ``(count, 2n)`` 0/1 ``uint8`` rows.

    Up to ``2n = 64`` items: uniform random words of ``2n`` bits kept when exactly ``n`` bits are set
    (rejection sampling: a kept word is uniform over the balanced ones; about ``sqrt(pi n)`` words drawn
    per row); beyond, a shuffle of ``n`` ones and ``n`` zeros per row.

    Example:
        >>> rows = _balanced_masks(np.random.default_rng(0), 5, 3)
        >>> rows.shape, rows.sum(axis=1).tolist()
        ((5, 6), [3, 3, 3, 3, 3])
    """
    width = 2 * n
    if width > 64:
        base = np.zeros((count, width), np.uint8)
        base[:, :n] = 1
        return rng.permuted(base, axis=1)
    size = 1 if width <= 8 else 2 if width <= 16 else 4 if width <= 32 else 8
    word = np.dtype(f"<u{size}")  # the random bytes read as little-endian words, as unpacked below
    top = None if width == 8 * size else word.type((1 << width) - 1)
    accept = math.comb(width, n) / 2.0**width
    out = np.empty(count, word)
    got = 0
    while got < count:
        x = rng.bit_generator.random_raw(int((count - got) / accept * 1.1 * size / 8) + 8).view(word)
        if top is not None:
            x &= top
        x = np.compress(_popcount(x) == n, x)[:count - got]
        out[got:got + x.size] = x
        got += x.size
    bits = np.unpackbits(out.view(np.uint8), bitorder="little").reshape(count, 8 * size)
    return bits if width == 8 * size else bits[:, :width]


def _label_permutations(rng: np.random.Generator, prompts: int, n: int, resamples: int, cells: int = 1 << 24):
    """Chunks of ``(resamples, prompts * 2n)`` float32 0/1 masks (one reused buffer: read each chunk before
    asking for the next): per resample and prompt, which ``n`` of its ``2n`` images are labelled "shuffled",
    a uniform draw, independent across prompts and resamples."""
    width = prompts * 2 * n
    chunk = max(1, min(resamples, cells // width))
    buffer = np.empty((chunk, width), np.float32)
    for start in range(0, resamples, chunk):
        b = min(chunk, resamples - start)
        np.copyto(buffer[:b], _balanced_masks(rng, b * prompts, n).reshape(b, width), casting="unsafe")
        yield buffer[:b]


def _observed_mask(prompts: int, n: int) -> np.ndarray:
    mask = np.zeros((1, prompts, 2 * n), np.float32)
    mask[..., n:] = 1.0  # the pooled images are the original prompt's n, then the shuffled prompt's n
    return mask.reshape(1, -1)


def _moved_contrasts(original: np.ndarray, shuffled: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``(prompts, 2n, K)``: per image (original prompt's first), ``v[q] = y[order[q]] - y[q]``: the
    detection of the component the shuffled prompt names at position ``q`` minus that of the component the
    original names there."""
    pooled = np.concatenate([original, shuffled], axis=1)
    moved = np.take_along_axis(pooled, np.broadcast_to(order[:, None, :], pooled.shape), axis=2)
    return moved - pooled


def _whitening(v: np.ndarray, n: int, tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """``(W, informative)``: ``W`` (K, r) with ``W' C W = I`` on the range of ``C``, the exact covariance of
    ``Z`` over the within-prompt label permutations; ``informative``: prompts whose images differ in ``v``."""
    centred = v - v.mean(axis=1, keepdims=True)
    # Z_i = (2 sum_S v - sum_all v) / n for a uniform n-subset S of 2n: Cov = 4 / (2n - 1) * population cov
    cov = np.einsum("mjk,mjl->kl", centred, centred) * (4.0 / (2 * n - 1)) / (2 * n)
    informative = np.abs(centred).reshape(centred.shape[0], -1).max(axis=1) > 0
    values, vectors = np.linalg.eigh(cov)
    top = float(values.max())
    keep = values > tol * top if top > 0 else np.zeros(values.shape, bool)  # C's range (1 is always outside)
    return vectors[:, keep] / np.sqrt(values[keep]), informative


def _position_statistic(v: np.ndarray, n: int) -> tuple[float, int, np.ndarray]:
    """``(T, r, W)`` without resampling (the simulation of :func:`order_position_power`)."""
    w, _ = _whitening(v, n)
    if w.shape[1] == 0:
        return 0.0, 0, w
    z = ((v[:, n:] - v[:, :n]).sum(axis=(0, 1)) / n) @ w
    return float(z @ z), int(w.shape[1]), w


def _position_profile(order: np.ndarray, contrast: np.ndarray) -> np.ndarray:
    """Least-squares inclusion by position (sum zero) from the within-prompt contrasts ``Z = X'D``, where
    ``X'X = sum_i (2I - P_i - P_i')`` (``P_i`` sends a component's original position to its shuffled one)."""
    m, k = order.shape
    moves = np.zeros((k, k))
    np.add.at(moves, (np.arange(k)[None, :].repeat(m, 0), order), 1.0)  # sum_i P_i' (original <- shuffled)
    gram = 2.0 * m * np.eye(k) - moves - moves.T
    return np.linalg.pinv(gram, rcond=1e-10) @ contrast


def _log_labelings(informative: int, n: int) -> float:
    return informative * math.log(math.comb(2 * n, n))


@dataclass(frozen=True)
class OrderPositionResult:
    """The position test of "shuffling the component order changes nothing" (:func:`order_position_test`).

    ``pvalue = (1 + #{T* >= T}) / (1 + resamples)``: never 0, never below ``resolution``; it is also never
    below the exact permutation p-value's floor ``min_exact_pvalue`` by more than Monte Carlo error.
    ``profile[q]`` is the inclusion of a component named at position ``q + 1`` minus the mean over
    positions (least squares over the within-prompt changes; sums to 0).
    """

    statistic: float
    dof: int
    pvalue: float
    resamples: int
    exceed: int
    asymptotic_pvalue: float
    profile: np.ndarray
    contrast: np.ndarray
    prompts: int
    informative: int
    images: int
    min_exact_pvalue: float
    method: str = "within-prompt label permutations (Monte Carlo), position statistic"

    @property
    def resolution(self) -> float:
        """The smallest p-value the Monte Carlo can report: ``1 / (1 + resamples)``."""
        return 1.0 / (1.0 + self.resamples)

    @property
    def floor(self) -> float:
        """The smallest p-value this design and ``B`` can give: the larger of ``resolution`` and the exact
        test's ``2 / L`` (``L`` labelings of the informative prompts)."""
        return max(self.resolution, self.min_exact_pvalue)


def order_position_test(original, shuffled, order, *, n_resamples: int = ORDER_POSITION_RESAMPLES,
                        seed: int = 0) -> OrderPositionResult:
    """Does a component's position in the prompt change whether it is drawn? A permutation test with power.

    Each prompt ``i`` is rendered twice, in its original order and shuffled (``order[i]``), with ``n``
    images each. For an image, ``v[q] = y[order[q]] - y[q]``: the detection of the component the shuffled
    prompt names at position ``q`` minus that of the component the original names there. The contrast

        ``Z = sum_i (mean of v over the shuffled prompt's images - mean over the original's)``

    is, per position ``q``, the change in inclusion of the component moved TO ``q`` minus that of the
    component moved AWAY from ``q``: a within-prompt comparison (each component against itself), so
    prompt and component effects cancel. If inclusion depends on position by ``beta_q``,
    ``E Z_q = sum_i (2 beta_q - beta_{order[q]}- beta_{order^-1[q]})``, about ``2M (beta_q - mean beta)``
    over random shuffles. The statistic is ``T = Z' C^+ Z`` with ``C`` the exact covariance of ``Z`` over
    the permutations below (the score test of "no position effect": about chi-square with ``r = rank C``
    <= K - 1 degrees of freedom under H0).

    Two-sided in every direction: ``T`` grows with any position profile: the first-named drawn more
    (primacy), the last-named drawn more (recency), the middle lost. A one-sided "earlier is drawn more"
    statistic would gain power only against that one shape and be blind to the others; on the paper's
    size the any-direction test already has power 1.000 against a first-to-last difference of 0.2
    (docs/calibration.md, "The CIS order test").

    Calibration: under H0 (the order changes nothing) the ``2n`` images of a prompt are i.i.d. (own
    seeds), so their original/shuffled labels are exchangeable within the prompt. The test draws, per
    resample and per prompt, a uniform ``n``-subset of its ``2n`` images as "shuffled" (the same
    within-prompt permutations as :func:`order_invariance_permutation_test`; ``C`` depends only on the
    pooled images, so it is the same for every resample) and returns
    ``p = (1 + #{T* >= T}) / (1 + B)`` (Davison & Hinkley 1997, 4.2): valid at any size, never 0.
    Prompts whose shuffle left the order unchanged, or whose images all show the same components at the
    moved positions, add nothing to ``T`` or ``T*`` (``informative`` counts the others).

    Args:
        original: ``(prompts, images, K)`` 0/1, component ``k`` (the original's ``k``-th) detected in an
            image of the original prompt (:func:`order_arrays`).
        shuffled: ``(prompts, images, K)`` 0/1, the same for the shuffled prompt's images.
        order: ``(prompts, K)`` permutations: ``order[i, q]`` is the original index of the component the
            shuffled prompt ``i`` names at position ``q``.
        n_resamples: B; the resolution is ``1 / (B + 1)`` (:func:`order_resamples` for a level). 0: the
            statistic and its asymptotic p alone (``pvalue`` is NaN).
        seed: of the permutations (same arguments, same p-value).

    Returns:
        :class:`OrderPositionResult` (``dof = 0``, ``T = 0`` and ``p = 1`` when no prompt is informative).

    Raises:
        ValueError: arrays of other shapes, values other than 0/1, rows of ``order`` that are not
            permutations, ``n_resamples < 0``.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> order = np.array([rng.permutation(4) for _ in range(60)])
        >>> null = [rng.random((60, 8, 4)) < 0.6 for _ in range(2)]
        >>> r = order_position_test(null[0], null[1], order, n_resamples=999)
        >>> r.dof, r.pvalue > 0.05
        (3, True)
        >>> first = np.array([0.9, 0.6, 0.6, 0.3])  # inclusion by position: the first-named drawn most
        >>> shuffled = rng.random((60, 8, 4)) < first[np.argsort(order, axis=1)][:, None, :]
        >>> r = order_position_test(rng.random((60, 8, 4)) < first, shuffled, order, n_resamples=999)
        >>> r.pvalue == r.resolution == 0.001, [round(float(x), 1) + 0.0 for x in r.profile]
        (True, [0.3, 0.0, 0.0, -0.3])
    """
    a, b, o = _check_order_arrays(original, shuffled, order)
    n_resamples = _check_resamples(n_resamples)
    m, n, k = a.shape
    v = _moved_contrasts(a, b, o)
    w, informative = _whitening(v, n)
    contrast = (v[:, n:] - v[:, :n]).sum(axis=(0, 1)) / n
    profile = _position_profile(o, contrast)
    r = int(w.shape[1])
    min_p = min(1.0, 2.0 * math.exp(-_log_labelings(int(informative.sum()), n))) if informative.any() else 1.0
    if r == 0:
        return OrderPositionResult(0.0, 0, 1.0, n_resamples, n_resamples, 1.0, profile, contrast, m, 0, 2 * m * n, 1.0)
    mi = int(informative.sum())
    vi = v[informative]
    # S* = sum of v over the shuffled-labelled images: integer sums, exact in float32 below 2**24 images
    exact = np.float32 if mi * 2 * n < 1 << 24 else np.float64
    flat = vi.reshape(-1, k).astype(exact)
    total = vi.sum(axis=(0, 1))

    def stats(masks: np.ndarray) -> np.ndarray:  # Z* = (2 S* - sum_all v) / n, T* = |W'Z*|^2
        z = ((2.0 * (masks.astype(exact, copy=False) @ flat).astype(np.float64) - total) / n) @ w
        return np.einsum("br,br->b", z, z)

    stat = float(stats(_observed_mask(mi, n))[0])
    tol = 1e-9 * max(1.0, stat)  # float ties count as extreme (conservative)
    rng = np.random.default_rng(seed)
    exceed = sum(int(np.count_nonzero(stats(masks) >= stat - tol))
                 for masks in _label_permutations(rng, mi, n, int(n_resamples)))
    from scipy.stats import chi2

    return OrderPositionResult(stat, r, _monte_carlo_p(exceed, n_resamples), n_resamples, exceed,
                               float(chi2.sf(stat, r)), profile, contrast, m, mi, 2 * m * n, min_p)


@dataclass(frozen=True)
class OrderEffect:
    """Inclusion by position, estimated prompt by prompt, with law-free limits at any look (:func:`order_effect`).

    ``values[i, q]``: half the change, between prompt ``i``'s shuffled and original images, of
    ``v[q] = y[order[q]] - y[q]`` (the detection of the component named at position ``q`` after the shuffle minus
    that of the one named there before). With inclusion ``beta_q`` added at position ``q`` and the shuffle a
    uniform permutation, ``E values[i, q] = beta_q - mean(beta)`` (each component against itself: prompt and
    component effects cancel), so the column means estimate the position profile the order test's report prints.
    The prompts are drawn from a population and shuffled independently: the rows are independent, bounded in
    [-1, 1], and in draw order.
    """

    values: np.ndarray  # (prompts, K) in [-1, 1]

    @property
    def estimate(self) -> np.ndarray:
        """The position profile's estimate (``K`` values summing to 0 in expectation)."""
        return self.values.mean(axis=0)

    def limits(self, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """Per position, the one-sided lower and upper limits at ``alpha`` each (betting:
        :func:`~t2i_fairness.metrics.intervals.betting_limit` on ``(values + 1) / 2``, in draw order)."""
        from t2i_fairness.metrics.intervals import betting_limit

        unit = (self.values + 1.0) / 2.0
        low = np.array([2.0 * betting_limit(unit[:, q], alpha, "low") - 1.0 for q in range(unit.shape[1])])
        high = np.array([2.0 * betting_limit(unit[:, q], alpha, "high") - 1.0 for q in range(unit.shape[1])])
        return low, high

    def limit(self, alpha: float, side: str) -> float:
        """``"high"``: the largest position effect ``|beta_q - mean(beta)|`` the data leave possible, the larger of
        every position's upper limit and minus its lower limit, each at ``alpha``. For a model with some position
        ``d`` or more away from the mean, the limit is below ``d`` with probability at most ``alpha`` (that
        position's one-sided limit covers it; no multiplicity: every position must clear). There is no ``"low"``."""
        if side != "high":
            raise ValueError(f"an order effect has an upper limit only ('high'), but got {side!r}")
        low, high = self.limits(alpha)
        return float(max(high.max(), -low.min()))


def order_effect(original, shuffled, order) -> OrderEffect:
    """The order study's per-prompt position effects (:class:`OrderEffect`), from the arrays
    :func:`order_position_test` reads.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> a, b, o = simulate_order_study(np.full((400, 4), 0.5), 16, rng, effect=0.4)
        >>> e = order_effect(a, b, o)
        >>> [round(float(x), 1) + 0.0 for x in e.estimate]          # beta - mean(beta): 0.2 .. -0.2
        [0.2, 0.1, -0.1, -0.2]
        >>> 0.2 < e.limit(0.001, "high") < 0.35
        True
        >>> a, b, o = simulate_order_study(np.full((400, 4), 0.5), 16, rng, effect=0.0)
        >>> order_effect(a, b, o).limit(0.001, "high") < 0.1          # no effect: every position within 0.1
        True
    """
    a, b, o = _check_order_arrays(original, shuffled, order)
    n = a.shape[1]
    v = _moved_contrasts(a, b, o)
    return OrderEffect((v[:, n:].mean(axis=1) - v[:, :n].mean(axis=1)) / 2.0)


def _linear_effect(k: int, effect: float) -> np.ndarray:
    """Inclusion added at each position: ``effect / 2`` at the first, ``-effect / 2`` at the last, linear."""
    return effect / 2.0 - effect * np.arange(k) / max(1, k - 1)


def simulate_order_study(rates, images: int, rng: np.random.Generator, effect: float | Sequence[float] = 0.0):
    """One order study drawn from per-prompt, per-component inclusion rates plus a position effect.

    Component ``k`` of prompt ``i`` (the original's ``k``-th) is detected in an image independently with
    probability ``rates[i, k] + delta[position]``, clipped to [0, 1], where ``position`` is where the
    image's prompt names it: ``k`` in the original, a uniform random reordering in the shuffled prompt.

    Args:
        rates: ``(prompts, K)`` inclusion rates in [0, 1] with no position effect.
        images: images per prompt and group.
        rng: the generator (advanced).
        effect: a number: the first position's inclusion this much above the last (linear in between,
            :data:`ORDER_EFFECT`); or ``K`` values ``delta`` by position.

    Returns:
        ``(original, shuffled, order)`` as :func:`order_position_test` reads them.

    Example:
        >>> import numpy as np
        >>> a, b, o = simulate_order_study(np.full((3, 4), 0.5), 2, np.random.default_rng(0), effect=0.2)
        >>> a.shape, b.shape, o.shape, sorted(o[0].tolist())
        ((3, 2, 4), (3, 2, 4), (3, 4), [0, 1, 2, 3])
    """
    rates = np.asarray(rates, dtype=float)
    m, k = rates.shape
    delta = (_linear_effect(k, float(effect)) if np.ndim(effect) == 0 else np.asarray(effect, dtype=float))
    if delta.shape != (k,):
        raise ValueError(f"`effect` must be a number or {k} values by position, but got shape {delta.shape}")
    order = np.argsort(rng.random((m, k)), axis=1)
    position = np.argsort(order, axis=1)  # where the shuffled prompt names each original component
    p_original = np.clip(rates + delta[None, :], 0.0, 1.0)
    p_shuffled = np.clip(rates + delta[position], 0.0, 1.0)
    original = (rng.random((m, images, k)) < p_original[:, None, :]).astype(np.uint8)
    shuffled = (rng.random((m, images, k)) < p_shuffled[:, None, :]).astype(np.uint8)
    return original, shuffled, order


@dataclass(frozen=True)
class OrderPower:
    """Power of :func:`order_position_test` against a stated effect (:func:`order_position_power`)."""

    power: float
    runs: int
    effect: float
    level: float
    floor: float  # the smallest p-value the design can give (every prompt informative)
    prompts: int
    images: int
    k: int
    method: str = "simulated studies, T judged with its chi-square reference"

    @property
    def reachable(self) -> bool:
        """Whether the test can reject at ``level`` at all at these sizes."""
        return self.floor <= self.level


def order_position_power(rates, images: int, *, level: float, effect: float = ORDER_EFFECT, runs: int = 200,
                         seed: int = 0) -> OrderPower:
    """The rejection rate of :func:`order_position_test` at ``level`` when the first-named component is
    drawn ``effect`` more often than the last-named (linear in between), at the run's own sizes.

    ``runs`` studies are drawn by :func:`simulate_order_study` from ``rates`` (e.g. the run's own
    per-prompt, per-component inclusion, pooled over both groups); each study's ``T`` is judged against
    its chi-square reference (``r`` degrees of freedom), which costs no resampling:
    ``bench/bench_order_test.py`` measures it against the Monte Carlo permutation p side by side. When
    the design cannot reach ``level`` at all (``2 / L > level``, ``L = C(2n, n)^M`` labelings, with
    :func:`order_resamples` resamples), the power is 0 whatever the effect.

    Args:
        rates: ``(prompts, K)`` inclusion rates in [0, 1] (no position effect).
        images: images per prompt and group.
        level: the per-gate level the gate is decided at (``alpha / m``).
        effect: first-minus-last inclusion (default :data:`ORDER_EFFECT`).
        runs: simulated studies.
        seed: of the simulation.

    Raises:
        ValueError: ``rates`` not a (prompts, K >= 2) array in [0, 1], ``images``/``runs`` < 1, ``level``
            outside (0, 1).

    Example:
        >>> import numpy as np
        >>> p = order_position_power(np.full((4, 8), 0.6), 2, level=0.05 / 475, runs=20)
        >>> p.reachable, p.power, p.floor > p.level
        (False, 0.0, True)
        >>> order_position_power(np.full((200, 8), 0.6), 8, level=0.05 / 475, runs=20).power
        1.0
    """
    rates = np.asarray(rates, dtype=float)
    if rates.ndim != 2 or rates.shape[0] < 1 or rates.shape[1] < 2 or not np.all((rates >= 0) & (rates <= 1)):
        raise ValueError(f"`rates` must be a (prompts, K >= 2) array of inclusion rates in [0, 1], "
                         f"but got shape {rates.shape}")
    images, runs = _check_pos_int("images", images), _check_pos_int("runs", runs)
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1), but got {level!r}")
    from scipy.stats import chi2

    m, k = rates.shape
    floor = max(1.0 / (1.0 + order_resamples(level)), min(1.0, 2.0 * math.exp(-_log_labelings(m, images))))
    rejected = 0
    if floor <= level:
        rng = np.random.default_rng(seed)
        for _ in range(runs):
            a, b, o = simulate_order_study(rates, images, rng, effect)
            stat, r, _ = _position_statistic(_moved_contrasts(a.astype(float), b.astype(float), o), images)
            rejected += r > 0 and chi2.sf(stat, r) <= level
    return OrderPower(float(rejected / runs), runs, float(effect), level, floor, m, images, k)


def order_component_permutation_test(original, shuffled, components, *, n_resamples: int = ORDER_POSITION_RESAMPLES,
                                     seed: int = 0) -> PermutationResult:
    """The paper's order test (section 8.1) made valid: Pearson's chi-square on how often each component is
    detected, original vs shuffled prompts, with a within-prompt permutation p-value.

    The table is ``2 x components`` (the reading of the paper's ``X2(996, N=175918)`` at K = 8 over
    ImageNet names, :func:`order_invariance_test_by_component`); its cells count detections, several per
    image and many per prompt, so the asymptotic chi-square p (``asymptotic_pvalue``) assumes an
    independence the data do not have. The p-value here permutes the original/shuffled labels within
    each prompt as :func:`order_position_test` does (``p = (1 + #{X2* >= X2}) / (1 + B)``), which is
    valid. It is an omnibus statistic: a component's position changes at random from prompt to prompt, so
    a position effect only inflates the per-component differences it squares and sums. It sees large
    effects, but reads no position and loses power fast against smaller ones (a first-to-last difference
    of 0.1 at 100 prompts x 16 images: 0.34 at 0.05 where :func:`order_position_test` rejects 1.000;
    docs/calibration.md, "The CIS order test").

    Args:
        original, shuffled: ``(prompts, images, K)`` 0/1 detections (:func:`order_arrays`).
        components: ``(prompts, K)`` non-negative integer ids of the components (the original order).
        n_resamples: B; 0: the statistic and its asymptotic p alone (``pvalue`` is NaN).
        seed: of the permutations.

    Raises:
        ValueError: arrays of other shapes, values other than 0/1, negative or non-integer ids,
            ``n_resamples < 0``.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(1)
        >>> ids = np.array([rng.choice(30, 4, replace=False) for _ in range(40)])
        >>> a, b = (rng.random((40, 6, 4)) < 0.6 for _ in range(2))
        >>> r = order_component_permutation_test(a, b, ids, n_resamples=999)
        >>> r.dof == r.table.shape[1] - 1, r.pvalue > 0.05
        (True, True)
    """
    a, b, _ = _check_order_arrays(original, shuffled, np.tile(np.arange(np.shape(original)[-1]),
                                                             (np.shape(original)[0], 1)))
    ids = np.asarray(components)
    if ids.shape != a.shape[::2] or ids.dtype.kind not in "iu" or (ids < 0).any():
        raise ValueError(f"`components` must be a {a.shape[::2]} array of non-negative integer ids, "
                         f"but got shape {ids.shape} and dtype {ids.dtype}")
    n_resamples = _check_resamples(n_resamples)
    from scipy import sparse
    from scipy.stats import chi2

    m, n, k = a.shape
    cols = int(ids.max()) + 1
    scatter = sparse.csr_matrix((np.ones(m * k), (ids.ravel(), np.arange(m * k))), shape=(cols, m * k))
    first = scatter @ a.sum(axis=1).ravel()
    totals = first + scatter @ b.sum(axis=1).ravel()
    kept = np.flatnonzero(totals > 0)
    table = np.array([first[kept], totals[kept] - first[kept]])
    dof = max(0, kept.size - 1)
    if dof == 0 or min(table.sum(axis=1)) == 0:
        return PermutationResult(0.0, 0, 1.0, n_resamples, n_resamples, 1.0, table, tuple(kept.tolist()),
                                 "within-prompt label permutations (Monte Carlo), Pearson chi-square by component")
    scatter, tot, grand = scatter[kept], totals[kept], float(totals.sum())
    pooled = np.concatenate([a, b], axis=1).astype(np.float32)  # 0/1: integer sums, exact in float32

    def stats(masks: np.ndarray) -> np.ndarray:  # (B, M * 2n) shuffled labels -> X2 of each resample
        labels = masks.reshape(masks.shape[0], m, 2 * n).transpose(1, 0, 2)
        second = np.matmul(labels, pooled).astype(np.float64)  # (M, B, K): shuffled-labelled detections
        second = np.asarray(scatter @ second.transpose(0, 2, 1).reshape(m * k, -1)).T  # (B, kept)
        n2 = second.sum(axis=1, keepdims=True)
        n1 = grand - n2
        with np.errstate(divide="ignore", invalid="ignore"):
            x2 = grand**2 / (n1 * n2)[:, 0] * (((tot - second) - tot * n1 / grand) ** 2 / tot).sum(axis=1)
        return np.nan_to_num(x2, nan=0.0, posinf=0.0)

    stat = float(stats(_observed_mask(m, n))[0])
    tol = 1e-9 * max(1.0, stat)
    rng = np.random.default_rng(seed)
    exceed = sum(int(np.count_nonzero(stats(masks) >= stat - tol))
                 for masks in _label_permutations(rng, m, n, int(n_resamples)))
    return PermutationResult(stat, dof, _monte_carlo_p(exceed, n_resamples), n_resamples, exceed,
                             float(chi2.sf(stat, dof)), table, tuple(kept.tolist()),
                             "within-prompt label permutations (Monte Carlo), Pearson chi-square by component")


# ----------------------------------------------------------------------------- scorer self-check


def tile_composite(images: Sequence[object], tile_size: int = 224, background: tuple[int, int, int] = (0, 0, 0)):
    """Tile ``K`` single-component images into one near-square RGB grid (MCID-style check).

    Layout: ``columns = ceil(sqrt(K))``, ``rows = ceil(K / columns)``, filled row by row; each
    image is converted to RGB, centre-cropped to a square and resized to
    ``tile_size x tile_size`` (``PIL.ImageOps.fit``, bicubic); unused cells keep
    ``background``.  K = 1, 2, 3, 4, 8 give grids of 1x1, 1x2, 2x2, 2x2 and 3x3 tiles.  (The
    paper combines "images of varying shapes ... as close to a square as possible"; equal square
    tiles are this project's simplification.)

    Args:
        images: PIL images, or ``(H, W[, C])`` uint8 arrays.
        tile_size: side of each square tile in pixels.
        background: RGB fill of unused cells.

    Returns:
        A ``PIL.Image.Image`` of size ``(columns * tile_size, rows * tile_size)``.

    Raises:
        ValueError: if ``images`` is empty or ``tile_size < 1``.
        TypeError: if an item is neither a PIL image nor an array.

    Example:
        >>> from PIL import Image
        >>> tiles = [Image.new("RGB", (40, 30), c) for c in ("red", "green", "blue")]
        >>> tile_composite(tiles, tile_size=16).size
        (32, 32)
    """
    from PIL import Image, ImageOps

    tile_size = _check_pos_int("tile_size", tile_size)
    items = list(images)
    if not items:
        raise ValueError("`images` must hold at least one image, but got none")
    cols = math.ceil(math.sqrt(len(items)))
    rows = math.ceil(len(items) / cols)
    canvas = Image.new("RGB", (cols * tile_size, rows * tile_size), tuple(background))
    for i, item in enumerate(items):
        if isinstance(item, np.ndarray):
            item = Image.fromarray(item)
        if not isinstance(item, Image.Image):
            raise TypeError(f"`images[{i}]` must be a PIL image or a numpy array, but got {type(item).__name__}")
        tile = ImageOps.fit(item.convert("RGB"), (tile_size, tile_size), method=Image.Resampling.BICUBIC)
        canvas.paste(tile, ((i % cols) * tile_size, (i // cols) * tile_size))
    return canvas


# ----------------------------------------------------------------------------- degradation


def degradation_slope(ks: Sequence[float], values: Sequence[float], relative_to: str | None = None) -> float:
    """Least-squares slope of ``values`` against ``ks``: change per added component.

    The paper reports "CIS drops 8.53% per component, when 1 <= K <= 8" averaged over models
    without giving the formula.  This project's definition: the ordinary least-squares slope of
    ``CIS_K`` on ``K`` (negative = drop), in CIS units, so ``-100 * slope`` is the drop in
    percentage points per component.  Because CIS is already a fraction and ``CIS_1`` is close
    to 1 for most models, absolute and relative-to-``CIS_1`` readings nearly coincide.  Slopes
    are linear in the values, so the slope of the model-averaged curve equals the average of
    per-model slopes on a shared K grid.  For IS/FID, which have no natural scale, pass
    ``relative_to="mean"`` (slope of ``values / mean(values)``) or ``"first"``
    (``values / values[0]``).  (Neither reproduces the paper's IS -15.91% / FID +9.62% exactly
    from its Table 1: the per-model ``"mean"`` reading gives about -15.4% / +10.2%.)

    Args:
        ks: component counts (at least two distinct values).
        values: indicator at each ``k``.
        relative_to: ``None`` (absolute), ``"first"`` or ``"mean"``.

    Raises:
        ValueError: on length mismatch, fewer than two distinct ``ks``, non-finite values,
            an unknown ``relative_to``, or a zero reference value.

    Example:
        >>> round(degradation_slope([1, 2, 4, 8], [1.0, 0.90, 0.76, 0.67]), 4)
        -0.0448
        >>> degradation_slope([1, 2, 3], [10.0, 8.0, 6.0], relative_to="first")
        -0.2
    """
    x = np.asarray(ks, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(f"`ks` and `values` must be 1-D of equal length, but got shapes {x.shape} and {y.shape}")
    if np.unique(x).size < 2:
        raise ValueError(f"`ks` must hold at least two distinct values, but got {x.tolist()}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("`ks` and `values` must be finite")
    choices = (None, "first", "mean")
    if relative_to not in choices:
        raise ValueError(f"`relative_to` must be one of {choices}, but got {relative_to!r}")
    if relative_to is not None:
        ref = y[0] if relative_to == "first" else y.mean()
        if ref == 0:
            raise ValueError(f"cannot normalise by {relative_to!r} value 0")
        y = y / ref
    xc = x - x.mean()
    return float(np.sum(xc * (y - y.mean())) / np.sum(xc**2))


def _check_probs(probs: object) -> np.ndarray:
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] == 0:
        raise ValueError(f"`probs` must have shape (images, classes) with both > 0, but got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("`probs` must be finite and non-negative")
    sums = p.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > 1e-3:
        raise ValueError(
            f"`probs` rows must sum to 1 (class probabilities, e.g. a softmax), but row {worst} sums to {sums[worst]:.6g}"
        )
    return p


def inception_score_splits(probs: object, splits: int = 1) -> np.ndarray:
    """Inception Score of each of ``splits`` consecutive chunks of the images.

    ``IS = exp(mean_x KL(p(y|x) || p(y)))`` with ``p(y)`` the chunk's mean prediction
    (Salimans et al. 2016); chunks are ``numpy.array_split`` of the rows, in order, and
    ``0 * log 0 = 0``.

    Args:
        probs: array ``(images, classes)`` of class probabilities (rows sum to 1).
        splits: number of chunks, ``1 <= splits <= images``.

    Returns:
        Array ``(splits,)`` of scores, each in ``[1, classes]``.

    Raises:
        ValueError: if ``probs`` is not a 2-D array of probabilities or ``splits`` is out of range.

    Example:
        >>> inception_score_splits([[1, 0], [0, 1], [1, 0], [0, 1]], splits=2).tolist()
        [2.0, 2.0]
    """
    from scipy.special import rel_entr

    p = _check_probs(probs)
    splits = _check_pos_int("splits", splits)
    if splits > p.shape[0]:
        raise ValueError(f"`splits` must be at most the number of images ({p.shape[0]}), but got {splits}")
    scores = []
    for chunk in np.array_split(p, splits):
        marginal = chunk.mean(axis=0, keepdims=True)
        kl = rel_entr(chunk, marginal).sum(axis=1)
        scores.append(math.exp(float(kl.mean())))
    return np.asarray(scores)


def inception_score(probs: object, splits: int = 1) -> float:
    """Inception Score: mean of :func:`inception_score_splits` (use that for the std).

    Args:
        probs: array ``(images, classes)`` of class probabilities.
        splits: number of chunks to average over.

    Raises:
        ValueError: as :func:`inception_score_splits`.

    Example:
        >>> inception_score([[0.5, 0.5], [0.5, 0.5]])
        1.0
        >>> round(inception_score([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), 12)
        3.0
    """
    return float(np.mean(inception_score_splits(probs, splits)))


def gaussian_statistics(features: object) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of feature rows, as FID fits them (``numpy.cov``, ``ddof=1``, float64).

    Args:
        features: array ``(images, dim)`` with at least two rows.

    Raises:
        ValueError: if ``features`` is not 2-D with at least two rows, or is not finite.

    Example:
        >>> mu, sigma = gaussian_statistics([[0.0, 1.0], [2.0, 3.0]])
        >>> mu.tolist(), sigma.tolist()
        ([1.0, 2.0], [[2.0, 2.0], [2.0, 2.0]])
    """
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"`features` must have shape (images, dim) with at least 2 images, but got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("`features` must be finite, but contains NaN or infinity")
    return x.mean(axis=0), np.atleast_2d(np.cov(x, rowvar=False))


def frechet_distance(mu1: object, sigma1: object, mu2: object, sigma2: object) -> float:
    """Fréchet distance between two Gaussians (Heusel et al. 2017; FID on Inception features).

    ``||mu1 - mu2||^2 + tr(S1) + tr(S2) - 2 tr((S1 S2)^(1/2))``.  The trace of the matrix square
    root is computed as the sum of square roots of the eigenvalues of ``S1^(1/2) S2 S1^(1/2)``
    (symmetric positive semi-definite, with the same eigenvalues as ``S1 S2``), which needs no
    complex arithmetic and stays finite when a covariance is singular (fewer images than
    dimensions); negative round-off eigenvalues are clipped to 0 and so is the result.

    Args:
        mu1, mu2: means, shape ``(dim,)``.
        sigma1, sigma2: covariances, shape ``(dim, dim)``, symmetric positive semi-definite.

    Raises:
        ValueError: on mismatched shapes or non-finite values.

    Example:
        >>> import numpy as np
        >>> frechet_distance([0.0, 0.0], np.eye(2), [3.0, 4.0], np.eye(2))
        25.0
        >>> round(frechet_distance([0.0], [[1.0]], [0.0], [[4.0]]), 12)
        1.0
    """
    m1, m2 = np.asarray(mu1, dtype=np.float64), np.asarray(mu2, dtype=np.float64)
    s1, s2 = np.atleast_2d(np.asarray(sigma1, dtype=np.float64)), np.atleast_2d(np.asarray(sigma2, dtype=np.float64))
    if m1.ndim != 1 or m1.shape != m2.shape:
        raise ValueError(f"`mu1` and `mu2` must be 1-D of equal length, but got shapes {m1.shape} and {m2.shape}")
    d = m1.shape[0]
    if s1.shape != (d, d) or s2.shape != (d, d):
        raise ValueError(f"`sigma1` and `sigma2` must have shape ({d}, {d}), but got {s1.shape} and {s2.shape}")
    if not all(np.all(np.isfinite(a)) for a in (m1, m2, s1, s2)):
        raise ValueError("means and covariances must be finite")
    w, v = np.linalg.eigh((s1 + s1.T) / 2)
    root1 = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T
    middle = root1 @ s2 @ root1
    tr_covmean = float(np.sqrt(np.clip(np.linalg.eigvalsh((middle + middle.T) / 2), 0.0, None)).sum())
    diff = m1 - m2
    value = float(diff @ diff + np.trace(s1) + np.trace(s2) - 2.0 * tr_covmean)
    return max(value, 0.0)


def frechet_inception_distance(features_a: object, features_b: object) -> float:
    """FID between two sets of feature rows (e.g. InceptionV3 2048-d pool features).

    Args:
        features_a: ``(images_a, dim)``, at least two rows.
        features_b: ``(images_b, dim)``, at least two rows, same ``dim``.

    Raises:
        ValueError: as :func:`gaussian_statistics`, or if the widths differ.

    Example:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).normal(size=(50, 3))
        >>> round(frechet_inception_distance(x, x), 9)
        0.0
        >>> round(frechet_inception_distance(x, x + [1.0, 0.0, 0.0]), 6)
        1.0
    """
    mu1, s1 = gaussian_statistics(features_a)
    mu2, s2 = gaussian_statistics(features_b)
    if mu1.shape != mu2.shape:
        raise ValueError(f"`features_a` and `features_b` must have the same width, but got {mu1.shape[0]} and {mu2.shape[0]}")
    return frechet_distance(mu1, s1, mu2, s2)
