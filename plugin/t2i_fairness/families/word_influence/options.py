"""Word-level explanations' options (prompts, the CLIP zero-shot groups, masked-LM replacements, influence
levels, images per candidate prompt) and the settings they resolve to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from t2i_fairness.errors import OptionError
from t2i_fairness.spine.options import Option, Values, positive

from t2i_fairness.families.word_influence.study import SUITES as SUITE_CHOICES  # noqa: E402

OPTIONS = (
    Option("--t2i-wi-prompts", "word influence prompts: 'examples' (the paper's two worked examples, default), "
           "'paper' (its 150 prompts 'a {adjective} {person} at the {place}', Figure 3) or 'all'",
           default="examples", choices=SUITE_CHOICES),
    Option("--t2i-wi-groups", "word influence groups for the CLIP zero-shot classifier, comma-separated "
           "(default male,female)", default="male,female", metavar="LIST"),
    Option("--t2i-wi-template", "CLIP text of each group (default 'a photo of a {group}')",
           default="a photo of a {group}", metavar="TEXT"),
    Option("--t2i-wi-replacements", "masked-LM replacement candidates per replaced word set (default 3, as the paper)",
           default=3, type=int, metavar="M"),
    Option("--t2i-wi-k", "word influence levels k for every prompt, comma-separated (default: the paper's, k=1 for "
           "'a respected doctor at the hospital' and the 150 prompts, k=1,2 for 'the ceo of a fortune 500 company')",
           metavar="LIST"),
    Option("--t2i-wi-images", "images per candidate prompt (default ceil(images per prompt / M): each distribution "
           "has about --t2i-images-per-prompt images; the original prompt gets M x N)", type=int, metavar="N"),
)


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


def resolve(v: Values, core) -> WordInfluenceSettings:
    """Check the options; problems raise ``OptionError`` naming the option."""
    from t2i_fairness.families.word_influence.study import (
        check_template,
        parse_groups,
        parse_levels,
        suite_levels,
        suite_prompts,
    )

    suite = v("--t2i-wi-prompts")
    prompts = tuple(suite_prompts(suite))
    try:
        groups = parse_groups(v("--t2i-wi-groups"))
    except ValueError as exc:
        raise OptionError("--t2i-wi-groups", str(exc)) from None
    try:
        template = check_template(v("--t2i-wi-template"), groups)
    except ValueError as exc:
        raise OptionError("--t2i-wi-template", str(exc)) from None
    m = positive(v, "--t2i-wi-replacements")
    raw_k = v.raw("--t2i-wi-k")
    try:
        levels = suite_levels(suite, None if raw_k is None else parse_levels(raw_k, prompts))
    except ValueError as exc:
        raise OptionError("--t2i-wi-k", str(exc)) from None
    n = positive(v, "--t2i-wi-images") if v.given("--t2i-wi-images") else max(1, math.ceil(core.images_per_prompt / m))
    return WordInfluenceSettings(suite, prompts, groups, template, m, levels, n)
