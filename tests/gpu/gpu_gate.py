"""Runs a `gpu`-labelled test only where an NVIDIA GPU is present: NVML (libnvidia-ml.so.1) must
load, initialise and count at least one device. Otherwise prints why and exits 77, which CTest
reports as "Not Run" (SKIP_RETURN_CODE). Usage: gpu_gate.py COMMAND [ARG...]"""
import ctypes
import os
import sys

SKIP = 77


def gpu_count():
    """(count, reason): the GPUs NVML sees, or 0 and why none."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        return 0, f"libnvidia-ml.so.1 does not load ({e})"
    rc = nvml.nvmlInit_v2()
    if rc != 0:
        return 0, f"nvmlInit_v2 failed ({rc}): no NVIDIA driver"
    n = ctypes.c_uint(0)
    rc = nvml.nvmlDeviceGetCount_v2(ctypes.byref(n))
    nvml.nvmlShutdown()
    if rc != 0 or n.value == 0:
        return 0, f"NVML counts no GPU (rc {rc})"
    return n.value, ""


def main():
    count, why = gpu_count()
    if count == 0:
        print(f"SKIP: this test needs an NVIDIA GPU and none is present here: {why}")
        return SKIP
    print(f"{count} GPU(s) present; running {' '.join(sys.argv[1:])}", flush=True)
    os.execvp(sys.argv[1], sys.argv[1:])
    return 1


if __name__ == "__main__":
    sys.exit(main())
