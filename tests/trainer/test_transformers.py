"""A transformers model trains unchanged (its loss comes from the output's `.loss`) and saves in its own layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_glue import Parity, tiny_bert_config
from trainer_tasks import quiet_args

from trainer import Trainer

transformers = pytest.importorskip("transformers")


def tiny_bert():
    torch.manual_seed(0)
    return transformers.BertForSequenceClassification(tiny_bert_config())


def test_a_transformers_model_trains_evaluates_and_saves_pretrained(tmp_path, monkeypatch):
    # transformers sets this variable; registering it with monkeypatch removes it again after the test
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK")

    def accuracy(prediction):
        return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    args = quiet_args(
        tmp_path,
        num_train_epochs=15,
        learning_rate=1e-2,
        per_device_train_batch_size=16,
        eval_strategy="epoch",
        logging_strategy="epoch",
    )
    trainer = Trainer(
        model=tiny_bert(), args=args, train_dataset=Parity(), eval_dataset=Parity(), compute_metrics=accuracy
    )
    trainer.train()
    metrics = trainer.evaluate()
    assert metrics["eval_accuracy"] >= 0.9
    assert trainer.state.num_input_tokens_seen == 15 * 48 * 8

    folder = trainer.save_model(tmp_path / "export")
    assert (folder / "config.json").exists() and (folder / "model.safetensors").exists()
    reloaded = transformers.BertForSequenceClassification.from_pretrained(str(folder)).eval()
    batch = Parity()[0:4]
    with torch.no_grad():  # both models on the CPU: the same kernels, whatever device trained the model
        expected = (
            trainer.model.cpu()
            .eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            .logits
        )
        got = reloaded(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-6)
