"""Trainer test setup.

torch sets TORCHINDUCTOR_CACHE_DIR when torch._dynamo is first imported, which its optimizers do on their first step.
Importing it here, before any test starts, keeps the project's leaked-environment check about the tests themselves.
"""

import torch
import torch._dynamo  # noqa: F401

torch.set_num_threads(1)
