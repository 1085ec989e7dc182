"""`log_sys_usage`: the machine's load in each result (`result["perf"]`), as RLlib reports it;
`usable_cores`: the cores this process may run on.

Keys (RLlib 1.x's): `cpu_util_percent` (all cores, since the previous report),
`ram_util_percent` (the machine's memory in use), and per visible CUDA device
`gpu_util_percent<i>` (when the NVIDIA management library answers) and
`vram_util_percent<i>` (memory torch has reserved on it). Read with psutil; torch
is asked about GPUs only when it is already imported and CUDA is initialised.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any


def usable_cores() -> int:
    """The cores this process may run on: its affinity mask where the OS has one, else
    the machine's core count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class SysUsage:
    """Reads the machine's load; the first `read()` primes the CPU counter."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        psutil.cpu_percent(interval=None)  # starts the interval the next read measures

    def read(self) -> dict[str, float]:
        """The load since the previous call (CPU) and now (memory, GPUs)."""
        psutil = self._psutil
        out: dict[str, Any] = {
            "cpu_util_percent": float(psutil.cpu_percent(interval=None)),
            "ram_util_percent": float(psutil.virtual_memory().percent),
        }
        out.update(_gpu_usage())
        return out


def _gpu_usage() -> dict[str, float]:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    out = {}
    for i in range(torch.cuda.device_count()):
        total = torch.cuda.get_device_properties(i).total_memory
        out[f"vram_util_percent{i}"] = 100.0 * torch.cuda.memory_reserved(i) / total
        with contextlib.suppress(Exception):  # needs pynvml, which is optional
            out[f"gpu_util_percent{i}"] = float(torch.cuda.utilization(i))
    return out
