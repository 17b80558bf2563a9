"""The study file of `hpo run`: a run file plus `study:`, `search_space:` and `resources:`.

Everything that can be checked without training is checked here, so a bad study is refused before any trial starts:
unknown keys, ranges, `when:` conditions that name unknown parameters or impossible values, enqueued trials outside the
space, sampler and pruner options (the Optuna objects are constructed), every TrainingArguments value a sampled parameter
can take, and combinations Optuna cannot honour (a pruner with several objectives or with evaluation off).
"""

from __future__ import annotations

import difflib
import warnings
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from hpo.spec import adapters
from hpo.spec.base import Section
from hpo.spec.callbacks import CallbackSpec, build_callbacks, check_early_stopping
from hpo.spec.errors import FieldProblem, SpecError, join_path, problems_from_validation_error
from hpo.spec.extras import check_strategy_installed
from hpo.spec.launcher import LauncherSpec
from hpo.spec.names import check_plain_name
from hpo.spec.optuna_parts import PrunerSpec, SamplerSpec
from hpo.spec.pbt import PbtSchedulerSpec, check_pbt
from hpo.spec.reporting import check_study_report_to
from hpo.spec.run import check_training
from hpo.spec.scheduler import STARTUP_TRIALS, SchedulerSpec
from hpo.spec.search_space import ParamSpec
from hpo.spec.sections import ExportSpec, KeepCheckpointsSpec, ResourcesSpec, StorageSpec, TrackingSpec
from hpo.spec.task import Task, TaskSpec
from hpo.spec.training import (
    build_training_arguments,
    check_training_keys,
    read_strategies,
    training_field_names,
)

Direction = Literal["minimize", "maximize"]
STORAGE_BACKENDS = ("sqlite", "postgresql", "mysql")


def metric_key(name: str) -> str:
    """`accuracy` and `eval_accuracy` both name the key `eval_accuracy` of evaluate()'s result."""
    return name if name.startswith("eval_") else f"eval_{name}"


def default_direction(metric: str) -> Direction:
    """As `greater_is_better` in TrainingArguments: losses are minimised, every other metric maximised."""
    return "minimize" if metric.endswith("loss") else "maximize"


def check_storage_url(url: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        raise ValueError(
            f"{url!r} is not a database URL; use e.g. sqlite:///runs/study.db or postgresql://user@host/db"
        ) from None
    if backend not in STORAGE_BACKENDS:
        raise ValueError(
            f"unsupported database {backend!r} in {url!r}; use one of {', '.join(STORAGE_BACKENDS)}"
        )
    return url


class StudySection(Section):
    name: str | None = None
    output_dir: str | None = None
    storage: str | None = None
    direction: Direction | None = None
    directions: list[Direction] | None = None
    metric: str | None = None
    metrics: list[str] | None = None
    objective: Literal["best", "last"] = "best"
    n_trials: int | None = Field(None, ge=1)
    timeout: float | None = Field(None, gt=0)
    sampler: SamplerSpec = SamplerSpec()
    pruner: PrunerSpec | None = None  # default: stop-type ASHA rungs when it evaluates, one objective
    # Pauses trials and continues some (ASHA promotions, PBT members); excludes a pruner. `type:` picks the kind.
    scheduler: SchedulerSpec | PbtSchedulerSpec | None = None
    enqueue: list[dict[str, Any]] = []
    max_failures: int | None = Field(None, ge=1)
    keep_checkpoints: KeepCheckpointsSpec = KeepCheckpointsSpec()

    @field_validator("scheduler", mode="before")
    @classmethod
    def _scheduler_kind(cls, value: Any) -> Any:
        """`type: pbt` is population-based training, any other ASHA; built here so an error names the field
        (study.scheduler.population), not the union member pydantic tried."""
        if not isinstance(value, dict):
            return value
        model = PbtSchedulerSpec if value.get("type") == "pbt" else SchedulerSpec
        try:
            return model.model_validate(value)
        except ValidationError as error:
            path, message = problems_from_validation_error(error, model)[0]
            raise FieldProblem(path, message) from None

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        return None if value is None else check_plain_name(value, output_field="study.output_dir")

    @field_validator("storage")
    @classmethod
    def _storage_url(cls, value: str | None) -> str | None:
        return None if value is None else check_storage_url(value)

    @model_validator(mode="after")
    def _objectives(self) -> StudySection:
        """Fill both forms: `metrics`/`directions` always, `metric`/`direction` for a single objective."""
        if self.metric is not None and self.metrics is not None:
            raise FieldProblem("metrics", "give metric (one objective) or metrics (several), not both")
        if self.direction is not None and self.directions is not None:
            raise FieldProblem(
                "directions", "give direction (one objective) or directions (several), not both"
            )
        metrics = [metric_key(m) for m in (self.metrics or [self.metric or "eval_loss"])]
        if not metrics:
            raise FieldProblem(
                "metrics", "list at least one metric, e.g. metrics: [accuracy, num_parameters]"
            )
        if len(set(metrics)) != len(metrics):
            raise FieldProblem("metrics", f"names a metric twice: {metrics}")
        if self.directions is not None:
            directions = list(self.directions)
        elif self.direction is not None and len(metrics) == 1:
            directions = [self.direction]
        elif self.direction is not None:
            raise FieldProblem(
                "direction", f"{len(metrics)} metrics need directions: [...] with one entry each"
            )
        else:
            directions = [default_direction(m) for m in metrics]
        if len(directions) != len(metrics):
            raise FieldProblem(
                "directions", f"has {len(directions)} entries for {len(metrics)} metrics; give one per metric"
            )
        self.metrics, self.directions = metrics, directions
        if len(metrics) == 1:
            self.metric, self.direction = metrics[0], directions[0]
        return self

    @property
    def is_multi_objective(self) -> bool:
        return len(self.metrics or []) > 1


class StudySpec(Section):
    moved_fields: ClassVar[dict[str, str]] = {
        "name": "in a study file it is study.name",
        "output_dir": "in a study file it is study.output_dir",
        "storage": "in a study file it is study.storage",
        "n_trials": "in a study file it is study.n_trials",
        "sampler": "in a study file it is study.sampler",
        "pruner": "in a study file it is study.pruner",
    }

    study: StudySection
    task: TaskSpec
    model: dict[str, Any] = {}
    training: dict[str, Any] = {}
    search_space: dict[str, ParamSpec] = {}
    resources: ResourcesSpec = ResourcesSpec()
    # `storage:` in the file; `storage` here is the URL (study.storage, or the default SQLite file).
    storage_options: StorageSpec = Field(StorageSpec(), alias="storage")
    launcher: LauncherSpec = LauncherSpec()  # where `hpo run` starts the workers (hpo.spec.launcher)
    callbacks: list[CallbackSpec] = []
    tracking: TrackingSpec = TrackingSpec()
    export: ExportSpec = ExportSpec()
    peft: dict[str, Any] | None = None  # train an adapter: {method: lora, r: 8, ...} (hpo.spec.adapters)

    _source: str | None = PrivateAttr(default=None)

    @field_validator("storage_options", mode="before")
    @classmethod
    def _storage_section(cls, value: Any) -> Any:
        if isinstance(value, str):  # a URL where the section is: say where the URL goes
            raise ValueError(
                f"is a section (outage_timeout); the storage URL {value!r} goes in study.storage"
            )
        return value

    @field_validator("training")
    @classmethod
    def _training_keys(cls, training: dict[str, Any]) -> dict[str, Any]:
        check_training_keys(training)  # here, so a misspelt key is reported beside other field problems
        return read_strategies(training)

    @model_validator(mode="after")
    def _check(self) -> StudySpec:
        adapters.check_section(self.peft)
        self._resolve_targets()
        self._check_peft_params()
        self._check_scheduler()
        _check_conditions(self.search_space)
        self._check_training()
        self._check_strategy()
        # A study with one objective watches it (hpo.trial.run sets metric_for_best_model); several need the file's.
        has_metric = not self.study.is_multi_objective or bool(self.training.get("metric_for_best_model"))
        check_early_stopping(self.callbacks, evaluates=self.evaluation_always_on(), has_metric=has_metric)
        self._choose_pruner()
        self._check_sampler()
        _check_enqueued(self.study.enqueue, self.search_space)
        return self

    # ---- validation steps -------------------------------------------------------------------------------------
    def _resolve_targets(self) -> None:
        fields = training_field_names()
        peft_options = adapters.option_names(adapters.method_of(self.peft)) if self.peft else ()
        for name, param in self.search_space.items():
            if param.target is None:
                param.target = "training" if name in fields else "peft" if name in peft_options else "model"
            elif param.target == "peft" and name not in peft_options:
                if not self.peft:
                    raise FieldProblem(
                        f"search_space.{name}.target", "peft needs a peft: section (its method)"
                    )
                adapters.check_options(adapters.method_of(self.peft), {name: None}, where="search_space")
            elif param.target == "training" and name not in fields:
                close = difflib.get_close_matches(name, fields, n=1)
                hint = f"did you mean {close[0]}?" if close else "use target: model"
                raise FieldProblem(
                    f"search_space.{name}.target", f"{name!r} is not a TrainingArguments field ({hint})"
                )
            if param.target == "training" and name == "output_dir":
                raise FieldProblem(
                    f"search_space.{name}", "each trial's output_dir is set by the study; remove it"
                )

    def _check_training(self) -> None:
        check_study_report_to(check_training(self.training, prefix="training"))
        # Each value a training parameter can take must make valid arguments with the file's defaults.
        for name, param in self.training_params().items():
            for value in param.extremes():
                try:
                    build_training_arguments(self.training, "unused-output-dir", **{name: value})
                except FieldProblem as problem:
                    raise FieldProblem(
                        f"search_space.{name}",
                        f"the value {value!r} makes the training arguments invalid: "
                        f"{join_path('training', problem.field)}: {problem.message}",
                    ) from problem

    def _check_peft_params(self) -> None:
        """Each value an adapter parameter can take must make a config peft accepts, with the section's options."""
        for name, param in self.search_space.items():
            if param.target != "peft":
                continue
            for value in param.extremes():
                try:
                    adapters.build_config(self.peft or {}, {name: value})
                except FieldProblem as problem:
                    raise FieldProblem(
                        f"search_space.{name}",
                        f"the value {value!r} makes the peft config invalid: {problem.message}",
                    ) from problem
        if self.peft:
            multi_rank = self.resources.strategy if self.resources.ranks > 1 else None
            adapters.check_strategy(self.training, multi_rank)

    def _check_strategy(self) -> None:
        """`training.strategy` and `resources.strategy` name how a multi-rank trial runs; they must agree."""
        given = str(self.training.get("strategy", "auto"))
        ranks = self.resources.ranks
        if ranks > 1 and given == "single":
            raise FieldProblem(
                "training.strategy",
                f"single runs one rank, but each trial runs {ranks} ranks (resources); remove it (resources.strategy "
                "decides) or set it to ddp, fsdp or deepspeed",
            )
        if given not in ("auto", "single") and "strategy" in self.resources.model_fields_set:
            if given != self.resources.strategy:
                raise FieldProblem(
                    "resources.strategy",
                    f"is {self.resources.strategy} but training.strategy is {given}; give one of them",
                )
        configured = configured_strategy(self.training)
        self._check_installed(given, configured)
        if (
            configured
            and "strategy" in self.resources.model_fields_set
            and self.resources.strategy != configured
        ):
            key = "deepspeed" if configured == "deepspeed" else "fsdp_config"
            raise FieldProblem(
                "resources.strategy",
                f"is {self.resources.strategy} but training.{key} configures {configured}; set resources.strategy: "
                f"{configured}, or remove training.{key}",
            )

    def _check_installed(self, given: str, configured: str | None) -> None:
        """The strategy trials would use must be importable, else every rank of every trial fails on the import."""
        if given not in ("auto", "single"):
            check_strategy_installed("training.strategy", given)
        elif configured is not None:
            check_strategy_installed(
                f"training.{configured if configured == 'deepspeed' else 'fsdp_config'}", configured
            )
        if given == "auto" and ("strategy" in self.resources.model_fields_set or self.resources.ranks > 1):
            check_strategy_installed("resources.strategy", self.resources.strategy)

    def trial_strategy(self) -> str | None:
        """The strategy a multi-rank trial sets in its arguments, or None when `training.strategy` decides."""
        given = str(self.training.get("strategy", "auto"))
        if given != "auto":
            return None
        if configured_strategy(self.training) and "strategy" not in self.resources.model_fields_set:
            return None  # auto picks deepspeed or fsdp from their config, as in `hpo train`
        return self.resources.strategy

    def _check_scheduler(self) -> None:
        scheduler = self.study.scheduler
        if scheduler is None:
            return
        if self.study.pruner is not None and self.study.pruner.enabled:
            raise FieldProblem(
                "study.pruner",
                f"the {scheduler.type} scheduler already decides which trials go on; remove study.pruner (or "
                "study.scheduler)",
            )
        if self.study.is_multi_objective:
            raise FieldProblem(
                "study.scheduler",
                "ranks trials by one objective, but the study has several; optimise one metric or remove it",
            )
        self.study.pruner = PrunerSpec(type="none")
        if scheduler.type == "asha":
            self.training = scheduler.settle(self.training, evaluates=self.evaluation_always_on())
        else:
            self.training = scheduler.settle(self.training)
        if scheduler.type == "pbt":
            check_pbt(self)

    def _choose_pruner(self) -> None:
        evaluates = self.evaluation_always_on()
        if self.study.pruner is None:  # neither a pruner nor a scheduler in the file
            self.study.pruner = PrunerSpec(type="none")
            if not evaluates or self.study.is_multi_objective:
                return
            if not self._stop_at_rungs_by_default():
                self.study.pruner = PrunerSpec(type="median")
            return
        if not self.study.pruner.enabled:
            return
        if self.study.is_multi_objective:
            raise FieldProblem(
                "study.pruner",
                f"Optuna cannot prune a study with several objectives ({', '.join(self.study.metrics or [])}); "
                "remove the pruner (or set pruner: {type: none}), or optimise one metric",
            )
        if not evaluates:
            raise FieldProblem(
                "study.pruner",
                "pruning needs evaluations during training, but evaluation can be off (training.eval_strategy is "
                "'no' by default); set training.eval_strategy: epoch (or steps with eval_steps), or pruner: {type: none}",
            )

    def _stop_at_rungs_by_default(self) -> bool:
        """A study that evaluates and names no pruner or scheduler gets what `scheduler: {type: asha}` runs: stop-type
        rungs from the first evaluation (bench/search chose them on held-out problems; Optuna's median pruner, the
        default before, ranked level with random search there, docs/benchmarks.md). A training length that is not
        whole (e.g. 2.5 epochs) keeps Optuna's median pruner. No trial is stopped before two have completed: on a
        study of 8-15 trials, stopping from the second trial ended with a worse best model on most recorded problems
        (bench/search/small.py)."""
        scheduler = SchedulerSpec(type="asha", mode="stop", startup_trials=STARTUP_TRIALS)
        try:
            training = scheduler.settle(self.training, evaluates=True)
        except FieldProblem:
            return False
        self.study.scheduler, self.training = scheduler, training
        return True

    def _check_sampler(self) -> None:
        grid = None
        if self.study.sampler.type == "grid":
            grid = {}
            for name, param in self.sampled_params().items():
                values = param.grid_values()
                if values is None:
                    raise FieldProblem(
                        f"search_space.{name}.step",
                        "the grid sampler needs a step for float parameters; add step: or use type: categorical",
                    )
                grid[name] = values
        try:
            with warnings.catch_warnings():  # a check, not a use: Optuna's "experimental" notices can wait
                warnings.simplefilter("ignore")
                self.study.sampler.build(grid)
        except FieldProblem as problem:
            raise FieldProblem(join_path("study.sampler", problem.field), problem.message) from problem

    # ---- queries used by the study manager ----------------------------------------------------------------------
    @property
    def source(self) -> str | None:
        return self._source

    @property
    def name(self) -> str:
        return self.study.name or "study"

    @property
    def output_dir(self) -> str:
        return self.study.output_dir or str(Path("runs") / self.name)

    @property
    def storage(self) -> str:
        return self.study.storage or f"sqlite:///{Path(self.output_dir) / 'study.db'}"

    @property
    def store_url(self) -> str:
        """The experiment store: the study's PostgreSQL database, or experiments.db beside a SQLite study."""
        if self.storage.startswith("postgresql"):
            return self.storage
        return str(Path(self.output_dir) / "experiments.db")

    def trial_dir(self, number: int) -> str:
        return str(Path(self.output_dir) / f"trial-{number}")

    def sampled_params(self) -> dict[str, ParamSpec]:
        return {name: p for name, p in self.search_space.items() if p.type != "fixed"}

    def training_params(self) -> dict[str, ParamSpec]:
        return {name: p for name, p in self.search_space.items() if p.target == "training"}

    def split_params(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(TrainingArguments overrides, model_init params) of a trial; model params include the file's `model:`.
        Adapter parameters are in neither (see `peft_params`)."""
        training = {k: v for k, v in params.items() if self._target(k) == "training"}
        model = {**self.model, **{k: v for k, v in params.items() if self._target(k) == "model"}}
        return training, model

    def peft_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The sampled options of the adapter's config (search_space entries with target peft)."""
        return {k: v for k, v in params.items() if self._target(k) == "peft"}

    def _target(self, name: str) -> str:
        param = self.search_space.get(name)
        return param.target if param is not None and param.target else "model"

    def stops_at_rungs(self) -> bool:
        """Whether the scheduler stops trials at their rungs (ASHA in mode stop, through a pruner) rather than
        pausing them: such a study reports every evaluation to its pruner as a pruned study does."""
        scheduler = self.study.scheduler
        return scheduler is not None and scheduler.type == "asha" and scheduler.mode == "stop"

    def pruning_label(self) -> str:
        """What stops trials early, in a word or two (`hpo validate`, the model card)."""
        if self.stops_at_rungs():
            return "asha stop-type rungs"
        return str(self.study.pruner.type) if self.study.pruner is not None else "none"

    def pauses_trials(self) -> bool:
        """Whether the scheduler pauses trials and continues some (promotion ASHA, PBT)."""
        return self.study.scheduler is not None and not self.stops_at_rungs()

    def evaluation_always_on(self) -> bool:
        """Whether every trial evaluates during training (eval_strategy set, or sampled, never to 'no')."""
        param = self.search_space.get("eval_strategy")
        values = param.extremes() if param is not None and param.target == "training" else []
        values = values or [self.training.get("eval_strategy", "no")]
        return all(str(getattr(v, "value", v)) != "no" for v in values)

    def resolve_task(self) -> Task:
        return self.task.resolve()

    def build_callbacks(self) -> list[Any]:
        """Fresh instances of the file's `callbacks:` (one set per trial)."""
        return build_callbacks(self.callbacks, self.task.base_dir)

    def training_arguments(self, output_dir: str | None = None, **overrides: Any) -> Any:
        """A fresh TrainingArguments with the file's defaults, the trial's overrides and the trial's folder."""
        try:
            return build_training_arguments(self.training, output_dir or self.output_dir, **overrides)
        except FieldProblem as problem:
            raise SpecError(
                self._source or "study", [(join_path("training", problem.field), problem.message)]
            ) from problem


def configured_strategy(training: dict[str, Any]) -> str | None:
    """The strategy `training.strategy: auto` picks from a DeepSpeed or FSDP config in the training arguments."""
    if training.get("deepspeed") is not None:
        return "deepspeed"
    return "fsdp" if training.get("fsdp_config") is not None else None


def _check_conditions(space: dict[str, ParamSpec]) -> None:
    for name, param in space.items():
        for other, expected in (param.when or {}).items():
            where = f"search_space.{name}.when.{other}"
            if other == name:
                raise FieldProblem(where, "a parameter cannot depend on itself")
            if other not in space:
                close = difflib.get_close_matches(other, list(space), n=1)
                hint = f"did you mean {close[0]}?" if close else f"parameters: {', '.join(space)}"
                raise FieldProblem(where, f"names no parameter of search_space ({hint})")
            for value in expected if isinstance(expected, list) else [expected]:
                if not space[other].accepts(value):
                    raise FieldProblem(
                        where, f"{other} never takes the value {value!r}; it is {space[other].describe()}"
                    )
    _check_acyclic(space)


def _check_acyclic(space: dict[str, ParamSpec]) -> None:
    placed: set[str] = set()
    pending = dict(space)
    while pending:
        ready = [n for n, p in pending.items() if set(p.when or {}) <= placed]
        if not ready:
            raise FieldProblem(
                f"search_space.{next(iter(pending))}.when",
                f"the conditions of {', '.join(pending)} form a cycle; make one of them unconditional",
            )
        placed.update(ready)
        for name in ready:
            del pending[name]


def _check_enqueued(enqueue: list[dict[str, Any]], space: dict[str, ParamSpec]) -> None:
    for index, params in enumerate(enqueue):
        for name, value in params.items():
            where = f"study.enqueue.{index}.{name}"
            if name not in space:
                close = difflib.get_close_matches(name, list(space), n=1)
                hint = f"did you mean {close[0]}?" if close else f"parameters: {', '.join(space)}"
                raise FieldProblem(where, f"not a parameter of search_space ({hint})")
            if not space[name].accepts(value):
                raise FieldProblem(
                    where, f"{value!r} is outside the search space: {name} is {space[name].describe()}"
                )
