"""Small pieces: the events API on a spec, RunInfo identities, FSDP shard consolidation, offline-by-default wandb."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from study_task import write_study

from hpo.errors import HpoError
from hpo.export.weights import checkpoint_state_dict
from hpo.spec import load_study_spec
from hpo.tracking import RunInfo
from hpo.tracking.environment import git_commit
from hpo.tracking.events import KeptOpenEvents, record_event, store_location
from hpo.tracking.store import open_store
from hpo.tracking.wandb_callback import default_mode


def test_record_event_through_a_study_spec_sets_the_status(tmp_path):
    spec = load_study_spec(write_study(tmp_path, tracking={"store": True}))
    assert store_location(spec) == str(tmp_path / "out" / "experiments.db")

    assert record_event(spec, "test/trial-4", "interrupted", "SIGINT at step 30", {"step": 30})

    row = open_store(spec.store_url).run("test/trial-4")
    assert (row["status"], row["trial_number"]) == ("interrupted", 4)


def test_record_event_with_the_store_off_or_down_never_raises(tmp_path):
    spec = load_study_spec(write_study(tmp_path, tracking={"store": False}))
    assert record_event(spec, "test/trial-0", "failed") is False
    assert record_event("postgresql://nobody:x@127.0.0.1:1/none", "test/trial-0", "failed") is False
    with pytest.raises(ValueError, match="unknown event kind"):
        record_event(tmp_path / "e.db", "test/trial-0", "finished")


def test_kept_open_events_write_through_one_store_and_reopen_after_a_failure(tmp_path):
    """A worker's events: one open store for many; a store whose connection went away costs one event, and the next
    event opens it again."""
    spec = load_study_spec(write_study(tmp_path, tracking={"store": True}))
    events = KeptOpenEvents(spec)
    assert events.record("test/trial-1", "paused", "paused at step 40", {"step": 40})
    first = events._store
    assert events.record("test/trial-2", "paused", "paused at step 80", {"step": 80})
    assert events._store is first  # not opened again
    first.close()  # the connection goes away under it
    assert events.record("test/trial-1", "failed", "lost") is False
    assert events.record("test/trial-2", "interrupted", "SIGINT") is True
    assert events._store is not first
    events.close()
    store = open_store(spec.store_url)
    assert store.run("test/trial-1")["status"] == "paused"  # the lost event was not written
    assert store.run("test/trial-2")["status"] == "interrupted"
    assert (
        KeptOpenEvents(load_study_spec(write_study(tmp_path / "off", tracking={"store": False}))).record(
            "test/trial-0", "failed"
        )
        is False
    )


def test_run_info_ids():
    trial = RunInfo(kind="trial", study_name="digits", trial_number=7, devices=[0, 1])
    assert (trial.run_id, trial.name, trial.devices) == ("digits/trial-7", "trial-7", "0,1")
    run = RunInfo(kind="run", name="mlp")
    assert run.run_id.startswith("run/mlp-")
    with pytest.raises(ValueError, match="study_name and trial_number"):
        RunInfo(kind="trial", study_name="digits")


def test_fsdp_shards_are_joined_along_the_first_dimension(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.BatchNorm1d(5))
    full = {k: torch.randn_like(v.float()).to(v.dtype) for k, v in model.state_dict().items()}
    meta = {"fsdp": json.dumps({"world_size": 2})}
    for rank in (0, 1):
        # 5 rows over 2 ranks: 3 + 2 (Shard(0)); buffers such as the running mean are whole on every rank.
        rows = slice(0, 3) if rank == 0 else slice(3, 5)
        shard = {f"model.{k}": (v[rows] if k.startswith("0.") else v).contiguous() for k, v in full.items()}
        save_file(shard, str(tmp_path / f"fsdp_shard_rank{rank}.safetensors"), metadata=meta)

    joined = checkpoint_state_dict(tmp_path, model)

    assert set(joined) == set(full) and all(torch.equal(joined[k], full[k]) for k in full)


def test_a_checkpoint_without_weights_is_a_clear_error(tmp_path):
    with pytest.raises(HpoError, match="holds no weights"):
        checkpoint_state_dict(tmp_path, torch.nn.Linear(2, 2))


def test_wandb_mode_defaults_to_offline_without_an_api_key(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert default_mode(None) == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert default_mode(None) == "online" and default_mode("disabled") == "disabled"


def test_wandb_that_cannot_start_costs_the_wandb_run_not_the_trial(tmp_path, monkeypatch):
    from hpo.spec import WandbSpec
    from hpo.tracking.wandb_callback import WandbCallback
    from trainer import TrainerControl, TrainerState, TrainingArguments

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:1")  # nothing listens there
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "5")
    run = RunInfo(kind="trial", study_name="s", trial_number=0, output_dir=str(tmp_path))
    callback = WandbCallback(WandbSpec(mode="online", project="p"), run, directory=tmp_path)
    args, state, control = TrainingArguments(output_dir=str(tmp_path)), TrainerState(), TrainerControl()

    callback.on_train_begin(args, state, control)
    callback.on_log(args, state, control, logs={"loss": 1.0})
    callback.finish("completed", [0.5])

    assert callback.wandb_run is None and callback.mode == "disabled"


def test_the_git_commit_follows_the_current_folder(tmp_path, monkeypatch):
    """A run row records the commit of the checkout it ran in: a process that ran a study elsewhere first (a folder
    outside any checkout) still records its checkout's commit afterwards, and the other way round."""
    checkout = git_commit()
    assert checkout and len(checkout.removesuffix("-dirty")) == 40
    monkeypatch.chdir(tmp_path)
    assert git_commit() is None
    monkeypatch.undo()
    assert git_commit() == checkout
