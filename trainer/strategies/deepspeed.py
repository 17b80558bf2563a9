"""DeepSpeed ZeRO (stages 0-3, CPU offload of optimizer and parameters), driven through `deepspeed.initialize` itself:
accelerate's DeepSpeed plugin miscounts processes on CPU, deepspeed's own engine works with gloo.

The loop keeps its contract: it normalises the loss for gradient accumulation itself (so the engine's backward does not
divide again), marks the last micro-batch of each window as the accumulation boundary, and steps its own LR scheduler
(unless the DeepSpeed config brings a scheduler, which the engine then steps). DeepSpeed clips inside `engine.step()`,
after it has reduced the gradients, so the norm is known only after the step: `grad_norm_after_step`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from trainer import distributed
from trainer.data import cast_floating
from trainer.deepspeed_config import fill_deepspeed_config, zero_stage
from trainer.rank_layout import RankLayout
from trainer.strategies.base import OptimizerFactory, SchedulerFactory
from trainer.strategies.parallel import (
    MODEL_FILE,
    ParallelStrategy,
    load_scheduler,
    load_weights,
    save_scheduler,
)

CHECKPOINT_TAG = "deepspeed"


class DeepSpeedStrategy(ParallelStrategy):
    name = "deepspeed"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.config: dict[str, Any] = {}
        self.last_grad_norm: torch.Tensor | None = None

    def _init_process_group(self, layout: RankLayout) -> bool:
        started = super()._init_process_group(layout)
        if self.device.type == "cpu":
            os.environ.setdefault("DS_ACCELERATOR", "cpu")  # what DeepSpeed would guess, minus its warning
            _remove_stale_shm_segment(self.rank)
            distributed.barrier()  # every rank's stale segment is gone before any rank maps its peers'
        if layout.world_size == 1:
            # A world of one started by plain `python` (no launcher): DeepSpeed's engine reads these from the
            # environment as its own launcher or torchrun would set them, and refuses to start without LOCAL_RANK.
            for name, value in (("LOCAL_RANK", 0), ("RANK", 0), ("WORLD_SIZE", 1)):
                os.environ.setdefault(name, str(value))
        import deepspeed

        if self.device.type == "cpu":
            _skip_shared_memory_all_reduce()

        # DeepSpeed logs its whole config and every op load at INFO, and calls torch collectives under names torch
        # deprecates; the Trainer reports progress itself, so only DeepSpeed's warnings and errors are shown.
        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
        for collective in ("all_gather_into_tensor", "reduce_scatter_tensor"):
            warnings.filterwarnings(
                "ignore", message=f".*{collective}. is deprecated", category=FutureWarning
            )
        # deepspeed.comm wraps the torch process group started above instead of starting its own.
        deepspeed.init_distributed(dist_backend=distributed.default_backend(self.device), verbose=False)
        return started

    def setup(
        self, model: torch.nn.Module, build_optimizer: OptimizerFactory, build_scheduler: SchedulerFactory
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        import deepspeed

        self.config = fill_deepspeed_config(getattr(self.args, "deepspeed", None), self.args, self.world_size)
        client_optimizer = None if "optimizer" in self.config else build_optimizer(model)
        engine, optimizer, _, engine_scheduler = deepspeed.initialize(
            model=model,
            optimizer=client_optimizer,
            model_parameters=[p for p in model.parameters() if p.requires_grad],
            config=self.config,
            dist_init_required=False,
        )
        if engine_scheduler is not None:
            scheduler: Any = EngineSteppedScheduler(engine_scheduler)
        else:
            # ZeRO wraps the torch optimizer but shares its param_groups, so a torch scheduler on it drives the lr.
            scheduler = build_scheduler(_torch_optimizer(optimizer))
        return engine, optimizer, scheduler

    # ---- precision -------------------------------------------------------------------------------------
    def engine_dtype(self) -> torch.dtype | None:
        """The dtype DeepSpeed's own mixed precision keeps the module in (its bf16 or fp16 section), or None."""
        for key, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            if self.config.get(key, {}).get("enabled") is True:
                return dtype
        return None

    def autocast(self) -> contextlib.AbstractContextManager:
        # In DeepSpeed's bf16/fp16 modes the module itself is in half precision, and the engine turns an outer CUDA
        # autocast off inside its forward (deepspeed/runtime/torch_autocast.py): float inputs met half weights
        # ("mat1 and mat2 must have the same dtype", seen on an H200). Inputs are cast instead, as transformers does.
        if self.engine_dtype() is not None:
            return contextlib.nullcontext()
        return super().autocast()

    def move_batch(self, batch: Any) -> Any:
        dtype = self.engine_dtype()
        batch = super().move_batch(batch)
        return batch if dtype is None else cast_floating(batch, dtype)

    def no_backward_sync(self, model: torch.nn.Module, enabled: bool) -> contextlib.AbstractContextManager:
        return _accumulation_boundary(model, is_boundary=not enabled)

    def backward(self, loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        model.backward(loss, scale_wrt_gas=False)  # the loop has already divided by the accumulation steps

    def clip_grad_norm(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_norm: float
    ) -> torch.Tensor | None:
        """DeepSpeed clips inside `engine.step()` (config `gradient_clipping` = max_grad_norm), when gradients are
        reduced and partitioned. The norm it measures is returned by `grad_norm_after_step`."""
        return None

    def optimizer_step(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> bool:
        model.step()
        norm = model.get_global_grad_norm()
        self.last_grad_norm = None if norm is None else torch.as_tensor(float(norm))
        return bool(model.was_step_applied())

    def grad_norm_after_step(self) -> torch.Tensor | None:
        return self.last_grad_norm if self.args.max_grad_norm else None

    # ---- weights and checkpoints ------------------------------------------------------------------------
    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """fp32 weights gathered from the ZeRO partitions (a collective under ZeRO-3: every rank calls it)."""
        from deepspeed.utils import safe_get_full_fp32_param

        module = self.unwrap(model)
        gathered: dict[int, torch.Tensor] = {}
        state: dict[str, torch.Tensor] = {}
        for name, param in module.named_parameters(remove_duplicate=False):
            if id(param) not in gathered:
                full = safe_get_full_fp32_param(param)
                gathered[id(param)] = (full if full is not None else param).detach().to("cpu", copy=True)
            state[name] = gathered[id(param)]
        names = set(state)
        for name, buffer in module.state_dict().items():
            if name not in names:
                state[name] = buffer.detach().to("cpu")
        return state if self.is_global_zero else {}

    def save_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        directory = Path(directory)
        # DeepSpeed's own files (every rank writes its optimizer partition), plus consolidated weights for users.
        if not self.save_only_model:
            model.save_checkpoint(str(directory), tag=CHECKPOINT_TAG, save_latest=False)
            if not isinstance(scheduler, EngineSteppedScheduler):
                save_scheduler(directory, scheduler, self)
        self.write_model_file(directory, self.full_state_dict(model))
        self.barrier()

    def load_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        directory = Path(directory)
        engine_owns_scheduler = isinstance(scheduler, EngineSteppedScheduler)
        model.load_checkpoint(
            str(directory),
            tag=CHECKPOINT_TAG,
            load_optimizer_states=True,
            load_lr_scheduler_states=engine_owns_scheduler,
        )
        if not engine_owns_scheduler:
            load_scheduler(directory, scheduler)
        self.barrier()

    def load_model_weights(self, directory: Path, model: torch.nn.Module) -> None:
        """Weights for load_best_model_at_end: DeepSpeed's files when the checkpoint has them (fp32 masters and all),
        else the consolidated safetensors file, written into both the fp32 masters and the module's parameters."""
        directory = Path(directory)
        if (directory / CHECKPOINT_TAG).is_dir():
            model.load_checkpoint(
                str(directory), tag=CHECKPOINT_TAG, load_optimizer_states=True, load_lr_scheduler_states=False
            )
        else:
            _set_full_weights(model, load_weights(directory / MODEL_FILE), self.zero_stage)
        self.barrier()

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return getattr(model, "module", model)

    @property
    def zero_stage(self) -> int:
        return zero_stage(self.config)


class EngineSteppedScheduler:
    """A scheduler from the DeepSpeed config: `engine.step()` steps it, so the loop's `step()` must not."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def step(self, *args: Any, **kwargs: Any) -> None:
        pass

    def get_last_lr(self) -> list[float]:
        return self.scheduler.get_last_lr()

    def state_dict(self) -> dict:
        return self.scheduler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.scheduler.load_state_dict(state)


def _torch_optimizer(optimizer: Any) -> torch.optim.Optimizer:
    while not isinstance(optimizer, torch.optim.Optimizer) and hasattr(optimizer, "optimizer"):
        optimizer = optimizer.optimizer
    return optimizer


@contextlib.contextmanager
def _accumulation_boundary(engine: Any, is_boundary: bool) -> Iterator[None]:
    engine.set_gradient_accumulation_boundary(is_boundary)
    yield


def _set_full_weights(engine: Any, weights: dict[str, torch.Tensor], stage: int) -> None:
    import deepspeed
    from deepspeed.utils import safe_set_full_fp32_param

    for name, param in engine.module.named_parameters():
        value = weights[name]
        safe_set_full_fp32_param(param, value.float())  # the optimizer's fp32 master copy (ZeRO, bf16)
        with deepspeed.zero.GatheredParameters([param], modifier_rank=0, enabled=stage == 3), torch.no_grad():
            if param.numel():
                param.copy_(value.to(param.dtype))


def _skip_shared_memory_all_reduce() -> None:
    """On CPU, deepspeed.comm compiles and maps a shared-memory all-reduce op that serves only inference
    (`inference_all_reduce`); training collectives go through the torch process group. Skipping it saves its ~20 s
    compile, and its C++ threads aborted ranks at exit ("terminate called without an active exception") after ZeRO-3
    jobs that had finished their work. DeepSpeed keeps its op table in one dict that it reads when comm starts."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def _remove_stale_shm_segment(rank: int) -> None:
    """DeepSpeed's CPU all-reduce maps one shared-memory segment per rank, named after MASTER_ADDR and MASTER_PORT, and
    opens an existing one as is. A segment left by a killed job with the same address and port (the deepspeed
    launcher's default port is always 29500) would be mapped by the peers with stale state: remove this rank's own."""
    address, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if address and port:
        Path("/dev/shm", f"deepspeed_allreduce_buffer_{os.getuid()}_{address}_{port}_{rank}").unlink(
            missing_ok=True
        )
