"""Word-level explanations' options (prompts, the CLIP zero-shot groups, masked-LM replacements, influence
levels, images per candidate prompt), each declared once as a field of :class:`WordInfluenceOptions`, and the
settings they resolve to (:class:`WordInfluenceSettings`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from t2i_fairness.errors import OptionError
from t2i_fairness.spine.options import Option, Values, option_fields, options_of, positive, resolve_fields

from t2i_fairness.families.word_influence.study import SUITES as SUITE_CHOICES  # noqa: E402


def _groups(v: Values, flag: str) -> tuple[str, ...]:
    from t2i_fairness.families.word_influence.study import parse_groups

    try:
        return parse_groups(v(flag))
    except ValueError as exc:
        raise OptionError(flag, str(exc)) from None


def _template(v: Values, flag: str) -> str:
    from t2i_fairness.families.word_influence.study import check_template

    groups = _groups(v, "--t2i-wi-groups")
    try:
        return check_template(v(flag), groups)
    except ValueError as exc:
        raise OptionError(flag, str(exc)) from None


def _levels(v: Values, flag: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Every prompt's influence levels, as ``(prompt, levels)`` pairs (a frozen field's default is immutable)."""
    from t2i_fairness.families.word_influence.study import parse_levels, suite_levels, suite_prompts

    suite, raw = v("--t2i-wi-prompts"), v.raw(flag)
    try:
        levels = suite_levels(suite, None if raw is None else parse_levels(raw, tuple(suite_prompts(suite))))
    except ValueError as exc:
        raise OptionError(flag, str(exc)) from None
    return tuple(levels.items())


@dataclass(frozen=True)
@option_fields
class WordInfluenceOptions:
    """The family's options of a run: one field per option; defaults are an empty command line's."""

    suite: str = Option(
        "--t2i-wi-prompts", "word influence prompts: 'examples' (the paper's two worked examples, default), "
        "'paper' (its 150 prompts 'a {adjective} {person} at the {place}', Figure 3) or 'all'",
        default="examples", choices=SUITE_CHOICES)
    groups: tuple[str, ...] = Option(
        "--t2i-wi-groups", "word influence groups for the CLIP zero-shot classifier, comma-separated "
        "(default male,female)", default="male,female", metavar="LIST", check=_groups)
    template: str = Option("--t2i-wi-template", "CLIP text of each group (default 'a photo of a {group}')",
                           default="a photo of a {group}", metavar="TEXT", check=_template)
    m: int = Option(
        "--t2i-wi-replacements", "masked-LM replacement candidates per replaced word set (default 3, as the paper)",
        default=3, type=int, metavar="M", check=positive)
    levels: tuple[tuple[str, tuple[int, ...]], ...] = Option(
        "--t2i-wi-k", "word influence levels k for every prompt, comma-separated (default: the paper's, k=1 for "
        "'a respected doctor at the hospital' and the 150 prompts, k=1,2 for 'the ceo of a fortune 500 company')",
        metavar="LIST", check=_levels)
    images: int | None = Option(
        "--t2i-wi-images", "images per candidate prompt (default ceil(images per prompt / M): each distribution "
        "has about --t2i-images-per-prompt images; the original prompt gets M x N)", type=int, metavar="N",
        check=lambda v, flag: positive(v, flag) if v.given(flag) else None)


OPTIONS = options_of(WordInfluenceOptions)


@dataclass(frozen=True)
class WordInfluenceSettings:
    suite: str
    prompts: tuple[str, ...]
    groups: tuple[str, ...]
    template: str
    m: int
    levels: dict[str, tuple[int, ...]]  # per prompt
    images_per_text: int

    @property
    def images_per_distribution(self) -> int:
        return self.m * self.images_per_text

    @classmethod
    def of(cls, options: WordInfluenceOptions, core) -> WordInfluenceSettings:
        """The settings of the declared options; images per text default to ceil(core images per prompt / M)."""
        from t2i_fairness.families.word_influence.study import suite_prompts

        images = options.images if options.images is not None else max(1, math.ceil(core.images_per_prompt / options.m))
        return cls(options.suite, tuple(suite_prompts(options.suite)), options.groups, options.template, options.m,
                   dict(options.levels), images)


def resolve(v: Values, core) -> WordInfluenceSettings:
    """Check the options; problems raise ``OptionError`` naming the option."""
    return WordInfluenceSettings.of(WordInfluenceOptions(**resolve_fields(WordInfluenceOptions, v)), core)
