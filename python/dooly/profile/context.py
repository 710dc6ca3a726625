"""The measurement context of this machine: what goes into the provenance of every measured point."""

from __future__ import annotations

import subprocess


def _driver_version() -> str:
    try:
        with open("/proc/driver/nvidia/version") as f:
            for word in f.readline().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    return ""


def _clock_policy(device) -> str:
    """Production runs with unlocked clocks; say so, or what nvidia-smi reports as locked."""
    if device.type != "cuda":
        return "cpu"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.applications.graphics,clocks.max.graphics",
                              "--format=csv,noheader", "-i", str(device.index or 0)],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return f"unlocked (application/max graphics clock: {out})" if out else "unlocked"
    except (OSError, subprocess.SubprocessError):
        return "unlocked"


def machine_context(device) -> dict:
    import torch
    import transformers

    import dooly_core

    cuda = device.type == "cuda"
    return {
        "gpu_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "driver_version": _driver_version() if cuda else "",
        "cuda_version": (torch.version.cuda or "") if cuda else "",
        "engine": "hf-transformers",
        "engine_version": transformers.__version__,
        "extra": {
            "torch": torch.__version__,
            "device": str(device),
            "clock_policy": _clock_policy(device),
            "cuda_graphs": "replay where the unit can be captured" if device.type == "cuda" else "off (cpu)",
            "dooly": dooly_core.VERSION,
        },
    }
