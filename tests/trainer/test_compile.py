"""torch_compile: the model is compiled in place, so checkpoints keep the module's own parameter names."""

from __future__ import annotations

import math

import pytest
from safetensors.torch import load_file
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer


@pytest.mark.slow  # inductor compiles C++ kernels: about a minute on 2 CPU cores
def test_torch_compile_trains_and_saves_plain_parameter_names(tmp_path, monkeypatch):
    # inductor sets this variable; registering it with monkeypatch removes it again after the test
    monkeypatch.setenv("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR", "")
    monkeypatch.delenv("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR")
    args = quiet_args(tmp_path, max_steps=5, torch_compile=True, save_strategy="steps", save_steps=5)
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32))
    assert math.isfinite(trainer.train().training_loss)
    saved = load_file(tmp_path / "checkpoint-5" / "model.safetensors")
    assert sorted(saved) == sorted(make_model().state_dict())
