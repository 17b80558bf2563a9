"""`hpo.load_exported(folder)`: the model of an `hpo export` folder, built and loaded, in eval mode."""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path
from typing import Any

import torch

from hpo.errors import HpoError
from hpo.export.weights import MODEL_FILE, load_into, read_weights
from hpo.spec.imports import add_search_paths, resolve_callable
from trainer import set_seed


def load_exported(
    folder: str | Path, *, device: str | None = None, adapter: str | None = None
) -> torch.nn.Module:
    """Rebuild the exported model: transformers models through `from_pretrained`, others through the task's
    `model_init(params)` and the safetensors weights, adapter exports as the base model with their adapter(s) (peft's
    `PeftModel`; `adapter` names the active one of several). Returns the module in eval mode (on `device` if given)."""
    folder = Path(folder)
    manifest = _manifest(folder)
    if manifest.get("adapter"):
        model = _adapter_model(folder, manifest, adapter)
    elif adapter is not None:
        raise HpoError(f"adapter={adapter!r}: {folder} holds no adapters (its study trained the whole model)")
    elif manifest.get("transformers_class"):
        model = _transformers_model(folder, manifest["transformers_class"])
    else:
        model = _task_model(folder, manifest)
    if device is not None:
        model = model.to(device)
    return model.eval()


def _manifest(folder: Path) -> dict[str, Any]:
    path = folder / "export.json"
    if not path.is_file():
        raise HpoError(f"{folder} is not an hpo export (no export.json); create one with `hpo export`")
    return json.loads(path.read_text(encoding="utf-8"))


def _transformers_model(folder: Path, class_path: str) -> Any:
    module_name, _, class_name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.from_pretrained(
        str(folder), use_safetensors=True
    )  # never a pytorch_model.bin (a pickle) instead


def _task_model(folder: Path, manifest: dict[str, Any]) -> Any:
    add_search_paths(manifest.get("task_dir"))
    model_init = resolve_callable(
        manifest["model_init"], field="export.json model_init", base_dir=manifest.get("task_dir")
    )
    params = dict(manifest.get("model_params") or {})
    model = _call_model_init(model_init, params)
    return load_into(model, read_weights(folder / MODEL_FILE), source=str(folder))


def _adapter_model(folder: Path, manifest: dict[str, Any], chosen: str | None) -> Any:
    """The base model rebuilt by the task's model_init, with every exported adapter loaded and `chosen` active."""
    from peft import PeftModel  # only adapter exports pay peft's import (it imports transformers: seconds)

    info = manifest["adapter"]
    names = list(info["adapters"])
    chosen = chosen or info.get("default") or names[0]
    if chosen not in names:
        raise HpoError(f"adapter={chosen!r}: {folder} holds the adapters {', '.join(names)}")
    base = info["base"]
    add_search_paths(manifest.get("task_dir"))
    model_init = resolve_callable(
        base["model_init"], field="export.json model_init", base_dir=manifest.get("task_dir")
    )
    set_seed(int(base.get("seed", 42)))  # as the trial did before model_init
    model = PeftModel.from_pretrained(
        _call_model_init(model_init, dict(base.get("model_params") or {})),
        str(_adapter_dir(folder, chosen)),
        adapter_name=chosen,
    )
    for name in names:
        if name != chosen:
            model.load_adapter(str(_adapter_dir(folder, name)), adapter_name=name)
    model.set_adapter(chosen)
    return model


def _adapter_dir(folder: Path, name: str) -> Path:
    """peft's layout: the adapter named "default" at the top of the folder, any other in a subfolder of its name."""
    return folder if name == "default" else folder / name


def _call_model_init(model_init: Any, params: dict[str, Any]) -> Any:
    try:
        takes_params = bool(inspect.signature(model_init).parameters)
    except (TypeError, ValueError):
        takes_params = True
    return model_init(params) if takes_params else model_init()
