"""A warm trial process (a PBT member's, on the CPU) gives a finished trial's memory back before the next trial once it
has grown: what a task leaves in a reference cycle outlives its trial until a collection."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from hpo.scheduling.child import GrowthCollector


class Cycle:
    """A large tensor in a reference cycle, as a task's model that refers to itself leaves it."""

    def __init__(self, megabytes: int) -> None:
        self.weights = torch.ones(megabytes * 2**18)  # float32, written: resident
        self.handler = {"trainer": self}


@pytest.fixture
def no_automatic_collection():
    gc.disable()
    yield
    gc.enable()


def left_in_a_cycle(megabytes: int) -> weakref.ref:
    return weakref.ref(Cycle(megabytes).weights)


def test_a_grown_process_collects_and_a_small_growth_costs_nothing(no_automatic_collection):
    collector = GrowthCollector(threshold=48 * 2**20)
    small = left_in_a_cycle(8)
    assert collector.after_run() is False and small() is not None  # 8 MB: left to the collector's thresholds
    large = left_in_a_cycle(96)
    assert collector.after_run() is True
    assert small() is None and large() is None
    assert collector.after_run() is False  # measured again from here
