"""No TrainingArguments field is parsed and then ignored: each is read by the Trainer's code, acts through a derived
value that is (`DERIVED_FIELDS`), is for scripts as in transformers (`SCRIPT_FIELDS`), or is refused when set
(`trainer/args_unsupported.py`). A new field that none of these covers fails here, by name."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from trainer_tasks import Regression, make_model, quiet_args

import trainer
from trainer import Trainer, TrainingArguments
from trainer.args import DERIVED_FIELDS, SCRIPT_FIELDS
from trainer.args_unsupported import UNSUPPORTED
from trainer.eval_accumulation import DeviceAccumulator

PACKAGE = Path(trainer.__file__).parent
# Where the fields are declared, checked and refused: a name read there has not acted yet.
DECLARING = {PACKAGE / "args.py", PACKAGE / "args_unsupported.py"}


def names_read_by_the_trainer() -> set[str]:
    """Attribute names (`args.<name>`) and exact-name strings (`getattr(args, "<name>")`) in the Trainer's modules."""
    read: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path in DECLARING:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                read.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                read.add(node.value)
    return read


def test_every_field_is_read_derived_for_scripts_or_refused():
    read = names_read_by_the_trainer()
    ignored = [
        field.name
        for field in dataclasses.fields(TrainingArguments)
        if field.name not in read
        and field.name not in UNSUPPORTED
        and field.name not in SCRIPT_FIELDS
        and DERIVED_FIELDS.get(field.name) not in read
    ]
    assert not ignored, f"parsed and never read: {ignored}; make the Trainer act on them or refuse them"


def test_the_lists_name_real_fields_and_do_not_overlap():
    fields = {field.name for field in dataclasses.fields(TrainingArguments)}
    lists = [set(UNSUPPORTED), set(SCRIPT_FIELDS), set(DERIVED_FIELDS)]
    assert all(names <= fields for names in lists)
    assert sum(len(names) for names in lists) == len(set().union(*lists))


def test_eval_accumulation_steps_moves_n_batches_in_one_copy_with_the_same_predictions(tmp_path, monkeypatch):
    """transformers' meaning: outputs stay on the device for N evaluation batches, then move to the CPU together."""
    copies: dict[int | None, list[int]] = {}
    original = DeviceAccumulator.chunks

    def counted(self):
        chunks = original(self)
        copies.setdefault(self.every, []).append(self.copies)
        return chunks

    monkeypatch.setattr(DeviceAccumulator, "chunks", counted)  # the real accumulator, observed
    outputs = []
    for steps in (None, 2):
        args = quiet_args(tmp_path, eval_accumulation_steps=steps, per_device_eval_batch_size=4)
        outputs.append(Trainer(model=make_model(), args=args).predict(Regression(18)))
    assert (outputs[0].predictions == outputs[1].predictions).all()
    assert outputs[0].metrics["test_loss"] == outputs[1].metrics["test_loss"]
    # 18 samples in batches of 4: 5 batches, moved 5 times one by one, or 3 times two by two (the last alone)
    assert copies[1][:3] == [5, 5, 5] and copies[2][:3] == [3, 3, 3]
