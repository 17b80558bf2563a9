"""GPU ids as CUDA_VISIBLE_DEVICES names them. A module of its own with no imports, so that the CLI parses --gpus
without loading the spec's models."""

from __future__ import annotations

# An index (nvidia-smi's), or a UUID ("GPU-8f2a...", a MIG instance's "MIG-..."), which a cluster's scheduler (SLURM,
# Kubernetes' device plugin) often sets instead of indices.
DeviceId = int | str
UUID_PREFIXES = ("GPU-", "MIG-")


def visible_devices(visible: str) -> list[DeviceId]:
    """The devices a CUDA_VISIBLE_DEVICES value names: indices as ints, GPU and MIG UUIDs as written (the worker
    passes them on to its slot's CUDA_VISIBLE_DEVICES unchanged); negative or unreadable entries are left out."""
    devices: list[DeviceId] = []
    for part in (part.strip() for part in visible.split(",")):
        if part.isdigit():
            devices.append(int(part))
        elif part.startswith(UUID_PREFIXES):
            devices.append(part)
    return devices
