"""Which machine a benchmark ran on, written into its JSON so runs from different sessions can be told apart.

The development machines are of one kind but not one CPU, and their names do not tell them apart: two
machines that both report "AMD EPYC" ran the same detector view in ~6 ms (AVX-512) and in ~17 ms (AVX2
only), and the same code spent 98 and 194 ms of CPU a scan on them (docs/scanner-performance.md). The
scanner's networks spend most of a scan's CPU, and oneDNN picks its kernels by the vector instructions,
which also move the networks' last floating-point bits (the accuracy benchmark answers a few knife-edge
photos otherwise on another CPU).
So each result records the instruction set torch uses and a yardstick: one detector view, timed on one
thread, the cost that dominates a scan on a CPU. Two runs are comparable only where both agree.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import numpy as np

# CPU flags that change what the scanner's networks cost (oneDNN's fp32 and bf16 kernels).
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu_info() -> tuple[str, set[str]]:
    """The CPU's model name and its flags, from /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return "", set()
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    return model, set(flags)


def detector_view_ms(views: int = 24) -> float:
    """Median milliseconds of one 224-px view through the shipped detector network (batch 1, one torch
    thread, as a CPU replica runs it), on fixed random pixels after a short warm-up."""
    import torch

    from models.detector import INPUT, CardDetector

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        detector = CardDetector()
        view = np.random.default_rng(0).integers(0, 256, (1, 224, 224, 3), dtype=np.uint8)
        times = []
        for i in range(views + 4):
            started = time.perf_counter()
            detector.session.run({INPUT: view})
            if i >= 4:
                times.append(time.perf_counter() - started)
    finally:
        torch.set_num_threads(threads)
    return round(1000 * statistics.median(times), 2)


def describe(yardstick: bool = True) -> dict[str, Any]:
    """The machine, for a benchmark's JSON: CPU model and cores, the vector instructions torch computes
    with and the relevant CPU flags, and (unless `yardstick` is False) `detector_view_ms`."""
    import torch

    model, flags = cpu_info()
    facts: dict[str, Any] = {
        "cpu": model,
        "cores": os.cpu_count(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_flags": [flag for flag in FLAGS if flag in flags],
    }
    if yardstick:
        facts["detector_view_ms"] = detector_view_ms()
    return facts


def summary(facts: dict[str, Any]) -> str:
    """One line for a benchmark's printout: 'AMD EPYC, 2 cores, AVX2, a detector view 17.1 ms'."""
    parts = [facts.get("cpu") or "unknown CPU", f"{facts.get('cores')} cores", facts["torch_cpu_capability"]]
    if "detector_view_ms" in facts:
        parts.append(f"a detector view {facts['detector_view_ms']} ms")
    return ", ".join(parts)
