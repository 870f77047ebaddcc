"""benchmarks/host.py: what a benchmark's JSON says about the machine it ran on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from benchmarks import host

CPUINFO = Path("/proc/cpuinfo")


@pytest.mark.skipif(not CPUINFO.exists(), reason="no /proc/cpuinfo on this system")
def test_the_machine_is_described_from_cpuinfo_and_torch() -> None:
    facts = host.describe(yardstick=False)
    text = CPUINFO.read_text()
    flags_line = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    model_line = re.search(r"^model name\s*:(.*)$", text, re.MULTILINE)
    if flags_line is None or model_line is None:
        pytest.skip("/proc/cpuinfo names no x86 model and flags here (another architecture)")
    present = set(flags_line.group(1).split())
    assert facts["cpu_flags"] == [flag for flag in host.FLAGS if flag in present]
    assert facts["cpu"] == model_line.group(1).strip()
    assert facts["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert "detector_view_ms" not in facts
    assert host.summary(facts).endswith(f"cores, {facts['torch_cpu_capability']}")


def test_the_yardstick_times_the_detector_on_one_thread_and_restores_threads() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ms = host.detector_view_ms(views=3)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    # A 224-px view of a ~0.7 GFLOP U-Net: milliseconds on any CPU, never zero, never seconds.
    assert 0.5 < ms < 2000
    assert host.summary({"cpu": "", "cores": 2, "torch_cpu_capability": "AVX2", "detector_view_ms": ms}) == (
        f"unknown CPU, 2 cores, AVX2, a detector view {ms} ms"
    )
