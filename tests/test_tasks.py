"""The example task modules under studies/tasks: real data, real pretrained weights, metrics."""

from __future__ import annotations

import numpy as np
import pytest

from studies.tasks import digits, minilm
from trainer import EvalPrediction


def test_digits_split_is_fixed_stratified_and_complete():
    train, evaluation = digits.data()
    assert len(train) + len(evaluation) == 1797
    assert abs(len(evaluation) - 0.2 * 1797) < 10
    assert np.bincount(evaluation.labels.numpy()).min() >= 35  # every class is in the eval split
    again_train, again_eval = digits.data()
    assert (again_eval.labels == evaluation.labels).all() and (again_eval.pixels == evaluation.pixels).all()
    assert float(train.pixels.max()) == 1.0 and float(train.pixels.min()) == 0.0


def test_digits_model_takes_its_parameters_and_refuses_others():
    model = digits.model_init({"hidden_size": 32, "num_layers": 2, "activation": "gelu", "dropout": 0.0})
    linear = [m for m in model.net if hasattr(m, "out_features")]
    assert [m.out_features for m in linear] == [32, 32, 10]
    with pytest.raises(ValueError, match="unknown parameter"):
        digits.model_init({"hidden": 3})
    with pytest.raises(ValueError, match="activation 'swish'"):
        digits.model_init({"activation": "swish"})


def test_accuracy_metric():
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    result = digits.compute_metrics(EvalPrediction(predictions=logits, label_ids=np.array([1, 0, 0])))
    assert result == {"accuracy": pytest.approx(2 / 3)}


def test_minilm_reviews_are_balanced_deterministic_and_eval_words_are_unseen():
    reviews = minilm.generate_reviews(200, seed=0)
    assert sum(label for _, label in reviews) == 100
    assert reviews == minilm.generate_reviews(200, seed=0)
    assert any(" but " in text for text, _ in reviews) and any(" not " in text for text, _ in reviews)
    train_text = " ".join(text for text, _ in reviews)
    eval_text = " ".join(text for text, _ in minilm.generate_reviews(200, seed=1, split="eval"))
    for word in minilm.POSITIVE["eval"] + minilm.NEGATIVE["eval"]:
        assert f" {word}" not in train_text
    assert any(f" {word}" in eval_text for word in minilm.POSITIVE["eval"])


def test_minilm_ships_in_its_package():
    folder = minilm.model_dir()
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()


def test_minilm_refuses_unknown_parameters():
    with pytest.raises(ValueError, match="unknown parameter"):
        minilm.model_init({"hidden_dropot": 0.1})


@pytest.mark.slow
def test_minilm_loads_pretrained_weights_and_pads_batches(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    from safetensors.torch import load_file

    model = minilm.model_init({"hidden_dropout": 0.0, "freeze_embeddings": True})
    stored = load_file(minilm.model_dir() / "model.safetensors")
    key = next(k for k in stored if k.endswith("word_embeddings.weight"))
    assert (model.bert.embeddings.word_embeddings.weight == stored[key]).all()  # the real pretrained weights
    assert not model.bert.embeddings.word_embeddings.weight.requires_grad
    assert model.config.hidden_dropout_prob == 0.0 and model.config.num_labels == 2
    train, evaluation = minilm.data({"train_size": 8, "eval_size": 4})
    batch = minilm.collator(train[:4])
    assert batch["input_ids"].shape == batch["attention_mask"].shape and batch["labels"].tolist() == [
        row["labels"] for row in train[:4]
    ]
    output = model(**batch)
    assert output.logits.shape == (4, 2) and float(output.loss) > 0
    assert minilm.tokenizer().decode(train[0]["input_ids"], skip_special_tokens=True).endswith(".")
