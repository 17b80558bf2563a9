"""Task: a tiny character-level GPT (a causal transformer) on text that ships with Python itself: the help topics of
`pydoc_data.topics` (the English text `help("FOR")` prints), or the source code of a fixed list of standard-library
modules (`corpus: source`), numpy's docstrings (`corpus: numpy_docs`), or the Unicode character names Python's
`unicodedata` knows (`corpus: unicode_names`), torch's docstrings (`corpus: torch_docs`) or scikit-learn's
(`corpus: sklearn_docs`). The small language model
of `bench/search/`.

    task: {model_init: studies.tasks.charlm:model_init, data: studies.tasks.charlm:data}
    model: {corpus: help}            # or source, numpy_docs, unicode_names, torch_docs, sklearn_docs
    metric: loss                     # eval_loss: cross-entropy per character, minimised

Model parameters: n_embd, n_layer, n_head, dropout (and `corpus`, from the file). The text is the topics joined in
sorted order (or the modules' files in the listed order, or numpy's public names' docstrings in sorted order), cut to ASCII (others become '?'); the last tenth is the eval
text. Training samples are `TRAIN_WINDOWS` fixed windows of
`BLOCK + 1` characters drawn once with a fixed seed, the eval set `EVAL_WINDOWS` windows of the eval text, so every
trial sees the same data.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

BLOCK = 32  # characters of context
TRAIN_WINDOWS = 8192
EVAL_WINDOWS = 256
VOCAB = 96  # printable ASCII (32..126) and newline; anything else is '?'
MODEL_KEYS = {"n_embd", "n_layer", "n_head", "dropout", "corpus"}
# Pure-Python standard-library modules, about 440 KB of source together (the help topics are about 460 KB of text)
SOURCE_MODULES = (
    "argparse",
    "textwrap",
    "difflib",
    "fractions",
    "calendar",
    "shlex",
    "heapq",
    "bisect",
    "string",
    "csv",
    "configparser",
    "dataclasses",
)


def _help_text() -> str:
    from pydoc_data.topics import topics

    return "\n".join(topics[key] for key in sorted(topics))


def _source_text() -> str:
    return "\n".join(Path(importlib.util.find_spec(name).origin).read_text() for name in SOURCE_MODULES)


def _numpy_docs_text() -> str:
    """numpy's docstrings (the lock pins its version): technical English with examples, unlike the help topics' prose
    or the standard library's code. Sorted by name, so the text is the same on every machine with that numpy."""
    docs = (inspect.getdoc(getattr(np, name)) for name in sorted(dir(np)) if not name.startswith("_"))
    return "\n".join(doc for doc in docs if doc)


# The blocks whose names are a stem and a number (ideographs, syllables, hieroglyphs): thousands of near-identical lines
# that would make most of the text.
NUMBERED_NAMES = (
    "CJK UNIFIED",
    "CJK COMPATIBILITY IDEOGRAPH",
    "TANGUT",
    "HANGUL SYLLABLE",
    "KHITAN",
    "NUSHU",
    "EGYPTIAN HIEROGLYPH",
)


def _unicode_names_text() -> str:
    """One line per named code point, "0041 LATIN CAPITAL LETTER A", in code point order: upper-case, regular and
    repetitive, unlike the other corpora; the eval tenth is the last planes' (symbols, scripts added late), so what is
    learnt on the first must carry over. Fixed by Python's Unicode version (unicodedata.unidata_version)."""
    names = ((code, unicodedata.name(chr(code), "")) for code in range(sys.maxunicode + 1))
    return "\n".join(
        f"{code:04X} {name}" for code, name in names if name and not name.startswith(NUMBERED_NAMES)
    )


def _torch_docs_text() -> str:
    """torch's docstrings (the lock pins its version): tensor operations with signatures, reStructuredText markup and
    LaTeX, longer entries than numpy's. Sorted by name, so the text is the same on every machine with that torch."""
    docs = (inspect.getdoc(getattr(torch, name)) for name in sorted(dir(torch)) if not name.startswith("_"))
    return "\n".join(doc for doc in docs if doc)


def _sklearn_docs_text() -> str:
    """scikit-learn's docstrings (the lock pins its version): its estimators' and functions' parameters, attributes and
    examples, longer and more uniform entries than numpy's. Sorted by module and name, so the text is the same on every
    machine with that scikit-learn."""
    import sklearn.utils.discovery  # noqa: PLC0415 - imports every sklearn module: only for this corpus

    found = sklearn.utils.discovery.all_estimators() + sklearn.utils.discovery.all_functions()
    docs = (
        inspect.getdoc(thing) for _, thing in sorted(found, key=lambda item: (item[1].__module__, item[0]))
    )
    return "\n".join(doc for doc in docs if doc)


CORPORA = {
    "help": _help_text,
    "source": _source_text,
    "numpy_docs": _numpy_docs_text,
    "unicode_names": _unicode_names_text,
    "torch_docs": _torch_docs_text,
    "sklearn_docs": _sklearn_docs_text,
}


@lru_cache(maxsize=2)
def _text_codes(corpus: str = "help") -> np.ndarray:
    if corpus not in CORPORA:
        raise ValueError(f"charlm data: unknown corpus {corpus!r}; one of {sorted(CORPORA)}")
    text = CORPORA[corpus]()
    codes = np.frombuffer(text.encode("ascii", errors="replace"), dtype=np.uint8).astype(np.int64)
    codes = np.where(codes == 10, 95, codes - 32)  # newline -> 95, printable -> 0..94
    return np.where((codes < 0) | (codes > 95), ord("?") - 32, codes)


class Windows(Dataset):
    def __init__(self, codes: np.ndarray, count: int, seed: int) -> None:
        starts = np.random.default_rng(seed).integers(0, len(codes) - BLOCK - 1, size=count)
        self.windows = torch.tensor(np.stack([codes[s : s + BLOCK + 1] for s in starts]), dtype=torch.long)

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        window = self.windows[index]
        return {"tokens": window[:-1], "labels": window[1:]}


class CharGPT(nn.Module):
    """Token and position embeddings, `n_layer` pre-norm transformer blocks under a causal mask, a linear head."""

    def __init__(self, n_embd: int, n_layer: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, n_embd)
        self.positions = nn.Parameter(torch.zeros(BLOCK, n_embd))
        layer = nn.TransformerEncoderLayer(
            n_embd, n_head, 4 * n_embd, dropout, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(BLOCK), persistent=False)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        length = tokens.shape[1]
        hidden = self.tokens(tokens) + self.positions[:length]
        hidden = self.blocks(hidden, mask=self.mask[:length, :length], is_causal=True)
        logits = self.head(self.norm(hidden))
        output = {"logits": logits}
        if labels is not None:
            output["loss"] = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
        return output


def model_init(params: dict[str, Any] | None = None) -> CharGPT:
    params = dict(params or {})
    unknown = sorted(set(params) - MODEL_KEYS)
    if unknown:
        raise ValueError(f"charlm model: unknown parameter(s) {unknown}; it takes {sorted(MODEL_KEYS)}")
    n_embd, n_head = int(params.get("n_embd", 64)), int(params.get("n_head", 2))
    if n_embd % n_head:
        raise ValueError(f"charlm model: n_embd {n_embd} is not a multiple of n_head {n_head}")
    return CharGPT(n_embd, int(params.get("n_layer", 2)), n_head, float(params.get("dropout", 0.0)))


def data(params: dict[str, Any] | None = None) -> tuple[Windows, Windows]:
    """(train, eval) windows of the file's `corpus` (help topics unless it says source)."""
    codes = _text_codes(str((params or {}).get("corpus", "help")))
    cut = len(codes) * 9 // 10
    return Windows(codes[:cut], TRAIN_WINDOWS, seed=0), Windows(codes[cut:], EVAL_WINDOWS, seed=1)
