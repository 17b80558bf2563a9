"""The README model card of an export: what the model is, how it scored, which study chose it, how to load it."""

from __future__ import annotations

import json
from typing import Any

from hpo.export.select import ExportSource


def _table(rows: dict[str, Any], header: tuple[str, str]) -> str:
    if not rows:
        return "_none recorded_\n"
    lines = [f"| {header[0]} | {header[1]} |", "| --- | --- |"]
    lines += [f"| `{k}` | {_show(v)} |" for k, v in sorted(rows.items())]
    return "\n".join(lines) + "\n"


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def model_card(
    source: ExportSource, transformers_class: str | None, adapters: dict[str, dict[str, Any]] | None = None
) -> str:
    title = (
        f"{source.study_name} — trial {source.trial_number}"
        if source.kind == "trial"
        else f"run {source.spec.name}"
    )
    scores = {k: v for k, v in source.recorded_metrics.items() if not k.endswith(("_runtime", "_per_second"))}
    parts = [
        f"# {title}\n",
        _origin(source),
        "## Metrics at the exported checkpoint\n",
        _table(scores, ("metric", "value")),
    ]
    parts += ["## Hyperparameters\n", _table(source.params, ("parameter", "value"))]
    if source.schedule:
        parts += ["## Hyperparameter schedule (population-based training)\n", _schedule(source.schedule)]
    if source.model_params != source.params:
        parts += ["`model_init` parameters:\n", _table(source.model_params, ("parameter", "value"))]
    if source.study_summary:
        parts += ["## Study\n", _study(source.study_summary)]
    if adapters:
        parts += ["## Adapters\n", _adapters(adapters, source.metrics)]
    parts += ["## Loading\n", _loading(transformers_class, list(adapters or {}))]
    return "\n".join(parts)


def _origin(source: ExportSource) -> str:
    lines = [
        f"- model_init: `{source.spec.task.model_init}`",
        f"- checkpoint: `{source.checkpoint}` (step {source.step})",
    ]
    if source.values:
        objectives = ", ".join(f"{m} = {v:.6g}" for m, v in zip(source.metrics, source.values, strict=False))
        lines.append(f"- objective: {objectives}")
    return "\n".join(lines) + "\n"


def _study(summary: dict[str, Any]) -> str:
    states = ", ".join(f"{n} {s.lower()}" for s, n in sorted(summary["states"].items()))
    goals = ", ".join(f"{d} {m}" for m, d in zip(summary["metrics"], summary["directions"], strict=False))
    return (
        f"- study `{summary['study_name']}`: {summary['n_trials']} trials ({states})\n"
        f"- objective(s): {goals}\n"
        f"- sampler: {summary['sampler']}, pruner: {summary['pruner']}\n"
        f"- exported trial: {summary['chosen_trial']}\n"
    )


def _adapters(adapters: dict[str, dict[str, Any]], objectives: list[str]) -> str:
    """One row per adapter: its name, method, trainable parameters and metrics (objectives first)."""
    names = list(objectives) or sorted({k for a in adapters.values() for k in a.get("metrics", {})})
    header = "| adapter | method | trainable parameters | " + " | ".join(f"`{n}`" for n in names) + " |"
    lines = [header, "| " + " | ".join(["---"] * (3 + len(names))) + " |"]
    for name, entry in adapters.items():
        values = [
            _show(entry.get("metrics", {}).get(n, entry.get("objectives", {}).get(n, "-"))) for n in names
        ]
        lines.append(
            f"| `{name}` | {entry.get('method')} | {entry.get('trainable_params')} | "
            + " | ".join(values)
            + " |"
        )
    return "\n".join(lines) + "\n"


def _schedule(steps: list[dict[str, Any]]) -> str:
    """One row per segment: from which step, the values that changed there, which member trained it."""
    lines = ["| from step | hyperparameters | trained by |", "| --- | --- | --- |"]
    previous: dict[str, Any] = {}
    for entry in steps:
        changed = {k: v for k, v in entry["params"].items() if previous.get(k) != v}
        values = ", ".join(f"`{k}` = {_show(v)}" for k, v in sorted(changed.items()))
        copied = f" (copied member {entry['copied_from']})" if entry.get("copied_from") is not None else ""
        lines.append(f"| {entry['step']} | {values} | member {entry['member']}{copied} |")
        previous = entry["params"]
    replay = "Train one run along it from scratch with `hpo retrain <study file> --out DIR --replay`.\n"
    return "\n".join(lines) + "\n\n" + replay


def _loading(transformers_class: str | None, adapters: list[str] | None = None) -> str:
    text = '```python\nimport hpo\nmodel = hpo.load_exported("<this folder>")\n```\n'
    named = [name for name in adapters or [] if name != "default"]
    if named:
        text += (
            f"\nThe first adapter ({named[0]}) is active; pick another by name (all are loaded, "
            f'`model.set_adapter(name)` switches):\n\n```python\nmodel = hpo.load_exported("<this folder>", adapter="{named[-1]}")\n```\n'
        )
    elif adapters:
        text += (
            "\nThe adapter is in peft's layout over the base model `model_init` builds:\n\n```python\n"
            'from peft import PeftModel\nmodel = PeftModel.from_pretrained(base_model, "<this folder>")\n```\n'
        )
    if transformers_class:
        cls = transformers_class.rsplit(".", 1)[1]
        text += (
            f"\nIt is also a transformers folder:\n\n```python\nfrom transformers import {cls}\n"
            f'model = {cls}.from_pretrained("<this folder>")\n```\n'
        )
    return text
