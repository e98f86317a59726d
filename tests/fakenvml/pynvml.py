"""A `pynvml` module that shows a process fake GPUs, for trying GPU paths by hand on a host without one.

    PYTHONPATH=tests/fakenvml FAKE_NVML_GPUS='[{"uuid": "GPU-0h100", "name": "NVIDIA H100 80GB HBM3",
        "total_mb": 81559, "used_mb": [70000], "processes": [{"pid": 4242, "used_mb": 69000}]}]' specselect doctor

Each entry of FAKE_NVML_GPUS is a `tests.fakegpu.FakeGpu` (its `processes` are `FakeProcess` fields); unset or
`[]`, no GPU answers. Test support only: nothing in the package imports it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.fakegpu import FakeGpu, FakeProcess, fake_nvml


def _gpu(entry: dict[str, Any]) -> FakeGpu:
    processes = [FakeProcess(**p) for p in entry.pop("processes", [])]
    used = tuple(entry.pop("used_mb", (0,)))
    return FakeGpu(**entry, used_mb=used, processes=processes)


_MODULE = fake_nvml([_gpu(dict(e)) for e in json.loads(os.environ.get("FAKE_NVML_GPUS") or "[]")])
globals().update({name: getattr(_MODULE, name) for name in dir(_MODULE) if not name.startswith("__")})
