"""IndicTTI's canary: every language answered with one language's text (``answer_language``)."""

from __future__ import annotations

import hashlib

from t2i_fairness.generators.canary import Canary, CanaryInfo, CanarySlice, SliceKind, split_gate

__all__ = ["CANARIES", "LANGUAGE", "AnswerLanguage"]

# Gate tests (names before "[") that measure one language, and those relative to English.
LANGUAGE_GATES = frozenset({
    "test_clgc", "test_igc", "test_lgc", "test_scwl", "test_dwl", "test_clgc_vs_english",
    "test_scal_with_english",
})
ENGLISH_RELATIVE = frozenset({"test_clgc_vs_english", "test_scal_with_english"})


def language_role(value: str, gate_id: str) -> str:
    """The role of a gate for ``answer_language:value`` (its slice: every other language)."""
    name, params = split_gate(gate_id)
    if name not in LANGUAGE_GATES or not params:
        return "other"
    if params[0] != value.lower():
        return "slice"
    return "aggregate" if name in ENGLISH_RELATIVE else "other"


LANGUAGE = SliceKind("language", language_role, "languages other than {value}")


def read_language(value: str) -> str:
    """A language code of the benchmark, any case, as the benchmark spells it (``hin_deva`` ->
    ``hin_Deva``); a ValueError for an unknown code.
    """
    from t2i_fairness.vocab.languages import get_language

    return get_language(value).code


class AnswerLanguage(Canary):
    """IndicTTI: every language's prompt is answered with the images of one language's text.

    A text of ``prompt_set`` in another language is generated as the ``language`` text of the same
    prompt id, with its own seed (fresh draws, not copies). Other texts are left alone; a text shared
    by several rows takes its first id's answer.

    Raises:
        ValueError: an unknown language code or one absent from the prompt set.
        TypeError: ``inner`` is not a generator, or ``prompt_set`` is missing.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> from t2i_fairness.vocab.multilingual import load_smoke_sample
        >>> AnswerLanguage(ProceduralGenerator(), "hin_deva", load_smoke_sample()).answer_for("a dog sitting on a wooden bench")
        'लकड़ी की बेंच पर बैठा एक कुत्ता'
    """

    name = "answer_language"

    def __init__(self, inner, language: str, prompt_set):
        if prompt_set is None or not hasattr(prompt_set, "prompts"):
            raise TypeError(
                f"canary {self.name}: needs the run's multilingual prompt set (a MultilingualPromptSet), "
                f"got {type(prompt_set).__name__}"
            )
        code = read_language(language)
        if code not in prompt_set.languages:
            raise ValueError(
                f"canary {self.name}: language {code!r} is not in the prompt set; present: {list(prompt_set.languages)}"
            )
        self.language = code
        answers: dict[str, str] = {}
        for p in prompt_set.prompts:
            if p.lang == code or p.text in answers:
                continue
            try:
                answers[p.text] = prompt_set.get(p.prompt_id, code).text
            except KeyError:
                continue
        self._answers = {t: a for t, a in answers.items() if t != a}
        h = hashlib.sha256()
        for text, answer in sorted(self._answers.items()):
            h.update(f"{text}\x1f{answer}\n".encode("utf-8"))
        super().__init__(inner, CanarySlice("language", code))
        self.fingerprint += f":set{h.hexdigest()[:12]}"

    def describe(self) -> str:
        return f"{super().describe()}: every language's prompt answered with the {self.language} text of its prompt id"

    def answer_for(self, prompt: str) -> str | None:
        """The text generated instead of ``prompt``, or None when it is left alone."""
        return self._answers.get(prompt)

    def targets(self, prompt: str) -> bool:
        return prompt in self._answers

    def _replacement(self, prompt: str, seed: int) -> str | None:
        return self._answers.get(prompt)


def _build(inner, slice_: str, params: dict, multilingual) -> Canary:
    if multilingual is None:
        raise ValueError("answer_language needs the run's multilingual prompt set "
                         "(make_canary(..., multilingual=prompt_set))")
    return AnswerLanguage(inner, slice_, multilingual)


#: IndicTTI's canaries (listed on :data:`~t2i_fairness.families.indic_tti.FAMILY`).
CANARIES: tuple[CanaryInfo, ...] = (
    CanaryInfo("answer_language", "language", "a language code of the IndicTTI prompt set, e.g. hin_Deva", "none",
               "every language's prompt is answered with this language's text of the same prompt id",
               build=_build, read_slice=read_language),
)
