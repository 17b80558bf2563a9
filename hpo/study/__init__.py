"""The study manager: run a study (`hpo run`), join one from another machine (`hpo worker`), summarise it.

manager.py     run_study, run_loaded_study, join_study, the failure limit
in_process.py  `hpo run --in-process`: every trial in this process
summary.py     StudySummary, TrialSummary, best_trials
retrain.py     the run file that trains a chosen trial's parameters again (`hpo retrain`)
"""

import importlib
from typing import TYPE_CHECKING, Any

# Public names, loaded on first use: name -> the module that defines it. So `hpo status` reads a summary
# (hpo.study.summary) without the manager, whose worker imports torch for the trials it forks (3 s).
_EXPORTS = {
    "StudySummary": "hpo.study.summary",
    "TrialSummary": "hpo.study.summary",
    "best_trials": "hpo.study.summary",
    "summarize": "hpo.study.summary",
    "join_study": "hpo.study.manager",
    "run_loaded_study": "hpo.study.manager",
    "run_study": "hpo.study.manager",
    "load_existing_study": "hpo.storage.study_db",
    "open_study": "hpo.storage.study_db",
}

if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from hpo.storage.study_db import load_existing_study, open_study
    from hpo.study.manager import join_study, run_loaded_study, run_study
    from hpo.study.summary import StudySummary, TrialSummary, best_trials, summarize


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'hpo.study' has no attribute {name!r}")


__all__ = [
    "StudySummary",
    "TrialSummary",
    "best_trials",
    "join_study",
    "load_existing_study",
    "open_study",
    "run_loaded_study",
    "run_study",
    "summarize",
]
