"""Shared helpers of the benchmark scripts (not part of the specselect package).

Machine description, medians and ratios, markdown tables (pasteable into RESULTS.md), the CPU engine set-up
the integration tests use (float32, eager, 2 GiB KV cache), and a runner for `vllm bench serve` -- vLLM's
own benchmark client -- over a prompt file written from the same workload items specselect sends.

The prompt file uses vLLM's ShareGPT format: its `custom` JSONL dataset needs pandas, which the managed
engine environment does not have, and ShareGPT prompts go to the chat endpoint verbatim (no client-side
chat template), exactly like specselect's single-message chat requests.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from specselect.engines.base import LaunchSpec
from specselect.workloads.model import WorkloadItem

__all__ = [
    "CPU_ENGINE_ARGS",
    "CPU_SERVER_ENV",
    "ROOT",
    "EngineSetup",
    "VllmBenchRun",
    "chat_prompts",
    "cpu_launch_spec",
    "engine_setup",
    "fmt",
    "load_average",
    "machine_description",
    "markdown_table",
    "median",
    "print_table",
    "ratio",
    "run_vllm_bench",
    "vllm_bench_argv",
    "write_sharegpt_prompts",
]

_NUMBER = re.compile(r"-|[-+]?[\d.,]+ ?(%|x|s|ms)?")

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (also put on sys.path: the scripts use `tests.stubs`, test support outside the package)."""
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CPU_SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2"}
"""A 2 GiB KV cache keeps one server near 5 GB RSS (same as tests/integration/conftest.py)."""
CPU_ENGINE_ARGS = ("--enforce-eager",)
"""Eager start-up is ~35 s instead of ~100 s; float32 keeps temperature-0 outputs identical under speculation."""


# ------------------------------------------------------------------------------------------------ numbers


def median(values: Iterable[float | None]) -> float | None:
    """Median of the non-None values (None when there are none)."""
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, None when either is missing or den is zero."""
    if num is None or den is None or den == 0:
        return None
    return num / den


def fmt(value: float | None, spec: str = ".1f", suffix: str = "") -> str:
    """Format a number, '-' for None."""
    return "-" if value is None else f"{value:{spec}}{suffix}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table; columns of numbers (and '-') right-aligned, text columns left-aligned."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    right = [bool(rows) and all(_NUMBER.fullmatch(r[i].strip()) for r in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        padded = (c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True))
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join("-" * (w + 1) + ":" if r else ":" + "-" * (w + 1) for w, r in zip(widths, right, strict=True))
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()) -> None:
    """Print a titled markdown table followed by its notes."""
    print(f"\n### {title}\n")
    print(markdown_table(headers, rows))
    for note in notes:
        print(f"\n{note}")
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------------ machine


def load_average() -> tuple[float, float, float]:
    """The 1/5/15-minute load averages."""
    return psutil.getloadavg()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description() -> str:
    """One line: CPU, cores, memory, Python, load average now."""
    mem_gib = psutil.virtual_memory().total / 2**30
    load = load_average()
    return (
        f"{_cpu_model()}, {psutil.cpu_count()} logical CPUs, {mem_gib:.0f} GiB, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, load average {load[0]:.2f}/{load[1]:.2f}/"
        f"{load[2]:.2f}, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
    )


# ------------------------------------------------------------------------------------------------ engine


@dataclass(frozen=True)
class EngineSetup:
    """The engine python and the target model directory a benchmark uses."""

    python: Path
    model: Path


def engine_setup(python: Path | None = None, model: Path | None = None) -> EngineSetup:
    """The given python/model, or the managed CPU vLLM environment and builtin:smollm2-135m (`specselect setup`)."""
    if python is not None and model is not None:
        return EngineSetup(python=python, model=model)
    from specselect.assets import resolve_model
    from specselect.engines.vllm.envsetup import engine_env_from_python, ensure_managed_vllm_env

    env = engine_env_from_python(python) if python is not None else ensure_managed_vllm_env()
    path = model or resolve_model("builtin:smollm2-135m", env=env).path
    return EngineSetup(python=env.python, model=path)


def cpu_launch_spec(group: str, model: Path, work: Path, **overrides: Any) -> LaunchSpec:
    """A CPU launch spec for `model`: float32, eager, 2 GiB KV cache, files under `work/group`."""
    fields: dict[str, Any] = {
        "group": group,
        "model_path": model,
        "served_model_name": "smollm2-135m",
        "dtype": "float32",
        "max_model_len": 2048,
        "engine_args": CPU_ENGINE_ARGS,
        "env": dict(CPU_SERVER_ENV),
        "startup_timeout_s": 600.0,
        "log_path": work / group / "server.log",
        "run_dir": work / group / "run",
    }
    fields.update(overrides)
    return LaunchSpec(**fields)


# ------------------------------------------------------------------------------------------------ vLLM bench


def chat_prompts(items: Sequence[WorkloadItem]) -> list[str]:
    """The user message of each single-message chat item (what both clients send verbatim)."""
    prompts = []
    for item in items:
        if item.messages is None or len(item.messages) != 1 or item.messages[0].role != "user":
            raise SystemExit(f"item {item.id}: vLLM's benchmark client takes one user message per request")
        prompts.append(item.messages[0].content)
    return prompts


def write_sharegpt_prompts(path: Path, prompts: Sequence[str]) -> None:
    """Write `prompts` in order as a ShareGPT JSON file (the reply turn is a placeholder vLLM ignores
    when the output length is given)."""
    rows = [
        {"id": f"p{i}", "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "-"}]}
        for i, p in enumerate(prompts)
    ]
    path.write_text(json.dumps(rows))


@dataclass(frozen=True)
class VllmBenchRun:
    """The saved result JSON of one `vllm bench serve` run and its wall time (process start to exit)."""

    result: dict[str, Any]
    wall_s: float


def vllm_bench_argv(
    python: Path,
    *,
    base_url: str,
    model: str,
    tokenizer: Path,
    dataset: Path,
    n_prompts: int,
    output_len: int,
    concurrency: int,
    warmups: int,
    result_path: Path,
) -> list[str]:
    """`vllm bench serve` with the prompts of `dataset` in file order, greedy, exactly `output_len` tokens.

    `--extra-body` asks for the same per-chunk usage specselect requests, so the server streams the same
    bytes to both clients.
    """
    extra_body = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    return [
        str(python), "-m", "vllm.entrypoints.cli.main", "bench", "serve",
        "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
        "--base-url", base_url, "--model", model, "--tokenizer", str(tokenizer),
        "--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--disable-shuffle",
        "--sharegpt-output-len", str(output_len), "--num-prompts", str(n_prompts),
        "--max-concurrency", str(concurrency), "--request-rate", "inf", "--num-warmups", str(warmups),
        "--ignore-eos", "--temperature", "0", "--extra-body", json.dumps(extra_body),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm",
        "--save-result", "--result-dir", str(result_path.parent), "--result-filename", result_path.name,
    ]  # fmt: skip


def run_vllm_bench(argv: Sequence[str], result_path: Path, timeout_s: float = 3600.0) -> VllmBenchRun:
    """Run vLLM's benchmark client (offline: no hub access) and load its saved result."""
    result_path.unlink(missing_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0 or not result_path.exists():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SystemExit(f"vllm bench serve failed (exit {done.returncode}):\n{tail}")
    result: dict[str, Any] = json.loads(result_path.read_text())
    if result.get("failed"):
        raise SystemExit(f"vllm bench serve: {result['failed']} of {result.get('num_prompts')} requests failed")
    return VllmBenchRun(result=result, wall_s=wall)
