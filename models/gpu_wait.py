"""How a process's host thread waits for its GPU: spinning on a core, or asleep until the device is done.

CUDA's default ("auto") for a process with fewer CUDA contexts than the machine has cores is to spin: a
thread that waits for a copy back or a synchronise keeps its core at 100% until the device answers. A
GPU replica waits at every copy back (the detector's probability maps, the faces, the embeddings, the
reads), and where many replicas share one GPU a wait lasts through the other processes' kernels too, so
spinning burns cores the other replicas need for their own host work. "block" puts the waiting thread to
sleep until the device signals: the core goes back to the others, for a few microseconds more per wait.

There is no torch call for this; the CUDA driver's `cuDevicePrimaryCtxSetFlags` sets it on the primary
context, the one torch uses, through ctypes. On a machine without a CUDA driver or GPU nothing happens.
"""

from __future__ import annotations

import ctypes

# The driver's CU_CTX_SCHED_* flags.
MODES = {"auto": 0x00, "spin": 0x01, "yield": 0x02, "block": 0x04}
_SCHED_MASK = 0x07


def _driver() -> ctypes.CDLL | None:
    """The CUDA driver, initialised, with at least one device; None on a machine without either."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    return driver


def _devices(driver: ctypes.CDLL) -> list[ctypes.c_int]:
    count = ctypes.c_int(0)
    driver.cuDeviceGetCount(ctypes.byref(count))
    devices = []
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        if driver.cuDeviceGet(ctypes.byref(device), ordinal) == 0:
            devices.append(device)
    return devices


def set_gpu_wait(mode: str) -> bool:
    """Make this process's threads wait for its GPUs by `mode` ("auto", "spin", "yield" or "block"), on
    every device, before or after torch has started CUDA. Whether the driver took it: False on a machine
    without a CUDA driver or device, where there is nothing to wait for."""
    if mode not in MODES:
        raise ValueError(f"unknown GPU wait {mode!r} (expected one of {', '.join(MODES)})")
    driver = _driver()
    if driver is None:
        return False
    # _v2 may change the scheduling flags of a context already in use; the first version may not.
    set_flags = getattr(driver, "cuDevicePrimaryCtxSetFlags_v2", None) or driver.cuDevicePrimaryCtxSetFlags
    devices = _devices(driver)
    return bool(devices) and all(set_flags(device, ctypes.c_uint(MODES[mode])) == 0 for device in devices)


def gpu_wait() -> str | None:
    """How this process waits for its first GPU (a `MODES` name); None without a CUDA driver or device."""
    driver = _driver()
    if driver is None:
        return None
    flags, active = ctypes.c_uint(0), ctypes.c_int(0)
    if driver.cuDevicePrimaryCtxGetState(_devices(driver)[0], ctypes.byref(flags), ctypes.byref(active)) != 0:
        return None
    return {value: name for name, value in MODES.items()}.get(flags.value & _SCHED_MASK)
