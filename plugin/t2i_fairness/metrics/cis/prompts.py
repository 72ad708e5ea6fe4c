"""CIS prompts: the template, the article rule, ImageNet component names and prompt sampling (docs/cis.md)."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Callable, Iterable, Sequence

import numpy as np


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
    """``"an"`` if ``word`` starts with a vowel letter, else ``"a"``: spelling, not sound."""
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
        style: ``"paper"`` ("A photo of ...") or ``"prototype"`` ("a photo of ...").

    Example:
        >>> render_prompt(["acoustic guitar", "sock", "steel drum"], style="prototype")
        'a photo of an acoustic guitar, a sock, and a steel drum.'
    """
    prefix = _prompt_prefix(style)
    items = _check_components(components)
    if not items:
        raise ValueError("`components` must name at least one component, but got none")
    return _render(items, prefix)


_CLASSNAMES_FILE = "imagenet_classnames_cis.txt"


def imagenet_classnames() -> tuple[str, ...]:
    """The 998 distinct ImageNet class names, worded as the CIS prototype's label file.

    Example:
        >>> names = imagenet_classnames()
        >>> len(names), names[0]
        (998, 'tench')
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
    """Sample ``m`` prompts of ``k`` distinct components each from one ``default_rng(seed)``.

    Args:
        seed: an int or a sequence of ints; ``None`` is refused (it would not reproduce).
        classnames: component pool; default :func:`imagenet_classnames`.
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
    """``m`` prompts for every ``k`` in ``ks``, each ``k`` with its own generator ``[seed, k]``."""
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
    """Like :func:`sample_component_prompts`, but a draw that does not ``fit`` is set aside.

    Args:
        fits: ``components -> bool``, e.g. "the rendered prompt has at most 77 CLIP tokens".

    Returns:
        ``(prompts, rejected)``: ``m`` fitting component tuples and the draws set aside.
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
    """The token count of every text; ``ValueError`` naming the first over ``limit`` (CLIP: 77).

    Example:
        >>> check_token_lengths(["a photo of a crab."], lambda t: len(t.split()) + 2)
        [7]
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
    """A random reordering of a prompt's components (``rng``: a ``Generator`` or a seed)."""
    items = _check_components(components)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return tuple(items[int(i)] for i in gen.permutation(len(items)))


def shuffled_prompts(prompts: Sequence[Sequence[str]], seed: int) -> list[tuple[str, ...]]:
    """Shuffle the component order of every prompt with one ``default_rng(seed)`` (paper 8.1)."""
    rng = np.random.default_rng(seed)
    return [shuffle_components(p, rng) for p in prompts]
