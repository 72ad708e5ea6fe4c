"""The 31 languages of the IndicTTI benchmark: English plus the 30 Indic languages of its Table 5.

A language is a NLLB/FLORES-style code, ISO 639-3 language plus ISO 15924 script (``hin_Deva``),
since three languages appear in two scripts. Test ids and threshold files use :func:`lang_slug`
(``hin_deva``); every function accepts either form.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable

ENGLISH = "eng_Latn"

# ISO 15924 code -> script name. Table 5 calls Urdu's script "Urdu" and Kashmiri's "Perso-Arabic";
# all three are the Arabic script (Arab), named once here so languages group by script.
SCRIPTS: dict[str, str] = {
    "Arab": "Arabic",
    "Beng": "Bengali",
    "Deva": "Devanagari",
    "Gujr": "Gujarati",
    "Guru": "Gurmukhi",
    "Knda": "Kannada",
    "Latn": "Latin",
    "Mlym": "Malayalam",
    "Mtei": "Meitei",
    "Olck": "Ol Chiki",
    "Orya": "Odia",
    "Sinh": "Sinhala",
    "Taml": "Tamil",
    "Telu": "Telugu",
}


@dataclass(frozen=True)
class Language:
    """One benchmark language in one script."""

    code: str  # "hin_Deva": ISO 639-3 + "_" + ISO 15924
    name: str  # "Hindi"
    family: str  # "Indo-Aryan", as in Table 5

    @property
    def script(self) -> str:
        """ISO 15924 script code, e.g. ``"Deva"``."""
        return self.code.split("_", 1)[1]

    @property
    def script_name(self) -> str:
        """Script name, e.g. ``"Devanagari"``."""
        return SCRIPTS[self.script]

    @property
    def slug(self) -> str:
        """The id used in test names and threshold files: the code in lower case."""
        return self.code.lower()


# English first, then Table 5's order (alphabetical by code).
LANGUAGES: tuple[Language, ...] = (
    Language("eng_Latn", "English", "Indo-European"),
    Language("asm_Beng", "Assamese", "Indo-Aryan"),
    Language("awa_Deva", "Awadhi", "Indo-Aryan"),
    Language("ben_Beng", "Bengali", "Indo-Aryan"),
    Language("bho_Deva", "Bhojpuri", "Indo-Aryan"),
    Language("brx_Deva", "Bodo", "Sino-Tibetan"),
    Language("doi_Deva", "Dogri", "Indo-Aryan"),
    Language("gom_Deva", "Konkani", "Indo-Aryan"),
    Language("guj_Gujr", "Gujarati", "Indo-Aryan"),
    Language("hin_Deva", "Hindi", "Indo-Aryan"),
    Language("hne_Deva", "Chhattisgarhi", "Indo-Aryan"),
    Language("kan_Knda", "Kannada", "Dravidian"),
    Language("kas_Arab", "Kashmiri", "Indo-Aryan"),
    Language("kas_Deva", "Kashmiri", "Indo-Aryan"),
    Language("mag_Deva", "Magahi", "Indo-Aryan"),
    Language("mai_Deva", "Maithili", "Indo-Aryan"),
    Language("mal_Mlym", "Malayalam", "Dravidian"),
    Language("mar_Deva", "Marathi", "Indo-Aryan"),
    Language("mni_Beng", "Manipuri", "Sino-Tibetan"),
    Language("mni_Mtei", "Manipuri", "Sino-Tibetan"),
    Language("npi_Deva", "Nepali", "Indo-Aryan"),
    Language("ory_Orya", "Odia", "Indo-Aryan"),
    Language("pan_Guru", "Punjabi", "Indo-Aryan"),
    Language("san_Deva", "Sanskrit", "Indo-Aryan"),
    Language("sat_Olck", "Santali", "Austroasiatic"),
    Language("sin_Sinh", "Sinhala", "Indo-Aryan"),
    Language("snd_Arab", "Sindhi", "Indo-Aryan"),
    Language("snd_Deva", "Sindhi", "Indo-Aryan"),
    Language("tam_Taml", "Tamil", "Dravidian"),
    Language("tel_Telu", "Telugu", "Dravidian"),
    Language("urd_Arab", "Urdu", "Indo-Aryan"),
)
LANGUAGES_BY_CODE: dict[str, Language] = {lang.code: lang for lang in LANGUAGES}
INDIC_CODES: tuple[str, ...] = tuple(lang.code for lang in LANGUAGES if lang.code != ENGLISH)
_BY_LOWER: dict[str, Language] = {lang.code.lower(): lang for lang in LANGUAGES}


def _unknown_message(code: object) -> str:
    text = str(code).strip().lower().replace("-", "_")
    lowers = list(_BY_LOWER)
    # A bare ISO 639-3 code ("kas") or a name ("Kashmiri") matches every script of that language.
    near = [c for c in lowers if text in (c.split("_")[0], _BY_LOWER[c].name.lower())]
    near += [c for c in difflib.get_close_matches(text, lowers, n=2, cutoff=0.85) if c not in near]
    hint = ""
    if near:
        hint = " did you mean " + " or ".join(repr(_BY_LOWER[c].code) for c in near) + "?"
    valid = ", ".join(lang.code for lang in LANGUAGES)
    return f"unknown language code {code!r};{hint} valid codes (language_Script, any case): {valid}"


def get_language(code: str) -> Language:
    """The :class:`Language` of a code, in any case (``-`` accepted as separator).

    Raises:
        ValueError: not one of the 31 benchmark languages; the message suggests near misses.

    Example:
        >>> get_language("hin_deva").name, get_language("hin_deva").script_name
        ('Hindi', 'Devanagari')
        >>> get_language("kas")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: unknown language code 'kas'; did you mean 'kas_Arab' or 'kas_Deva'? valid codes ...
    """
    if isinstance(code, str):
        lang = _BY_LOWER.get(code.strip().lower().replace("-", "_"))
        if lang is not None:
            return lang
    raise ValueError(_unknown_message(code))


def normalize_language(code: str) -> str:
    """The canonical code (``hin_Deva``) of a code in any case (a ValueError for an unknown code)."""
    return get_language(code).code


def lang_slug(code: str) -> str:
    """The id of a language in test names and threshold files: its code in lower case (``hin_deva``)."""
    return get_language(code).slug


def resolve_languages(codes: Iterable[str] | None) -> list[Language]:
    """Validate language codes (any case), keeping their order; ``None`` means all 31 (a ValueError
    for an unknown code or a language given twice).

    Example:
        >>> [lang.code for lang in resolve_languages(["eng_latn", "tam_Taml"])]
        ['eng_Latn', 'tam_Taml']
    """
    if codes is None:
        return list(LANGUAGES)
    codes = list(codes)
    out: list[Language] = []
    for code in codes:
        lang = get_language(code)
        if lang in out:
            raise ValueError(f"language {code!r} given twice in {codes!r}")
        out.append(lang)
    return out
