"""Run `convert_script.py` with an engine python: a GGUF file -> a Hugging Face directory vLLM loads.

specselect never imports torch or transformers itself; the script runs as a subprocess of the engine
environment, offline, with its output in a log next to the model, and reports versions and costs as one
JSON line (`ConverterReport`). A failed or timed-out conversion removes its partial output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from specselect._common.pyenv import log_tail, script_command
from specselect.errors import EngineSetupError

__all__ = ["CONVERT_TIMEOUT_S", "ConverterReport", "run_converter"]

CONVERT_TIMEOUT_S = 900
"""The 1.5B model converts in ~75-90 s here; a conversion 10x slower than that has gone wrong."""


class ConverterReport(BaseModel):
    """What the conversion script reports: the converter's versions, its time, peak memory and output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    ok: bool = True
    seconds: float | None = None
    torch: str | None = None
    transformers: str | None = None
    gguf: str | None = None
    accelerate: str | None = None
    tokenizers: str | None = None
    num_parameters: int | None = None
    dtype: str | None = None
    peak_rss_mb: float | None = None
    dropped_config_keys: tuple[str, ...] = ()


def _parse_report(stdout: str, gguf: Path, log_path: Path) -> ConverterReport:
    lines = stdout.strip().splitlines()
    try:
        return ConverterReport.model_validate(json.loads(lines[-1]))
    except (IndexError, ValueError, ValidationError) as exc:
        raise EngineSetupError(
            f"the conversion script printed no report: {str(exc).splitlines()[0]}",
            location=str(gguf),
            fix=f"see {log_path}",
        ) from exc


def run_converter(
    python: Path, gguf: Path, out: Path, *, dtype: str, log_path: Path, drop_config_keys: tuple[str, ...] = ()
) -> ConverterReport:
    """Convert `gguf` into the new directory `out` (removed again on failure) with `python`."""
    script = Path(__file__).with_name("convert_script.py")
    args = ["--gguf", str(gguf), "--out", str(out), "--dtype", dtype]
    for key in drop_config_keys:
        args += ["--drop-config-key", key]
    cmd = script_command(python, script, *args)
    environ = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    fix = f"see {log_path}; the engine python needs transformers>=5, gguf and accelerate"
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.run(
                cmd,
                cwd=log_path.parent,
                env=environ,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                timeout=CONVERT_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(out, ignore_errors=True)
        raise EngineSetupError(f"model conversion did not finish: {exc}", location=str(gguf), fix=fix) from exc
    if proc.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        tail = log_tail(log_path, 4)
        raise EngineSetupError(f"model conversion failed (exit {proc.returncode}): {tail}", location=str(gguf), fix=fix)
    return _parse_report(proc.stdout, gguf, log_path)
