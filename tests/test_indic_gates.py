"""The IndicTTI gate layer: options and their errors, collection ids, the evaluation's wiring, the
caption cache, the report; and one end-to-end run of the gates on the tiny model."""

from __future__ import annotations

import doctest
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.errors import IndicModelWarning
from t2i_fairness.families.indic_tti import options as indic_options, report as indic_report, study as indic_eval
from t2i_fairness.base.cache import Cache, CacheStats, content_key
from t2i_fairness.spine.generation import ImageRef
from t2i_fairness.families.indic_tti.options import check_full_grid, select_languages
from t2i_fairness.families.indic_tti.study import IndicEvaluation, cached_captions
from t2i_fairness.families.indic_tti.report import IndicSummary, scal_heatmap_png, summary_json, summary_lines
from t2i_fairness.metrics import indic as metrics
from t2i_fairness.vocab.multilingual import load_prompts, load_smoke_sample

REPO = Path(__file__).resolve().parents[1]
INDIC_TESTS = REPO / "fairness_tests" / "test_indic_tti.py"


def write_prompts(path: Path, rows: list[tuple[str, str, str]], references: dict[str, str] | None = None) -> Path:
    references = references or {}
    with path.open("w", encoding="utf-8") as fh:
        fh.write("# a test file\n")
        for pid, lang, text in rows:
            record = {"prompt_id": pid, "lang": lang, "text": text}
            if pid in references:
                record["reference_image"] = references[pid]
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


TWO_BY_TWO = [("p1", "eng_Latn", "a red bus"), ("p1", "hin_Deva", "एक लाल बस"),
              ("p2", "eng_Latn", "a dog on a bench"), ("p2", "hin_Deva", "बेंच पर एक कुत्ता")]


@pytest.fixture
def indic_pytester(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    """A pytester project whose tests ask for the IndicTTI family's parametrized arguments."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pytester.makepyfile(test_ids="""
        def test_all(indic_language):
            pass

        def test_others(indic_non_english):
            pass
    """)
    return pytester


# ---------------------------------------------------------------- options and their errors


@pytest.mark.parametrize("args, message", [
    (["--t2i-languages", "hin_deva,xyz_Latn"], "*--t2i-languages: unknown language code 'xyz_Latn'*valid codes*"),
    (["--t2i-languages", "kas"], "*--t2i-languages: unknown language code 'kas'; did you mean 'kas_Arab' or 'kas_Deva'?*"),
    (["--t2i-languages", "urd_Arab"], "*--t2i-languages: language(s) [[]'urd_Arab'[]] not in the prompt file *indic_smoke.jsonl;"
                                      " it has: eng_Latn, ben_Beng, hin_Deva, mar_Deva, tam_Taml, tel_Telu*"),
    (["--t2i-languages", " , "], "*--t2i-languages: no language in ' , '*"),
    (["--t2i-indic-prompts", "nope.jsonl"], "*--t2i-indic-prompts: prompt file not found: *nope.jsonl*"),
    (["--t2i-indic-prompts", "prompts.txt"], "*--t2i-indic-prompts: prompt file *prompts.txt* has extension '.txt';"
                                             " choose from [[]'.jsonl', '.csv'[]]*"),
])
def test_bad_options_are_usage_errors_naming_the_option(indic_pytester, args, message):
    result = indic_pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_broken_prompt_file_is_reported_with_its_line(indic_pytester):
    bad = indic_pytester.path / "bad.jsonl"
    bad.write_text('{"prompt_id": "p1", "lang": "eng_Latn", "text": "a bus"}\n{"prompt_id": "p1", "lang": "hin_Deva"\n')
    result = indic_pytester.runpytest("--t2i-indic-prompts", "bad.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--t2i-indic-prompts: *bad.jsonl:2: not valid JSON*"])


def test_holes_in_the_prompt_grid_are_usage_errors_unless_the_language_is_left_out(indic_pytester):
    write_prompts(indic_pytester.path / "holes.jsonl", TWO_BY_TWO[:3])  # p2 has no Hindi
    result = indic_pytester.runpytest("--t2i-indic-prompts", "holes.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--t2i-indic-prompts: *holes.jsonl lacks 1 (prompt id, language) pair(s): (p2, hin_Deva);"
                                 "*leave the language out with --t2i-languages*"])
    result = indic_pytester.runpytest("--t2i-indic-prompts", "holes.jsonl", "--t2i-languages", "eng_Latn", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["test_ids.py::test_all[eng_latn]", "test_ids.py::test_others[[]NOTSET[]]"])


# ---------------------------------------------------------------- collection: one id per language


def test_gates_are_parametrized_with_the_files_languages(indic_pytester):
    result = indic_pytester.runpytest("--collect-only", "-q")
    slugs = ["eng_latn", "ben_beng", "hin_deva", "mar_deva", "tam_taml", "tel_telu"]
    result.stdout.fnmatch_lines([f"test_ids.py::test_all[{s}]" for s in slugs]
                                + [f"test_ids.py::test_others[{s}]" for s in slugs[1:]])
    assert "test_others[eng_latn]" not in result.stdout.str()


def test_languages_option_keeps_english_and_k_selects_one_language(indic_pytester):
    result = indic_pytester.runpytest("--collect-only", "-q", "--t2i-languages", "TAM_TAML,hin_Deva")
    result.stdout.fnmatch_lines(["test_ids.py::test_all[eng_latn]", "test_ids.py::test_all[hin_deva]",
                                 "test_ids.py::test_all[tam_taml]", "test_ids.py::test_others[hin_deva]",
                                 "test_ids.py::test_others[tam_taml]", "5 tests collected*"])
    result = indic_pytester.runpytest("-v", "-k", "hin_deva")
    result.assert_outcomes(passed=2, deselected=9)


def test_header_names_the_prompt_file_and_the_sample_size(indic_pytester):
    result = indic_pytester.runpytest("--co")
    result.stdout.fnmatch_lines(["t2i-fairness IndicTTI: *indic_smoke.jsonl [[]SAMPLE for smoke tests only*]; 4 prompt ids"
                                 " x 6 languages (eng_Latn, ben_Beng, *); 6 images per prompt and language"])
    result = indic_pytester.runpytest("--co", "--t2i-model", "org/some-model")  # the paper's 4 for real models
    result.stdout.fnmatch_lines(["t2i-fairness IndicTTI: *; 4 images per prompt and language"])
    result = indic_pytester.runpytest("--co", "--t2i-images-per-prompt", "2")
    result.stdout.fnmatch_lines(["t2i-fairness IndicTTI: *; 2 images per prompt and language"])


# ---------------------------------------------------------------- selection helpers


def test_select_languages_and_full_grid(tmp_path):
    sample = load_smoke_sample()
    assert select_languages(sample, None) == sample.languages
    assert select_languages(sample, "all") == sample.languages
    assert select_languages(sample, "tel_Telu,tel_telu") == ("eng_Latn", "tel_Telu")
    prompts = load_prompts(write_prompts(tmp_path / "h.jsonl", TWO_BY_TWO[:3]))
    with pytest.raises(ValueError, match=r"lacks 1 \(prompt id, language\) pair\(s\): \(p2, hin_Deva\)"):
        check_full_grid(prompts)
    check_full_grid(prompts.subset(languages=["eng_Latn"]))


# ---------------------------------------------------------------- the evaluation's wiring, with fake models


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class FakeEncoder:
    """Deterministic random vectors per image key / text, so the expected numbers can be computed directly."""

    def __init__(self, name: str, dim: int = 5):
        self.fingerprint = f"fake:{name}"
        self.model_name = name
        self.dim = dim

    def vector(self, item: str) -> np.ndarray:
        return np.random.default_rng(list(digest(f"{self.fingerprint}|{item}"))).normal(size=self.dim)

    def encode_texts(self, texts):
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)


class FakeCaptioner:
    def __init__(self, fingerprint: str = "fake-captioner/v1"):
        self.fingerprint = fingerprint
        self.calls = 0

    def caption(self, images):
        self.calls += 1
        return [f"caption of a {im.size[0]}px image with mean {np.asarray(im).mean():.1f}" for im in images]


class FakeBench:
    """The workbench surface IndicEvaluation uses."""

    def __init__(self, root: Path):
        self.cache = Cache(root / "cache")
        self.options = type("Options", (), {"scorers": "tiny", "confidence": 0.95})()
        self.models = {
            "indic-blip2-captioner": FakeCaptioner(),
            "indic-blip2-image-features": FakeEncoder("f"),
            "indic-sentence-encoder": FakeEncoder("t"),
            "clip": FakeEncoder("clip"),
        }
        self.root = root
        self.generated: list[str] = []

    def scorer(self, name, build=None):
        return self.models[name]

    def progress(self, total, desc):
        import contextlib

        return contextlib.nullcontext(lambda n: None)

    def images(self, prompts, n, desc=""):
        out = []
        for k, prompt in enumerate(prompts):
            row = []
            for i in range(n):
                path = self.root / "images" / f"{digest(prompt).hex()[:16]}-{i}.png"
                if not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    Image.new("RGB", (8, 8), (k * 40 % 256, i * 60 % 256, len(prompt) % 256)).save(path)
                    self.generated.append(prompt)
                row.append(ImageRef(f"{prompt}#{i}", path, prompt, i, i))
            out.append(row)
        return out

    def features(self, encoder, refs, desc="", encode=None):
        return np.stack([encoder.vector(r.key) for r in refs]).astype(np.float32)

    def text_features(self, encoder, texts):
        return encoder.encode_texts(texts)


def test_evaluation_feeds_each_metric_the_right_embeddings(tmp_path):
    prompts = load_smoke_sample().subset(languages=["eng_Latn", "hin_Deva", "tam_Taml"])
    bench = FakeBench(tmp_path)
    ev = IndicEvaluation(bench, prompts, n_images=3)
    f, t, clip = (bench.models[k] for k in ("indic-blip2-image-features", "indic-sentence-encoder", "clip"))
    ids = prompts.prompt_ids
    english = [prompts.get(pid, "eng_Latn").text for pid in ids]

    s = ev.scores("hin_deva")
    assert set(bench.generated) == {prompts.get(pid, "hin_Deva").text for pid in ids}  # nothing else generated
    hindi = [prompts.get(pid, "hin_Deva").text for pid in ids]
    keys = [[f"{text}#{i}" for i in range(3)] for text in hindi]  # (prompt, image) in prompt-major order
    f_grid = np.array([[f.vector(k) for k in row] for row in keys])
    captions = ev.captions("hin_Deva")
    assert s.clgc == pytest.approx(metrics.clgc(t.encode_texts(english), np.array([[t.vector(c) for c in row] for row in captions])))
    assert s.lgc == pytest.approx(metrics.lgc(clip.encode_texts(english), np.array([[clip.vector(k) for k in row] for row in keys])))
    assert s.scwl == pytest.approx(metrics.scwl(f_grid))
    assert s.dwl == pytest.approx(metrics.dwl(f_grid))
    assert s.igc is None and s.n == 12 and s.captions[ids[0]] == captions[0]
    assert ev.measured == ("hin_Deva",)

    english_grid = np.array([[f.vector(f"{text}#{i}") for i in range(3)] for text in english])
    assert ev.scal("eng_Latn", "hin_Deva") == pytest.approx(metrics.scal(english_grid, f_grid))
    matrix = ev.scal_matrix()
    assert matrix.shape == (3, 3) and matrix[0, 1] == pytest.approx(ev.scal("hin_Deva", "eng_Latn"))
    with pytest.raises(ValueError, match=r"language 'ben_Beng' is not measured in this session"):
        ev.scores("ben_Beng")


def test_evaluation_measures_igc_on_the_prompts_with_reference_images(tmp_path):
    for name, color in (("r1.png", "red"), ("r2.png", "blue")):
        Image.new("RGB", (8, 8), color).save(tmp_path / name)
    path = write_prompts(tmp_path / "p.jsonl", TWO_BY_TWO, references={"p1": "r1.png", "p2": "r2.png"})
    bench = FakeBench(tmp_path)
    ev = IndicEvaluation(bench, load_prompts(path), n_images=2)
    s = ev.scores("hin_Deva")
    f = bench.models["indic-blip2-image-features"]
    refs = ev.reference_features()
    grid = np.array([[f.vector(f"{text}#{i}") for i in range(2)] for text in ("एक लाल बस", "बेंच पर एक कुत्ता")])
    assert s.igc == pytest.approx(metrics.igc(refs, grid)) and s.igc_prompts == 2


# ---------------------------------------------------------------- models per profile


def test_paper_sentence_model_falls_back_to_minilm_with_a_warning(monkeypatch):
    from t2i_fairness.base.devices import RunContext
    from t2i_fairness.generators import ModelLoadError
    from t2i_fairness.models.sentence import SentenceEncoder

    built = []

    def from_profile(profile, device="cpu", precision=None, **options):
        name = options.get("model", {"paper": "all-mpnet-base-v2", "tiny": "all-MiniLM-L6-v2"}[profile])
        if name == "all-mpnet-base-v2" or options.get("fail"):
            raise ModelLoadError(f"cannot load the sentence model {name!r}: it is not in the local Hugging Face cache")
        built.append(name)
        return type("Encoder", (), {"model_name": name, "fingerprint": f"SentenceEncoder/{name}"})()

    monkeypatch.setattr(SentenceEncoder, "from_profile", staticmethod(from_profile))
    RUN = RunContext("cpu")  # what the workbench hands a builder: the run's device and precision
    with pytest.warns(IndicModelWarning, match=r"all-mpnet-base-v2 could not be loaded, so all-MiniLM-L6-v2"):
        assert indic_eval._build_sentence("paper", RUN).model_name == "all-MiniLM-L6-v2"
    assert indic_eval._build_sentence("tiny", RUN).model_name == "all-MiniLM-L6-v2"
    monkeypatch.setattr(SentenceEncoder, "from_profile", staticmethod(lambda *a, **k: from_profile("tiny", fail=True)))
    with pytest.raises(ModelLoadError, match=r"cannot load the sentence model 'all-MiniLM-L6-v2'"):
        indic_eval._build_sentence("tiny", RUN)  # no fallback from the fallback: one clear error


# ---------------------------------------------------------------- the caption cache


def test_captions_are_cached_per_image_and_captioner(tmp_path):
    bench = FakeBench(tmp_path)
    refs = bench.images(["a", "b"], 2)
    flat = [r for row in refs for r in row]
    captioner = FakeCaptioner()
    first = cached_captions(bench, captioner, flat)
    assert captioner.calls == 1 and len(first) == 4
    assert cached_captions(bench, captioner, flat) == first and captioner.calls == 1  # read back
    kind = "captions:fake-captioner"
    assert bench.cache.stats.computed[kind] == 4 and bench.cache.stats.reused[kind] == 4

    other = FakeCaptioner("fake-captioner/v2")  # another fingerprint never reuses v1's captions
    cached_captions(bench, other, flat)
    assert other.calls == 1

    entry = bench.cache.path("captions", flat[3].key, ".json", content_key(captioner=captioner.fingerprint)[:16])
    entry.write_text("{not json")
    bench.cache.stats = CacheStats()
    assert sorted(cached_captions(bench, captioner, flat)) == sorted(first)  # remade
    assert bench.cache.stats.corrupt == [str(entry)] and bench.cache.stats.computed[kind] == 1


# ---------------------------------------------------------------- the report


def summary(**overrides) -> IndicSummary:
    scores = {
        "eng_Latn": {"clgc": 0.6, "igc": None, "lgc": 0.3, "scwl": 0.9, "dwl": 0.4},
        "hin_Deva": {"clgc": 0.3, "igc": None, "lgc": 0.2, "scwl": 0.8, "dwl": 0.5},
        "tam_Taml": {"clgc": 0.15, "igc": None, "lgc": 0.25, "scwl": 0.7, "dwl": 0.45},
    }
    fields = dict(source="p.jsonl", languages=("eng_Latn", "hin_Deva", "tam_Taml"), n_prompts=2, n_images=3,
                  profile="tiny", scores=scores, scal_with_english={"hin_Deva": 0.5, "tam_Taml": 0.4},
                  scal_matrix=[[0.9, 0.5, 0.4], [0.5, 0.8, 0.6], [0.4, 0.6, 0.7]],
                  models={"sentence encoder t (CLGC)": "fake"}, sentence_model="all-MiniLM-L6-v2",
                  igc_note="IGC not measured: no reference_image")
    fields.update(overrides)
    return IndicSummary(**fields)


def test_summary_table_drops_and_json():
    s = summary()
    assert s.drops()["clgc"] == pytest.approx({"hin_Deva": 0.3, "tam_Taml": 0.45})
    assert s.mean_drops()["clgc"] == pytest.approx(0.6 - (0.3 + 0.15) / 2)
    assert "igc" not in s.drops()
    assert s.clgc_ratios() == pytest.approx({"hin_Deva": 0.5, "tam_Taml": 0.25})
    assert s.scal_overall() == pytest.approx(0.5)
    text = "\n".join(summary_lines(s))
    for expected in ("hin_Deva Hindi    0.3000    -  0.2000  0.8000  0.5000      0.5000   0.5000",
                     "tam_Taml Tamil       0.4500  0.0500  0.2000  -0.0500",
                     "mean of 2 languages  0.3750",
                     "overall SCAL (mean over the 3 pairs of distinct languages, Eq. 9): 0.5000",
                     "IGC not measured: no reference_image", "sentence model all-MiniLM-L6-v2"):
        assert expected in text
    data = json.loads(json.dumps(summary_json(s)))
    assert data["drop_vs_english"]["lgc"]["tam_Taml"] == pytest.approx(0.05)
    assert data["clgc_ratio_vs_english"]["hin_Deva"] == pytest.approx(0.5) and data["scal_overall"] == pytest.approx(0.5)


def test_summary_with_negative_english_clgc_and_unmeasured_languages():
    s = summary(scores={"eng_Latn": {"clgc": -0.01, "igc": None, "lgc": 0.3, "scwl": 0.9, "dwl": 0.4},
                        "hin_Deva": {"clgc": 0.02, "igc": None, "lgc": 0.2, "scwl": 0.8, "dwl": 0.5}},
                scal_with_english={"hin_Deva": 0.5}, scal_matrix=None)
    assert s.clgc_ratios() == {"hin_Deva": None}
    text = "\n".join(summary_lines(s))
    assert "CLGC/en undefined: CLGC(English) = -0.0100 <= 0" in text
    assert "not measured in this run (no selected gate needed them): tam_Taml" in text
    assert "overall SCAL" not in text


def test_heatmap_is_a_png_and_checks_its_shape():
    assert scal_heatmap_png(["eng_Latn", "hin_Deva"], [[1.0, 0.5], [0.5, 1.0]])[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match=r"expected `matrix` of shape \(3, 3\) for 3 languages, but got shape \(2, 2\)"):
        scal_heatmap_png(["eng_Latn", "hin_Deva", "tam_Taml"], np.eye(2))


@pytest.mark.parametrize("module", [indic_report, indic_options])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# ---------------------------------------------------------------- the ratio gate, with fake models

FAKE_INDIC = """

# -- appended by tests/test_indic_gates.py: the session's evaluation with fake models --
import os

import pytest  # the gate tests import no pytest: the fixture below needs it

import numpy as np

from t2i_fairness.families.indic_tti.study import IndicEvaluation
from test_indic_gates import FakeBench, FakeEncoder


class SignedSentences(FakeEncoder):
    \"\"\"Prompts near +1, captions near FAKE_SIGN * 1: CLGC is about FAKE_SIGN in every language.\"\"\"

    def vector(self, item):
        sign = float(os.environ["FAKE_SIGN"]) if item.startswith("caption") else 1.0
        return sign * np.ones(self.dim) + 0.1 * super().vector(item)


@pytest.fixture(scope="session")
def indic(t2i_options, tmp_path_factory):
    bench = FakeBench(tmp_path_factory.mktemp("bench"))
    bench.models["indic-sentence-encoder"] = SignedSentences("t")
    return IndicEvaluation(bench, t2i_options.family("indic_tti").prompts, 2)
"""


def test_ratio_gate_divides_by_english_and_is_inconclusive_when_undefined_with_a_bound(indic_pytester, monkeypatch):
    pytest.importorskip("torch")  # the gate's provenance imports torch: load it here so in-process runs keep it
    indic_pytester.makepyfile(test_indic_tti=INDIC_TESTS.read_text(encoding="utf-8") + FAKE_INDIC)
    args = ["-k", "vs_english", "--t2i-languages", "hin_Deva,tam_Taml", "--t2i-no-progress", "-rs"]

    monkeypatch.setenv("FAKE_SIGN", "1")
    result = indic_pytester.runpytest(*args, "--t2i-thresholds", "thr.yaml", "--t2i-update-thresholds")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_clgc_vs_english[[]hin_deva[]] *1.0* written", "*CLGC/en*",
                                 "hin_Deva Hindi *", "tam_Taml Tamil *"])

    monkeypatch.setenv("FAKE_SIGN", "-1")  # CLGC(English) < 0: the ratio is undefined
    # English's own gate judges English; the ratio, undefined, is no evidence against Hindi: inconclusive
    result = indic_pytester.runpytest(*args, "--t2i-thresholds", "thr.yaml")
    result.assert_outcomes(passed=2, warnings=result.parseoutcomes().get("warnings", 0))  # (pytest's own vary by order)
    assert result.stdout.str().count("T2IInconclusiveWarning: test_clgc_vs_english") == 2
    result.stdout.fnmatch_lines(["*T2IInconclusiveWarning: test_clgc_vs_english[[]hin_deva[]]: CLGC(l) / CLGC(eng_Latn) is "
                                 "undefined: CLGC(eng_Latn) = -0.9* <= 0 *; inconclusive (the gate has a bound in *)*"])
    result = indic_pytester.runpytest(*args, "--t2i-thresholds", "thr.yaml", "--t2i-inconclusive", "fail")
    result.assert_outcomes(failed=2)
    result = indic_pytester.runpytest(*args, "--t2i-thresholds", "new.yaml")  # no bound yet: a visible skip
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED [[]2[]] *CLGC(l) / CLGC(eng_Latn) is undefined*"])


# ---------------------------------------------------------------- end to end on the tiny model


@pytest.mark.slow
def test_gates_run_update_and_pass_on_the_tiny_model(indic_pytester, monkeypatch):
    # In a subprocess: an in-process run would drop torch from sys.modules afterwards, and importing it twice crashes.
    import t2i_fairness

    plugin_dir = Path(t2i_fairness.__file__).resolve().parents[1]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(plugin_dir), str(REPO)]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for name, color in (("bus.png", "red"), ("dog.png", "brown")):
        Image.new("RGB", (32, 32), color).save(indic_pytester.path / name)
    write_prompts(indic_pytester.path / "p.jsonl", TWO_BY_TWO, references={"p1": "bus.png", "p2": "dog.png"})
    indic_pytester.makepyfile(test_indic_tti=INDIC_TESTS.read_text(encoding="utf-8"))
    args = ["test_indic_tti.py", "--t2i-indic-prompts", "p.jsonl", "--t2i-images-per-prompt", "2",
            "--t2i-thresholds", "thr.yaml", "--t2i-cache-dir", "cache", "--t2i-no-progress", "-rs"]

    first = indic_pytester.runpytest_inprocess(*args, "--t2i-update-thresholds")
    gates = ["clgc", "igc", "lgc", "scwl", "dwl"]
    ids = [f"test_{g}[{lang}]" for g in gates for lang in ("eng_latn", "hin_deva")] + ["test_scal_with_english[hin_deva]"]
    first.stdout.fnmatch_lines(["*-- IndicTTI per language --*", "eng_Latn English *", "hin_Deva Hindi *",
                                "drop relative to English*", "*overall SCAL*"])
    written = (indic_pytester.path / "thr.yaml").read_text()
    assert all(gate_id in written for gate_id in ids)
    outcomes = first.parseoutcomes()
    ratio_skipped = "test_clgc_vs_english[hin_deva]" not in written
    assert outcomes.get("passed") == len(ids) + 1 + (0 if ratio_skipped else 1)  # + test_scal_matrix

    second = indic_pytester.runpytest_inprocess(*args)
    second.assert_outcomes(passed=outcomes["passed"], skipped=outcomes.get("skipped", 0))
    second.stdout.fnmatch_lines(["*images: 0 generated, 8 from cache*", "*captions:Blip2Captioner: 0 computed, 8 from cache*"])
    assert (indic_pytester.path / "t2i-artifacts" / "test_scal_matrix" / "scal_matrix.png").is_file()
    metrics_json = json.loads((indic_pytester.path / "t2i-artifacts" / "test_scal_matrix" / "indic_tti_metrics.json").read_text())
    assert set(metrics_json["scores"]) == {"eng_Latn", "hin_Deva"} and metrics_json["scores"]["hin_Deva"]["igc"] is not None
