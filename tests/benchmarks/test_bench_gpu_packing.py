"""bench/gpu/packing.py reads each mode's study back from its storage: how many trials ran side by side and the largest
peak a trial recorded, the figures that say whether the GPU gate packed three big trials where three fit."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import FrozenTrial, TrialState

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
from packing import Outcome, count_trials, most_at_once  # noqa: E402  (bench/gpu is not a package)

T0 = datetime(2026, 11, 29, 12, 0, 0)
GiB = 2**30


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_most_at_once_counts_overlaps_and_not_a_trial_that_starts_as_another_ends() -> None:
    assert most_at_once([]) == 0
    assert most_at_once([(at(0), at(10)), (at(1), at(5)), (at(2), at(4)), (at(6), at(9))]) == 3
    assert most_at_once([(at(0), at(5)), (at(5), at(10))]) == 1


def _trial(number: int, state: TrialState, start: float, end: float, **attrs: object) -> FrozenTrial:
    return FrozenTrial(
        number=number,
        state=state,
        value=0.5 if state == TrialState.COMPLETE else None,
        values=None,
        datetime_start=at(start),
        datetime_complete=at(end),
        params={"learning_rate": 1e-4},
        distributions={"learning_rate": FloatDistribution(1e-5, 1e-3, log=True)},
        user_attrs=attrs,
        system_attrs={},
        intermediate_values={},
        trial_id=number,
    )


def test_a_packed_study_reads_back_its_span_overlap_peak_and_requeued_attempt(tmp_path: Path) -> None:
    database = tmp_path / "study.db"
    study = optuna.create_study(study_name="packing-big-auto", storage=f"sqlite:///{database}")
    # three big trials side by side, one that ran out of memory beside them and was queued again, then its rerun
    study.add_trial(_trial(0, TrialState.COMPLETE, 0, 10, peak_gpu_memory=40 * GiB))
    study.add_trial(_trial(1, TrialState.COMPLETE, 1, 11, peak_gpu_memory=41 * GiB))
    study.add_trial(_trial(2, TrialState.COMPLETE, 2, 12, peak_gpu_memory=42.5 * GiB))
    study.add_trial(_trial(3, TrialState.FAIL, 3, 4, requeued=True))
    study.add_trial(_trial(4, TrialState.COMPLETE, 12, 20, peak_gpu_memory=39 * GiB))

    outcome = count_trials(Outcome("big", "auto"), database, "packing-big-auto")

    assert (outcome.completed, outcome.failed, outcome.requeued) == (4, 0, 1)
    assert outcome.span_s == 20.0
    assert outcome.per_hour == 4 / 20 * 3600
    assert outcome.most_at_once == 4  # the requeued attempt ran beside the three
    assert outcome.peak_gib == 42.5


def test_the_oom_report_names_an_alone_retry_that_ran_beside_another_attempt(tmp_path: Path, capsys) -> None:
    from oom import NAME, attempts, report  # noqa: PLC0415  (bench/gpu/oom.py: imported where it is exercised)

    database = tmp_path / "study.db"
    study = optuna.create_study(study_name=NAME, storage=f"sqlite:///{database}")
    hog_error = "CUDA out of memory: the trial asked for 52.65 GiB on GPU 0 (20.60 GiB free of 139.80 GiB)"
    study.add_trial(_profile_trial(0, "steady", TrialState.COMPLETE, 0, 30))
    study.add_trial(_profile_trial(1, "hog", TrialState.FAIL, 1, 3, error=hog_error))
    study.add_trial(_profile_trial(2, "steady", TrialState.COMPLETE, 1, 20))
    # the hog's retry was to run alone, yet started while trial 0 still ran
    study.add_trial(_profile_trial(3, "hog", TrialState.FAIL, 25, 28, error=hog_error, oom_retry=True))

    report(attempts(database), seconds=31.0, code=0)

    printed = capsys.readouterr().out
    assert "  #3 FAIL [alone] 25.0-28.0 s: CUDA out of memory: the trial asked for 52.65 GiB" in printed
    assert "== oom alone attempts beside another: 3+0\n" in printed
    assert "== oom hog: 2 attempt(s), last FAIL, its error one line" in printed


def test_the_oom_report_counts_an_attempt_from_its_gpu_admission_not_its_claim(
    tmp_path: Path, capsys
) -> None:
    from oom import NAME, attempts, report  # noqa: PLC0415  (bench/gpu/oom.py: imported where it is exercised)

    database = tmp_path / "study.db"
    study = optuna.create_study(study_name=NAME, storage=f"sqlite:///{database}")
    study.add_trial(_profile_trial(0, "steady", TrialState.COMPLETE, 0, 10))
    study.add_trial(_profile_trial(1, "grower", TrialState.FAIL, 0, 4))
    # claimed at 4 s, it waited at the gate until the steady trial had left the GPU
    admission = {"gpu_admitted_at": at(10.5).timestamp(), "gpu_admission": "start: no trial on this GPU"}
    study.add_trial(_profile_trial(2, "grower", TrialState.COMPLETE, 4, 30, oom_retry=True, **admission))
    # claimed at 5 s, admitted at 12 s while the alone retry ran: the gate let it in beside it
    late = {"gpu_admitted_at": at(12).timestamp(), "gpu_admission": "start: expects 40 GiB"}
    study.add_trial(_profile_trial(3, "steady", TrialState.COMPLETE, 5, 20, **late))

    report(attempts(database), seconds=31.0, code=0)

    printed = capsys.readouterr().out
    assert "  #2 COMPLETE [alone] 4.0-30.0 s (on the GPU from 10.5 s, start: no trial on this GPU)" in printed
    assert "== oom alone attempts beside another: 2+3\n" in printed


def _profile_trial(number: int, profile: str, state: TrialState, start: float, end: float, **attrs: object):
    trial = _trial(number, state, start, end, **attrs)
    trial.params = {"profile": profile}
    trial.distributions = {"profile": CategoricalDistribution(["steady", "grower", "hog"])}
    return trial


def test_trials_waiting_at_the_gate_do_not_count_as_on_the_gpu(tmp_path: Path) -> None:
    database = tmp_path / "study.db"
    study = optuna.create_study(study_name="packing-big-auto", storage=f"sqlite:///{database}")
    study.add_trial(_trial(0, TrialState.COMPLETE, 0, 10, peak_gpu_memory=40 * GiB))
    study.add_trial(_trial(1, TrialState.COMPLETE, 1, 11, peak_gpu_memory=40 * GiB))
    # claimed at 2 s beside the two, let onto the GPU at 11 s once trial 1 had left
    study.add_trial(_trial(2, TrialState.COMPLETE, 2, 20, gpu_admitted_at=at(11).timestamp()))

    outcome = count_trials(Outcome("big", "auto"), database, "packing-big-auto")

    assert outcome.most_at_once == 2
