"""benchmarks/scan_load.py's per-process readings of /proc: the kernel's CPU, minor page faults and RSS that
a load row attributes to each server process, read off a real process that touches new memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.scan_load import by_role, minor_faults, role, rss_by_role, system_seconds

# A child that, when told, fills 64 MiB it never had (every page faulted in), then waits to be read.
CHILD = """
import sys
sys.stdin.readline()
held = bytearray(64 << 20)
print("filled", flush=True)
sys.stdin.readline()
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="no /proc on this system")
def test_a_process_that_fills_new_memory_shows_its_faults_and_rss() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        pids = [child.pid]
        faults_before, sys_before, rss_before = minor_faults(pids), system_seconds(pids), rss_by_role(pids)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "filled"
        faults_after, sys_after, rss_after = minor_faults(pids), system_seconds(pids), rss_by_role(pids)
        name = role(child.pid)
        faults = by_role(faults_before, faults_after)
        # 64 MiB is 16,384 pages of 4 KiB, each faulted in; where the kernel hands out 2 MiB pages unasked
        # (transparent huge pages "always") it is 32 faults, so that is the floor asserted.
        assert faults == {name: faults[name]} and faults[name] >= 32
        assert sys_after[child.pid] >= sys_before[child.pid]  # system seconds never go back
        assert rss_after[name] - rss_before[name] >= 60  # MiB
    finally:
        child.kill()
        child.wait()
