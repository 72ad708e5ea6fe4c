"""Multilingual prompt files for the IndicTTI indicators: one prompt id in many languages.

A prompt file is JSONL or CSV (by extension) with the fields below; blank lines and lines starting
with ``#`` are skipped (comments are kept in :attr:`MultilingualPromptSet.comments`).

==================  =========  ==================================================================
field               required   meaning
==================  =========  ==================================================================
``prompt_id``       yes        the prompt's id, shared by all its languages: letters, digits,
                               ``_ . -`` (it becomes part of test ids); an int is accepted in JSONL
``lang``            yes        language code with script, any case: ``hin_Deva``, ``hin_deva``
                               (one of :data:`t2i_fairness.vocab.languages.LANGUAGES`)
``text``            yes        the prompt in that language, not empty
``english``         no         must equal the text of the prompt's ``eng_Latn`` row
``reference_image`` no         the prompt's reference image for IGC, relative to the file's folder;
                               the same file in every row of a prompt that gives one
==================  =========  ==================================================================

Every prompt id needs an ``eng_Latn`` row (drops are relative to English);
:meth:`MultilingualPromptSet.missing` lists the (id, language) holes.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from t2i_fairness import DATA
from t2i_fairness.vocab.languages import ENGLISH, LANGUAGES, get_language, lang_slug

__all__ = [
    "FIELDS",
    "MultilingualPrompt",
    "MultilingualPromptSet",
    "PromptFileError",
    "SMOKE_SAMPLE",
    "lang_slug",
    "load_prompts",
    "load_smoke_sample",
]

FIELDS: tuple[str, ...] = ("prompt_id", "lang", "text", "english", "reference_image")
REQUIRED_FIELDS: tuple[str, ...] = ("prompt_id", "lang", "text")
FORMATS: tuple[str, ...] = (".jsonl", ".csv")

# A SAMPLE for smoke tests: 4 prompts in English and 5 Indic languages, translated by hand by the
# project and NOT validated by native speakers. Not the IndicTTI prompts; no reference images.
SMOKE_SAMPLE = DATA / "indic_smoke.jsonl"

_PROMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_LANG_ORDER = {lang.code: i for i, lang in enumerate(LANGUAGES)}


class PromptFileError(ValueError):
    """A problem in a prompt file: ``<file>:<line>: field '<field>': <problem>``, the parts also attributes."""

    def __init__(self, path: Path, line: int | None, field: str | None, problem: str):
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem
        where = f"{path}:{line}" if line is not None else f"{path}"
        what = f" field {field!r}:" if field is not None else ""
        super().__init__(f"{where}:{what} {problem}")


@dataclass(frozen=True)
class MultilingualPrompt:
    """One prompt id in one language."""

    prompt_id: str
    lang: str  # canonical code, "hin_Deva"
    text: str
    english: str  # the English text of this prompt id (from its eng_Latn row)
    reference_image: Path | None = None  # absolute, checked to exist when loaded from a file
    line: int | None = None  # line in the source file, for messages

    @property
    def lang_slug(self) -> str:
        """The language as in test ids: ``hin_deva``."""
        return lang_slug(self.lang)


@dataclass(frozen=True)
class MultilingualPromptSet:
    """Prompts by (prompt id, language), as :func:`load_prompts` returns them, with the file's comments."""

    prompts: tuple[MultilingualPrompt, ...]
    source: Path | None = None
    comments: tuple[str, ...] = ()
    _index: dict[tuple[str, str], MultilingualPrompt] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompts", tuple(self.prompts))
        object.__setattr__(self, "_index", {(p.prompt_id, p.lang): p for p in self.prompts})

    @property
    def prompt_ids(self) -> tuple[str, ...]:
        """The prompt ids in order of first appearance."""
        return tuple(dict.fromkeys(p.prompt_id for p in self.prompts))

    @property
    def languages(self) -> tuple[str, ...]:
        """The canonical codes present, English first, then in Table 5's order."""
        return tuple(sorted({p.lang for p in self.prompts}, key=_LANG_ORDER.__getitem__))

    def __len__(self) -> int:
        return len(self.prompts)

    def __iter__(self) -> Iterator[MultilingualPrompt]:
        return iter(self.prompts)

    def __getitem__(self, key: tuple[str, str]) -> MultilingualPrompt:
        prompt_id, lang = key
        return self.get(prompt_id, lang)

    def get(self, prompt_id: str, lang: str) -> MultilingualPrompt:
        """The prompt with this id in this language (code in any case).

        Raises:
            KeyError: no such prompt; the message lists the ids or languages present.
            ValueError: ``lang`` is not a benchmark language code.
        """
        code = get_language(lang).code
        found = self._index.get((str(prompt_id), code))
        if found is not None:
            return found
        if str(prompt_id) not in self.prompt_ids:
            raise KeyError(f"unknown prompt id {prompt_id!r}; ids present: {list(self.prompt_ids)}")
        have = [p.lang for p in self.prompts if p.prompt_id == str(prompt_id)]
        raise KeyError(f"prompt {prompt_id!r} has no {code!r} entry; its languages: {have}")

    def in_language(self, lang: str) -> tuple[MultilingualPrompt, ...]:
        """The prompts of one language, in :attr:`prompt_ids` order (ids without it are skipped)."""
        code = get_language(lang).code
        return tuple(self._index[(i, code)] for i in self.prompt_ids if (i, code) in self._index)

    def english(self, prompt_id: str) -> str:
        """The English text of a prompt id."""
        return self.get(prompt_id, ENGLISH).text

    def reference_image(self, prompt_id: str) -> Path | None:
        """The reference image of a prompt id, or ``None`` when no row gives one."""
        for p in self.prompts:
            if p.prompt_id == str(prompt_id) and p.reference_image is not None:
                return p.reference_image
        if str(prompt_id) not in self.prompt_ids:
            raise KeyError(f"unknown prompt id {prompt_id!r}; ids present: {list(self.prompt_ids)}")
        return None

    def missing(self) -> list[tuple[str, str]]:
        """The (prompt id, language) pairs absent from the full grid ids x languages."""
        return [(i, lang) for i in self.prompt_ids for lang in self.languages if (i, lang) not in self._index]

    def subset(
        self, prompt_ids: Iterable[str] | None = None, languages: Iterable[str] | None = None
    ) -> "MultilingualPromptSet":
        """The prompts of some ids and languages (``None`` keeps all), in this set's order; a ValueError
        listing those present for an id or language not in the set.
        """
        ids = set(self.prompt_ids)
        codes = set(self.languages)
        if prompt_ids is not None:
            wanted = [str(i) for i in prompt_ids]
            unknown = [i for i in wanted if i not in ids]
            if unknown:
                raise ValueError(f"unknown prompt id(s) {unknown}; ids present: {list(self.prompt_ids)}")
            ids = set(wanted)
        if languages is not None:
            wanted = [get_language(code).code for code in languages]
            unknown = [c for c in wanted if c not in codes]
            if unknown:
                raise ValueError(f"language(s) {unknown} not in this prompt set; present: {list(self.languages)}")
            codes = set(wanted)
        kept = tuple(p for p in self.prompts if p.prompt_id in ids and p.lang in codes)
        return MultilingualPromptSet(kept, self.source, self.comments)


def _read_jsonl(path: Path, comments: list[str]) -> Iterator[tuple[int, dict]]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        for number, raw in enumerate(fh, start=1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith("#"):
                comments.append(line[1:].strip())
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise PromptFileError(path, number, None, f"not valid JSON ({err.msg} at column {err.colno})") from None
            if not isinstance(record, dict):
                raise PromptFileError(
                    path, number, None,
                    f"expected a JSON object with fields {list(FIELDS)}, got {type(record).__name__}",
                )
            yield number, record


def _read_csv(path: Path, comments: list[str]) -> Iterator[tuple[int, dict]]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        header: list[str] | None = None
        header_line = 0
        last_end = 0
        for row in reader:
            start, last_end = last_end + 1, reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if row[0].lstrip().startswith("#"):
                comments.append(",".join(row).lstrip()[1:].strip())
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                header_line = start
                for name in header:
                    if header.count(name) > 1:
                        raise PromptFileError(path, start, name, "column given twice in the header")
                for name in REQUIRED_FIELDS:
                    if name not in header:
                        raise PromptFileError(
                            path, start, name,
                            f"required column missing from the header {header}; fields: {list(FIELDS)}",
                        )
                continue
            if len(row) != len(header):
                raise PromptFileError(
                    path, start, None,
                    f"expected {len(header)} cells as in the header on line {header_line}, got {len(row)}",
                )
            yield start, dict(zip(header, row))


def _text_field(path: Path, line: int, record: dict, name: str) -> str:
    """A string field: stripped, '' when absent or null; ints only for prompt_id."""
    value = record.get(name)
    if value is None:
        return ""
    if name == "prompt_id" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise PromptFileError(path, line, name, f"expected a string, got {type(value).__name__} {value!r}")
    return value.strip()


def _parse_record(path: Path, line: int, record: dict) -> tuple[str, str, str, str, Path | None]:
    unknown = [name for name in record if name not in FIELDS]
    if unknown:
        raise PromptFileError(path, line, unknown[0], f"unknown field; fields: {list(FIELDS)}")
    for name in REQUIRED_FIELDS:
        if name not in record:
            raise PromptFileError(path, line, name, f"required field missing; fields: {list(FIELDS)}")

    prompt_id = _text_field(path, line, record, "prompt_id")
    if not _PROMPT_ID.fullmatch(prompt_id):
        raise PromptFileError(
            path, line, "prompt_id",
            f"invalid prompt id {prompt_id!r}: use letters, digits, '_', '.', '-' (it is part of test ids)",
        )
    raw_lang = _text_field(path, line, record, "lang")
    try:
        lang = get_language(raw_lang).code
    except ValueError as err:
        raise PromptFileError(path, line, "lang", str(err)) from None
    text = _text_field(path, line, record, "text")
    if not text:
        raise PromptFileError(path, line, "text", f"empty text for prompt {prompt_id!r} in {lang!r}")
    english = _text_field(path, line, record, "english")

    image = _text_field(path, line, record, "reference_image")
    reference: Path | None = None
    if image:
        reference = Path(image)
        if not reference.is_absolute():
            reference = path.parent.resolve() / reference
        if not reference.is_file():
            raise PromptFileError(
                path, line, "reference_image",
                f"reference image {image!r} not found (looked for {reference}; relative paths are resolved "
                f"against the prompt file's folder {path.parent.resolve()})",
            )
        reference = reference.resolve()
    return prompt_id, lang, text, english, reference


def load_prompts(path: str | Path) -> MultilingualPromptSet:
    """Read and check a multilingual prompt file (format in this module's docstring).

    Each prompt's ``english`` and ``reference_image`` are its id's, whichever row gave them.

    Raises:
        ValueError: the extension is neither ``.jsonl`` nor ``.csv``.
        FileNotFoundError: no such file.
        PromptFileError: (a ``ValueError``) the first problem found, as ``<file>:<line>: field
            '<field>': <problem>`` (bad row, field, id or language code, duplicate, no English row,
            mismatched ``english`` or reference image, no prompts).

    Example:
        >>> load_prompts(SMOKE_SAMPLE).get("smoke-dog", "hin_deva").english
        'a dog sitting on a wooden bench'
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"prompt file {str(path)!r} has extension {path.suffix!r}; choose from {list(FORMATS)}")
    if not path.is_file():
        raise FileNotFoundError(f"prompt file not found: {path}")
    comments: list[str] = []
    records = _read_jsonl(path, comments) if suffix == ".jsonl" else _read_csv(path, comments)

    rows: list[tuple[int, str, str, str, str, Path | None]] = []
    first_line: dict[tuple[str, str], int] = {}
    for line, record in records:
        prompt_id, lang, text, english, reference = _parse_record(path, line, record)
        key = (prompt_id, lang)
        if key in first_line:
            raise PromptFileError(
                path, line, "lang",
                f"duplicate entry for prompt {prompt_id!r} in {lang!r} (first on line {first_line[key]})",
            )
        first_line[key] = line
        rows.append((line, prompt_id, lang, text, english, reference))
    if not rows:
        raise PromptFileError(path, None, None, f"no prompts in the file; expected rows with fields {list(FIELDS)}")

    english_of = {pid: text for (_, pid, lang, text, _, _) in rows if lang == ENGLISH}
    reference_of: dict[str, tuple[Path, int]] = {}
    for line, pid, lang, text, english, reference in rows:
        if pid not in english_of:
            raise PromptFileError(
                path, line, "lang",  # rows are in file order: this is the id's first row
                f"prompt {pid!r} has no English ({ENGLISH!r}) entry; every prompt id needs one",
            )
        if english and english != english_of[pid]:
            raise PromptFileError(
                path, line, "english",
                f"{english!r} differs from the text of prompt {pid!r} in {ENGLISH!r} "
                f"(line {first_line[(pid, ENGLISH)]}): {english_of[pid]!r}",
            )
        if reference is not None:
            seen = reference_of.setdefault(pid, (reference, line))
            if seen[0] != reference:
                raise PromptFileError(
                    path, line, "reference_image",
                    f"prompt {pid!r} names reference image {str(reference)!r}, "
                    f"but line {seen[1]} named {str(seen[0])!r}",
                )
    prompts = tuple(
        MultilingualPrompt(pid, lang, text, english_of[pid], reference_of.get(pid, (None,))[0], line)
        for line, pid, lang, text, _, _ in rows
    )
    return MultilingualPromptSet(prompts, path, tuple(comments))


def load_smoke_sample() -> MultilingualPromptSet:
    """The bundled SAMPLE prompt file: 4 prompts in English, Hindi, Bengali, Tamil, Telugu, Marathi.

    Its translations are the project's own, NOT validated, with no reference images: for smoke tests,
    not for measuring a model.
    """
    return load_prompts(SMOKE_SAMPLE)
