"""`hpo export`: ship the best model of a study (or of one `hpo train` run) as a folder that reloads with one call.

    export_study(spec, out_dir, trial_number=None, metric=None) -> ExportResult
    export_run(spec, out_dir) -> ExportResult

The folder holds `model.safetensors` (consolidated; the `save_pretrained` layout and the tokenizer for transformers
models), `export.json` (what `hpo.load_exported` needs: the model_init import path and its params), `hyperparameters.json`,
`metrics.json`, `training_args.json` and a README model card. It is written to a temporary sibling folder and renamed
into place, so an interrupted export leaves the previous one intact. Then the model is reloaded from the folder and
evaluated on the task's eval set, and that metric is shown beside the one recorded during training.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hpo.errors import ConfigError, HpoError
from hpo.export.adapters import adapter_entry, adapter_model, base_reference, check_same_base, merged_model
from hpo.export.card import model_card
from hpo.export.load import load_exported
from hpo.export.select import ExportSource, run_source, study_source, top_sources
from hpo.export.weights import checkpoint_state_dict, load_into
from hpo.spec import RunSpec, StudySpec, Task
from hpo.tracking.events import store_location
from hpo.tracking.store import open_store
from trainer import PrinterCallback, ProgressCallback, Trainer, TrainingArguments
from trainer.checkpoint import save_weights
from trainer.file_modes import follow_umask

logger = logging.getLogger(__name__)

EXPORT_MANIFEST = "export.json"
FORMAT_VERSION = 1


@dataclass
class ExportResult:
    out_dir: Path
    source: ExportSource
    recorded: dict[str, float]
    reloaded: dict[str, float] = field(default_factory=dict)
    # --top K: each named adapter's trial source, and its reloaded evaluation
    adapters: dict[str, ExportSource] = field(default_factory=dict)
    reloaded_adapters: dict[str, dict[str, float]] = field(default_factory=dict)

    def comparison(self) -> list[tuple[str, float | None, float | None]]:
        """(metric, recorded, reloaded) for every eval metric in both, objectives first."""
        names = [m for m in self.source.metrics if m in self.recorded or m in self.reloaded]
        names += sorted(k for k in self.recorded if k in self.reloaded and k not in names and _is_score(k))
        return [(n, self.recorded.get(n), self.reloaded.get(n)) for n in names]


def _is_score(name: str) -> bool:
    return name.startswith("eval_") and not name.endswith(("_runtime", "_per_second"))


def export_study(
    spec: StudySpec,
    out_dir: str | Path,
    *,
    trial_number: int | None = None,
    metric: str | None = None,
    evaluate: bool = True,
    merge: bool = False,
) -> ExportResult:
    source = study_source(spec, trial_number=trial_number, metric=metric)
    return _export(source, out_dir, evaluate=evaluate, merge=merge)


def export_run(
    spec: RunSpec, out_dir: str | Path, *, evaluate: bool = True, merge: bool = False
) -> ExportResult:
    return _export(run_source(spec), out_dir, evaluate=evaluate, merge=merge)


def export_top(
    spec: StudySpec, out_dir: str | Path, k: int, *, metric: str | None = None, evaluate: bool = True
) -> ExportResult:
    """The top k trials' adapters as named adapters (trial-<n>) over one base model, in one folder."""
    if spec.peft is None:
        raise ConfigError(
            "--top: exports the adapters of a study with a peft: section; for full models export one trial (--trial N)"
        )
    sources = top_sources(spec, k, metric)
    check_same_base(sources)
    given = str(out_dir)
    out_dir = Path(os.path.abspath(out_dir))  # ".", "a/..": staging and swap need a real name
    _check_destination(out_dir, given)
    task = spec.task.resolve()
    staging = _staging(out_dir)
    try:
        entries: dict[str, Any] = {}
        for source in sources:
            model = adapter_model(source, task)
            name = f"trial-{source.trial_number}"
            model.save_pretrained(str(staging / name))  # peft's layout of a named adapter: <folder>/<name>/
            entries[name] = adapter_entry(source, model)
            base = base_reference(model, source)
        names = list(entries)
        adapter_info = {"base": base, "adapters": entries, "default": names[0]}
        _write_folder(staging, sources[0], None, task, adapter_info)
        _replace(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result = ExportResult(out_dir, sources[0], sources[0].recorded_metrics)
    result.adapters = dict(zip(names, sources, strict=True))
    if evaluate:
        for name, source in result.adapters.items():
            result.reloaded_adapters[name] = evaluate_export(out_dir, source, adapter=name)
        result.reloaded = result.reloaded_adapters[names[0]]
    _record_artifact(sources[0], out_dir)
    return result


def _staging(out_dir: Path) -> Path:
    staging = out_dir.parent / f".{out_dir.name}.export-{int(time.time() * 1000)}"
    staging.mkdir(parents=True)
    return staging


def _export(
    source: ExportSource, out_dir: str | Path, *, evaluate: bool, merge: bool = False
) -> ExportResult:
    given = str(out_dir)
    out_dir = Path(
        os.path.abspath(out_dir)
    )  # ".", "a/..": the staging and previous siblings need a real name
    _check_destination(out_dir, given)
    task = source.spec.task.resolve()
    adapter_info = None
    if source.spec.peft is not None:
        model = adapter_model(source, task)
        if merge:
            model = merged_model(model)
        else:
            adapter_info = {
                "base": base_reference(model, source),
                "adapters": {"default": adapter_entry(source, model)},
                "default": "default",
            }
    else:
        if merge:
            raise ConfigError(
                "--merge: merges an adapter into its base model; this file trains no adapter (peft:)"
            )
        model = task.model_init(dict(source.model_params))
        load_into(model, checkpoint_state_dict(source.checkpoint, model), source=str(source.checkpoint))
    staging = _staging(out_dir)
    try:
        _write_folder(staging, source, model, task, adapter_info)
        _replace(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result = ExportResult(out_dir, source, source.recorded_metrics)
    if evaluate:
        result.reloaded = evaluate_export(out_dir, source)
    _record_artifact(source, out_dir)
    return result


def _check_destination(out_dir: Path, given: str) -> None:
    """An earlier export is replaced as a whole; anything else that is not empty is the user's, and is refused. The
    current folder (or one holding it) is refused too: swapping it away would leave the shell in a deleted folder."""
    cwd = Path.cwd()
    if out_dir == cwd or out_dir in cwd.parents:
        raise ConfigError(
            f"--out {given}: the export replaces its folder as a whole, and this is the current folder; give another "
            f"folder, e.g. --out {out_dir.parent / (out_dir.name + '-export')}"
        )
    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if not out_dir.is_dir():
        raise ConfigError(
            f"--out {given}: {out_dir} is a file, not a folder; give another --out, or delete the file"
        )
    if any(out_dir.iterdir()) and not is_earlier_export(out_dir):
        raise ConfigError(
            f"--out {given}: {out_dir} holds files and is not an earlier hpo export (no export.json of ours), so it "
            "is not replaced; give another --out, or delete the folder"
        )


def is_earlier_export(folder: Path) -> bool:
    """Whether `folder` is what `hpo export` wrote: its export.json parses and has our keys. Only then is the folder
    replaced as a whole; any export.json (a web project's, say) would otherwise get someone's folder deleted."""
    manifest = folder / EXPORT_MANIFEST
    try:
        data = json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else None
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and {"format_version", "kind", "model_init"} <= data.keys()


def _write_folder(
    folder: Path,
    source: ExportSource,
    model: torch.nn.Module | None,
    task: Task,
    adapter_info: dict[str, Any] | None = None,
) -> None:
    """The export folder; `model` None: the adapters are already written (--top), `adapter_info` says what they are."""
    transformers_class = None if model is None or adapter_info else _transformers_class(model)
    if adapter_info is not None:
        if model is not None:
            model.save_pretrained(
                str(folder)
            )  # peft's layout: adapter_config.json + adapter_model.safetensors
        if task.tokenizer is not None:
            task.tokenizer().save_pretrained(str(folder))
    elif transformers_class:
        model.save_pretrained(str(folder))
        if task.tokenizer is not None:
            task.tokenizer().save_pretrained(str(folder))
    else:
        save_weights(model.state_dict(), folder / "model.safetensors")
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": source.kind,
        "model_init": source.spec.task.model_init,
        "task_dir": source.spec.task.base_dir,
        "model_params": source.model_params,
        "transformers_class": transformers_class,
        "study_name": source.study_name,
        "trial_number": source.trial_number,
        "checkpoint": str(source.checkpoint),
        "step": source.step,
        "metrics": source.recorded_metrics,
        "objectives": dict(zip(source.metrics, source.values or [], strict=False)),
        "exported_at": time.time(),
        "adapter": adapter_info,
        "merged_adapter": source.spec.peft is not None and adapter_info is None,
    }
    _write_json(folder / EXPORT_MANIFEST, manifest)
    hyperparameters = {
        "params": source.params,
        "model_init_params": source.model_params,
        "training": source.training,
        **({"schedule": source.schedule} if source.schedule is not None else {}),
    }
    _write_json(folder / "hyperparameters.json", hyperparameters)
    _write_json(folder / "metrics.json", source.recorded_metrics)
    _write_json(folder / "training_args.json", source.arguments)
    card = model_card(source, transformers_class, adapters=(adapter_info or {}).get("adapters"))
    (folder / "README.md").write_text(card, encoding="utf-8")
    follow_umask(folder)  # the weights as readable as the files beside them, for whoever serves the model


def _transformers_class(model: torch.nn.Module) -> str | None:
    """ "module.Class" of a transformers PreTrainedModel, else None (checked without importing transformers)."""
    for cls in type(model).__mro__:
        if cls.__name__ == "PreTrainedModel" and cls.__module__.startswith("transformers."):
            return f"{type(model).__module__}.{type(model).__qualname__}"
    return None


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")


def _replace(staging: Path, out_dir: Path) -> None:
    """Move the finished export into place; an earlier export is removed only once the new one is complete."""
    previous = out_dir.parent / f".{out_dir.name}.previous-{int(time.time() * 1000)}"
    if out_dir.exists():
        out_dir.rename(previous)
    staging.rename(out_dir)
    shutil.rmtree(previous, ignore_errors=True)


def evaluate_export(out_dir: Path, source: ExportSource, adapter: str | None = None) -> dict[str, float]:
    """Reload the exported folder like a user would and evaluate it on the task's eval set (one process)."""
    task = source.spec.task.resolve()
    _, eval_dataset = task.data(dict(source.model_params))
    if eval_dataset is None:
        return {}
    model = load_exported(out_dir, adapter=adapter)
    with tempfile.TemporaryDirectory(prefix="hpo-export-eval-") as scratch:
        args = evaluation_arguments(source, scratch)
        trainer = Trainer(
            model=model,
            args=args,
            eval_dataset=eval_dataset,
            data_collator=task.collator,
            compute_metrics=task.compute_metrics,
        )
        # The comparison table shows the result; the default callbacks would print raw log dicts first.
        for quiet in (PrinterCallback, ProgressCallback):
            trainer.pop_callback(quiet)
        metrics = trainer.evaluate()
    return {k: float(v) for k, v in metrics.items() if isinstance(v, int | float)}


def evaluation_arguments(source: ExportSource, output_dir: str) -> TrainingArguments:
    """The trial's arguments for evaluation in this one process: no distributed strategy, nothing saved or logged."""
    values = {k: v for k, v in source.arguments.items() if k not in ("fsdp_config", "deepspeed")}
    # Nothing is saved, so nothing is reloaded at the end either (load_best_model_at_end needs saves to validate).
    values.update(output_dir=output_dir, strategy="single", save_strategy="no", load_best_model_at_end=False)
    try:
        return TrainingArguments.from_dict(values)
    except Exception as error:
        raise HpoError(f"the training arguments of {source.checkpoint} no longer load: {error}") from error


def _record_artifact(source: ExportSource, out_dir: Path) -> None:
    """An "export" artifact row (sha256 and size of the weights) in the experiment store of the run."""
    location = store_location(source.spec)
    if location is None or source.run_id is None:
        return
    try:
        with open_store(location) as store:
            weights = out_dir / "model.safetensors"
            store.add_artifact(
                source.run_id, "export", weights if weights.is_file() else out_dir, step=source.step
            )
    except Exception as error:  # the export itself is done; a missing artifact row must not undo it
        logger.warning("could not record the export in %s: %s", location, error)
