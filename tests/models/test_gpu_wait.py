"""How a GPU replica waits for its device (`models.gpu_wait`): the CUDA driver's scheduling flag, set
through ctypes. On a machine without a GPU nothing can be set; on one with a GPU the flag must read
back after torch has started CUDA, in a fresh process as in a replica."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from models.gpu_wait import gpu_wait, set_gpu_wait
from serve_app.config import ScanConfig
from tests.harness import REPO


def test_an_unknown_wait_is_refused_before_the_driver_is_touched() -> None:
    with pytest.raises(ValueError, match="unknown GPU wait 'sleep'"):
        set_gpu_wait("sleep")
    with pytest.raises(ValueError, match="gpu_wait must be one of"):
        ScanConfig(index_dir="unused", gpu_wait="sleep")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the test below covers it")
def test_without_a_gpu_there_is_nothing_to_set() -> None:
    assert set_gpu_wait("block") is False
    assert gpu_wait() is None
    assert torch.ones(2).sum().item() == 2  # and the CPU path is untouched


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["block", "spin"])
def test_a_gpu_process_waits_the_way_it_was_told(mode: str) -> None:
    code = (
        "import torch\n"
        "from models.gpu_wait import gpu_wait, set_gpu_wait\n"
        f"assert set_gpu_wait({mode!r})\n"
        "torch.ones(8, device='cuda').sum().item()\n"
        "print(gpu_wait())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [mode]
