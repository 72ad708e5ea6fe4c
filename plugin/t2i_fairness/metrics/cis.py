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
    "order_invariance_test",
    "order_invariance_test_by_component",
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
    """Exact-in-distribution test of "shuffling the order changes nothing", by Monte Carlo permutation.

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
