"""How fast the dashboard's study page paints for a big study, in a real headless Chromium.

    python bench/overhead/dashboard_paint.py                      # 10,000 trials against a 100-trial baseline
    python bench/overhead/dashboard_paint.py --trials 2000 --repeat 2

Builds SQLite studies of N trials (real Optuna trials: 4 parameters, 10 intermediate values, complete/pruned/failed,
8 slots; cached under the temp folder because writing 10,000 trials through Optuna takes about a minute), serves them
with the dashboard server (warmed up as `hpo dashboard` does at start), and loads `/study?name=...` in Debian's
Chromium through playwright. It reports, per study:
- first screen: ms from navigation start until the first screen (header, summary, best trial, the trial table with
  its rows) has been painted (`window.hpoPaintedMs`, set by the page after the frame that drew it), with a cold
  browser cache (a fresh browser context) and with a warm one (a reload, as a user with the dashboard open sees it).
  The benchmark checks that the table's rows were in the DOM and on screen at that moment (`window.hpoFirstScreen`);
- all plots: ms until every plot of the page (history, intermediate values, parallel coordinates, importance,
  slices, timeline) has been drawn, cold and warm; Plotly's bundle is loaded after the first screen.
and prints each big-study figure as a ratio against the baseline study measured in the same run.

With optuna-dashboard installed (the bench extra: `.venv-bench/bin/python bench/overhead/dashboard_paint.py`), the same browser
then loads optuna-dashboard's study page on the same two storages (`optuna-dashboard <url>`, its study page
`/dashboard/studies/<id>`), and the table gains its figures and their ratio to hpo's. optuna-dashboard has no paint
marks of its own, so they are read from outside, in the page, at the first animation frame where they hold: first
screen = its History plot has drawn its points; all plots = every plot of the page (history, importance, timeline,
intermediate values) has drawn.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CACHE = Path(tempfile.gettempdir()) / "hpo-bench-dashboard-v1"
DISTRIBUTIONS = {
    "learning_rate": FloatDistribution(1e-5, 1e-1, log=True),
    "num_layers": IntDistribution(1, 4),
    "optimizer": CategoricalDistribution(["adamw", "sgd", "lion"]),
    "dropout": FloatDistribution(0.0, 0.5),
}


def synthetic_trial(number: int, rng: random.Random, t0: datetime) -> FrozenTrial:
    params = {
        "learning_rate": 10 ** rng.uniform(-5, -1),
        "num_layers": rng.randint(1, 4),
        "optimizer": rng.choice(["adamw", "sgd", "lion"]),
        "dropout": rng.uniform(0.0, 0.5),
    }
    state = rng.choices([TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL], weights=[6, 3, 1])[0]
    steps = 10 if state == TrialState.COMPLETE else rng.randint(1, 9)
    quality = abs(params["learning_rate"] - 3e-3) * 50 + params["dropout"] / 2
    curve = {step * 100: quality + 1.0 / (step + 1) + rng.gauss(0, 0.01) for step in range(steps)}
    start = t0 + timedelta(seconds=number * 6)
    return FrozenTrial(
        number=number,
        trial_id=number,
        state=state,
        value=min(curve.values()) if state == TrialState.COMPLETE else None,
        datetime_start=start,
        datetime_complete=start + timedelta(seconds=steps * 4 + rng.random() * 8),
        params=params,
        distributions=DISTRIBUTIONS,
        user_attrs={"slot": number % 8, "host": "bench"},
        system_attrs={},
        intermediate_values=curve,
    )


def study_database(n_trials: int) -> str:
    """A SQLite storage URL holding a study `bench-<n>` of n trials (built once, then reused)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"bench-{n_trials}.db"
    url = f"sqlite:///{path}"
    if path.exists():
        return url
    partial = CACHE / f"bench-{n_trials}.partial.db"
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    rng, t0 = random.Random(n_trials), datetime(2026, 1, 1)
    study = optuna.create_study(study_name=f"bench-{n_trials}", storage=f"sqlite:///{partial}")
    study.add_trials([synthetic_trial(number, rng, t0) for number in range(n_trials)])
    partial.rename(path)
    print(f"built a {n_trials}-trial study in {time.perf_counter() - started:.0f} s ({path})")
    return url


def measure(page, url: str, timeout_ms: int = 120_000) -> dict[str, float]:
    page.goto(url)
    page.wait_for_selector("body[data-painted]", timeout=timeout_ms)
    page.wait_for_selector("body[data-all-plots]", timeout=timeout_ms)
    marks = page.evaluate(
        "Object.fromEntries(performance.getEntriesByType('mark').map(m => [m.name, m.startTime]))"
    )
    check_first_screen(page.evaluate("window.hpoFirstScreen"), url)
    return {
        "first_view": page.evaluate("window.hpoPaintedMs"),
        "all_plots": page.evaluate("window.hpoAllPlotsMs"),
        "marks": marks,
    }


def check_first_screen(first_screen: dict, url: str) -> None:
    """The first-screen figure must be the moment the trial table's rows were drawn, in view."""
    rows, top, height = first_screen["rows"], first_screen["firstRowTop"], first_screen["viewportHeight"]
    if not rows or top is None or not 0 <= top < height:
        raise SystemExit(f"{url}: the first screen was marked without table rows in view: {first_screen}")


def bench_study(browser, server_url: str, name: str, repeat: int) -> dict[str, float]:
    url = f"{server_url}/study?name={name}"
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    cold = measure(page, url)
    warm = [measure(page, url) for _ in range(repeat)]
    context.close()
    marks = sorted(warm[-1]["marks"].items(), key=lambda item: item[1])
    print(
        f"{name}, last warm load (ms from navigation start): "
        + ", ".join(f"{k[4:]} {v:.0f}" for k, v in marks)
    )
    return {
        "cold_first_view": cold["first_view"],
        "warm_first_view": statistics.median(run["first_view"] for run in warm),
        "cold_all_plots": cold["all_plots"],
        "warm_all_plots": statistics.median(run["all_plots"] for run in warm),
    }


# A plot container of optuna-dashboard (Plotly) that has drawn its data: a trace group inside its plot area.
_DRAWN = "[...document.querySelectorAll('.js-plotly-plot')].filter(p => p.querySelector('g.trace'))"
OPTUNA_DASHBOARD_PLOTS = 4  # history, hyperparameter importance, timeline, intermediate values


def optuna_dashboard_command() -> list[str] | None:
    beside = Path(sys.executable).with_name("optuna-dashboard")
    found = str(beside) if beside.exists() else shutil.which("optuna-dashboard")
    return [found] if found else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def measure_optuna_dashboard(page, url: str, timeout_ms: int = 180_000) -> dict[str, float]:
    page.goto(url)
    first = page.wait_for_function(
        f"() => {_DRAWN}.length >= 1 && performance.now()", polling="raf", timeout=timeout_ms
    ).json_value()
    every = page.wait_for_function(
        f"() => {_DRAWN}.length >= {OPTUNA_DASHBOARD_PLOTS} && performance.now()",
        polling="raf",
        timeout=timeout_ms,
    ).json_value()
    return {"first_view": float(first), "all_plots": float(every)}


def bench_optuna_dashboard(browser, command: list[str], storage_url: str, repeat: int) -> dict[str, float]:
    """optuna-dashboard's study page on the same storage: cold (fresh browser context), then warm reloads."""
    port = free_port()
    started = time.perf_counter()
    server = subprocess.Popen(
        [*command, storage_url, "--port", str(port), "--host", "127.0.0.1", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if server.poll() is not None or time.perf_counter() - started > 120:
                    raise SystemExit(f"optuna-dashboard did not start on port {port}") from None
                time.sleep(0.1)
        start_s = time.perf_counter() - started
        url = f"http://127.0.0.1:{port}/dashboard/studies/1"
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        cold = measure_optuna_dashboard(page, url)
        warm = [measure_optuna_dashboard(page, url) for _ in range(repeat)]
        context.close()
    finally:
        server.terminate()
        server.wait()
    return {
        "cold_first_view": cold["first_view"],
        "warm_first_view": statistics.median(run["first_view"] for run in warm),
        "cold_all_plots": cold["all_plots"],
        "warm_all_plots": statistics.median(run["all_plots"] for run in warm),
        "server_load_s": start_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--baseline-trials", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="warm loads per study (median reported)")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from dashboards.api import DashboardApi
    from dashboards.optuna_source import OptunaSource
    from dashboards.server import start_server
    from dashboards.store_reader import StoreReader

    results = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for n in (args.baseline_trials, args.trials):
            api = DashboardApi(OptunaSource(study_database(n)), StoreReader(None))
            started = time.perf_counter()
            api.warm_up()  # what `hpo dashboard` does at start-up: load the study once, encode its trials
            load_s = time.perf_counter() - started
            server = start_server(api, port=0)
            try:
                results[n] = {
                    **bench_study(browser, server.url, f"bench-{n}", args.repeat),
                    "server_load_s": load_s,
                }
            finally:
                server.shutdown()
        peer: dict[int, dict[str, float]] = {}
        command = optuna_dashboard_command()
        if command is None:
            print("optuna-dashboard is not installed (the bench extra): its figures are left out")
        else:
            for n in (args.baseline_trials, args.trials):
                peer[n] = bench_optuna_dashboard(browser, command, study_database(n), args.repeat)
        browser.close()

    base, big = results[args.baseline_trials], results[args.trials]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nstudy page paint, headless Chromium ({CHROMIUM}), ms from navigation start")
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load} (other work on the machine slows every figure)"
    )
    print(f"{'':28}{args.baseline_trials:>10} trials{args.trials:>10} trials{'ratio':>10}")
    for key, label in [
        ("cold_first_view", "first screen, cold cache"),
        ("warm_first_view", "first screen, warm cache"),
        ("cold_all_plots", "all plots, cold cache"),
        ("warm_all_plots", "all plots, warm cache"),
    ]:
        print(f"{label:28}{base[key]:>17.0f}{big[key]:>17.0f}{big[key] / base[key]:>10.2f}")
    print(f"{'server: first study load (s)':28}{base['server_load_s']:>17.2f}{big['server_load_s']:>17.2f}")
    if peer:
        other_base, other_big = peer[args.baseline_trials], peer[args.trials]
        print(
            f"\noptuna-dashboard {optuna_dashboard_version()} on the same storages, and its ratio to hpo's dashboard"
        )
        print(f"{'':28}{args.baseline_trials:>10} trials{'x hpo':>8}{args.trials:>10} trials{'x hpo':>8}")
        for key, label in [
            ("cold_first_view", "first screen, cold cache"),
            ("warm_first_view", "first screen, warm cache"),
            ("cold_all_plots", "all plots, cold cache"),
            ("warm_all_plots", "all plots, warm cache"),
        ]:
            print(
                f"{label:28}{other_base[key]:>17.0f}{other_base[key] / base[key]:>8.2f}"
                f"{other_big[key]:>17.0f}{other_big[key] / big[key]:>8.2f}"
            )
        print(
            f"{'server: start to listening (s)':28}{other_base['server_load_s']:>17.2f}{'':>8}"
            f"{other_big['server_load_s']:>17.2f}"
        )


def optuna_dashboard_version() -> str:
    try:
        from importlib.metadata import version

        return version("optuna-dashboard")
    except Exception:  # noqa: BLE001 - only a label
        return "?"


if __name__ == "__main__":
    main()
