"""Where and when a run was made, as its manifest records it: the time, the package versions, the machine
and the polytox source commit. Also recorded by the prompt-set builder and the scorer's training."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

VERSIONED_PACKAGES = (
    "polytox",
    "torch",
    "transformers",
    "numpy",
    "pyarrow",
    "duckdb",
    "alt-profanity-check",
    "scikit-learn",
    "scipy",
    "vllm",
    "tokenizers",
)


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    out["python"] = sys.version.split()[0]
    return out


def platform_info() -> dict[str, Any]:
    """The machine a run or a retrain ran on: the last bits of floating-point results can depend on the CPU
    (its SIMD kernels) as well as on the package versions, so both are recorded beside the numbers."""
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"machine": platform.machine(), "system": platform.system(), "cpu": cpu, "cpu_count": os.cpu_count()}


def git_commit() -> str | None:
    """The polytox source checkout's commit, when polytox runs from one."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
