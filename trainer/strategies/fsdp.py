"""Fully sharded data parallel with torch FSDP2 (`fully_shard`): each rank keeps 1/W of every parameter, gradient and
optimizer state, and gathers a layer's parameters only while it runs. Works with gloo on CPU (accelerate's FSDP plugin
does not), so this strategy drives torch directly.

`fsdp_config` keys (Hugging Face names where HF has one):
- `transformer_layer_cls_to_wrap`: class names (list or comma-separated string); each such submodule is sharded on its own.
- `min_num_params`: shard every submodule holding at least this many parameters not already in a sharded child.
- `reshard_after_forward` (default True): free gathered parameters after forward (ZeRO-3); False keeps them (ZeRO-2).
- `cpu_offload` (default False): keep sharded parameters and optimizer state in CPU memory (CUDA runs).
- `state_dict_type`: FULL_STATE_DICT (default; rank 0 writes consolidated files) or SHARDED_STATE_DICT (each rank
  writes its own shard as safetensors; resume needs the same world size).
Mixed precision follows `bf16`: parameters are gathered in bfloat16 for compute, gradients are reduced in float32 and the
sharded master weights stay float32.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from trainer.fsdp_options import SHARDED, validate_fsdp_config
from trainer.strategies.base import OptimizerFactory, SchedulerFactory
from trainer.strategies.parallel import (
    MODEL_FILE,
    OPTIMIZER_FILE,
    ParallelStrategy,
    load_scheduler,
    load_torch_file,
    load_weights,
    save_scheduler,
)

logger = logging.getLogger(__name__)
_FULL_OPTIONS = StateDictOptions(full_state_dict=True, cpu_offload=True)


class FSDPStrategy(ParallelStrategy):
    name = "fsdp"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.config = validate_fsdp_config(getattr(args, "fsdp_config", None))

    def setup(
        self, model: torch.nn.Module, build_optimizer: OptimizerFactory, build_scheduler: SchedulerFactory
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        model = model.to(self.device)
        self._shard(model)
        optimizer = build_optimizer(model)  # built on the sharded parameters: optimizer state is sharded too
        return model, optimizer, build_scheduler(optimizer)

    def _shard(self, model: torch.nn.Module) -> None:
        mesh = init_device_mesh(self.device.type, (self.world_size,))
        options: dict[str, Any] = {
            "mesh": mesh,
            "reshard_after_forward": bool(self.config["reshard_after_forward"]),
        }
        if getattr(self.args, "bf16", False):
            options["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=torch.float32
            )
        if self.config["cpu_offload"] and self.device.type != "cpu":
            options["offload_policy"] = CPUOffloadPolicy()
        elif self.config["cpu_offload"] and self.is_global_zero:
            # torch's offload policy needs an accelerator; on a CPU run the shards live in CPU memory already.
            logger.warning("fsdp_config.cpu_offload has no effect on a CPU run: the shards are in CPU memory")
        for module in self._modules_to_wrap(model):
            fully_shard(module, **options)
        fully_shard(model, **options)

    def _modules_to_wrap(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        """Submodules to shard on their own, children before parents (FSDP needs the inner units first)."""
        class_names = set(self.config["transformer_layer_cls_to_wrap"])
        min_params = self.config["min_num_params"]
        chosen: list[torch.nn.Module] = []
        covered: set[int] = set()  # ids of parameters already inside a chosen unit
        for module in _post_order(model):
            if module is model:
                continue
            own = [p for p in module.parameters() if id(p) not in covered]
            by_class = type(module).__name__ in class_names
            by_size = min_params > 0 and sum(p.numel() for p in own) >= min_params
            if own and (by_class or by_size):
                chosen.append(module)
                covered.update(id(p) for p in own)
        return chosen

    def no_backward_sync(self, model: torch.nn.Module, enabled: bool) -> contextlib.AbstractContextManager:
        return _gradient_sync_off(model) if enabled else contextlib.nullcontext()

    def backward(self, loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        loss.backward()

    def clip_grad_norm(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_norm: float
    ) -> torch.Tensor | None:
        if not max_norm or max_norm <= 0:
            return None
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        return norm.full_tensor() if isinstance(norm, DTensor) else norm

    def optimizer_step(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> bool:
        optimizer.step()
        return True

    # ---- weights and checkpoints ------------------------------------------------------------------------
    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        # A collective: every rank must call it; rank 0 receives the whole model on CPU, the others an empty dict.
        state = get_model_state_dict(model, options=_FULL_OPTIONS)
        return state if self.is_global_zero else {}

    def save_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        directory = Path(directory)
        if self.save_only_model:
            self.write_model_file(directory, self.full_state_dict(model))
        elif self.config["state_dict_type"] == SHARDED:
            save_local_shards(directory, self.rank, self.world_size, model, optimizer)
            save_scheduler(directory, scheduler, self)
        else:
            self.write_model_file(directory, self.full_state_dict(model))
            optimizer_state = get_optimizer_state_dict(model, optimizer, options=_FULL_OPTIONS)
            self.write_torch_file(directory / OPTIMIZER_FILE, optimizer_state)
            save_scheduler(directory, scheduler, self)
        self.barrier()

    def load_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        directory = Path(directory)
        if (directory / shard_file_name(self.rank)).exists():
            load_local_shards(directory, self.rank, self.world_size, model, optimizer)
        else:
            # Every rank reads the consolidated files and keeps its own slice.
            options = StateDictOptions(full_state_dict=True)
            set_model_state_dict(model, load_weights(directory / MODEL_FILE), options=options)
            optimizer_state = load_torch_file(directory / OPTIMIZER_FILE)
            set_optimizer_state_dict(model, optimizer, optimizer_state, options=options)
        load_scheduler(directory, scheduler)
        self.barrier()

    def load_model_weights(self, directory: Path, model: torch.nn.Module) -> None:
        """Consolidated weights into the sharded model: every rank reads the file and keeps its slice."""
        weights = load_weights(Path(directory) / MODEL_FILE)
        set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True))


def _post_order(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    for child in module.children():
        yield from _post_order(child)
    yield module


@contextlib.contextmanager
def _gradient_sync_off(model: torch.nn.Module) -> Iterator[None]:
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


# ---- sharded checkpoints: each rank's local shards as safetensors, the rest as JSON ------------------------
def shard_file_name(rank: int) -> str:
    return f"fsdp_shard_rank{rank}.safetensors"


def _local(tensor: Any) -> Any:
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def save_local_shards(
    directory: Path, rank: int, world_size: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    from safetensors.torch import save_file

    tensors = {f"model.{k}": _local(v).detach().cpu().contiguous() for k, v in model.state_dict().items()}
    optimizer_state = optimizer.state_dict()
    for index, state in optimizer_state["state"].items():
        for key, value in state.items():
            tensors[f"optim.{index}.{key}"] = _local(value).detach().cpu().contiguous()
    meta = {"world_size": world_size, "param_groups": optimizer_state["param_groups"]}
    save_file(tensors, str(directory / shard_file_name(rank)), metadata={"fsdp": json.dumps(meta)})


def load_local_shards(
    directory: Path, rank: int, world_size: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    from safetensors import safe_open

    path = directory / shard_file_name(rank)
    with safe_open(str(path), framework="pt") as handle:
        meta = json.loads(handle.metadata()["fsdp"])
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    if meta["world_size"] != world_size:
        raise ValueError(
            f"{path} was written by {meta['world_size']} ranks, this run has {world_size}: resume a "
            f"SHARDED_STATE_DICT checkpoint with the same number of processes, or save with FULL_STATE_DICT"
        )
    with torch.no_grad():
        for key, value in model.state_dict().items():
            _local(value).copy_(tensors[f"model.{key}"])
    optimizer.load_state_dict(_optimizer_state_from_shards(optimizer, tensors, meta["param_groups"]))


def _optimizer_state_from_shards(optimizer: torch.optim.Optimizer, tensors: dict, param_groups: list) -> dict:
    params = [p for group in optimizer.param_groups for p in group["params"]]
    state: dict[int, dict[str, Any]] = {}
    for name, tensor in tensors.items():
        if not name.startswith("optim."):
            continue
        _, index, key = name.split(".", 2)
        param = params[int(index)]
        value = tensor
        if isinstance(param, DTensor) and tensor.shape == param.to_local().shape and tensor.dim() > 0:
            value = DTensor.from_local(
                tensor,
                param.device_mesh,
                param.placements,
                run_check=False,
                shape=param.shape,
                stride=param.stride(),
            )
        state.setdefault(int(index), {})[key] = value
    return {"state": state, "param_groups": param_groups}
