"""Fault injection ("chaos") for `hpo run`: studies of every kind, real processes, real signals, real storages.

    python tests/chaos/campaign.py --faults 40                  # 40 faults in all, spread over runs of 1-3 faults each
    python tests/chaos/campaign.py --faults 200 --seed 7 --out /tmp/chaos
    python tests/chaos/campaign.py --kinds kill_trial,preempt --faults 10
    python tests/chaos/campaign.py --replay 123456              # one run again, by the seed the report printed
    python tests/chaos/campaign.py --faults 200 --shard 0/3     # a third of that campaign (run 1/3 and 2/3 beside it)
    python tests/chaos/campaign.py --postgres-url postgresql://... --postgres-data /tmp/hpo-pg   # also PostgreSQL (restarts)

Each run draws, from its own seed (tests/chaos/plan.py), a study (Optuna median pruner, promotion ASHA, PBT, or
retries with retry_on_exception), a storage (SQLite, or PostgreSQL when a URL is given: --postgres-url or
$HPO_TEST_POSTGRES_URL), 1-3 workers, sometimes an `hpo worker` beside `hpo run`, and its faults (tests/chaos/faults.py):
SIGKILL of a trial, a worker, or `hpo run` with its whole tree; SIGSTOP of a worker past the grace period, then SIGCONT;
SIGTERM (a preemption); an exception in model_init, data or compute_metrics; an `hpo worker` whose writes fail
(RLIMIT_FSIZE: a full disk); a PostgreSQL restart, or an outage of 30 s to 5 minutes; a truncated or deleted checkpoint; a second `hpo run` at once.
Each fault lands a seeded delay after the study's first trial starts running (or after the previous fault). After
the faults, the harness does what a user would: runs the same `hpo run` command again until the study completes.
Then it checks the invariants (tests/chaos/checks.py). Prints faults by kind, runs, violations (each with the run's
seed and faults, to replay it) and the wall time; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import s3fs

# Run as a script, this folder is on the path but not the tests' shared helpers (pytest adds them: pyproject.toml).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))

from checks import check_all, load  # noqa: E402
from faults import Session, inject  # noqa: E402
from outage_proxy import OutageProxy  # noqa: E402
from plan import (  # noqa: E402
    FAULT_KINDS,
    OUTAGE_S,
    Fault,
    Scenario,
    draw_scenario,
    time_scale,
    write_study,
)

from hpo.spec import load_spec  # noqa: E402
from hpo.storage.study_db import storage_url  # noqa: E402

# Each limit in seconds is multiplied by plan.time_scale() (the machine's load), so slowness is not a finding.
RUN_DEADLINE_S = 300.0  # one chaos run, faults and restarts included; past it the study "did not complete"
MAX_RESTARTS = 12  # `hpo run` commands in a row that end no trial, before the study counts as stuck
FIRST_TRIAL_WAIT_S = 60.0
LEAVE_WAIT_S = 60.0  # for `hpo worker`s and second runs to leave once the study is done


@dataclass
class Outcome:
    scenario: Scenario
    runs: int = 0
    wall_s: float = 0.0
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class ObjectStoreAccess:
    """The S3 API on loopback as the studies reach it: through an OutageProxy, in one bucket, with these variables."""

    proxy: OutageProxy
    bucket: str
    env: dict[str, str]


def open_object_store(endpoint: str) -> ObjectStoreAccess:
    """A proxy in front of `endpoint` (moto's server: `.ci/s3.sh`) and a new bucket behind it."""
    where = urlparse(endpoint)
    proxy = OutageProxy((where.hostname or "127.0.0.1", where.port or 80))
    proxy.up()
    env = {
        "AWS_ENDPOINT_URL": proxy.url,
        "AWS_ACCESS_KEY_ID": "hpo-chaos",
        "AWS_SECRET_ACCESS_KEY": "hpo-chaos-secret",  # moto checks no key
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    bucket = f"hpo-chaos-{uuid.uuid4().hex[:8]}"
    with environment(env):
        s3fs.S3FileSystem(skip_instance_cache=True).mkdir(bucket)
    return ObjectStoreAccess(proxy, bucket, env)


@contextlib.contextmanager
def environment(extra: dict[str, str]) -> Iterator[None]:
    """These variables set in this process for the block (the checks read an object-store study as hpo does)."""
    before = {name: os.environ.get(name) for name in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_one(
    scenario: Scenario,
    folder: Path,
    postgres_url: str | None,
    pg_data: Path | None,
    store: ObjectStoreAccess | None = None,
) -> Outcome:
    """Run the scenario's study with its faults, restart it until it completes, check the invariants."""
    started = time.monotonic()
    storage = postgres_url if scenario.postgres else None
    scale = time_scale()
    in_store = store if scenario.object_store else None
    path = write_study(folder, scenario, storage, scale, bucket=in_store.bucket if in_store else None)
    if (
        in_store is not None and storage is None
    ):  # SQLite in the mirror of the object store: where hpo run keeps it
        with environment(in_store.env):
            storage = storage_url(load_spec(path))
    session = Session(
        folder,
        storage,
        pg_data=pg_data if scenario.postgres else None,
        workers=scenario.workers,
        scale=scale,
        proxy=in_store.proxy if in_store else None,
        env=in_store.env if in_store else {},
    )
    outcome = Outcome(scenario)
    rng = random.Random(scenario.seed * 7919 + 1)  # picks the targets: which trial, which worker
    try:
        session.start("run")
        if scenario.extra_worker:
            session.start("worker")
        wait_for_first_trial(session)
        for fault in scenario.faults:
            time.sleep(fault.delay)
            inject_into_a_run(session, outcome, fault, rng)
        finish(session, outcome, started)
    finally:
        session.end_all()
    outcome.runs = session.runs
    if not outcome.violations:
        with environment(session.env):
            spec = load_spec(path)
            outcome.violations += check_all(spec, damaged_trials(scenario))  # type: ignore[arg-type]
    outcome.violations += unexpected_output(session)
    outcome.wall_s = time.monotonic() - started
    return outcome


def inject_into_a_run(session: Session, outcome: Outcome, fault: Fault, rng: random.Random) -> None:
    """Inject `fault` into a running study, restarting `hpo run` first when the last fault ended it. A run may also
    end while the fault looks for its target (a restarted run that fails at once and is restarted later by `finish`):
    then the fault is tried once more on the next run, so that it lands on some run rather than on none. A study that
    is already complete is not started again for a fault: there is nothing left to hit."""
    for _ in range(2):
        if not session.alive(("run",)) and _complete_already(session):
            return  # the study ended before this fault: nothing left to hit (it stays not injected)
        if not session.alive(("run",)):
            restart(session, outcome)
            wait_for_first_trial(session)
        inject(session, fault, rng)
        if fault.injected or session.alive(("run",)):
            return
        outcome.notes.append(
            f"{fault.kind}: the run ended before it found a target; tried again on a new run"
        )


def _complete_already(session: Session) -> bool:
    try:
        return study_done(session)
    except Exception:  # no study to read yet (a run that died before creating it): not complete
        return False


def damaged_trials(scenario: Scenario) -> set[str]:
    """The trial folders ("trial-2") whose checkpoints a damage_checkpoint fault cut short or deleted."""
    return {
        part
        for fault in scenario.faults
        if fault.kind == "damage_checkpoint" and fault.injected
        for part in Path(fault.target.split(" ", 1)[-1]).parts
        if part.startswith("trial-")
    }


def wait_for_first_trial(session: Session) -> None:
    deadline = time.monotonic() + FIRST_TRIAL_WAIT_S * session.scale
    while time.monotonic() < deadline and not session.trials_now() and session.alive(("run",)):
        time.sleep(0.1)


def restart(session: Session, outcome: Outcome) -> None:
    """Run the same command again, as a user would after the fault ended it."""
    run = session.main_run()
    if run is not None and run.process.returncode == 0 and not session.alive(("worker", "second_run")):
        outcome.notes.append(f"hpo run exited 0 with the study not complete (log {run.log.name})")
    session.start("run")


def finish(session: Session, outcome: Outcome, started: float) -> None:
    """Wait for `hpo run` (restarting it when it ended without completing the study), then for everything else. Stuck
    means MAX_RESTARTS runs in a row that ended no trial, or RUN_DEADLINE_S (both scaled to the machine's load)."""
    restarts, ended = 0, finished_trials(session)
    run_deadline = RUN_DEADLINE_S * session.scale + outage_allowance(outcome.scenario)
    while time.monotonic() - started < run_deadline:
        run = session.main_run()
        if run is not None and run.process.poll() is None:
            time.sleep(0.2)
            continue
        if run is not None and run.process.returncode == 0 and study_done(session):
            break
        now_ended = finished_trials(session)
        if (
            now_ended > ended
        ):  # progress: on a loaded machine a run may end having done little, but not nothing
            restarts, ended = 0, now_ended
        if restarts >= MAX_RESTARTS:
            outcome.violations.append(
                f"the study did not complete: {restarts} more runs of hpo run in a row ended no trial"
            )
            return
        restarts += 1
        restart(session, outcome)
    else:
        outcome.violations.append(f"the study did not complete within {run_deadline:.0f} s")
        return
    leave_wait = LEAVE_WAIT_S * session.scale
    deadline = time.monotonic() + leave_wait
    while (
        session.alive() and time.monotonic() < deadline
    ):  # `hpo worker`s and second runs leave by themselves
        time.sleep(0.2)
    for left in session.alive():
        outcome.violations.append(
            f"{left.role} pid {left.process.pid} still running {leave_wait:.0f} s after the study ended"
        )


def outage_allowance(scenario: Scenario) -> float:
    """Seconds added to a study's deadline for the long outages it waits out: its own, and on PostgreSQL one of another
    shard's beside it (shards of one campaign share the server, so one's outage stops the others' studies too)."""
    shared = OUTAGE_S[1] if scenario.postgres else 0.0
    return scenario.outage_s() + shared


def finished_trials(session: Session) -> int:
    try:
        with environment(session.env):
            spec = load_spec(session.folder / "study.yaml")
            return sum(t.state.is_finished() for t in load(spec))  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - no study yet (the first run was killed before creating it)
        return 0


def study_done(session: Session) -> bool:
    """The study completed: no trial running or waiting, n_trials reached (the checks say it in detail)."""
    with environment(session.env):
        spec = load_spec(session.folder / "study.yaml")
        trials = load(spec)  # type: ignore[arg-type]
    busy = [t for t in trials if not t.state.is_finished()]
    ends = [t for t in trials if t.state.is_finished() and not t.user_attrs.get("requeued")]
    return not busy and len(ends) >= (spec.study.n_trials or 0)  # type: ignore[union-attr]


def unexpected_output(session: Session) -> list[str]:
    """A traceback shown to the user is a defect (the disk-full worker's own is expected: its writes fail)."""
    found = []
    for started in session.started:
        if started.role == "disk_full" or not started.log.exists():
            continue
        if "Traceback" in started.log.read_text(errors="replace"):
            found.append(f"a traceback in the output of {started.role} ({started.log.name})")
    return found


# ---- the campaign -----------------------------------------------------------------------------------------------------
def plan_runs(
    seed: int, faults: int, kinds: list[str], postgres: bool, object_store: bool = False
) -> list[Scenario]:
    """Runs of 1-3 faults each until `faults` are planned; each run's own seed drawn from the campaign's."""
    rng = random.Random(seed)
    scenarios, planned = [], 0
    while planned < faults:
        count = min(rng.randint(1, 3), faults - planned)
        scenarios.append(
            draw_scenario(rng.randrange(10**6), kinds, count, postgres, object_store=object_store)
        )
        planned += count
    return scenarios


def report(outcomes: list[Outcome], wall: float) -> dict:
    injected = Counter(f.kind for o in outcomes for f in o.scenario.faults if f.injected)
    missed = Counter(f.kind for o in outcomes for f in o.scenario.faults if not f.injected)
    failing = [o for o in outcomes if o.violations]
    print(
        f"\nchaos: {len(outcomes)} studies, {sum(o.runs for o in outcomes)} hpo run commands, wall {wall:.0f} s"
    )
    print("faults injected by kind (and planned but with nothing to hit):")
    for kind in sorted(set(injected) | set(missed)):
        print(f"  {kind:<18} {injected[kind]:>4}   ({missed[kind]} missed)")
    by_study = Counter(
        o.scenario.study
        + ("/postgres" if o.scenario.postgres else "/sqlite")
        + ("/s3" if o.scenario.object_store else "")
        for o in outcomes
    )
    print("studies: " + ", ".join(f"{k} {v}" for k, v in sorted(by_study.items())))
    print(f"invariant violations: {sum(len(o.violations) for o in failing)} in {len(failing)} studies")
    for outcome in failing:
        faults = [(f.kind, f.detail, f.target) for f in outcome.scenario.faults]
        print(
            f"  seed {outcome.scenario.seed} ({outcome.scenario.study}, replay: --replay {outcome.scenario.seed} "
            f"--replay-faults {len(outcome.scenario.faults)} --kinds ...)"
        )
        print(f"    faults: {faults}")
        for line in outcome.violations:
            print(f"    - {line}")
    return {
        "studies": len(outcomes),
        "runs": sum(o.runs for o in outcomes),
        "wall_s": round(wall, 1),
        "injected": dict(injected),
        "missed": dict(missed),
        "violations": [
            {
                "seed": o.scenario.seed,
                "scenario": o.scenario.describe(),
                "violations": o.violations,
                "notes": o.notes,
            }
            for o in failing
        ],
        "notes": {o.scenario.seed: o.notes for o in outcomes if o.notes},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=20, help="faults to inject in all, across runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kinds", default=",".join(FAULT_KINDS), help="a comma-separated subset of the fault kinds"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="where the studies go (default: a new temp folder)"
    )
    parser.add_argument("--replay", type=int, default=None, help="run one study again by its seed")
    parser.add_argument(
        "--replay-faults", type=int, default=None, help="with --replay: how many faults it had"
    )
    parser.add_argument(
        "--shard",
        default=None,
        help="K/N: only studies K, K+N, K+2N... of the campaign's plan (0-based): one campaign over N processes",
    )
    parser.add_argument("--postgres-url", default=os.environ.get("HPO_TEST_POSTGRES_URL"))
    parser.add_argument("--postgres-data", type=Path, default=os.environ.get("HPO_PG_DATA"))
    parser.add_argument(
        "--s3-endpoint",
        default=os.environ.get("HPO_TEST_S3_ENDPOINT"),
        help="an S3 API (moto's server: .ci/s3.sh); a third of the studies then keep their checkpoints there",
    )
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; choose from {', '.join(FAULT_KINDS)}")
    out = args.out or Path(__import__("tempfile").mkdtemp(prefix="hpo-chaos-"))
    postgres, object_store = bool(args.postgres_url), bool(args.s3_endpoint)
    store = open_object_store(args.s3_endpoint) if object_store else None
    if args.replay is not None:
        scenarios = [
            draw_scenario(args.replay, kinds, args.replay_faults or 3, postgres, object_store=object_store)
        ]
    else:
        scenarios = plan_runs(args.seed, args.faults, kinds, postgres, object_store)
    if args.shard:
        index, _, count = args.shard.partition("/")
        scenarios = scenarios[int(index) :: int(count)]
    started, outcomes = time.monotonic(), []
    for scenario in scenarios:
        outcome = run_one(
            scenario, out / f"study-{scenario.seed}", args.postgres_url, args.postgres_data, store
        )
        outcomes.append(outcome)
        faults = ", ".join(f"{f.kind}{'' if f.injected else ' (missed)'}" for f in scenario.faults)
        state = "ok" if not outcome.violations else f"{len(outcome.violations)} VIOLATIONS"
        print(
            f"seed {scenario.seed}: {scenario.study} on {'postgres' if scenario.postgres else 'sqlite'}"
            f"{', checkpoints in s3' if scenario.object_store else ''}, "
            f"{scenario.workers} worker(s){' + hpo worker' if scenario.extra_worker else ''}: {faults}; "
            f"{outcome.runs} runs, {outcome.wall_s:.0f} s: {state}",
            flush=True,
        )
        for line in outcome.violations:  # as found: a shard stopped before its report still says what it saw
            print(f"    - {line}", flush=True)
    summary = report(outcomes, time.monotonic() - started)
    (out / "chaos.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"details: {out / 'chaos.json'}")
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
