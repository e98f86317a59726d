"""benchmarks/run_all.py: runs the scripts in order and writes RESULTS.md's header and targets table from the records
they saved, keeping only the scripts' sections (no server, no timing)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from test_bench_results_md import record

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def common(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("_common")


@pytest.fixture
def run_all(common: ModuleType) -> ModuleType:
    return importlib.import_module("run_all")


def test_the_targets_table_is_computed_from_the_saved_records(
    common: ModuleType, run_all: ModuleType, tmp_path: Path
) -> None:
    results_md = tmp_path / "RESULTS.md"
    saved = [
        record(common, "bench_fidelity", ("fidelity within 0.95-1.05", "ratios 0.990-1.067", False)),
        record(
            common,
            "bench_client_overhead",
            ("client >= 1.0x", "vLLM's client not available", None),
            engine_version=None,
            model=None,
            model_snapshot=None,
        ),
        record(common, "bench_selection_cost", ("run <= 600 s", "540 s", True)),
    ]
    for r in saved:
        path = common.record_path(results_md, r.section)
        path.parent.mkdir(exist_ok=True)
        path.write_text(r.model_dump_json())
    results_md.write_text("hand-typed header\n" + common.section_block("bench_cpu_draft", "## 5. draft"))
    assert run_all.write_document(results_md) == 1
    out = results_md.read_text()
    assert common.section_names(out) == ["run_all", "bench_cpu_draft"]
    assert "|       1 | fidelity within 0.95-1.05 | ratios 0.990-1.067          | NO           |" in out
    assert "|       2 | client >= 1.0x            | vLLM's client not available | not assessed |" in out
    assert "|       3 | run <= 600 s              | 540 s                       | yes          |" in out
    assert "Targets met: 1 of 3 (1 not assessed)." in out
    assert "- **Runs:** 2026-12-01 10:10:00 UTC to 2026-12-01 10:35:00 UTC." in out
    assert "the 1-minute load average at the scripts' starts and ends was 0.40-1.90" in out
    assert "**model:** builtin:smollm2-135m (snapshot `b179c9523d0e...`)" in out
    assert "|       5 | `bench_cpu_draft.py`       | its own lines in the section |" in out
    before = out
    assert run_all.write_document(results_md) == 0
    assert results_md.read_text() == before


def test_run_all_runs_the_scripts_in_order_and_the_slow_one_only_when_asked() -> None:
    def dry(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, str(BENCH / "run_all.py"), "--dry-run", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return [line.split()[1] for line in done.stdout.splitlines() if "benchmarks/bench_" in line]

    default = ["bench_fidelity", "bench_client_overhead", "bench_selection_cost", "bench_engine_startup_decode",
               "bench_rerun", "bench_decision_calibration", "bench_host_load", "bench_sampled_parity",
               "bench_cpu_sampled", "bench_cluster_cost", "bench_kv_capacity", "bench_cpu_runtime"]  # fmt: skip
    assert dry() == [f"benchmarks/{n}.py" for n in default]
    assert dry("--with-cpu-draft")[4:6] == ["benchmarks/bench_cpu_draft.py", "benchmarks/bench_rerun.py"]
    assert dry("--only", "bench_cluster_cost") == []  # it reads bench_selection_cost's run
    assert dry("--only", "bench_selection_cost") == ["benchmarks/bench_selection_cost.py"]
    assert dry("--header-only") == []


def test_the_cluster_cost_reads_the_run_the_selection_cost_makes() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "run_all.py"),
            "--dry-run",
            "--only",
            "bench_selection_cost",
            "bench_cluster_cost",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    argv = [line.split() for line in done.stdout.splitlines() if "benchmarks/bench_" in line]
    made = argv[0][argv[0].index("--results-dir") + 1]
    assert argv[1][argv[1].index("--results") + 1] == f"{made}/cost"
