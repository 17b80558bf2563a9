"""Trainer test setup.

torch sets TORCHINDUCTOR_CACHE_DIR when torch._dynamo is first imported, which its optimizers do on their first step.
Importing it here, before any test starts, keeps the project's leaked-environment check about the tests themselves.
"""

import os

import pytest
import torch
import torch._dynamo  # noqa: F401

from trainer.seed import CUDA_DETERMINISM_ENVIRONMENT

torch.set_num_threads(1)


@pytest.fixture
def restores_determinism():
    """For a test that turns full determinism on: it changes process-wide settings on purpose (torch's deterministic
    switch, cuDNN's flags and, where CUDA is there, CUDA_DETERMINISM_ENVIRONMENT); put them back afterwards."""
    environment = {name: os.environ.get(name) for name in CUDA_DETERMINISM_ENVIRONMENT}
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    deterministic = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
