"""CIS prompts: the template, the article rule, ImageNet component names and prompt sampling.

The conventions (template, capitalisation, article rule, prompts longer than the text encoder)
are written down in docs/cis.md.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Callable, Iterable, Sequence

import numpy as np

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
]

#: The component counts the paper evaluates (K = 1, 2, 4, 8).
DEFAULT_KS: tuple[int, ...] = (1, 2, 4, 8)

#: Prompt prefix per style: the paper's verbatim prompts ("A photo of ...") or the prototype's
#: generation template ``a photo of {}.``.
PROMPT_STYLES: dict[str, str] = {"paper": "A photo of ", "prototype": "a photo of "}

#: Prefix of every lookup-table entry (the prototype's ``Iclip.py`` template ``A photo of {}.``).
_LOOKUP_PREFIX = "A photo of "

_VOWELS = frozenset("aeiou")


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
