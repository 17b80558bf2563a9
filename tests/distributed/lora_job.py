"""A LoRA adapter over the real pretrained MiniLM trained by each rank (under `python -m trainer.launch`, or alone).

Rank 0 writes `result.json` (logged losses, the checkpoint files, the trained adapter's tensors as lists) and the
final adapter through save_model. LoRA dropout is 0 here so that 2 ranks at batch b and one process at batch 2b take
the same steps.

    python -m trainer.launch --nproc 2 tests/distributed/lora_job.py --out DIR --batch 4
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lora_minilm import collator, data, lora_model, trainable_state

from trainer import Trainer, TrainingArguments
from trainer.checkpoint import latest_checkpoint
from trainer.distributed import exit_rank
from trainer.launch import record


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--resume", default=None, help="a checkpoint folder to continue")
    return parser.parse_args(argv)


@record
def main(argv: list[str] | None = None) -> None:
    options = parse(argv)
    train, evaluation = data()
    args = TrainingArguments(
        output_dir=str(Path(options.out) / "run"),
        strategy=options.strategy,
        max_steps=options.max_steps,
        per_device_train_batch_size=options.batch,
        learning_rate=2e-3,
        logging_steps=1,
        save_strategy="steps",
        save_steps=2,
        disable_tqdm=True,
        report_to="none",
        seed=0,
        use_cpu=True,
    )
    trainer = Trainer(
        model=lora_model(lora_dropout=0.0),
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        data_collator=collator,
    )
    try:
        trainer.train(resume_from_checkpoint=options.resume)
        trainer.save_model(Path(options.out) / "final")
        if trainer.strategy.is_global_zero:
            module = trainer.strategy.unwrap(trainer.model)
            result = {
                "strategy": trainer.strategy.name,
                "world_size": trainer.strategy.world_size,
                "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
                "checkpoint_files": sorted(p.name for p in latest_checkpoint(args.output_dir).iterdir()),
                "adapter": {name: t.flatten().tolist() for name, t in trainable_state(module).items()},
            }
            Path(options.out, "result.json").write_text(json.dumps(result))
    finally:
        trainer.strategy.teardown()
    exit_rank(0)


if __name__ == "__main__":
    main()
