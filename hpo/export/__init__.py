"""`hpo export`: ship the best model of a study (or of a run) as a folder that reloads with one call.

select.py    which trial and checkpoint: the best, `--trial N`, or a Pareto pick by `--metric`
write.py     `export_study`, `export_run`: write the folder atomically, reload it, evaluate it
weights.py   consolidated weights of any strategy's checkpoint (FSDP shards stitched together)
card.py      the README model card;  load.py: `hpo.load_exported(folder)`
adapters.py  adapter (peft:) exports: peft's layout over a base reference, --merge, --top K named adapters
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ExportResult", "export_run", "export_study", "export_top", "load_exported"]

# Loaded on first use: `hpo.load_exported` needs only load.py, not the study database and tracking code write.py uses.
_LAZY = {
    "ExportResult": "hpo.export.write",
    "export_run": "hpo.export.write",
    "export_study": "hpo.export.write",
    "export_top": "hpo.export.write",
    "load_exported": "hpo.export.load",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hpo.export' has no attribute {name!r}")
