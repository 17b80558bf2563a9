"""A running trial's heartbeat, written by its worker while the trial process trains, riding out a storage outage.

A PostgreSQL restart or a dropped connection makes a beat fail. Raised, that error would end the worker's supervision
of a trial that trains on (tests/chaos/campaign.py seed 498873: the worker then waited at exit for its warm trial process, and
the study never ended). So a beat that cannot be written is skipped, said once, and the next one tries again: the trial
process needs no database to train. An outage longer than the grace period makes the trial look stale, and other
workers queue it again as for a dead worker; the worker's own result for it is then refused, as for any stale trial.
"""

from __future__ import annotations

import logging

import optuna

from hpo.storage.database import is_storage_outage, root_cause_line
from hpo.storage.outage import no_waiting
from hpo.storage.study_db import record_heartbeat

logger = logging.getLogger(__name__)


class TrialHeartbeat:
    """`beat()` records the trial's heartbeat; a storage outage is logged once and skipped, any other error raised."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial) -> None:
        self.study, self.trial = study, trial
        self.missed = 0  # beats in a row the storage did not take

    def __call__(self) -> None:
        try:
            with no_waiting():
                record_heartbeat(self.study, self.trial)
        except Exception as error:
            if not is_storage_outage(error):
                raise
            if self.missed == 0:
                logger.warning(
                    "trial %d: its heartbeat could not be recorded (%s); it trains on, and the next beat tries again",
                    self.trial.number,
                    root_cause_line(error),
                )
            self.missed += 1
            return
        if self.missed:
            logger.warning(
                "trial %d: heartbeat recorded again after %d missed", self.trial.number, self.missed
            )
        self.missed = 0
