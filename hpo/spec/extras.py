"""Optional packages behind a file's choices (`pip install 'hpo[extra]'`): a choice whose package is missing is refused
while the file is read, with the extra to install, before any rank or trial starts and fails on the import."""

from __future__ import annotations

import importlib.util
import sys

from hpo.spec.errors import FieldProblem

# strategy -> (module it imports, extra of pyproject.toml that installs it)
STRATEGY_PACKAGES = {"deepspeed": ("deepspeed", "deepspeed")}


def installed(module: str) -> bool:
    """Whether `import module` can work, without importing it (deepspeed's import costs seconds). trainer/report_to.py
    has the same check; importing it from here would import torch (through the trainer package) where the study file
    is only being read."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: an import known to fail
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_strategy_installed(field: str, strategy: str | None) -> None:
    """Refuse `strategy` (set at `field`) when its package is not installed."""
    if strategy not in STRATEGY_PACKAGES:
        return
    module, extra = STRATEGY_PACKAGES[strategy]
    if not installed(module):
        raise FieldProblem(
            field, f"{module} is not installed: install hpo[{extra}] (pip install 'hpo[{extra}]')"
        )
