"""The text transmuter of "Word-Level Explanations for Analyzing Bias in Text-to-Image Models".

Removing a word breaks the sentence, so the paper *replaces* it with BERT masked-LM candidates,
keeping the prompt roughly grammatical while taking the word's meaning away. Profiles: ``paper``
(``bert-base-uncased``) and ``tiny`` (a small seeded random BERT on the real bundled vocabulary).
A candidate is a whole word with a letter or digit, not a special token, not the original word
and not in ``STOP_TOKENS`` (``_filter_candidates``), taken by logit, ties by token id.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from t2i_fairness.models.base import PROFILES, check_profile
from t2i_fairness.models.configs import profile_configs
from t2i_fairness.models.sentence import (
    _check_options,
    _config_hash,
    _dtype_kwargs,
    _load_pretrained,
    _resolve_source,
    _with_commit,
)

MLM_CONFIGS: dict[str, dict[str, Any]] = profile_configs("masked_lm", PROFILES)  # model_configs/masked_lm-<profile>.json

# WordPiece splits "doctor's" / "don't" into "doctor ' s" / "don ' t": the fragments after the
# apostrophe rank high at a mask next to an apostrophe but are not words, and dropping one into a
# prompt yields nonsense ("a s doctor"). Words that are genuinely one letter ("a", "i") stay allowed.
STOP_TOKENS = frozenset({"s", "t", "d", "m", "ll", "re", "ve", "nt"})

_BRACKETED = re.compile(r"^\[.*\]$")  # [CLS], [MASK], [unused0] ...
_HAS_ALNUM = re.compile(r"[^\W_]", re.UNICODE)
_CORE = re.compile(r"^(\W*)(.*?)(\W*)$", re.UNICODE | re.DOTALL)


def _split_punct(word: str) -> tuple[str, str, str]:
    """'hospital.' -> ('', 'hospital', '.'): only the core is masked; the punctuation is put back,
    so replacing the last word keeps the full stop and the comparison with the original ignores it."""
    lead, core, trail = _CORE.match(word).groups()
    if not core:  # a punctuation-only "word": mask it whole
        return "", word, ""
    return lead, core, trail


def _filter_candidates(tokens: Sequence[str], original: str, special: set[str] | frozenset[str] = frozenset(),
                       stop: frozenset[str] = STOP_TOKENS) -> list[str]:
    """Keep the tokens (best first) that can stand in for ``original`` as a whole word, in order; the
    original is compared case-insensitively, surrounding punctuation ignored.
    """
    orig = _split_punct(original)[1].lower()
    kept, seen = [], set()
    for tok in tokens:
        low = tok.lower()
        if (tok.startswith("##") or tok in special or _BRACKETED.match(tok) or not _HAS_ALNUM.search(tok)
                or low == orig or low in stop or low in seen):
            continue
        seen.add(low)
        kept.append(tok)
    return kept


class MaskedLMReplacer:
    """Whole-word replacements from a BERT masked LM, deterministic.

    Example:
        >>> out = MaskedLMReplacer.from_profile("tiny").replacements("a respected doctor at the hospital".split(), 2, 3)
        >>> len(out), "doctor" in out
        (3, False)
    """

    OPTIONS = ("weights", "stop_tokens")

    def __init__(self, model: Any, tokenizer: Any, *, fingerprint: str, device: str = "cpu",
                 stop_tokens: Sequence[str] = tuple(STOP_TOKENS)) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.fingerprint = fingerprint
        self.device = device
        self.stop_tokens = frozenset(t.lower() for t in stop_tokens)
        if tokenizer.mask_token is None:
            raise ValueError("the tokenizer has no mask token; a masked LM tokenizer is required")
        self._special = set(tokenizer.all_special_tokens)
        self._vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))

    @classmethod
    def from_profile(cls, profile: str, device: str = "cpu", precision: str | None = None,
                     **options: Any) -> "MaskedLMReplacer":
        """Build the replacer of a profile (``tiny`` or ``paper``).

        Args:
            precision: ``auto`` (``None``; float32 everywhere), ``float32``, ``float16`` or ``bfloat16``.
            **options: ``weights`` (local directory or hub id; ``paper`` only), ``stop_tokens``
                (replaces ``STOP_TOKENS``).

        Raises:
            ValueError: unknown profile or option.
            ModelLoadError: ``paper`` weights are not available offline (saying how to get them).
        """
        check_profile(profile)
        _check_options(options, cls.OPTIONS, "MaskedLMReplacer.from_profile")
        cfg = MLM_CONFIGS[profile]
        stop = tuple(options.get("stop_tokens", STOP_TOKENS))

        import torch
        from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

        from t2i_fairness.models.precision import fingerprint_suffix, resolve, torch_dtype

        precision = resolve("masked_lm", device, precision)
        if "source" in cfg:
            source, weights_id = _resolve_source(options.get("weights", cfg["source"]))
            tokenizer = _load_pretrained(AutoTokenizer.from_pretrained, source, "masked LM tokenizer")
            model = _load_pretrained(BertForMaskedLM.from_pretrained, source, "masked LM",
                                     **_dtype_kwargs(torch.float32))
            weights_id = _with_commit(weights_id, model)
        else:
            if "weights" in options:
                raise ValueError(f"option 'weights' only applies to profile 'paper', not {profile!r}")
            tok_path, tok_id = _resolve_source(cfg["tokenizer"])
            tokenizer = AutoTokenizer.from_pretrained(tok_path)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(cfg["seed"])
                model = BertForMaskedLM(BertConfig(**cfg["bert"]))
            from t2i_fairness.base.identity import init_identity

            weights_id = f"random-seed{cfg['seed']}-{_config_hash(cfg)}@{init_identity('torch', 'transformers')}/tokenizer:{tok_id}"
        model.to(device=device, dtype=torch_dtype(precision)).eval()
        from t2i_fairness.base.identity import device_class

        fingerprint = (f"MaskedLMReplacer/{type(model).__name__}/{profile}/{weights_id}/whole-word-v1/{device_class(device)}"
                       f"{fingerprint_suffix(precision)}")
        return cls(model, tokenizer, fingerprint=fingerprint, device=device, stop_tokens=stop)

    # -- core ------------------------------------------------------------------------------------

    def _check_words(self, words: Sequence[str], indices: Sequence[int], m: int) -> list[str]:
        if isinstance(words, str):
            raise TypeError("words must be a sequence of words (e.g. prompt.split()), got a single str")
        words = list(words)
        if not words:
            raise ValueError("words is empty; expected the whitespace-tokenised prompt")
        for i in indices:
            if not isinstance(i, (int, np.integer)) or not 0 <= i < len(words):
                raise ValueError(f"index {i!r} out of range for a prompt of {len(words)} words")
        if len(set(int(i) for i in indices)) != len(indices):
            raise ValueError(f"indices must be distinct, got {list(indices)}")
        if not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"m must be a positive int, got {m!r}")
        if any(self.tokenizer.mask_token in w for w in words):
            raise ValueError(f"words must not contain the mask token {self.tokenizer.mask_token!r}")
        return words

    def _ranked(self, texts: list[str]) -> list[np.ndarray]:
        """For each text, token ids at its FIRST mask, sorted by logit (desc), ties by id (asc)."""
        import torch

        from t2i_fairness.models.precision import to_weights, weights_dtype

        enc = to_weights(dict(self.tokenizer(texts, padding=True, return_tensors="pt")),
                         weights_dtype(self.model), self.device)
        with torch.inference_mode():
            logits = self.model(**enc).logits
        is_mask = enc["input_ids"] == self.tokenizer.mask_token_id
        out = []
        for row in range(len(texts)):
            pos = int(torch.nonzero(is_mask[row])[0, 0])
            scores = logits[row, pos].float().cpu().numpy()
            # lexsort: last key is primary -> highest logit first, then lowest id.
            out.append(np.lexsort((np.arange(scores.size), -scores)))
        return out

    def _candidates(self, order: np.ndarray, original: str, need: int) -> list[str]:
        """The first ``need`` acceptable candidates of a ranked id list (walks the list in chunks)."""
        step = max(4 * need, 64)
        for stop in range(step, order.size + step, step):
            tokens = [self._vocab[i] for i in order[:stop]]
            found = _filter_candidates(tokens, original, self._special, self.stop_tokens)
            if len(found) >= need:
                break
        return found[:need]

    def _masked_text(self, words: list[str], masked: set[int]) -> str:
        parts = []
        for i, w in enumerate(words):
            if i in masked:
                lead, _, trail = _split_punct(w)
                parts.append(f"{lead}{self.tokenizer.mask_token}{trail}")
            else:
                parts.append(w)
        return " ".join(parts)

    # -- public ----------------------------------------------------------------------------------

    def replacements(self, words: Sequence[str], index: int, m: int) -> list[str]:
        """Top-``m`` whole-word candidates for ``words[index]``, original word excluded.

        The word's core becomes ONE ``[MASK]``; surrounding punctuation is kept (``"hospital."`` may
        give ``"clinic."``).

        Raises:
            ValueError: empty ``words``, ``index`` out of range, ``m < 1``.
        """
        words = self._check_words(words, [index], m)
        order = self._ranked([self._masked_text(words, {int(index)})])[0]
        lead, core, trail = _split_punct(words[index])
        return [f"{lead}{c}{trail}" for c in self._candidates(order, words[index], m)]

    def replace_set(self, words: Sequence[str], indices: Sequence[int], m: int) -> list[list[str]]:
        """Up to ``m`` prompts (as word lists) in which every word of ``indices`` is replaced.

        All words of the set are masked, then filled left to right: prompt ``j`` takes the ``j``-th best
        candidate at each position given the words already chosen, so joint replacements stay coherent
        (one batched forward per position). With one index it equals :meth:`replacements`.

        Raises:
            ValueError: empty ``words`` or ``indices``, an index out of range or repeated, ``m < 1``.
        """
        indices = [int(i) for i in indices]
        if not indices:
            raise ValueError("indices is empty; expected at least one word position to replace")
        words = self._check_words(words, indices, m)
        positions = sorted(indices)
        prompts = [list(words) for _ in range(m)]
        alive = list(range(m))
        for k, pos in enumerate(positions):
            still_masked = set(positions[k:])
            texts = [self._masked_text(prompts[j], still_masked) for j in alive]
            unique = list(dict.fromkeys(texts))  # at the first position all prompts are the same text
            ranked_unique = dict(zip(unique, self._ranked(unique)))
            ranked = [ranked_unique[t] for t in texts]
            lead, _, trail = _split_punct(words[pos])
            survivors = []
            for j, order in zip(alive, ranked):
                cands = self._candidates(order, words[pos], j + 1)
                if len(cands) > j:
                    prompts[j][pos] = f"{lead}{cands[j]}{trail}"
                    survivors.append(j)
            alive = survivors
        return [prompts[j] for j in alive]

    def __repr__(self) -> str:
        return f"MaskedLMReplacer({self.fingerprint!r})"
