"""IndicTTI's options (the multilingual prompt file, the languages, images per prompt and language), each declared
once as a field of :class:`IndicOptions`, and the selection they resolve to (:class:`IndicSelection`): the prompts,
checked to cover every measured language (English always included).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from t2i_fairness.errors import OptionError
from t2i_fairness.vocab.multilingual import MultilingualPromptSet
from t2i_fairness.spine.options import Option, Values, option_fields, options_of, positive, resolve_fields
from t2i_fairness.vocab.languages import ENGLISH, get_language

PAPER_INDIC_IMAGES_PER_PROMPT = 4  # IndicTTI Section 3.2; DIG In's 60 would be 15x the paper's work
SMOKE_INDIC_IMAGES_PER_PROMPT = 6


def _prompt_file(v: Values, flag: str) -> Path:
    from t2i_fairness.vocab.multilingual import SMOKE_SAMPLE

    raw = v.raw(flag)
    return SMOKE_SAMPLE if raw is None else v.invocation_dir / Path(raw).expanduser()


def _images(v: Values, flag: str) -> int | None:
    """The flag's value (checked), unless only ``--t2i-images-per-prompt`` is given: then ``None`` (the core's)."""
    if v.given(flag) or not v.given("--t2i-images-per-prompt"):
        return positive(v, flag)
    return None


@dataclass(frozen=True)
@option_fields
class IndicOptions:
    """The family's options of a run: one field per option; defaults are an empty command line's."""

    prompt_file: Path = Option(
        "--t2i-indic-prompts", "IndicTTI multilingual prompt file, .jsonl or .csv (fields prompt_id, lang, text, "
        "english, reference_image); default: the bundled smoke SAMPLE (4 prompts, 6 languages, not validated)",
        metavar="PATH", check=_prompt_file)
    languages: str | None = Option(
        "--t2i-languages", "IndicTTI languages to measure: comma-separated codes such as hin_Deva,tam_Taml (any "
        "case) or 'all' (default: every language of the prompt file; English is always included)", metavar="LIST")
    images: int | None = Option(
        "--t2i-indic-images", "IndicTTI: images per prompt and language (when not given: --t2i-images-per-prompt "
        "if that is given, else the preset's)", smoke=SMOKE_INDIC_IMAGES_PER_PROMPT,
        paper=PAPER_INDIC_IMAGES_PER_PROMPT, type=int, metavar="N", check=_images)


OPTIONS = options_of(IndicOptions)


@dataclass(frozen=True)
class IndicSelection:
    """What the options select: the prompts (restricted to the languages), the languages, the sample size."""

    prompts: MultilingualPromptSet
    languages: tuple[str, ...]
    images_per_prompt: int

    @property
    def non_english(self) -> tuple[str, ...]:
        return tuple(code for code in self.languages if code != ENGLISH)

    @classmethod
    def of(cls, options: IndicOptions, core) -> IndicSelection:
        """Load and check the prompt file and the languages (images per prompt: the core's where ``None``);
        problems raise ``OptionError`` naming the option.
        """
        from t2i_fairness.vocab.multilingual import load_prompts

        try:
            prompts = load_prompts(options.prompt_file)
        except (OSError, ValueError) as exc:  # FileNotFoundError, PromptFileError, a wrong extension
            raise OptionError("--t2i-indic-prompts", str(exc)) from None
        try:
            languages = select_languages(prompts, options.languages)
        except ValueError as exc:
            raise OptionError("--t2i-languages", str(exc)) from None
        prompts = prompts.subset(languages=languages)
        try:
            check_full_grid(prompts)
        except ValueError as exc:
            raise OptionError("--t2i-indic-prompts", str(exc)) from None
        images = core.images_per_prompt if options.images is None else options.images
        return cls(prompts, languages, images)


def select_languages(prompts: MultilingualPromptSet, spec: str | None) -> tuple[str, ...]:
    """The languages to measure: ``spec`` is ``None``/``"all"`` (every language of the file) or a
    comma-separated list of codes in any case. English is always included: the relative gates and
    the drops compare with it. The order is the file's (English first, then IndicTTI's Table 5).

    Raises:
        ValueError: an unknown code (with near misses), a language the file lacks (listing those it
            has), or an empty list.

    Example:
        >>> from t2i_fairness.vocab.multilingual import load_smoke_sample
        >>> select_languages(load_smoke_sample(), "tam_taml, HIN_DEVA")
        ('eng_Latn', 'hin_Deva', 'tam_Taml')
    """
    present = prompts.languages
    if spec is None or spec.strip().lower() == "all":
        wanted = set(present)
    else:
        items = [item.strip() for item in spec.split(",") if item.strip()]
        if not items:
            raise ValueError(f"no language in {spec!r}; give comma-separated codes such as hin_Deva,tam_Taml, or 'all'")
        codes = [get_language(item).code for item in items]  # ValueError names the unknown code
        absent = [c for c in dict.fromkeys(codes) if c not in present]
        if absent:
            where = f" {prompts.source}" if prompts.source else ""
            raise ValueError(f"language(s) {absent} not in the prompt file{where}; it has: {', '.join(present)}")
        wanted = set(codes) | {ENGLISH}
    return tuple(code for code in present if code in wanted)


def check_full_grid(prompts: MultilingualPromptSet) -> None:
    """The cross-language indicators compare every prompt id in every language: no holes allowed.

    Raises:
        ValueError: (prompt id, language) pairs are missing; the message shows the first few.

    Example:
        >>> from t2i_fairness.vocab.multilingual import load_smoke_sample
        >>> check_full_grid(load_smoke_sample())
    """
    holes = prompts.missing()
    if holes:
        shown = ", ".join(f"({pid}, {lang})" for pid, lang in holes[:5])
        more = f" and {len(holes) - 5} more" if len(holes) > 5 else ""
        raise ValueError(
            f"{prompts.source} lacks {len(holes)} (prompt id, language) pair(s): {shown}{more}; the cross-language "
            "indicators need every prompt id in every measured language: add the rows, or leave the language out "
            "with --t2i-languages"
        )


def resolve(v: Values, core) -> IndicSelection:
    """The IndicTTI selection of this run; bad values raise :class:`~t2i_fairness.errors.OptionError` naming the
    option.
    """
    return IndicSelection.of(IndicOptions(**resolve_fields(IndicOptions, v)), core)
