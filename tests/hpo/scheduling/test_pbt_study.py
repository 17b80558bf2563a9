"""Population-based training on a real study: members pause at every interval, the bottom quantile copies the top
one's checkpoint with explored values, lineage is recorded, replay reproduces the winner, and a killed run continues."""

from __future__ import annotations

import json
import math
import socket
import subprocess

import pytest
import safetensors.torch
import torch
from cli_support import PBT
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from scheduler_support import kill_quietly, run_hpo_to_end, start_hpo, trials, wait_for
from study_task import write_study

from hpo.cli import main
from hpo.spec import load_study_spec
from hpo.storage.lineage import latest_by_member, member_of, members, schedule, segments
from hpo.storage.study_db import open_study
from hpo.study import run_study
from hpo.tracking.store import open_store


def pbt_study(folder, **sections):
    study = {"scheduler": PBT, "sampler": {"type": "random", "seed": 0}, **sections.pop("study", {})}
    return write_study(
        folder,
        study=study,
        training={"max_steps": None, "lr_scheduler_type": "linear", **sections.pop("training", {})},
        search_space={"learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.5, "log": True}},
        resources={"heartbeat_interval": 1, "grace_period": 3, **sections.pop("resources", {})},
        **sections,
    )


def weights(path):
    return safetensors.torch.load_file(path / "model.safetensors")


def test_members_exploit_in_lockstep_and_replay_reproduces_the_winner(tmp_path, capsys):
    # On the CPU where a GPU is present too: the replay is compared bit for bit, which CUDA kernels do not promise.
    path = pbt_study(tmp_path / "pbt", training={"use_cpu": True})
    summary = run_study(
        path, workers=2, dry_run=False
    )  # 4 members on 2 slots: two wait, paused or not yet started
    found = trials(tmp_path / "pbt")
    assert len(found) == 4 and {t.state for t in found} == {TrialState.COMPLETE}
    by_member = latest_by_member(found)
    for trial in found:
        assert sorted(trial.intermediate_values) == [4, 8]  # scored at every interval
        assert trial.user_attrs["global_step"] == 12
    # On the CPU a worker's trial process stays and takes the next member: two processes trained all four members'
    # twelve pieces, none forked per pause and resume.
    assert len({t.user_attrs["pid"] for t in found}) <= 2
    copies = [(m, s) for m, t in by_member.items() for s in segments(t) if s.source is not None]
    assert len(copies) == 2  # one bottom member (ceil(4 x 0.25)) at each of the steps 4 and 8
    for member, copy in copies:
        scores = {n: t.intermediate_values[copy.step] for n, t in by_member.items()}
        assert scores[member] == min(scores.values()) and scores[copy.source] == max(scores.values())
        # The source's values when it was copied: its latest segment by then (it may itself have copied earlier).
        before = [s for s in schedule(by_member, copy.source) if s.step <= copy.step][-1].params
        assert copy.params["learning_rate"] in (
            min(0.5, before["learning_rate"] * 2.0),
            max(1e-4, before["learning_rate"] * 0.5),
        )

    with pytest.raises(SystemExit) as replay_exit:
        main(["retrain", str(path), "--replay", "--out", str(tmp_path / "replay")])
    assert replay_exit.value.code in (0, None)
    out = capsys.readouterr().out
    best = max(found, key=lambda t: t.value)
    member = member_of(best, {t.number: t for t in found})
    steps = schedule(by_member, member)
    assert summary.best_trial.params == steps[-1].params  # `hpo run` shows the values the winner ended with
    assert f"replaying the schedule of trial {best.number}" in out and "from step 0: learning_rate=" in out
    # Trained from scratch along the schedule, the replay lands exactly where the member did.
    replayed = json.loads((tmp_path / "replay" / "metrics.json").read_text())
    assert replayed["final"]["eval_accuracy"] == best.value
    member_weights = weights(tmp_path / "pbt" / "out" / f"trial-{best.number}" / "checkpoint-12")
    replay_weights = weights(tmp_path / "replay" / "checkpoint-12")
    for name, tensor in member_weights.items():
        assert torch.equal(tensor, replay_weights[name]), name

    with pytest.raises(SystemExit):
        main(["export", str(path), "--out", str(tmp_path / "export")])
    exported = json.loads((tmp_path / "export" / "hyperparameters.json").read_text())
    assert [(e["step"], e["params"], e["member"]) for e in exported["schedule"]] == [
        (s.step, s.params, s.member) for s in steps
    ]
    assert (
        "Hyperparameter schedule (population-based training)"
        in (tmp_path / "export" / "README.md").read_text()
    )


@pytest.mark.slow  # 15-21 s: the default suite stays near 10 minutes on 2 cores
def test_a_killed_run_continues_with_no_member_lost(tmp_path):
    folder = tmp_path / "killed"
    pbt_study(folder, model={"delay": 0.2})  # a member trains about a second per interval: killed mid-segment
    process = start_hpo(folder, "run", "--workers", "2")
    try:
        # Killed once some member has paused at an interval (its state is in the database only).
        wait_for(
            lambda: (
                any(t.state == TrialState.WAITING for t in trials(folder))
                and any(t.state == TrialState.RUNNING for t in trials(folder))
            ),
            what="a paused member while another trains",
        )
        kill_quietly(process)
    finally:
        kill_quietly(process)
    second = start_hpo(folder, "run", "--workers", "2")
    output, _ = second.communicate(timeout=240)
    assert second.returncode == 0, output
    found = trials(folder)
    grouped = members(found)
    assert len(grouped) == 4  # the population, however many retries continued its members
    assert len(found) > 4  # the member killed while training was continued by a retry, from its checkpoint
    latest = latest_by_member(found)
    copies = [s for t in latest.values() for s in segments(t) if s.source is not None]
    assert len(copies) == 2  # the decisions at steps 4 and 8 were all taken, once
    for chain in grouped.values():
        last = chain[-1]
        assert last.state == TrialState.COMPLETE and last.user_attrs["global_step"] == 12
        scored = {s for t in chain for s in t.intermediate_values}
        assert scored == {4, 8} and all(
            math.isfinite(v) for t in chain for v in t.intermediate_values.values()
        )


def test_a_retried_member_records_its_retry_once_however_often_it_pauses(tmp_path):
    """Found by tests/chaos/campaign.py: each piece of a retried member (it pauses at every interval and is resumed in a new
    process) recorded "retried" again, so the store showed one retry per interval."""
    folder = tmp_path / "retried"
    path = pbt_study(
        folder,
        study={"scheduler": {**PBT, "population": 2, "max_resource": 8}},
        tracking={"store": True},
    )
    spec = load_study_spec(path)
    crashed = open_study(spec).ask({"learning_rate": FloatDistribution(1e-4, 0.5, log=True)})
    dead = subprocess.Popen(["true"])
    dead.wait()  # the process that ran member 0 is gone: `hpo run` queues it again as it starts
    for key, value in {"host": socket.gethostname(), "pid": dead.pid, "run_dir": spec.trial_dir(0)}.items():
        crashed.set_user_attr(key, value)
    run_hpo_to_end(folder, "run", "--workers", "1", timeout=240)
    (retry,) = [t for t in trials(folder) if t.user_attrs.get("requeued_from_trial") == 0]
    assert retry.state == TrialState.COMPLETE and sorted(retry.intermediate_values) == [4]  # paused once
    store = open_store(spec.store_url)
    (event,) = store.events(f"test/trial-{retry.number}", kind="retried")
    assert event["data"]["requeued_from_trial"] == 0
