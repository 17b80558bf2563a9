"""Slots: which GPUs (or CPU share) each worker process gets."""

from __future__ import annotations

import pytest

from hpo.errors import ConfigError
from hpo.scheduling.slots import describe_slots, discover_gpus, make_slots
from hpo.spec import ResourcesSpec


def resources(**fields) -> ResourcesSpec:
    return ResourcesSpec(**fields)


def test_one_slot_per_gpu_by_default():
    slots = make_slots(resources(), available_gpus=[0, 1, 2, 3], cpu_count=16)
    assert [s.devices for s in slots] == [(0,), (1,), (2,), (3,)]
    assert [s.environment()["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0", "1", "2", "3"]
    assert slots[0].environment()["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"  # the worker may fork CUDA trials
    assert all(s.ranks == 1 and s.threads == 4 for s in slots)


def test_gpus_flag_picks_devices_and_groups_them_per_trial():
    slots = make_slots(resources(gpus_per_trial=2), gpus=[0, 1, 3], available_gpus=[0, 1, 2, 3], cpu_count=8)
    assert [s.devices for s in slots] == [(0, 1)]  # GPU 3 is left over: a trial needs two
    assert slots[0].ranks == 2
    assert slots[0].environment()["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert slots[0].label == "gpu 0,1"


def test_trials_per_gpu_packs_small_trials():
    slots = make_slots(resources(trials_per_gpu=2), gpus=[0, 1], available_gpus=[0, 1], cpu_count=8)
    assert [s.devices for s in slots] == [(0,), (0,), (1,), (1,)]
    assert [s.index for s in slots] == [0, 1, 2, 3]


def test_unknown_gpu_is_a_config_error_naming_the_flag():
    with pytest.raises(ConfigError, match=r"--gpus: GPU 7 not found \(this machine has: 0,1\)"):
        make_slots(resources(), gpus=[0, 7], available_gpus=[0, 1])


def test_too_many_gpus_per_trial_names_the_field():
    with pytest.raises(ConfigError, match="resources.gpus_per_trial: 4 GPUs per trial, but only 2"):
        make_slots(resources(gpus_per_trial=4), available_gpus=[0, 1])


def test_cpu_workers_share_the_cores():
    slots = make_slots(resources(), workers=2, available_gpus=[], cpu_count=2)
    assert [(s.devices, s.threads, s.ranks) for s in slots] == [((), 1, 1), ((), 1, 1)]
    assert slots[0].environment()["CUDA_VISIBLE_DEVICES"] == ""  # CPU slots see no GPU, also on a GPU machine
    assert slots[0].environment()["OMP_NUM_THREADS"] == "1"
    assert [s.label for s in slots] == ["cpu 0", "cpu 1"]


def test_cpu_threads_per_trial_and_workers_from_the_file():
    slots = make_slots(resources(workers=3, threads_per_trial=2), available_gpus=[], cpu_count=2)
    assert [s.threads for s in slots] == [2, 2, 2]


def test_cpu_default_fills_the_cores_at_threads_per_trial():
    # The shipped digits study (threads_per_trial: 1) on 2 cores runs 2 trials at a time, as Ray Tune would.
    slots = make_slots(resources(threads_per_trial=1), available_gpus=[], cpu_count=2)
    assert [(s.threads, s.ranks) for s in slots] == [(1, 1), (1, 1)]
    assert len(make_slots(resources(threads_per_trial=2), available_gpus=[], cpu_count=8)) == 4
    assert len(make_slots(resources(threads_per_trial=4), available_gpus=[], cpu_count=2)) == 1
    two_ranks = make_slots(resources(threads_per_trial=1, ranks_per_trial=2), available_gpus=[], cpu_count=8)
    assert [(s.threads, s.ranks) for s in two_ranks] == [(1, 2)] * 4


def test_cpu_default_without_threads_per_trial_is_one_worker_on_every_core():
    slots = make_slots(resources(), available_gpus=[], cpu_count=2)
    assert [(s.threads, s.ranks) for s in slots] == [(2, 1)]


def test_the_start_line_says_how_many_run_at_once_and_how_to_change_it():
    line = describe_slots(make_slots(resources(threads_per_trial=1), available_gpus=[], cpu_count=2), cpus=2)
    assert line.startswith("2 trial(s) at a time on CPU (1 thread each, 2 usable cores)")
    assert "--workers N" in line and "resources.workers" in line


def test_workers_flag_means_cpu_even_with_gpus():
    slots = make_slots(resources(), workers=1, available_gpus=[0, 1], cpu_count=4)
    assert slots[0].devices == () and slots[0].threads == 4


def test_workers_in_the_file_mean_cpu_even_with_gpus_as_the_flag_does():
    # The start-up line offers "--workers N or resources.workers": both must give CPU workers on a GPU machine.
    slots = make_slots(resources(workers=2), available_gpus=[0], cpu_count=4)
    assert [(slot.devices, slot.threads) for slot in slots] == [((), 2), ((), 2)]
    assert "on CPU" in describe_slots(slots, cpus=4)


def test_distributed_cpu_trial_splits_threads_between_ranks():
    slots = make_slots(resources(), workers=1, ranks_per_trial=2, available_gpus=[], cpu_count=2)
    assert (slots[0].ranks, slots[0].threads) == (2, 1)


def test_discovery_honours_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert discover_gpus() == [2, 5]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert discover_gpus() == []


GPU_UUID = "GPU-8f2a1c3e-5b7d-4e9f-a1b2-c3d4e5f60718"
MIG_UUID = "MIG-4b1e2f3a-6c7d-5e8f-9a0b-1c2d3e4f5a6b"


def test_discovery_keeps_gpu_and_mig_uuids_of_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{GPU_UUID},{MIG_UUID}")
    assert discover_gpus() == [GPU_UUID, MIG_UUID]
    slots = make_slots(resources(), cpu_count=4)  # from what discovery found
    assert [s.environment()["CUDA_VISIBLE_DEVICES"] for s in slots] == [GPU_UUID, MIG_UUID]
    assert [s.label for s in slots] == [f"gpu {GPU_UUID}", f"gpu {MIG_UUID}"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1, 3")
    assert discover_gpus() == [1, 3]


def test_gpus_flag_may_name_a_uuid_that_cuda_visible_devices_lists():
    slots = make_slots(resources(), gpus=[MIG_UUID], available_gpus=[GPU_UUID, MIG_UUID], cpu_count=4)
    assert [s.devices for s in slots] == [(MIG_UUID,)]


def test_slots_packed_on_one_gpu_have_distinct_labels():
    slots = make_slots(resources(trials_per_gpu=2), gpus=[0, 1], available_gpus=[0, 1], cpu_count=8)
    assert [s.label for s in slots] == ["gpu 0 #1", "gpu 0 #2", "gpu 1 #1", "gpu 1 #2"]
    line = describe_slots(slots)
    assert line.startswith("4 trial(s) at a time (gpu 0 #1, gpu 0 #2, gpu 1 #1, gpu 1 #2; 2 threads)")
    alone = make_slots(resources(), available_gpus=[0, 1], cpu_count=8)
    assert [s.label for s in alone] == ["gpu 0", "gpu 1"]  # a GPU of its own needs no number
