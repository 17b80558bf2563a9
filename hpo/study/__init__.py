"""The study manager: run a study (`hpo run`), join one from another machine (`hpo worker`), summarise it.

manager.py     run_study, run_loaded_study, join_study, the failure limit
in_process.py  `hpo run --in-process`: every trial in this process
summary.py     StudySummary, TrialSummary, best_trials
retrain.py     the run file that trains a chosen trial's parameters again (`hpo retrain`)
"""

from hpo.storage.study_db import load_existing_study, open_study
from hpo.study.manager import join_study, run_loaded_study, run_study
from hpo.study.summary import StudySummary, TrialSummary, best_trials, summarize

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
