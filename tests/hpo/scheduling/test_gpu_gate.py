"""The GPU gate of slots that share a GPU: given NVML-shaped figures and the peaks measured in a real (in-memory)
Optuna study, which trial may start beside which; the slots `trials_per_gpu` makes; the spec's `auto`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from hpo.scheduling.gpu_gate import PEAK_ATTR, GpuGate, measured_trials
from hpo.scheduling.gpu_memory import GpuMemory
from hpo.scheduling.slots import make_slots
from hpo.spec import ResourcesSpec, SpecError, parse_study_spec

GiB = 1 << 30
TOTAL = 12 * GiB  # margin: max(512 MiB, 5%) = 0.6 GiB
BATCH = {"per_device_train_batch_size": IntDistribution(8, 64)}


class SimulatedGpu:
    """A GPU as NVML reports it: `held` maps the pids of processes on it to the bytes each holds."""

    def __init__(self, total: int = TOTAL) -> None:
        self.total, self.held = total, {}
        self.readable = True

    def __call__(self, index: int) -> GpuMemory | None:
        if not self.readable:
            return None
        used = sum(self.held.values())
        return GpuMemory(index, "GPU-0", "Simulated", self.total, self.total - used, used, dict(self.held))


def study_with(*peaks: tuple[int, int]) -> optuna.Study:
    """A study whose finished trials were measured: (batch size, peak reserved bytes) each."""
    study = optuna.create_study()
    for batch, peak in peaks:
        study.add_trial(
            create_trial(
                state=TrialState.COMPLETE,
                value=0.5,
                params={"per_device_train_batch_size": batch},
                distributions=BATCH,
                user_attrs={PEAK_ATTR: peak},
            )
        )
    return study


def gates(tmp_path: Path, gpu: SimulatedGpu, count: int, cap: int | str = "auto") -> list[GpuGate]:
    return [GpuGate(tmp_path / "gpu0", 0, slot, cap, gpu) for slot in range(count)]


def test_the_first_trial_runs_alone_until_one_is_measured(tmp_path):
    gpu = SimulatedGpu()
    first, second = gates(tmp_path, gpu, 2)
    study = study_with()
    assert first.admit(study, 0, {"per_device_train_batch_size": 16}).start
    gpu.held[1001] = 2 * GiB
    waiting = second.decide(study, None)
    assert not waiting.start and "the first runs alone until it is" in waiting.reason
    assert not second.admit(study, 1, {"per_device_train_batch_size": 16}).start
    first.release()  # the first trial ended (and is measured now)
    del gpu.held[1001]
    assert second.admit(study_with((16, 4 * GiB)), 1, {"per_device_train_batch_size": 16}).start


def test_a_second_trial_joins_when_free_memory_covers_its_expected_peak_and_margin(tmp_path):
    gpu = SimulatedGpu()
    study = study_with((16, 4 * GiB))  # footprint 4 GiB + 1 GiB CUDA context = 5 GiB
    first, second, third = gates(tmp_path, gpu, 3)
    assert first.admit(study, 1, {"per_device_train_batch_size": 16}).start
    # Admitted but not yet allocated: counted at its full 5 GiB, so 12 - 5 - 0.6 = 6.4 GiB of room for the next.
    joined = second.admit(study, 2, {"per_device_train_batch_size": 16})
    assert joined.start and "room 6.4 GiB" in joined.reason and second.shared
    first.set_pids([2001])
    second.set_pids([2002])
    gpu.held.update({2001: 5 * GiB, 2002: 5 * GiB})  # NVML: 2 GiB free, nothing still to grow
    refused = third.admit(study, 3, {"per_device_train_batch_size": 16})
    assert not refused.start
    assert refused.reason == (
        "wait: expects 5.0 GiB, room 1.4 GiB (2.0 GiB free - 0.0 GiB still to grow for 2 running - 0.6 GiB margin)"
    )
    assert second.others_running() == 1 and not first.shared


def test_the_expected_peak_scales_with_the_next_trials_batch_size(tmp_path):
    gpu = SimulatedGpu()
    study = study_with((16, 3 * GiB))  # footprint 4 GiB at batch 16
    first, second = gates(tmp_path, gpu, 2)
    assert first.admit(study, 1, {"per_device_train_batch_size": 16}).start
    first.set_pids([3001])
    gpu.held[3001] = 4 * GiB  # 8 GiB free, room 7.4 GiB
    doubled = second.decide(study, {"per_device_train_batch_size": 32})
    assert not doubled.start and doubled.reason.startswith("wait: expects 8.0 GiB, room 7.4 GiB")
    assert second.decide(
        study, {"per_device_train_batch_size": 8}
    ).start  # a smaller batch is never scaled down


def test_a_numeric_cap_bounds_the_trials_even_with_room(tmp_path):
    gpu = SimulatedGpu(total=80 * GiB)
    study = study_with((16, GiB))
    slots = gates(tmp_path, gpu, 3, cap=2)
    assert slots[0].admit(study, 1, {}).start and slots[1].admit(study, 2, {}).start
    capped = slots[2].admit(study, 3, {})
    assert not capped.start and capped.reason == "wait: 2 trials on this GPU, the cap (trials_per_gpu) is 2"


def test_a_retry_after_running_out_of_memory_runs_alone_and_nothing_joins_it(tmp_path):
    gpu = SimulatedGpu(total=80 * GiB)
    study = study_with((16, GiB))
    first, retry = gates(tmp_path, gpu, 2)
    assert first.admit(study, 1, {}).start
    assert not retry.admit(study, 2, {}, alone=True).start  # the GPU has a trial of the study: wait
    first.release()
    assert retry.admit(study, 2, {}, alone=True).start
    refused = first.admit(study, 3, {})
    assert not refused.start and "runs alone" in refused.reason


def test_a_record_left_by_a_dead_worker_is_ignored(tmp_path):
    gpu = SimulatedGpu()
    study = study_with((16, 4 * GiB))
    first, second = gates(tmp_path, gpu, 2)
    assert first.admit(study, 1, {}).start
    record = first.record_path.read_text().replace(f'"worker": {os.getpid()}', '"worker": 999999999')
    first.record_path.write_text(record)
    assert second.others_running() == 0 and not first.record_path.exists()  # and the stale record is removed
    assert second.admit(study, 2, {}).reason.startswith("start: no trial on this GPU")


def test_two_pools_on_one_machine_keep_their_slot_records_apart(tmp_path):
    gpu = SimulatedGpu(total=80 * GiB)
    study = study_with((16, GiB))
    mine = GpuGate(tmp_path / "gpu0", 0, 0, "auto", gpu)
    assert mine.admit(study, 1, {}).start
    # Slot 0 of another `hpo worker` of the same study (another process) writes its own record beside it.
    theirs = tmp_path / "gpu0" / "slot-0-1.json"
    theirs.write_text(json.dumps({"trial": 2, "expected_peak": 2 * GiB, "pids": [], "worker": 1}))
    assert mine.record_path.exists() and mine.others_running() == 1


def test_unreadable_memory_means_one_trial_at_a_time(tmp_path):
    gpu = SimulatedGpu()
    gpu.readable = False
    study = study_with((16, GiB))
    first, second = gates(tmp_path, gpu, 2)
    assert first.admit(study, 1, {}).start
    refused = second.admit(study, 2, {})
    assert not refused.start and refused.reason == "wait: GPU 0's memory cannot be read; one trial at a time"


def test_measured_trials_are_footprints_of_the_recorded_peaks():
    study = study_with((16, 4 * GiB), (32, 6 * GiB))
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=0.1))  # a CPU trial: nothing measured
    assert [(t.params["per_device_train_batch_size"], t.peak) for t in measured_trials(study)] == [
        (16, 5 * GiB),
        (32, 7 * GiB),
    ]


# ---- slots and spec ------------------------------------------------------------------------------------------------
def test_auto_makes_as_many_slots_per_gpu_as_the_cores_allow():
    auto = make_slots(ResourcesSpec(trials_per_gpu="auto"), available_gpus=[0, 1], cpu_count=16)
    assert [s.devices for s in auto].count((0,)) == 8 and len(auto) == 16
    assert {s.packing for s in auto} == {"auto"} and {s.threads for s in auto} == {1}
    wide = make_slots(
        ResourcesSpec(trials_per_gpu="auto", threads_per_trial=4), available_gpus=[0], cpu_count=16
    )
    assert len(wide) == 4  # each trial needs its 4 threads' cores
    capped = make_slots(ResourcesSpec(trials_per_gpu=4), available_gpus=[0], cpu_count=2)
    assert len(capped) == 2 and capped[0].packing == 4  # 4 asked, 2 cores
    assert make_slots(ResourcesSpec(), available_gpus=[0], cpu_count=16)[0].packing == 1


def test_auto_on_a_machine_without_gpus_is_cpu_workers():
    slots = make_slots(ResourcesSpec(trials_per_gpu="auto"), available_gpus=[], cpu_count=2)
    assert [(s.devices, s.packing) for s in slots] == [((), 1)]


def test_slot_environments_make_cuda_and_nvml_agree_and_hide_gpus_from_cpu_slots():
    (gpu,) = make_slots(ResourcesSpec(), available_gpus=[3], cpu_count=2)
    assert gpu.environment()["CUDA_VISIBLE_DEVICES"] == "3"
    assert gpu.environment()["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    (cpu,) = make_slots(ResourcesSpec(), workers=1, available_gpus=[0, 1], cpu_count=2)
    assert cpu.environment()["CUDA_VISIBLE_DEVICES"] == ""  # a CPU trial on a GPU machine stays on the CPU
    assert "CUDA_DEVICE_ORDER" not in cpu.environment()


@pytest.mark.parametrize(("value", "parsed"), [("auto", "auto"), (3, 3), (1, 1)])
def test_trials_per_gpu_takes_a_number_or_auto(value, parsed):
    assert ResourcesSpec(trials_per_gpu=value).trials_per_gpu == parsed


def test_trials_per_gpu_refusal_is_one_line_naming_the_field_and_the_forms():
    study = {
        "study": {"name": "s", "metric": "accuracy"},
        "task": {"model_init": "m:f", "data": "m:d"},
        "search_space": {"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-1}},
        "resources": {"trials_per_gpu": "many"},
    }
    with pytest.raises(SpecError) as refused:
        parse_study_spec(study, source="study.yaml")
    assert refused.value.exit_code == 2
    assert str(refused.value) == (
        "study.yaml: resources.trials_per_gpu: must be a whole number of at least 1, or auto (got 'many')"
    )


def test_where_nvml_lists_no_trial_process_the_trials_own_figure_counts(tmp_path):
    # In a container NVML reports the host's pids: the running trial's memory is then what its PyTorch reserves
    # (its slot's status record) plus the CUDA context, so it is not counted twice (in NVML's free and as growth).
    gpu = SimulatedGpu()
    study = study_with((16, 4 * GiB))
    status = tmp_path / "slot-0.json"
    first = GpuGate(tmp_path / "gpu0", 0, 0, "auto", gpu, status_file=status)
    second = GpuGate(tmp_path / "gpu0", 0, 1, "auto", gpu)
    assert first.admit(study, 1, {}).start
    first.set_pids([4242])
    gpu.held[1] = 5 * GiB  # NVML: 5 GiB used by a pid that is not ours
    assert not second.decide(study, {}).start  # 7 GiB free - 5 GiB still to grow: no room
    status.write_text(json.dumps({"trial": 1, "state": "running", "gpu_memory": 4 * GiB}))
    joined = second.decide(study, {})
    assert joined.start and "0.0 GiB still to grow" in joined.reason


def test_a_running_trial_counts_as_measured_from_its_second_step(tmp_path):
    gpu = SimulatedGpu()
    study = study_with()  # nothing finished yet
    status = tmp_path / "slot-0.json"
    first = GpuGate(tmp_path / "gpu0", 0, 0, "auto", gpu, status_file=status)
    second = GpuGate(tmp_path / "gpu0", 0, 1, "auto", gpu)
    assert first.admit(study, 0, {"per_device_train_batch_size": 16}).start
    first.set_pids([5001])
    gpu.held[5001] = 5 * GiB
    on_gpu = {"trial": 0, "state": "running", "gpu_memory": 4 * GiB, "gpu_memory_peak": 4 * GiB}
    status.write_text(json.dumps({**on_gpu, "steps_run": 1}))
    assert (
        "the first runs alone until it is" in second.decide(study, {"per_device_train_batch_size": 16}).reason
    )
    status.write_text(
        json.dumps({**on_gpu, "steps_run": 2})
    )  # weights, gradients, optimizer state, activations
    joined = second.admit(study, 1, {"per_device_train_batch_size": 16})
    assert joined.start and joined.reason.startswith("start: expects 5.0 GiB, room 6.4 GiB")
    # Its measurement scales like a finished trial's: a doubled batch expects twice the footprint.
    second.release()
    doubled = second.decide(study, {"per_device_train_batch_size": 32})
    assert not doubled.start and doubled.reason.startswith("wait: expects 10.0 GiB")


def test_a_trial_that_runs_alone_is_never_measured_while_running(tmp_path):
    gpu = SimulatedGpu(total=80 * GiB)
    status = tmp_path / "slot-0.json"
    retry = GpuGate(tmp_path / "gpu0", 0, 0, "auto", gpu, status_file=status)
    other = GpuGate(tmp_path / "gpu0", 0, 1, "auto", gpu)
    assert retry.admit(study_with(), 3, {}, alone=True).start
    status.write_text(json.dumps({"trial": 3, "steps_run": 9, "gpu_memory": GiB, "gpu_memory_peak": GiB}))
    assert not other.decide(study_with((16, GiB)), {}).start
