"""Start N ranks of a training command with torch elastic (what `torchrun` uses), or notice that a launcher already did.

`launch_ranks(entry, nproc)` runs `entry` in `nproc` fresh processes per node with RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set, waits for them, and returns an exit code. When one rank fails, torch elastic stops the
others at once (no rank waits for a collective timeout) and the error of the rank that failed first is printed first.

`entry` is either a picklable function (run as `entry()` in each rank) or an argv list for the Python interpreter,
e.g. `["-m", "hpo.cli", "train", "run.yaml"]`.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Sequence

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

# Environment variables by which each launcher announces itself (checked in this order).
_LAUNCHER_MARKERS = (
    ("accelerate", "ACCELERATE_DYNAMO_BACKEND"),  # `accelerate launch` always exports its settings
    ("accelerate", "ACCELERATE_MIXED_PRECISION"),
    ("torchrun", "TORCHELASTIC_RUN_ID"),  # torchrun, and our own launch_ranks (also torch elastic)
    ("deepspeed", "CROSS_RANK"),  # the deepspeed launcher's per-node layout variables
    ("mpi", "OMPI_COMM_WORLD_SIZE"),
    ("env", "WORLD_SIZE"),
)


def detect_launcher() -> str | None:
    """Which launcher started this process: accelerate, torchrun, deepspeed, mpi, env (RANK/WORLD_SIZE only) or None."""
    for name, variable in _LAUNCHER_MARKERS:
        if variable in os.environ:
            return name
    return None


def is_launched_externally() -> bool:
    """True inside a rank started by torchrun, `accelerate launch`, the deepspeed launcher, MPI or `launch_ranks`: the
    command must then train in this process rather than start ranks of its own."""
    return detect_launcher() is not None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


INTERRUPTED = 130  # the shell's exit code for a command stopped by Ctrl-C


def launch_ranks(
    entry: Callable[[], object] | Sequence[str],
    nproc: int,
    nnodes: int = 1,
    node_rank: int = 0,
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
    signals_to_handle: str = "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
) -> int:
    """Run `entry` on `nproc` ranks of this node (of `nnodes`) and return 0, or the exit code of the rank that failed
    first (1 when it died of a signal), so a usage error in the ranks (exit 2) stays exit 2. `signals_to_handle`: the
    signals on which torch elastic terminates the ranks (its default); leave one out to let the ranks handle it."""
    _check_layout(nproc, nnodes, node_rank)
    if master_port is None:
        if nnodes > 1:
            raise ValueError(
                "--master-port is required with --nnodes > 1: every node must name the same port"
            )
        master_port = free_port()
    config = LaunchConfig(
        min_nodes=nnodes,
        max_nodes=nnodes,
        nproc_per_node=nproc,
        run_id=f"hpo-{master_port}",  # the same on every node: the rendezvous keys are namespaced by it
        # static rendezvous: ranks come from --node-rank, as `torchrun --node-rank` does; no etcd, no elasticity.
        rdzv_backend="static",
        rdzv_endpoint=f"{master_addr}:{master_port}",
        rdzv_configs={"rank": node_rank},
        max_restarts=0,
        monitor_interval=0.1,
        signals_to_handle=signals_to_handle,
    )
    target, args = _entrypoint(entry)
    try:
        elastic_launch(config, target)(*args)
    except ChildFailedError as failure:
        code = failure.get_first_failure()[1].exitcode
        if (
            code == INTERRUPTED
        ):  # ranks that stopped as asked (Ctrl-C): nothing failed, the caller says what was saved
            return code
        print(_describe_failure(failure), file=sys.stderr, flush=True)
        return code if isinstance(code, int) and code > 0 else 1
    return 0


def _check_layout(nproc: int, nnodes: int, node_rank: int) -> None:
    if nproc < 1:
        raise ValueError(f"--nproc must be at least 1, got {nproc}")
    if nnodes < 1:
        raise ValueError(f"--nnodes must be at least 1, got {nnodes}")
    if not 0 <= node_rank < nnodes:
        raise ValueError(
            f"--node-rank must be between 0 and {nnodes - 1} (--nnodes {nnodes}), got {node_rank}"
        )


def _entrypoint(entry: Callable[[], object] | Sequence[str]) -> tuple[Callable | str, tuple]:
    if callable(entry):
        return entry, ()
    return sys.executable, tuple(["-u", *entry])  # -u: ranks' output arrives as it is printed


def _describe_failure(failure: ChildFailedError) -> str:
    """The first failure (by time) in full, then one line for every other rank that did not finish."""
    first_rank, first = failure.get_first_failure()
    lines = [f"rank {first_rank} failed first (exit code {first.exitcode}):", _failure_message(first)]
    for rank, other in sorted(failure.failures.items()):
        if rank != first_rank:
            lines.append(
                f"rank {rank} also ended with exit code {other.exitcode} (stopped after rank {first_rank})"
            )
    return "\n".join(lines)


def _failure_message(failure: object) -> str:
    message = getattr(failure, "message", None)
    if isinstance(message, dict):
        extra = message.get("extraInfo", {})
        text = extra.get("py_callstack") or message.get("message")
        if text:
            return str(text)
    if message and "To enable traceback" not in str(message):
        return str(message)
    # The rank's entry point was not wrapped in `record` (or it was killed by a signal): only its output tells.
    return "(no error was recorded for this rank; its traceback, if any, is in the output above)"


def record(entry: Callable) -> Callable:
    """Wrap a rank's entry point so its exception reaches the launcher's failure report (torch elastic's `record`)."""
    from torch.distributed.elastic.multiprocessing.errors import record as elastic_record

    return elastic_record(entry)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m trainer.launch --nproc 2 script.py [args...]`: torchrun's job, with our failure report."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m trainer.launch", description=main.__doc__)
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=None)
    parser.add_argument("script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    return launch_ranks(
        [options.script, *options.script_args],
        options.nproc,
        nnodes=options.nnodes,
        node_rank=options.node_rank,
        master_addr=options.master_addr,
        master_port=options.master_port,
    )


if __name__ == "__main__":
    sys.exit(main())
