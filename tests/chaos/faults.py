"""Starting `hpo run` / `hpo worker` as a user would, finding their processes, and injecting one fault into them.

A `Session` owns every process the harness started for one chaos run. Processes are found through psutil: a worker is
a process running `hpo.scheduling.worker`; a trial is a child of a worker (the worker forks it).
"""

from __future__ import annotations

import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from outage_proxy import OutageProxy
from plan import GRACE_S, Fault

POSTGRES_SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "postgres.sh"
PREEMPT_WAIT_S = 60.0  # a SIGTERMed run saves at the next step and exits; it must not take longer than this


@dataclass
class Started:
    role: str  # run | worker | second_run | disk_full
    process: subprocess.Popen
    log: Path


@dataclass
class Session:
    folder: Path
    storage: str | None  # the URL an `hpo worker` joins
    pg_data: Path | None = None
    workers: int = 1
    scale: float = 1.0  # plan.time_scale() when the run began: every wait below is this many times longer
    started: list[Started] = field(default_factory=list)
    runs: int = 0  # `hpo run` commands started, the first one included
    outages: list[threading.Timer] = field(default_factory=list)  # a stopped server's start, due later
    proxy: OutageProxy | None = None  # in front of the object store, for a study whose output folder is there
    env: dict[str, str] = field(
        default_factory=dict
    )  # for every command: the object store's endpoint and keys

    # ---- starting commands ---------------------------------------------------------------------------------------
    def command(self, verb: str) -> list[str]:
        study = str(self.folder / "study.yaml")
        if verb == "run":
            return [
                sys.executable,
                "-m",
                "hpo.cli",
                "run",
                study,
                "--no-dry-run",
                "--workers",
                str(self.workers),
            ]
        url = self.storage or f"sqlite:///{self.folder / 'out' / 'study.db'}"
        return [sys.executable, "-m", "hpo.cli", "worker", study, "--storage", url, "--workers", "1"]

    def start(self, role: str, file_size_limit: int | None = None) -> Started:
        """`hpo run` (role run / second_run) or `hpo worker` (worker / disk_full) in its own session, output to a
        log file. `file_size_limit`: RLIMIT_FSIZE for it and everything it starts (writes past it fail: EFBIG)."""
        verb = "run" if role in ("run", "second_run") else "worker"
        log = self.folder / f"{role}-{len(self.started)}.log"
        limit = file_size_limit

        def prepare() -> None:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # as from a terminal (a background shell ignores it)
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        with log.open("w") as out:
            process = subprocess.Popen(
                self.command(verb),
                cwd=self.folder,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "OMP_NUM_THREADS": "1", **self.env},
                preexec_fn=prepare,
                start_new_session=True,
            )
        started = Started(role, process, log)
        self.started.append(started)
        if verb == "run":
            self.runs += 1
        return started

    def main_run(self) -> Started | None:
        runs = [s for s in self.started if s.role == "run"]
        return runs[-1] if runs else None

    def alive(self, roles: tuple[str, ...] = ("run", "worker", "second_run", "disk_full")) -> list[Started]:
        return [s for s in self.started if s.role in roles and s.process.poll() is None]

    # ---- finding processes ---------------------------------------------------------------------------------------
    def tree(self, started: Started) -> list[psutil.Process]:
        try:
            root = psutil.Process(started.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def workers_now(self) -> list[psutil.Process]:
        """Worker processes. A trial is forked by its worker and so shows the worker's command line: a process whose
        parent is a worker is a trial, not a worker."""
        found = []
        for started in self.alive():
            for proc in self.tree(started):
                try:
                    if _is_worker(proc) and not _is_worker(proc.parent()):
                        found.append(proc)
                except psutil.Error:
                    pass
        return found

    def trials_now(self) -> list[psutil.Process]:
        found = []
        for worker in self.workers_now():
            try:
                found += worker.children()
            except psutil.Error:
                pass
        return found

    def kill_tree(self, started: Started, signum: int = signal.SIGKILL) -> None:
        """Signal a command and everything under it (collected first: a dead parent's children move to init)."""
        for proc in self.tree(started):
            try:
                proc.send_signal(signum)
            except psutil.Error:
                pass
        if signum == signal.SIGKILL:
            started.process.wait()

    def end_all(self) -> None:
        for started in self.alive():
            self.kill_tree(started)
        self.end_outages()

    def end_outages(self) -> None:
        """Start now a server an outage stopped (the next study must not begin inside this one's outage)."""
        for back in self.outages:
            if back.is_alive():
                back.cancel()
                pg_start(self)
        if self.proxy is not None:
            self.proxy.end_outage()


def pick(rng: random.Random, items: list[psutil.Process]) -> psutil.Process | None:
    return rng.choice(sorted(items, key=lambda p: p.pid)) if items else None


def _is_worker(proc: psutil.Process | None) -> bool:
    return proc is not None and "hpo.scheduling.worker" in " ".join(proc.cmdline())


def signal_one(
    session: Session, found: callable, signum: int, what: str, rng: random.Random
) -> psutil.Process | None:
    """Signal one of the processes `found` returns, waiting up to 10 s (scaled) for one. A process may end between
    being listed and being signalled (a trial finishing, a worker leaving): then another is picked."""
    deadline = time.monotonic() + 10.0 * session.scale
    while time.monotonic() < deadline:
        victim = pick(rng, wait_for(found, deadline - time.monotonic()))
        if _signal(victim, signum, what) is not None:
            return victim
    return None


def wait_for(found: callable, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = found()
        if items:
            return items
        time.sleep(0.1)
    return []


# ---- the faults ---------------------------------------------------------------------------------------------------
def inject(session: Session, fault: Fault, rng: random.Random) -> None:
    """Inject `fault` now; fill its target (what it hit) and `injected` (False: nothing to hit, e.g. no trial ran)."""
    handler = HANDLERS[fault.kind]
    target = handler(session, fault, rng)
    fault.target, fault.injected = target or "", bool(target)


def kill_trial(session: Session, fault: Fault, rng: random.Random) -> str | None:
    victim = signal_one(session, session.trials_now, signal.SIGKILL, "trial process", rng)
    return f"trial process pid {victim.pid}" if victim else None


def kill_worker(session: Session, fault: Fault, rng: random.Random) -> str | None:
    victim = signal_one(session, session.workers_now, signal.SIGKILL, "worker", rng)
    return f"worker pid {victim.pid}" if victim else None


def kill_run(session: Session, fault: Fault, rng: random.Random) -> str | None:
    run = session.main_run()
    if run is None or run.process.poll() is not None:
        return None
    session.kill_tree(run)
    return f"hpo run pid {run.process.pid} and its tree"


def stop_worker(session: Session, fault: Fault, rng: random.Random) -> str | None:
    victim = signal_one(session, session.workers_now, signal.SIGSTOP, "worker", rng)
    if victim is None:
        return None
    stopped = GRACE_S * session.scale + 2.0  # longer than the study's grace period: its trial is found stale
    time.sleep(stopped)
    _signal(victim, signal.SIGCONT, "worker")
    return f"worker pid {victim.pid} stopped {stopped:.0f} s"


def preempt(session: Session, fault: Fault, rng: random.Random) -> str | None:
    run = session.main_run()
    if run is None or run.process.poll() is not None:
        return None
    run.process.send_signal(signal.SIGTERM)
    try:
        run.process.wait(PREEMPT_WAIT_S * session.scale)
    except subprocess.TimeoutExpired:
        session.kill_tree(run)
        waited = PREEMPT_WAIT_S * session.scale
        return f"hpo run pid {run.process.pid}: SIGTERM, still running after {waited:.0f} s (killed)"
    return f"hpo run pid {run.process.pid}: SIGTERM, exit {run.process.returncode}"


def exception(session: Session, fault: Fault, rng: random.Random) -> str | None:
    (session.folder / f"raise-{fault.detail}").touch()
    return f"{fault.detail} raises in the next trial that calls it"


def disk_full(session: Session, fault: Fault, rng: random.Random) -> str | None:
    started = session.start("disk_full", file_size_limit=int(fault.detail))
    return f"hpo worker pid {started.process.pid} with files limited to {int(fault.detail) // 1024} KiB"


def pg_restart(session: Session, fault: Fault, rng: random.Random) -> str | None:
    return "postgres restarted" if pg_ctl(session, "restart") else None


def pg_outage(session: Session, fault: Fault, rng: random.Random) -> str | None:
    """The server stops (`-m fast`: every connection cut, as a maintenance restart or a failover does) and starts again
    `fault.detail` seconds later, while the next faults land. The study must wait it out and lose nothing."""
    if not pg_ctl(session, "stop"):
        return None
    seconds = float(fault.detail)
    back = threading.Timer(seconds, pg_start, args=(session,))
    back.daemon = True
    back.start()
    session.outages.append(back)
    return f"postgres down for {seconds:.0f} s"


def s3_outage(session: Session, fault: Fault, rng: random.Random) -> str | None:
    """The object store stops answering (connections refused, open ones cut) for `fault.detail` seconds. Uploads must
    wait and retry, and no checkpoint be recorded as saved that is not."""
    if session.proxy is None:
        return None
    seconds = float(fault.detail)
    session.proxy.down(seconds)
    return f"object store down for {seconds:.0f} s"


def pg_start(session: Session) -> bool:
    """Start the stopped server as `.ci/postgres.sh` first did (its port and options; a bare `pg_ctl start` would
    listen on PostgreSQL's default port instead)."""
    if session.pg_data is None:
        return False
    done = subprocess.run(
        ["bash", str(POSTGRES_SCRIPT), "start"],
        env={**os.environ, "HPO_PG_DATA": str(session.pg_data)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=90,
        check=False,
    )
    return done.returncode == 0


def pg_ctl(session: Session, action: str) -> bool:
    """`pg_ctl ACTION` on the session's server, waiting until it is done; False when there is no server to act on."""
    if session.pg_data is None:
        return False
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not bins:
        return False
    log = str(session.pg_data / "server.log")  # without -l the server would hold our pipe open for its life
    command = [str(bins[-1]), "-D", str(session.pg_data), "-l", log, "-w", "-t", "60", "-m", "fast", action]
    if os.getuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=90, check=False
    )
    return done.returncode == 0


def damage_checkpoint(session: Session, fault: Fault, rng: random.Random) -> str | None:
    folders = sorted((session.folder / "out").glob("trial-*/checkpoint-*"))
    folders = [f for f in folders if f.is_dir()]
    if not folders:
        return None
    folder = rng.choice(folders)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    try:
        if fault.detail == "delete_folder" or not files:
            for path in files:
                path.unlink(missing_ok=True)
            folder.rmdir()
            return f"deleted {folder.relative_to(session.folder)}"
        path = rng.choice(files)
        if fault.detail == "truncate":
            with path.open("r+b") as handle:
                handle.truncate(path.stat().st_size // 2)
            return f"truncated {path.relative_to(session.folder)}"
        path.unlink()
        return f"deleted {path.relative_to(session.folder)}"
    except OSError:
        return None  # the retention rules deleted it first


def second_run(session: Session, fault: Fault, rng: random.Random) -> str | None:
    started = session.start("second_run")
    return f"a second hpo run, pid {started.process.pid}"


def _signal(victim: psutil.Process | None, signum: int, what: str) -> str | None:
    if victim is None:
        return None
    try:
        victim.send_signal(signum)
    except psutil.Error:
        return None
    return f"{what} pid {victim.pid}"


HANDLERS = {
    "kill_trial": kill_trial,
    "kill_worker": kill_worker,
    "kill_run": kill_run,
    "stop_worker": stop_worker,
    "preempt": preempt,
    "exception": exception,
    "disk_full": disk_full,
    "pg_restart": pg_restart,
    "pg_outage": pg_outage,
    "s3_outage": s3_outage,
    "damage_checkpoint": damage_checkpoint,
    "second_run": second_run,
}
