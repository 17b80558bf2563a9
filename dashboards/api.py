"""The JSON API behind the pages (and the data embedded in the static report).

Every endpoint is a GET with query parameters, so study names and run ids (which may hold `/` or any character) need no
escaping in paths. A study's trials can be asked for incrementally: `from=K` returns trials numbered K and above, and
`refresh=3,8` adds those numbers (the unfinished trials the page already shows), which is how a live page with 10,000
trials polls without re-reading them all.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from dashboards.importance import ImportanceCache, compute_importance
from dashboards.jsonenc import EncodedList, encode_item
from dashboards.optuna_source import OptunaSource
from dashboards.population import population
from dashboards.serialize import param_specs, study_summary, trial_to_json
from dashboards.store_reader import StoreReader
from hpo.storage.urls import redact
from hpo.tracking.store.schema import parse_run_id


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def int_arg(query: dict[str, str], name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f"query parameter {name!r} must be an integer, got {raw!r}") from None


@dataclass
class DashboardApi:
    source: OptunaSource | None
    store: StoreReader
    study_file: str | None = None
    importance: ImportanceCache | None = None
    # metric names by study, from the study file (used when the study did not record them itself)
    objectives: dict[str, list[str]] | None = None

    def __post_init__(self) -> None:
        self.importance = self.importance or ImportanceCache()
        self._finished_json: dict[tuple[str, int], str] = {}
        self.routes = {
            "/api/health": self.health,
            "/api/studies": self.studies,
            "/api/study": self.study,
            "/api/importance": self.param_importance,
            "/api/runs": self.runs,
            "/api/run": self.run,
        }
        if self.source is not None:
            # `hpo dashboard` warms the source up at start; encoding the trials then too spares the first visitor
            # of a 10,000-trial study a second of JSON encoding.
            self.source.warm_up_hooks.append(self.encode_study)

    def encode_study(self, name: str) -> None:
        """Make (and cache) the JSON of a study's finished trials, as the study page's first request will."""
        self.study({"name": name})

    def warm_up(self) -> None:
        """What `hpo dashboard` runs in the background at start: every study loaded and its trials encoded."""
        if self.source is not None:
            self.source.warm_up()

    def handle(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        endpoint = self.routes.get(path)
        if endpoint is None:
            raise ApiError(404, f"no API endpoint {path}")
        return endpoint(query)

    def health(self, query: dict[str, str]) -> dict[str, Any]:
        return {"ok": True}

    def studies(self, query: dict[str, str]) -> dict[str, Any]:
        summaries = []
        if self.source is not None:
            for name in self.source.study_names():
                study = self.source.study(name)
                if study is not None:
                    summaries.append(self._summary(study, self.source.trials(name)))
        return {
            "storage": redact(self.source.url) if self.source else None,
            "study_file": self.study_file,
            "studies": summaries,
        }

    def _study(self, name: str | None):
        if not name:
            raise ApiError(400, "query parameter 'name' is required")
        study = self.source.study(name) if self.source else None
        if study is None:
            raise ApiError(404, f"no study named {name!r} in this storage")
        return study

    def study(self, query: dict[str, str]) -> dict[str, Any]:
        study = self._study(query.get("name"))
        trials = self.source.trials(study.study_name)
        first = int_arg(query, "from", 0)
        refresh = {int(n) for n in query.get("refresh", "").split(",") if n.strip().isdigit()}
        chosen = [trial for trial in trials if trial.number >= first or trial.number in refresh]
        summary = self._summary(study, trials)
        best_numbers = summary["best"]["numbers"]
        # One best trial is what `hpo export` picks by default; on a Pareto front each needs --trial.
        name_trial = len(best_numbers) > 1
        return {
            "summary": summary,
            "params": param_specs(trials),
            "from": first,
            "trials": EncodedList(self._trial_text(study.study_name, trial) for trial in chosen),
            "export": {str(number): self.export_command(number, name_trial) for number in best_numbers},
            "population": population(
                study, trials
            ),  # PBT studies only: members over time, the winning schedule
        }

    def _summary(self, study, trials: list[FrozenTrial]) -> dict[str, Any]:
        return study_summary(study, trials, (self.objectives or {}).get(study.study_name))

    def _trial_text(self, study_name: str, trial: FrozenTrial) -> str:
        """A trial's JSON text; cached once the trial is finished (it cannot change any more)."""
        key = (study_name, trial.number)
        text = self._finished_json.get(key)
        if text is None:
            text = encode_item(trial_to_json(trial))
            if trial.state.is_finished():
                self._finished_json[key] = text
        return text

    def export_command(self, number: int, name_trial: bool) -> str:
        """The `hpo export` command line that ships trial `number`."""
        study_file = shlex.quote(self.study_file) if self.study_file else "<study.yaml>"
        storage = (
            "" if self.study_file or not self.source else f" --storage {shlex.quote(redact(self.source.url))}"
        )
        trial = f" --trial {number}" if name_trial else ""
        return f"hpo export {study_file}{storage}{trial} --out export-trial-{number}"

    def param_importance(self, query: dict[str, str]) -> dict[str, Any]:
        study = self._study(query.get("study"))
        objective = int_arg(query, "objective", 0)
        if not 0 <= objective < len(study.directions):
            raise ApiError(400, f"objective {objective} out of range: the study has {len(study.directions)}")
        trials = self.source.trials(study.study_name)
        n_complete = sum(trial.state == TrialState.COMPLETE for trial in trials)
        result = self.importance.get(
            (study.study_name, objective), n_complete, lambda: compute_importance(study, trials, objective)
        )
        return {"study": study.study_name, "objective": objective, **result}

    def runs(self, query: dict[str, str]) -> dict[str, Any]:
        kind = query.get("kind") or None
        return {"runs": self.store.runs(kind)}

    def run(self, query: dict[str, str]) -> dict[str, Any]:
        """A trial or a single run: its Optuna trial (if any) and everything the experiment store holds for it."""
        run_id = query.get("id")
        if not run_id:
            raise ApiError(400, "query parameter 'id' is required")
        trial_json, study_info = None, None
        trial_ref = parse_run_id(run_id)
        if trial_ref.get("kind") == "trial" and self.source is not None:
            study_name, number = trial_ref["study_name"], trial_ref["trial_number"]
            study = self.source.study(study_name)
            trials = self.source.trials(study_name) if study is not None else []
            match = [trial for trial in trials if trial.number == number]
            if match:
                trial_json = trial_to_json(match[0], full=True)
                summary = self._summary(study, trials)
                study_info = {key: summary[key] for key in ("name", "directions", "objectives", "best")}
                study_info["export"] = self.export_command(number, name_trial=True)
        row = self.store.run(run_id)
        if row is None and trial_json is None:
            raise ApiError(404, f"no run or trial with id {run_id!r}")
        return {
            "id": run_id,
            "run": row,
            "trial": trial_json,
            "study": study_info,
            "metrics": self.store.metrics(run_id),
            "events": self.store.events(run_id),
            "artifacts": self.store.artifacts(run_id),
        }
