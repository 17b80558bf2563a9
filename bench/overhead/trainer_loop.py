"""Overhead of trainer.Trainer against a hand-written PyTorch loop (and transformers' Trainer), same run, one thread.

    python bench/overhead/trainer_loop.py                 # both cases
    python bench/overhead/trainer_loop.py --case mlp --steps 2000 --repeats 7
    python bench/overhead/trainer_loop.py --device cuda --fp16   # on a GPU: the same runs on CUDA, fp16 with a GradScaler

Every contender trains the same model (same initial weights) on the same data with AdamW, gradient clipping at 1.0
and a linear schedule, batches made by the same DataLoader collation, the loss read at logging steps only. Runs are
interleaved (hand, ours, transformers, hand, ...) so that load from other processes hits all alike. The figure is
seconds per optimizer step, the whole `train()` call included (setup amortised over the steps); the ratio is against
the hand loop measured in the same run: each repeat's ratio to the hand run just before it, then the median. The CPU
time of this process is the steadier figure when other processes share the cores. Two cases: a small MLP (the loop's own overhead dominates) and a small
transformer encoder (compute dominates).
"""

from __future__ import annotations

import argparse
import copy
import logging
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, default_collate

LEARNING_RATE = 1e-3


# ---- the two cases ----------------------------------------------------------------------------------------------
class DictDataset(Dataset):
    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        self.tensors = tensors
        self.length = len(next(iter(tensors.values())))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {name: tensor[index] for name, tensor in self.tensors.items()}


class MLP(torch.nn.Module):
    def __init__(self, features: int = 64, hidden: int = 128, classes: int = 10) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(features, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, classes),
        )

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.cross_entropy(self.net(x), labels)}


class TinyTransformer(torch.nn.Module):
    def __init__(
        self, vocab: int = 1000, width: int = 128, layers: int = 2, heads: int = 4, classes: int = 4
    ) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        layer = torch.nn.TransformerEncoderLayer(
            width, heads, dim_feedforward=4 * width, dropout=0.1, batch_first=True
        )
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, classes)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        hidden = self.encoder(self.embed(input_ids)).mean(dim=1)
        return {"loss": torch.nn.functional.cross_entropy(self.head(hidden), labels)}


@dataclass
class Case:
    name: str
    model: torch.nn.Module
    data: Dataset
    batch_size: int
    steps: int
    device: torch.device = torch.device("cpu")
    fp16: bool = False

    @property
    def logging_steps(self) -> int:
        return max(1, min(50, self.steps // 2))


def make_case(name: str, steps: int | None, device: str = "cpu", fp16: bool = False) -> Case:
    case = _make_cpu_case(name, steps)
    case.device, case.fp16 = torch.device(device), fp16
    return case


def _make_cpu_case(name: str, steps: int | None) -> Case:
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if name == "tiny":  # almost no compute: the difference to the hand loop is the loop's own cost per step
        x = torch.randn(512, 4, generator=generator)
        data = DictDataset({"x": x, "labels": torch.randint(0, 2, (512,), generator=generator)})
        return Case("tiny", MLP(features=4, hidden=4, classes=2), data, batch_size=2, steps=steps or 2000)
    if name == "mlp":
        x = torch.randn(4096, 64, generator=generator)
        data = DictDataset({"x": x, "labels": torch.randint(0, 10, (4096,), generator=generator)})
        return Case("mlp", MLP(), data, batch_size=32, steps=steps or 1000)
    ids = torch.randint(0, 1000, (1024, 64), generator=generator)
    data = DictDataset({"input_ids": ids, "labels": torch.randint(0, 4, (1024,), generator=generator)})
    return Case("transformer", TinyTransformer(), data, batch_size=16, steps=steps or 40)


# ---- the contenders: each trains `case.steps` optimizer steps and returns the last logged loss ------------------
def hand_loop(case: Case, model: torch.nn.Module, workdir: str) -> float:
    loader = DataLoader(
        case.data,
        batch_size=case.batch_size,
        shuffle=True,
        collate_fn=default_collate,
        generator=torch.Generator().manual_seed(0),
    )
    model.to(case.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1 - step / case.steps))
    scaler = torch.amp.GradScaler("cuda", enabled=case.fp16)
    model.train()
    step, last = 0, math.nan
    while step < case.steps:
        for batch in loader:
            batch = {name: tensor.to(case.device, non_blocking=True) for name, tensor in batch.items()}
            with torch.autocast(case.device.type, dtype=torch.float16, enabled=case.fp16):
                loss = model(**batch)["loss"]
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % case.logging_steps == 0:
                last = loss.item()
            if step == case.steps:
                break
    return last


def ours(case: Case, model: torch.nn.Module, workdir: str) -> float:
    from trainer import PrinterCallback, Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=workdir,
        max_steps=case.steps,
        per_device_train_batch_size=case.batch_size,
        learning_rate=LEARNING_RATE,
        lr_scheduler_type="linear",
        max_grad_norm=1.0,
        logging_steps=case.logging_steps,
        save_strategy="no",
        disable_tqdm=True,
        report_to="none",
        use_cpu=case.device.type == "cpu",
        fp16=case.fp16,
    )
    trainer = Trainer(model=model, args=args, train_dataset=case.data, data_collator=default_collate)
    trainer.pop_callback(PrinterCallback)  # printing is not what is measured
    with Stopwatch() as ours.watch:
        trainer.train()
    return last_logged_loss(trainer.state.log_history)


def transformers_trainer(case: Case, model: torch.nn.Module, workdir: str) -> float:
    import transformers

    args = transformers.TrainingArguments(
        output_dir=workdir,
        max_steps=case.steps,
        per_device_train_batch_size=case.batch_size,
        learning_rate=LEARNING_RATE,
        lr_scheduler_type="linear",
        max_grad_norm=1.0,
        logging_steps=case.logging_steps,
        save_strategy="no",
        disable_tqdm=True,
        report_to="none",
        use_cpu=case.device.type == "cpu",
        fp16=case.fp16,
        dataloader_pin_memory=False,
        weight_decay=0.0,
    )
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=case.data, data_collator=default_collate
    )
    trainer.remove_callback(transformers.PrinterCallback)
    with Stopwatch() as transformers_trainer.watch:
        trainer.train()
    return last_logged_loss(trainer.state.log_history)


def last_logged_loss(log_history: list[dict]) -> float:
    losses = [entry["loss"] for entry in log_history if "loss" in entry]
    return losses[-1] if losses else math.nan


class Stopwatch:
    """Wall time and this process's CPU time (the latter barely moves when other processes load the machine)."""

    def __enter__(self) -> Stopwatch:
        _wait_for_gpu()
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        _wait_for_gpu()  # CUDA runs asynchronously: count the kernels still queued
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def _wait_for_gpu() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed(contender: Callable, case: Case) -> tuple[float, float, float]:
    """(wall s/step, CPU s/step, loss) of one run: train() for the trainers, the whole loop for the hand one."""
    model = copy.deepcopy(case.model)
    with tempfile.TemporaryDirectory() as workdir, Stopwatch() as whole:
        loss = contender(case, model, workdir)
    watch = getattr(contender, "watch", whole)
    return watch.wall / case.steps, watch.cpu / case.steps, loss


def contenders() -> dict[str, Callable]:
    found = {"hand loop": hand_loop, "trainer.Trainer": ours}
    try:
        import transformers  # noqa: F401

        logging.getLogger("transformers").setLevel(logging.ERROR)
        found["transformers.Trainer"] = transformers_trainer
    except ImportError:
        print("transformers is not installed: its Trainer is left out")
    return found


def run_case(name: str, steps: int | None, repeats: int, device: str = "cpu", fp16: bool = False) -> None:
    case = make_case(name, steps, device, fp16)
    runners = contenders()
    for (
        runner
    ) in runners.values():  # warm-up: imports, first optimizer step (torch._dynamo), allocator, CUDA context
        timed(runner, make_case(name, 20, device, fp16))
    wall: dict[str, list[float]] = {label: [] for label in runners}
    cpu: dict[str, list[float]] = {label: [] for label in runners}
    losses: dict[str, float] = {}
    for _ in range(repeats):
        for label, runner in runners.items():
            wall_s, cpu_s, losses[label] = timed(runner, case)
            wall[label].append(wall_s)
            cpu[label].append(cpu_s)
    print(
        f"\n{case.name}: {case.steps} optimizer steps, batch {case.batch_size}, {repeats} interleaved repeats, 1 thread, "
        f"{case.device.type}{' fp16' if case.fp16 else ''}"
    )
    print(
        "ms/step: median (best) of the repeats; x hand: median of each repeat's ratio to the hand run just before it;"
    )
    print("+us/step: median CPU time per step minus the hand loop's")
    columns = [
        ("contender", 22),
        ("CPU ms/step", 20),
        ("x hand (CPU)", 14),
        ("+us/step", 10),
        ("wall ms/step", 22),
        ("x hand (wall)", 15),
        ("last loss", 11),
    ]
    print(_row([c for c, _ in columns], [w for _, w in columns]))
    for label in runners:
        cells = [label]
        for values in (cpu, wall):
            median, best = statistics.median(values[label]), min(values[label])
            paired = statistics.median(a / b for a, b in zip(values[label], values["hand loop"], strict=True))
            cells += [f"{median * 1e3:.4f} ({best * 1e3:.4f})", f"{paired:.3f}"]
            if values is cpu:
                cells.append(f"{(median - statistics.median(cpu['hand loop'])) * 1e6:+.1f}")
        cells.append(f"{losses[label]:.4f}")
        print(_row(cells, [w for _, w in columns]))


def _row(cells: list[str], widths: list[int]) -> str:
    return "".join(
        f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["tiny", "mlp", "transformer", "all"], default="all")
    parser.add_argument(
        "--steps", type=int, default=None, help="optimizer steps per run (default: 1000 mlp, 40 transformer)"
    )
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="where every contender trains"
    )
    parser.add_argument("--fp16", action="store_true", help="fp16 autocast with a GradScaler (CUDA only)")
    options = parser.parse_args()
    if options.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU is visible to torch here")
    if options.fp16 and options.device != "cuda":
        parser.error("--fp16 needs --device cuda")
    torch.set_num_threads(1)
    for name in ("tiny", "mlp", "transformer") if options.case == "all" else (options.case,):
        run_case(name, options.steps, options.repeats, options.device, options.fp16)


if __name__ == "__main__":
    main()
