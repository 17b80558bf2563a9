"""The recorded data file of each problem: it loads, covers exactly the configurations the problem draws, and every
curve is complete."""

from __future__ import annotations

import gzip
import json
import math

import pytest
import sklearn  # noqa: F401  (its import sets KMP_* variables: done here, not inside a test)

from bench.search.problems import PROBLEMS, RECORDED
from bench.search.record import draw_configurations, record
from bench.search.recording import load
from hpo.spec import load_study_spec

MAX_BYTES = 400_000  # a few hundred KB at most in the repository


@pytest.mark.parametrize("name", RECORDED)
def test_the_recording_loads_and_covers_the_configurations_listed(name):
    problem = PROBLEMS[name]
    assert problem.data_file.stat().st_size < MAX_BYTES
    recording = load(problem)
    drawn = draw_configurations(problem, load_study_spec(problem.study))
    assert [c.params for c in recording.curves] == drawn  # the same draw, in order, none missing
    assert list(recording.steps) == problem.rung_steps
    assert set(problem.asha_levels) <= set(recording.steps)
    for curve in recording.curves:
        assert len(curve.values) == len(curve.losses) == len(curve.segment_s) == len(recording.steps)
        assert all(math.isfinite(v) for v in curve.values + curve.losses)
        assert curve.setup_s >= 0 and all(s > 0 for s in curve.segment_s)
    for key in ("machine", "threads", "date", "recording_wall_s"):
        assert key in recording.conditions


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_configuration_maps_to_itself(name):
    recording = load(PROBLEMS[name])
    for index, curve in enumerate(recording.curves):
        nearest = recording.nearest(curve.params)
        assert nearest == index or recording.curves[nearest].params == curve.params


def test_a_point_replays_the_nearest_configuration_not_yet_taken():
    recording = load(PROBLEMS["digits-cnn"])
    point = recording.curves[7].params
    assert recording.nearest(point) == 7
    second = recording.nearest(point, taken=[7])
    assert second != 7
    distances = [
        sum((a - b) ** 2 for a, b in zip(recording._encoded[i], recording._encoded[7], strict=True))  # noqa: SLF001
        for i in range(len(recording.curves))
    ]
    assert distances[second] == min(
        d for i, d in enumerate(distances) if i != 7
    )  # the runner-up, none closer
    everything = range(len(recording.curves))
    assert recording.nearest(point, taken=everything) == 7  # once all are taken, any may replay again


def test_a_recording_keeps_each_configurations_load_and_resumes_where_it_stopped(tmp_path):
    problem = PROBLEMS["fresh3-friedman2"]  # 300 steps of a small MLP: seconds a configuration
    out = tmp_path / "friedman2.json.gz"
    record(problem, out, limit=2, resume=False)
    first = json.loads(gzip.decompress(out.read_bytes()))
    assert [c["params"] for c in first["configurations"]] == draw_configurations(
        problem, load_study_spec(problem.study)
    )[:2]
    for entry in first["configurations"]:
        assert len(entry["segment_s"]) == len(problem.rung_steps)
        # the machine's load as the configuration ended: what tells a clean recording from one that shared the cores
        assert isinstance(entry["load_1min"], float) and entry["load_1min"] >= 0
    record(problem, out, limit=3, resume=True)
    resumed = json.loads(gzip.decompress(out.read_bytes()))
    assert resumed["configurations"][:2] == first["configurations"]  # kept as they were, one more after them
    assert len(resumed["configurations"]) == 3
