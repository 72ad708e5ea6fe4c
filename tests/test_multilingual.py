"""The IndicTTI language list and the multilingual prompt-file loader."""

from __future__ import annotations

import csv
import doctest
import json
from pathlib import Path

import pytest

from t2i_fairness.vocab import languages as languages_module
from t2i_fairness.vocab import multilingual as multilingual_module
from t2i_fairness.vocab.languages import (
    ENGLISH,
    INDIC_CODES,
    LANGUAGES,
    get_language,
    lang_slug,
    normalize_language,
    resolve_languages,
)
from t2i_fairness.vocab.multilingual import (
    SMOKE_SAMPLE,
    MultilingualPromptSet,
    PromptFileError,
    load_prompts,
    load_smoke_sample,
)

# Table 5 of the IndicTTI paper, copied by hand (code, name, script): the list under test must match.
TABLE_5 = """
asm_Beng Assamese Bengali; awa_Deva Awadhi Devanagari; ben_Beng Bengali Bengali;
bho_Deva Bhojpuri Devanagari; brx_Deva Bodo Devanagari; doi_Deva Dogri Devanagari;
gom_Deva Konkani Devanagari; guj_Gujr Gujarati Gujarati; hin_Deva Hindi Devanagari;
hne_Deva Chhattisgarhi Devanagari; kan_Knda Kannada Kannada; kas_Arab Kashmiri Arabic;
kas_Deva Kashmiri Devanagari; mag_Deva Magahi Devanagari; mai_Deva Maithili Devanagari;
mal_Mlym Malayalam Malayalam; mar_Deva Marathi Devanagari; mni_Beng Manipuri Bengali;
mni_Mtei Manipuri Meitei; npi_Deva Nepali Devanagari; ory_Orya Odia Odia; pan_Guru Punjabi Gurmukhi;
san_Deva Sanskrit Devanagari; sat_Olck Santali Ol_Chiki; sin_Sinh Sinhala Sinhala;
snd_Arab Sindhi Arabic; snd_Deva Sindhi Devanagari; tam_Taml Tamil Tamil; tel_Telu Telugu Telugu;
urd_Arab Urdu Arabic
"""


def table_5() -> list[tuple[str, str, str]]:
    rows = [entry.split() for entry in TABLE_5.replace("\n", " ").split(";")]
    return [(code, name, script.replace("_", " ")) for code, name, script in rows]


# ---------------------------------------------------------------- languages


def test_thirty_one_languages_english_first_then_table_5():
    assert len(LANGUAGES) == 31
    assert LANGUAGES[0].code == ENGLISH == "eng_Latn"
    assert [(lang.code, lang.name, lang.script_name) for lang in LANGUAGES[1:]] == table_5()
    assert INDIC_CODES == tuple(code for code, _, _ in table_5())


def test_language_script_and_slug():
    hindi = get_language("hin_Deva")
    assert (hindi.name, hindi.script, hindi.script_name, hindi.slug) == ("Hindi", "Deva", "Devanagari", "hin_deva")
    assert get_language("mni_Mtei").script_name == "Meitei"
    assert get_language(ENGLISH).script_name == "Latin"


@pytest.mark.parametrize("spelling", ["hin_Deva", "hin_deva", "HIN_DEVA", " hin-deva "])
def test_codes_are_case_insensitive(spelling):
    assert normalize_language(spelling) == "hin_Deva"
    assert lang_slug(spelling) == "hin_deva"


def test_slugs_are_unique_lower_case_codes():
    slugs = [lang_slug(lang.code) for lang in LANGUAGES]
    assert slugs == [lang.code.lower() for lang in LANGUAGES]
    assert len(set(slugs)) == 31


@pytest.mark.parametrize(
    "code, suggestion",
    [("hin_Dev", "'hin_Deva'"), ("kas", "'kas_Arab' or 'kas_Deva'"), ("Tamil", "'tam_Taml'"), ("tam_Tml", "'tam_Taml'")],
)
def test_unknown_code_suggests_near_misses_and_lists_codes(code, suggestion):
    with pytest.raises(ValueError) as info:
        get_language(code)
    message = str(info.value)
    assert f"unknown language code {code!r}; did you mean {suggestion}?" in message
    assert "eng_Latn, asm_Beng" in message and "urd_Arab" in message


def test_unknown_code_without_near_miss_lists_codes():
    with pytest.raises(ValueError, match=r"unknown language code 'xyz'; valid codes .*hin_Deva"):
        get_language("xyz")
    with pytest.raises(ValueError, match=r"unknown language code None"):
        get_language(None)  # type: ignore[arg-type]


def test_resolve_languages():
    assert [lang.code for lang in resolve_languages(None)] == [lang.code for lang in LANGUAGES]
    assert [lang.code for lang in resolve_languages(iter(["tel_telu", "eng_latn"]))] == ["tel_Telu", "eng_Latn"]
    with pytest.raises(ValueError, match=r"language 'HIN_DEVA' given twice in \['hin_Deva', 'HIN_DEVA'\]"):
        resolve_languages(["hin_Deva", "HIN_DEVA"])


# ---------------------------------------------------------------- prompt files


def rows(*specs: tuple) -> list[dict]:
    """(prompt_id, lang, text[, english[, reference_image]]) tuples as records."""
    names = ("prompt_id", "lang", "text", "english", "reference_image")
    return [dict(zip(names, spec)) for spec in specs]


GOOD = rows(
    ("p1", "eng_Latn", "a dog", "a dog"),
    ("p1", "hin_deva", "एक कुत्ता", "a dog"),
    ("p2", "tam_Taml", "ஒரு பேருந்து", ""),
    ("p2", "ENG_LATN", "a bus"),
)


def write_jsonl(path: Path, records: list, header: str = "# a comment\n") -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_csv(path: Path, records: list[dict], fields=("prompt_id", "lang", "text", "english", "reference_image")) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(fields), restval="")
        writer.writeheader()
        writer.writerows(records)
    return path


def check_error(info: pytest.ExceptionInfo, path: Path, line: int | None, field: str | None, *fragments: str):
    err = info.value
    assert isinstance(err, PromptFileError) and isinstance(err, ValueError)
    assert (err.path, err.line, err.field) == (path, line, field)
    message = str(err)
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    assert message.startswith(where), message
    if field is not None:
        assert f"field {field!r}:" in message, message
    for fragment in fragments:
        assert fragment in message, message


def test_load_jsonl(tmp_path):
    prompts = load_prompts(write_jsonl(tmp_path / "p.jsonl", GOOD))
    assert isinstance(prompts, MultilingualPromptSet)
    assert prompts.prompt_ids == ("p1", "p2")
    assert prompts.languages == ("eng_Latn", "hin_Deva", "tam_Taml")
    assert len(prompts) == 4 and prompts.comments == ("a comment",) and prompts.source == tmp_path / "p.jsonl"
    hindi = prompts.get("p1", "hin_deva")
    assert (hindi.lang, hindi.lang_slug, hindi.text, hindi.english, hindi.line) == (
        "hin_Deva", "hin_deva", "एक कुत्ता", "a dog", 3,
    )
    assert prompts["p2", "tam_taml"].english == "a bus"  # english filled from the eng_Latn row
    assert prompts.english("p2") == "a bus"
    assert prompts.reference_image("p1") is None
    assert [p.prompt_id for p in prompts.in_language("eng_latn")] == ["p1", "p2"]
    assert sorted(prompts.missing()) == [("p1", "tam_Taml"), ("p2", "hin_Deva")]


def test_csv_and_jsonl_load_the_same_prompts(tmp_path):
    from_jsonl = load_prompts(write_jsonl(tmp_path / "p.jsonl", GOOD, header=""))
    from_csv = load_prompts(write_csv(tmp_path / "p.csv", GOOD))
    strip = lambda s: [(p.prompt_id, p.lang, p.text, p.english, p.reference_image) for p in s]  # noqa: E731
    assert strip(from_csv) == strip(from_jsonl)
    assert [p.line for p in from_csv] == [2, 3, 4, 5]  # line 1 is the header


def test_csv_comments_optional_columns_and_multiline_cells(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(
        "# sample, not validated\nprompt_id,lang,text\n\np1,eng_Latn,\"a dog\non two lines\"\np1,hin_Deva,एक कुत्ता\n",
        encoding="utf-8",
    )
    prompts = load_prompts(path)
    assert prompts.comments == ("sample, not validated",)
    assert prompts.english("p1") == "a dog\non two lines"
    assert [p.line for p in prompts] == [4, 6]  # a record's line is where it starts


def test_int_prompt_ids_in_jsonl(tmp_path):
    prompts = load_prompts(write_jsonl(tmp_path / "p.jsonl", [{"prompt_id": 17, "lang": "eng_Latn", "text": "a cat"}]))
    assert prompts.prompt_ids == ("17",)
    assert prompts.get(17, "eng_Latn").text == "a cat"  # type: ignore[arg-type]


def test_reference_images_resolve_against_the_file_folder(tmp_path):
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "dog.png").write_bytes(b"png")
    absolute = tmp_path / "bus.png"
    absolute.write_bytes(b"png")
    path = write_jsonl(
        tmp_path / "p.jsonl",
        rows(
            ("p1", "eng_Latn", "a dog", "", "refs/dog.png"),
            ("p1", "hin_Deva", "एक कुत्ता", "", "./refs/dog.png"),  # the same file, written differently
            ("p1", "tam_Taml", "ஒரு நாய்", "", ""),  # may be left empty
            ("p2", "eng_Latn", "a bus", "", str(absolute)),
        ),
    )
    prompts = load_prompts(path)
    assert prompts.reference_image("p1") == (tmp_path / "refs" / "dog.png").resolve()
    assert prompts.get("p1", "tam_Taml").reference_image == (tmp_path / "refs" / "dog.png").resolve()
    assert prompts.reference_image("p2") == absolute.resolve()


def test_lookup_errors_list_what_is_there(tmp_path):
    prompts = load_prompts(write_jsonl(tmp_path / "p.jsonl", GOOD))
    with pytest.raises(KeyError, match=r"unknown prompt id 'p9'; ids present: \['p1', 'p2'\]"):
        prompts.get("p9", "eng_Latn")
    with pytest.raises(KeyError, match=r"prompt 'p1' has no 'tam_Taml' entry; its languages: \['eng_Latn', 'hin_Deva'\]"):
        prompts.get("p1", "tam_taml")
    with pytest.raises(ValueError, match=r"unknown language code 'tam'; did you mean 'tam_Taml'"):
        prompts.get("p1", "tam")
    with pytest.raises(KeyError, match="unknown prompt id 'p9'"):
        prompts.reference_image("p9")


def test_subset(tmp_path):
    prompts = load_prompts(write_jsonl(tmp_path / "p.jsonl", GOOD))
    small = prompts.subset(prompt_ids=["p1"], languages=["hin_deva", "eng_latn"])
    assert [(p.prompt_id, p.lang) for p in small] == [("p1", "eng_Latn"), ("p1", "hin_Deva")]
    assert small.missing() == [] and small.comments == prompts.comments
    with pytest.raises(ValueError, match=r"language\(s\) \['tel_Telu'\] not in this prompt set; present: \["):
        prompts.subset(languages=["tel_telu"])
    with pytest.raises(ValueError, match=r"unknown prompt id\(s\) \['p3'\]; ids present: \['p1', 'p2'\]"):
        prompts.subset(prompt_ids=["p3"])


# Every error names the file, the line and the field.


def test_error_unknown_language(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + rows(("p1", "hin_Dev", "x")))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "lang", "unknown language code 'hin_Dev'; did you mean 'hin_Deva'?", "valid codes", "urd_Arab")


def test_error_unknown_language_in_csv(tmp_path):
    path = write_csv(tmp_path / "p.csv", GOOD + rows(("p1", "Klingon", "x")))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "lang", "unknown language code 'Klingon'; valid codes")


def test_error_prompt_without_english(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + rows(("p3", "hin_Deva", "x"), ("p3", "tam_Taml", "y")))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "lang", "prompt 'p3' has no English ('eng_Latn') entry")


def test_error_missing_reference_image(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + rows(("p3", "eng_Latn", "a cat", "", "refs/cat.png")))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(
        info, path, 6, "reference_image",
        "reference image 'refs/cat.png' not found", str(tmp_path.resolve() / "refs" / "cat.png"),
        f"resolved against the prompt file's folder {tmp_path.resolve()}",
    )


def test_error_conflicting_reference_images(tmp_path):
    for name in ("a.png", "b.png"):
        (tmp_path / name).write_bytes(b"png")
    path = write_jsonl(tmp_path / "p.jsonl", rows(("p1", "eng_Latn", "a dog", "", "a.png"), ("p1", "hin_Deva", "x", "", "b.png")))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 3, "reference_image", "b.png", "but line 2 named", "a.png")


def test_error_duplicate_id_and_language(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + rows(("p1", "HIN_Deva", "दूसरा")))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "lang", "duplicate entry for prompt 'p1' in 'hin_Deva' (first on line 3)")


@pytest.mark.parametrize("text", ["", "   ", None])
def test_error_empty_text(tmp_path, text):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + rows(("p3", "eng_Latn", text)))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "text", "empty text for prompt 'p3' in 'eng_Latn'")


def test_error_empty_text_in_csv(tmp_path):
    path = write_csv(tmp_path / "p.csv", GOOD + rows(("p3", "eng_Latn", "")))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "text", "empty text")


def test_error_english_text_differs_from_english_row(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + rows(("p2", "hin_Deva", "एक बस", "a red bus")))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "english", "'a red bus' differs from the text of prompt 'p2' in 'eng_Latn' (line 5): 'a bus'")


def test_error_invalid_json(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + ['{"prompt_id": "p3",'])
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, None, "not valid JSON")


def test_error_json_not_an_object(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + ['["p3", "eng_Latn", "a cat"]'])
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, None, "expected a JSON object with fields ['prompt_id', 'lang', 'text', 'english', 'reference_image'], got list")


def test_error_unknown_field(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + [{"prompt_id": "p3", "lang": "eng_Latn", "text": "x", "refrence_image": ""}])
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "refrence_image", "unknown field; fields: ['prompt_id', 'lang', 'text', 'english', 'reference_image']")


def test_error_missing_field(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + [{"prompt_id": "p3", "text": "x"}])
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "lang", "required field missing")


def test_error_wrong_type(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + [{"prompt_id": "p3", "lang": "eng_Latn", "text": ["a", "cat"]}])
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 6, "text", "expected a string, got list ['a', 'cat']")


@pytest.mark.parametrize("prompt_id", ["", "two words", "-lead", True])
def test_error_invalid_prompt_id(tmp_path, prompt_id):
    path = write_jsonl(tmp_path / "p.jsonl", GOOD + [{"prompt_id": prompt_id, "lang": "eng_Latn", "text": "x"}])
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    fragment = "expected a string, got bool" if prompt_id is True else f"invalid prompt id {prompt_id!r}"
    check_error(info, path, 6, "prompt_id", fragment)


def test_error_csv_header_missing_column(tmp_path):
    path = write_csv(tmp_path / "p.csv", [{"prompt_id": "p1", "text": "a dog"}], fields=("prompt_id", "text"))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 1, "lang", "required column missing from the header ['prompt_id', 'text']")


def test_error_csv_unknown_column(tmp_path):
    path = write_csv(tmp_path / "p.csv", [{"prompt_id": "p1", "lang": "eng_Latn", "text": "a dog", "img": ""}],
                     fields=("prompt_id", "lang", "text", "img"))
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 2, "img", "unknown field")


def test_error_csv_duplicate_column(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("prompt_id,lang,text,text\np1,eng_Latn,a,b\n", encoding="utf-8")
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 1, "text", "column given twice in the header")


def test_error_csv_wrong_number_of_cells(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("prompt_id,lang,text\np1,eng_Latn,a dog\np1,hin_Deva\n", encoding="utf-8")
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, 3, None, "expected 3 cells as in the header on line 1, got 2")


def test_error_no_prompts(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [], header="# only a comment\n")
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    check_error(info, path, None, None, "no prompts in the file")


def test_error_extension_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"has extension '\.tsv'; choose from \['\.jsonl', '\.csv'\]"):
        load_prompts(tmp_path / "p.tsv")
    with pytest.raises(FileNotFoundError, match="prompt file not found"):
        load_prompts(tmp_path / "absent.jsonl")


# ---------------------------------------------------------------- the smoke SAMPLE


def test_smoke_sample_is_a_complete_marked_sample():
    sample = load_smoke_sample()
    assert sample.source == SMOKE_SAMPLE and SMOKE_SAMPLE.parent.name == "data"
    assert sample.languages == ("eng_Latn", "ben_Beng", "hin_Deva", "mar_Deva", "tam_Taml", "tel_Telu")
    assert len(sample.prompt_ids) == 4 and sample.missing() == []
    assert "SAMPLE" in sample.comments[0] and "NOT validated" in sample.comments[0]
    assert all(p.reference_image is None for p in sample)
    for prompt_id in sample.prompt_ids:  # every translation is in its language's script, not copied English
        for p in sample.subset(prompt_ids=[prompt_id]):
            if p.lang != ENGLISH:
                assert p.text != p.english and not any("a" <= ch.lower() <= "z" for ch in p.text)


def test_docstring_examples():
    for module in (languages_module, multilingual_module):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__
