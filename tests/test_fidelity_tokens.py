"""The generator's tokenizer truncates prompts at 77 tokens; every family counts and reports it (issue #15,
finding 11), and the consistency grid's size is one named number that the README states (finding 12).

Token counts were worked out by hand with OpenAI CLIP's byte-level BPE (the tokenizer of SD 1.x and of
the built-in tiny model): "a" is one token, so "a " x 75 is BOS + 75 + EOS = 77 tokens (whole) and
"a " x 76 is 78 (one lost); "बस" ("bus", two Devanagari characters, 6 UTF-8 bytes) is 3 tokens, so
"बस" x 60 is 2 + 180 = 182 tokens: 105 lost, 75 of 180 content tokens kept (0.417), and the cut falls
after the 25th word, so the 35 words after it are what diffusers drops.
"""

from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
BUS = " ".join(["बस"] * 60)
A75, A76 = " ".join(["a"] * 75), " ".join(["a"] * 76)
TINY = SimpleNamespace(spec="tiny", fingerprint="test-fidelity-tiny", loaded=False)


def test_77_tokens_are_whole_and_78_lose_one():
    from t2i_fairness.generators.tokens import prompt_truncation

    t = prompt_truncation(TINY, [A75, A76])
    assert (t.prompts, t.truncated, t.max_lost, t.lost_by_prompt) == (2, 1, 1, {A76: 1})
    assert t.limit == 77 and "CLIPTokenizer" in t.encoder


def test_a_long_hindi_prompt_loses_105_tokens():
    from t2i_fairness.generators.tokens import prompt_truncation

    t = prompt_truncation(TINY, [BUS, "एक लाल बस"])
    assert (t.truncated, t.max_lost, round(t.min_kept_fraction, 3)) == (1, 105, 0.417)
    assert t.details() == {"truncated_prompts": 1, "prompts": 2, "max_lost_tokens": 105,
                           "min_kept_fraction": pytest.approx(75 / 180), "tokenizer": t.encoder}


def test_the_count_is_what_the_diffusers_pipeline_drops():
    """The tiny model's own StableDiffusionPipeline logs what it truncates: the same prompts, the same tokens."""
    from diffusers.utils import logging as diffusers_logging

    from t2i_fairness.generators.diffusers_pipe import DiffusersGenerator

    gen = DiffusersGenerator.tiny()
    assert gen.count_tokens([A75, A76, BUS]) == {"tokenizer": [77, 78, 182]}
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = diffusers_logging.get_logger("diffusers")
    logger.addHandler(handler)
    try:
        for prompt in (A75, A76, BUS):
            gen.pipe.encode_prompt(prompt, "cpu", 1, False)
    finally:
        logger.removeHandler(handler)
    removed = [m for m in records if "was truncated" in m]
    assert len(removed) == 2  # A75 is whole
    assert removed[0].endswith("['a']")
    assert re.sub(r"\s+", " ", removed[1]).endswith("['" + " ".join(["बस"] * 35) + "']")


def test_a_random_paper_size_model_counts_with_the_tokenizer_it_is_built_with():
    """``sd15-random`` is built offline (no hub id to download a tokenizer from): its prompts are counted with the
    offline CLIP tokenizer its pipeline carries, not "not counted" with advice to download ``sd15-random``."""
    from t2i_fairness.generators.diffusers_pipe import build_tiny_pipeline
    from t2i_fairness.generators.tokens import prompt_truncation

    t = prompt_truncation(SimpleNamespace(spec="sd15-random", fingerprint="test-fidelity-sd15r", loaded=False), [A76])
    assert t.counted and (t.limit, t.truncated) == (77, 1)
    assert build_tiny_pipeline("tiny-sd")[0].tokenizer.model_max_length == 77  # what build_tiny_pipeline gives both


def test_generators_without_a_tokenizer_say_not_counted():
    from t2i_fairness.generators.tokens import prompt_truncation

    class NoTokens:
        fingerprint = "fake"

    source = SimpleNamespace(spec="python:fake:model", fingerprint="test-fidelity-none", loaded=True,
                             get=lambda: NoTokens())
    t = prompt_truncation(source, ["a bag"])
    assert not t.counted and t.cell() == "not counted" and "no tokenizer" in t.encoder
    assert t.details()["truncation"] == "not counted"


def test_a_truncated_language_warns_and_shows_in_the_per_language_table():
    from t2i_fairness.errors import T2ITruncationWarning
    from t2i_fairness.families.indic_tti.report import IndicSummary, summary_lines
    from t2i_fairness.generators.tokens import prompt_truncation, warn_truncation

    long, short = prompt_truncation(TINY, [BUS, "एक लाल बस"]), prompt_truncation(TINY, ["a red bus", "a bus"])
    with pytest.warns(T2ITruncationWarning, match=r"hin_Deva: 1 of 2 prompts exceed the generator's 77-token context"):
        warn_truncation(long, "hin_Deva")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_truncation(short, "eng_Latn")  # nothing truncated: no warning
    scores = {c: {"clgc": 0.5, "igc": None, "lgc": 0.3, "scwl": 0.9, "dwl": 0.2} for c in ("eng_Latn", "hin_Deva")}
    s = IndicSummary("p.jsonl", ("eng_Latn", "hin_Deva"), 2, 3, "tiny", scores,
                     truncation={"eng_Latn": short.details(), "hin_Deva": long.details()})
    lines = summary_lines(s)
    header = next(line for line in lines if line.startswith("language"))
    assert header.split()[-3:] == ["trunc", "lost", "max"]
    assert next(line for line in lines if line.startswith("hin_Deva")).split()[-2:] == ["1/2", "105"]
    assert next(line for line in lines if line.startswith("eng_Latn")).split()[-2:] == ["0/2", "0"]
    assert any("worst hin_Deva: 42% of a prompt kept" in line for line in lines)


def test_the_indic_study_counts_each_language_with_the_generator_s_tokenizer():
    from t2i_fairness.families.indic_tti.study import IndicEvaluation
    from t2i_fairness.vocab.multilingual import load_smoke_sample

    # The shipped sample's longest prompt is Telugu at 75 tokens (measured): nothing is truncated.
    bench = SimpleNamespace(source=TINY)
    ev = IndicEvaluation.__new__(IndicEvaluation)
    ev.bench, ev._memo, ev.prompts = bench, {}, load_smoke_sample()
    ev.languages, ev.prompt_ids = ev.prompts.languages, ev.prompts.prompt_ids
    got = {code: ev.truncation(code).cell() for code in ev.languages}
    assert got == {code: "0/4" for code in ev.languages}


# -- finding 12: the consistency grid ------------------------------------------------------------

def test_the_consistency_grid_shows_the_8_lowest_scores_lowest_first():
    from t2i_fairness.families.dig_in.report import LOWEST_GRID_IMAGES, lowest_scoring

    values = [0.19, 0.10, 0.18, 0.11, 0.17, 0.12, 0.16, 0.13, 0.15, 0.14]
    shown = lowest_scoring([SimpleNamespace(score=v, name=f"i{j}") for j, v in enumerate(values)])
    assert LOWEST_GRID_IMAGES == 8
    assert [s.score for s in shown] == [0.10, 0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17]
    tied = [SimpleNamespace(score=v, name=n) for v, n in [(0.17, "first"), (0.1, "x")] + [(0.12, "y")] * 6 + [(0.17, "second")]]
    assert [s.name for s in lowest_scoring(tied)][-1] == "first"  # a tie at the cut: the one listed first


def test_the_readme_states_the_grid_size_the_code_uses():
    from t2i_fairness.families.dig_in.report import LOWEST_GRID_IMAGES

    text = (REPO / "docs" / "reports.md").read_text(encoding="utf-8")  # "Reading the report" left the README
    assert f"{LOWEST_GRID_IMAGES} lowest-scoring images" in text
    assert not re.search(r"\b(?!8\b)\d+ lowest-scoring images", text)
