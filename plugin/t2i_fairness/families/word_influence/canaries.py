"""Word-level explanations' canary: prompts containing a word drift towards a group (``shift_group_share``)."""

from __future__ import annotations

from t2i_fairness.generators.canary import (
    CANARY_VERSION, WORD_RE, Canary, CanaryInfo, CanarySlice, SliceKind, fraction, split_gate, stable_int,
)

__all__ = ["CANARIES", "WORD", "ShiftGroupShare"]


def word_role(value: str, gate_id: str) -> str:
    """The role of a gate for the word slice ``value``."""
    name, params = split_gate(gate_id)
    if name == "test_word_influence" and params:
        return "slice" if params[0] == value else "aggregate"
    if name == "test_representation" and params:
        return "slice" if value in params[0].split("_") else "other"
    return "other"


WORD = SliceKind("word", word_role, "word {value}")
_SLICE_HELP = "one word of the word-level prompts, e.g. doctor"


def read_word(value: str) -> str:
    """One word (letters, digits, ' or -), as given; a ValueError for more than one word."""
    if not WORD_RE.fullmatch(value):
        raise ValueError(f"SLICE {value!r} must be one word; {_SLICE_HELP}")
    return value


class ShiftGroupShare(Canary):
    """Word-level explanations: prompts containing a word drift towards a group.

    Each image of a prompt containing ``word`` (whitespace-split, any case) is, with probability
    ``p`` (hashed from prompt and seed), replaced by the inner generator's image of
    ``template.format(group=group)`` at the same seed.

    Raises:
        ValueError: a word that is not one word, ``p`` outside ``[0, 1]``, a template without ``{group}``.
        TypeError: ``inner`` is not a generator.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> canary = ShiftGroupShare(ProceduralGenerator(), "doctor", "female", 1.0)
        >>> canary.targets("a respected Doctor at the hospital"), canary.targets("the doctor's office")
        (True, False)
    """

    name = "shift_group_share"

    def __init__(self, inner, word: str, group: str = "female", p: float = 0.5, template: str = "a photo of a {group}"):
        if not isinstance(word, str) or not WORD_RE.fullmatch(word.strip()):
            raise ValueError(f"canary {self.name}: word must be one word (letters, digits, ' or -), got {word!r}")
        if not isinstance(group, str) or not group.strip():
            raise ValueError(f"canary {self.name}: group must be a non-empty name (e.g. female), got {group!r}")
        if not isinstance(template, str) or "{group}" not in template:
            raise ValueError(f"canary {self.name}: template must contain {{group}}, got {template!r}")
        self.word = word.strip().lower()
        self.group = group.strip()
        self.p = fraction(p, f"canary {self.name}: p")
        self.template = template
        super().__init__(inner, CanarySlice("word", self.word), f"{self.group}={self.p:g}")
        if template != "a photo of a {group}":
            self.fingerprint += f":{template}"

    def describe(self) -> str:
        return (f"{super().describe()}: prompts containing {self.word!r} get "
                f"{self.template.format(group=self.group)!r} images with probability {self.p:g}")

    def targets(self, prompt: str) -> bool:
        return self.word in (w.lower() for w in prompt.split())

    def _replacement(self, prompt: str, seed: int) -> str | None:
        if not self.targets(prompt):
            return None
        u = stable_int("shift", CANARY_VERSION, self.word, self.group, prompt, seed) / 2.0**64
        return self.template.format(group=self.group) if u < self.p else None


def read_group_share(param: str) -> dict:
    """``GROUP=P``, ``GROUP`` or ``P`` as keyword arguments of :class:`ShiftGroupShare` (a ValueError
    for another form, an empty GROUP or P outside ``[0, 1]``).

    Example:
        >>> read_group_share("male=0.3"), read_group_share("0.7"), read_group_share("male")
        ({'group': 'male', 'p': 0.3}, {'p': 0.7}, {'group': 'male'})
    """
    group, sep, p = param.partition("=")
    if not sep:
        try:
            return {"p": fraction(float(param), "P")}
        except ValueError:
            if not WORD_RE.fullmatch(param):
                raise ValueError(f"PARAM {param!r} must read GROUP=P, GROUP or P") from None
            return {"group": param}
    if not group.strip():
        raise ValueError(f"PARAM {param!r}: empty GROUP before '='")
    return {"group": group.strip(), "p": fraction(p, "P")}


def _build(inner, slice_: str, params: dict, multilingual) -> Canary:
    return ShiftGroupShare(inner, slice_, **params)


#: The word-level family's canaries (listed on :data:`~t2i_fairness.families.word_influence.FAMILY`).
CANARIES: tuple[CanaryInfo, ...] = (
    CanaryInfo("shift_group_share", "word", _SLICE_HELP, "GROUP=P, GROUP or P (default female=0.5)",
               "prompts containing the word get 'a photo of a {group}' images with probability p",
               build=_build, read_slice=read_word, read_param=read_group_share),
)
