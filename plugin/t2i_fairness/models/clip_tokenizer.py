"""OpenAI CLIP's BPE tokenizer built offline from the vocabulary file open_clip ships (transformers 5
ignores ``vocab_file``/``merges_file``, so it is built from a vocab dict and a merges list).
"""

from __future__ import annotations

import functools
import gzip
import os

CONTEXT_LENGTH = 77
BOS_ID = 49406
EOS_ID = 49407
VOCAB_SIZE = 49408


def _bytes_to_unicode() -> list[str]:
    """GPT-2's reversible byte -> printable character table, in CLIP's order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


@functools.lru_cache(maxsize=1)
def offline_clip_tokenizer():
    """A ``transformers.CLIPTokenizer`` with the real OpenAI vocabulary, built with no network.

    Example:
        >>> offline_clip_tokenizer()("a photo of a cat")["input_ids"]
        [49406, 320, 1125, 539, 320, 2368, 49407]
    """
    import open_clip
    from transformers import CLIPTokenizer

    path = os.path.join(os.path.dirname(open_clip.__file__), "bpe_simple_vocab_16e6.txt.gz")
    lines = gzip.open(path).read().decode("utf-8").split("\n")
    merges = [tuple(line.split()) for line in lines[1 : 49152 - 256 - 2 + 1]]
    chars = _bytes_to_unicode()
    vocab = chars + [c + "</w>" for c in chars] + ["".join(m) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]
    return CLIPTokenizer(vocab={t: i for i, t in enumerate(vocab)}, merges=merges, model_max_length=CONTEXT_LENGTH)
