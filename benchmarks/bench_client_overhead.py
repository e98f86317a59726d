"""Client overhead: how fast and how accurate is specselect's measurement client, next to vLLM's own?

Starts the local stub server (tests/stubs/openai_stub.py) in its own process -- on its own core(s) -- and
pins this process (and vLLM's benchmark client, which inherits the pinning) to one core:

1. Throughput: the zero-delay stub (every chunk sent as fast as possible, one token per chunk) at concurrency
   1, 16, 64; per run the same prompts, the same number of requests, tokens and warm-up requests for both
   clients, runs alternated (specselect first in even runs). Medians over runs of requests/s and chunks/s
   of the measured phase, specselect / vLLM ratios (target >= 1.0), specselect's CPU per chunk and the stub's
   CPU use (a stub near 100% of its core means the stub, not the client, is the limit).
2. Accuracy: the stub with programmed delays at concurrency 1 and 32; median of measured - programmed TTFT,
   TPOT and E2E per request.
3. Overhead vs the engine: the client's CPU per chunk and its TPOT error next to the CPU engine's TPOT
   (`--engine-tpot-ms`, or `--engine-tpot-from` bench_fidelity.py's record; target: under 1%).

vLLM's client is the managed engine environment's (`specselect setup`) unless --vllm-python is given; the
tokenizer is the bundled model's unless --tokenizer is given. Without them section 1 shows specselect only.

No vLLM server runs, but the measurement holds the machine's server lock so that none runs beside it:
    .venv/bin/python benchmarks/bench_client_overhead.py --server-lock /tmp/specselect-vllm.lock [--runs 3] \\
        [--engine-tpot-from benchmarks/figures/bench_fidelity.json] [--write-results benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.stubs is test support, not in the package
from tests.stubs.openai_stub import StubBehavior, StubServer, programmed

from _common import (
    Report,
    RunClock,
    TargetCheck,
    add_results_arguments,
    fmt,
    fmt_range,
    load_record,
    machine_description,
    median,
    publish,
    ratio,
    run_vllm_bench,
    server_lock,
    utc_stamp,
    vllm_bench_argv,
    write_sharegpt_prompts,
)
from bench_fidelity import ENGINE_TPOT
from specselect._measure import e2e_ms, run_load, tpot_ms, ttft_ms
from specselect.records.measurement import Endpoint, ScenarioSpec
from specselect.records.workloads import ChatMessage, WorkloadItem

N_ITEMS = 64
MODEL = "stub-model"
STUB_SATURATED_PCT = 90.0
"""A stub using more of its core than this may itself have limited the rate."""
OVERHEAD_TARGET_PCT = 1.0


@dataclasses.dataclass(frozen=True)
class VllmClient:
    """vLLM's benchmark client: a python with vLLM and a local tokenizer directory."""

    python: Path
    tokenizer: Path
    engine_version: str

    def bench_argv(
        self, stub: StubServer, dataset: Path, result_path: Path, *, n: int, output_len: int, concurrency: int
    ) -> list[str]:
        """`vllm bench serve` against the stub with specselect's warm-up: one request per concurrent slot."""
        return vllm_bench_argv(
            self.python,
            Endpoint(base_url=stub.base_url, model=MODEL),
            tokenizer=self.tokenizer,
            dataset=dataset,
            n_prompts=n,
            output_len=output_len,
            concurrency=concurrency,
            result_path=result_path,
        )


def _prompt(i: int) -> str:
    return f"benchmark item {i}: send the programmed stream"  # >= 4 tokens: vLLM's loader drops shorter prompts


def _items(directives: list[dict[str, Any]] | None = None) -> list[WorkloadItem]:
    items = []
    for i in range(N_ITEMS):
        text = _prompt(i)
        if directives:
            text += f" [[stub:{json.dumps(directives[i])}]]"
        items.append(WorkloadItem(id=f"b{i}", messages=(ChatMessage(role="user", content=text),)))
    return items


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclasses.dataclass(frozen=True)
class Pinning:
    """The client's core (this process and its children: vLLM's client) and the stub's cores."""

    client: int | None = None
    stub: tuple[int, ...] = ()

    @classmethod
    def choose(cls, client_core: int | None) -> Pinning:
        """Pin this process to `client_core`, leaving the other cores to the stub (no-op on one core)."""
        cores = sorted(os.sched_getaffinity(0))
        if client_core is None or len(cores) < 2 or client_core not in cores:
            return cls()
        os.sched_setaffinity(0, {client_core})
        return cls(client=client_core, stub=tuple(c for c in cores if c != client_core))

    def apply(self, stub: StubServer) -> None:
        """Move the stub process (started with this process's affinity) to its own cores."""
        if self.stub:
            psutil.Process(stub.pid).cpu_affinity(list(self.stub))

    def describe(self) -> str:
        """For the table notes."""
        return f"client on core {self.client}, stub on cores {list(self.stub)}" if self.stub else "not pinned"


def specselect_overhead_run(stub: StubServer, concurrency: int, n_requests: int) -> dict[str, float]:
    """One specselect run against the zero-delay stub."""
    endpoint = Endpoint(base_url=stub.base_url, model=MODEL)
    repeats = max(1, n_requests // N_ITEMS)
    server = psutil.Process(stub.pid)
    stub_cpu0 = sum(server.cpu_times()[:2])
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    scenario = run_load(
        endpoint,
        _items(),
        ScenarioSpec(scenario=f"bench-c{concurrency}", concurrency=concurrency, warmup=concurrency, repeats=repeats),
    )
    result = asyncio.run(scenario)
    wall, cpu = time.perf_counter() - wall0, _cpu_s() - cpu0
    stub_cpu = sum(server.cpu_times()[:2]) - stub_cpu0
    summary = result.summary
    if summary.n_error or not summary.duration_s:
        raise SystemExit(f"benchmark run failed: {summary.errors}")
    chunks = sum(len(r.chunk_times_s) for r in result.measured())
    all_chunks = sum(len(r.chunk_times_s) for r in result.records)
    return {
        "rps": summary.n_success / summary.duration_s,
        "chunks_per_s": chunks / summary.duration_s,
        "cpu_us_per_chunk": 1e6 * cpu / all_chunks,
        "post_ms": 1000 * max(0.0, wall - summary.duration_s) / len(result.records),
        "stub_cpu_pct": 100 * stub_cpu / wall,
    }


def vllm_overhead_run(
    stub: StubServer, vllm: VllmClient, dataset: Path, *, concurrency: int, n: int, tokens: int
) -> dict[str, float]:
    """One run of vLLM's client against the same stub (same prompts, requests, tokens and warm-up)."""
    result_path = dataset.with_name(f"vllm-c{concurrency}.json")
    argv = vllm.bench_argv(stub, dataset, result_path, n=n, output_len=tokens, concurrency=concurrency)
    server = psutil.Process(stub.pid)
    stub_cpu0 = sum(server.cpu_times()[:2])
    r = run_vllm_bench(argv, result_path).result
    stub_cpu = sum(server.cpu_times()[:2]) - stub_cpu0  # ~0 while vLLM's client imports: the phase dominates
    if r["total_output_tokens"] != n * tokens:
        raise SystemExit(f"vLLM's client got {r['total_output_tokens']} tokens, expected {n * tokens}")
    return {
        "rps": r["request_throughput"],
        "chunks_per_s": r["output_throughput"],  # one token per chunk on this stub
        "stub_cpu_pct": 100 * stub_cpu / r["duration"],
    }


@dataclasses.dataclass(frozen=True)
class Throughput:
    """One concurrency of section 1: the medians over runs of specselect's and vLLM's measurements."""

    concurrency: int
    mine: dict[str, float | None]
    ref: dict[str, float | None]

    def ratio(self, key: str) -> float | None:
        """specselect / vLLM of one quantity (None without vLLM's client)."""
        return ratio(self.mine[key], self.ref.get(key))


@dataclasses.dataclass(frozen=True)
class Load:
    """What section 1 sends per run: requests (a multiple of the items) and tokens (= chunks) per request."""

    runs: int
    requests: int
    tokens: int

    @classmethod
    def of(cls, runs: int, requests: int, tokens: int) -> Load:
        """`requests` rounded down to whole passes over the items (at least one)."""
        return cls(runs, max(1, requests // N_ITEMS) * N_ITEMS, tokens)


def _throughput_runs(stub: StubServer, vllm: VllmClient | None, dataset: Path, c: int, load: Load) -> Throughput:
    """`load.runs` alternating runs of both clients at concurrency `c` (specselect first in even runs)."""
    mine: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    for k in range(load.runs):
        for client in ("specselect", "vllm") if k % 2 == 0 else ("vllm", "specselect"):
            if client == "specselect":
                mine.append(specselect_overhead_run(stub, c, load.requests))
            elif vllm is not None:
                theirs.append(
                    vllm_overhead_run(stub, vllm, dataset, concurrency=c, n=load.requests, tokens=load.tokens)
                )
    med = {key: median(r[key] for r in mine) for key in mine[0]}
    ref = {key: median(r[key] for r in theirs) for key in ("rps", "chunks_per_s", "stub_cpu_pct")}
    return Throughput(c, med, ref)


def measure_throughput(
    load: Load, concurrencies: list[int], vllm: VllmClient | None, pinning: Pinning
) -> list[Throughput]:
    """Section 1: both clients against the zero-delay stub at every concurrency."""
    behavior = StubBehavior(ttft_s=0.0, chunk_delay_s=0.0, output_tokens=load.tokens)
    with StubServer(behavior) as stub, tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        pinning.apply(stub)
        dataset = Path(tmp) / "prompts.json"
        write_sharegpt_prompts(dataset, [_prompt(i) for i in range(N_ITEMS)] * (load.requests // N_ITEMS))
        return [_throughput_runs(stub, vllm, dataset, c, load) for c in concurrencies]


def throughput_table(report: Report, found: list[Throughput], load: Load, context: str) -> None:
    """Section 1's table and what bounded the rate (`context`: the pinning and vLLM's client)."""
    rows = [
        [
            str(t.concurrency),
            fmt(t.mine["rps"], ".0f"),
            fmt(t.ref.get("rps"), ".0f"),
            fmt(t.ratio("rps"), ".2f"),
            fmt(t.mine["chunks_per_s"], ".0f"),
            fmt(t.ref.get("chunks_per_s"), ".0f"),
            fmt(t.ratio("chunks_per_s"), ".2f"),
            fmt(t.mine["cpu_us_per_chunk"], ".1f"),
            f"{fmt(t.mine['stub_cpu_pct'], '.0f')} / {fmt(t.ref.get('stub_cpu_pct'), '.0f')}",
        ]
        for t in found
    ]
    stub_cpu = [v for t in found for v in (t.mine["stub_cpu_pct"], t.ref.get("stub_cpu_pct")) if v is not None]
    busiest = max(stub_cpu, default=None)
    bound = (
        "the client, not the stub, set the rate"
        if busiest is not None and busiest < STUB_SATURATED_PCT
        else ("the stub may have set the rate")
    )
    report.table(
        f"client throughput: zero-delay stub, {load.requests} requests x {load.tokens} tokens (= chunks), medians "
        f"of {load.runs} runs",
        [
            "concurrency",
            "specselect req/s",
            "vLLM req/s",
            "ratio",
            "specselect chunks/s",
            "vLLM chunks/s",
            "ratio",
            "specselect CPU us/chunk",
            "stub CPU % (ss / vLLM)",
        ],
        rows,
        [
            f"{context}. specselect's CPU per chunk includes warm-up and decoding the recorded streams after the run "
            f"(off the hot path). The stub used at most {fmt(busiest, '.0f', '%')} of its core: {bound}."
        ],
    )


def throughput_target(found: list[Throughput]) -> TargetCheck:
    """specselect at least as fast as vLLM's client on both rates at every concurrency."""
    ratios = [t.ratio(key) for t in found for key in ("rps", "chunks_per_s")]
    assessed = [q for q in ratios if q is not None]
    levels = ", ".join(str(t.concurrency) for t in found)
    return TargetCheck(
        target="client: >= 1.0x vLLM's benchmark client, requests/s and chunks/s, zero-delay stub, one core",
        result=f"{fmt_range(assessed, '.2f', 'x')} at c={levels}" if assessed else "vLLM's client not available",
        met=(min(assessed) >= 1.0) if assessed and len(assessed) == len(ratios) else None,
    )


_LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms")


def vllm_latencies(stub: StubServer, vllm: VllmClient, dataset: Path, c: int, n: int) -> list[dict[str, float]]:
    """Per-request TTFT / TPOT / E2E (ms) from vLLM's client, in the prompt file's order (--save-detailed)."""
    result_path = dataset.with_name(f"vllm-acc-c{c}.json")
    # output_len: the stub's directives decide the real length (vLLM sends max_completion_tokens).
    argv = vllm.bench_argv(stub, dataset, result_path, n=n, output_len=64, concurrency=c)
    r = run_vllm_bench([*argv, "--save-detailed"], result_path).result
    out = []
    for ttft, latency, n_out in zip(r["ttfts"], r["latencies"], r["output_lens"], strict=True):
        tpot = (latency - ttft) * 1000 / (n_out - 1) if n_out > 1 else float("nan")
        out.append({"ttft_ms": ttft * 1000, "tpot_ms": tpot, "e2e_ms": latency * 1000})
    return out


BASE = StubBehavior(ttft_s=0.03, chunk_delay_s=0.01, output_tokens=12)
DIRECTIVES = [{"ttft_s": 0.02 + 0.002 * (i % 11), "output_tokens": 6 + (i * 7) % 17} for i in range(N_ITEMS)]
"""Section 2's programmed stub: per item its own TTFT and length, 10 ms between tokens."""
ACCURACY_LEVELS = ((1, 1), (32, 3))
"""(concurrency, passes over the items) of section 2: 16 items once at c=1, all 64 three times at c=32."""


@dataclasses.dataclass(frozen=True)
class Accuracy:
    """Section 2 at one concurrency: requests per run and each client's median error per latency (ms)."""

    concurrency: int
    requests: int
    mine: dict[str, float]
    ref: dict[str, float | None]


def _specselect_errors(endpoint: Endpoint, items: list[WorkloadItem], c: int, repeats: int) -> dict[str, float]:
    expected = {f"b{i}": programmed(dataclasses.replace(BASE, **d)) for i, d in enumerate(DIRECTIVES)}  # type: ignore[arg-type]
    spec = ScenarioSpec(scenario=f"acc-c{c}", concurrency=c, warmup=c, repeats=repeats)
    records = asyncio.run(run_load(endpoint, items, spec)).measured()
    out = {}
    for name, fn in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("e2e_ms", e2e_ms)):
        errors = [v - expected[r.item_id][name] for r in records if (v := fn(r)) is not None]
        out[name] = float(np.median(errors))
    return out


def _vllm_errors(
    stub: StubServer, vllm: VllmClient, dataset: Path, c: int, sent: list[WorkloadItem]
) -> dict[str, float]:
    expected = {f"b{i}": programmed(dataclasses.replace(BASE, **d)) for i, d in enumerate(DIRECTIVES)}  # type: ignore[arg-type]
    measured = vllm_latencies(stub, vllm, dataset, c, len(sent))
    return {
        name: float(np.nanmedian([m[name] - expected[item.id][name] for m, item in zip(measured, sent, strict=True)]))
        for name in _LATENCIES
    }


def measure_accuracy(runs: int, pinning: Pinning, vllm: VllmClient | None) -> list[Accuracy]:
    """Section 2: measured - programmed latencies (medians over requests, then over runs), both clients."""
    out = []
    with StubServer(BASE) as stub, tempfile.TemporaryDirectory(prefix="bench-accuracy-") as tmp:
        pinning.apply(stub)
        endpoint = Endpoint(base_url=stub.base_url, model=MODEL)
        for c, repeats in ACCURACY_LEVELS:
            items = _items(DIRECTIVES)[: 16 if c == 1 else N_ITEMS]
            sent = [item for _ in range(repeats) for item in items]
            dataset = Path(tmp) / f"acc-c{c}.json"
            write_sharegpt_prompts(dataset, [item.messages[0].content for item in sent if item.messages])
            mine, theirs = [], []
            for _ in range(runs):
                mine.append(_specselect_errors(endpoint, items, c, repeats))
                if vllm is not None:
                    theirs.append(_vllm_errors(stub, vllm, dataset, c, sent))
            med = {k: statistics.median(m[k] for m in mine) for k in _LATENCIES}
            out.append(Accuracy(c, len(sent), med, {k: median(t[k] for t in theirs) for k in _LATENCIES}))
    return out


def accuracy_table(report: Report, found: list[Accuracy], runs: int) -> None:
    """Section 2's table, titled with the stub's programme."""
    ttfts = [1000 * d["ttft_s"] for d in DIRECTIVES]
    lengths = [d["output_tokens"] for d in DIRECTIVES]
    rows = [
        [
            str(a.concurrency),
            str(a.requests),
            *(f"{fmt(a.mine[k], '.3f')} / {fmt(a.ref[k], '.3f')}" for k in _LATENCIES),
        ]
        for a in found
    ]
    report.table(
        f"timing accuracy: programmed stub (TTFT {min(ttfts):.0f}-{max(ttfts):.0f} ms, "
        f"{1000 * BASE.chunk_delay_s:.0f} ms per token, {min(lengths)}-{max(lengths)} tokens)",
        ["concurrency", "requests", *(f"{name} error ms (ss / vLLM)" for name in ("TTFT", "TPOT", "E2E"))],
        rows,
        [
            f"Median over requests of (measured - programmed), then median over {runs} runs; '-' = vLLM's client not "
            "available."
        ],
    )


@dataclasses.dataclass(frozen=True)
class EngineTpot:
    """The CPU engine's TPOT the client's costs are compared with, and where it came from."""

    ms: float
    source: str

    @classmethod
    def of(cls, args: argparse.Namespace) -> EngineTpot | None:
        """From --engine-tpot-ms, or from bench_fidelity.py's record (--engine-tpot-from)."""
        if args.engine_tpot_ms is not None:
            return cls(args.engine_tpot_ms, "given as --engine-tpot-ms")
        if args.engine_tpot_from is None:
            return None
        record = load_record(args.engine_tpot_from)
        value = record.figures.get(ENGINE_TPOT)
        if value is None:
            raise SystemExit(f"{args.engine_tpot_from}: figures.{ENGINE_TPOT} missing; fix: rerun bench_fidelity.py")
        return cls(value, f"specselect's c=1 TPOT median of bench_fidelity.py's run at {utc_stamp(record.started_at)}")


def overhead_table(
    report: Report, engine: EngineTpot, throughput: list[Throughput], accuracy: list[Accuracy]
) -> TargetCheck:
    """Section 3: the client's own costs as a share of the engine's TPOT; the target they meet or miss."""
    shares: list[float] = []
    rows = []
    for t in throughput:
        cpu_ms = (t.mine["cpu_us_per_chunk"] or 0.0) / 1000
        shares.append(100 * cpu_ms / engine.ms)
        rows.append([f"client CPU per chunk, c={t.concurrency}", f"{cpu_ms:.4f}", f"{shares[-1]:.3f}%"])
    for a in accuracy:
        err = abs(a.mine["tpot_ms"])
        shares.append(100 * err / engine.ms)
        rows.append([f"|TPOT error| on the programmed stub, c={a.concurrency}", f"{err:.4f}", f"{shares[-1]:.3f}%"])
    report.table(
        f"client overhead vs the CPU engine's TPOT ({engine.ms:.2f} ms per token)",
        ["quantity", "ms", f"share of engine TPOT (target < {OVERHEAD_TARGET_PCT:.0f}%)"],
        rows,
        [f"Engine TPOT: {engine.source}."],
    )
    return TargetCheck(
        target=f"client-side overhead < {OVERHEAD_TARGET_PCT:.0f}% of the CPU engine's TPOT ({engine.ms:.2f} ms)",
        result=f"at most {max(shares):.3f}% (CPU per chunk and TPOT error)" if shares else "-",
        met=bool(shares) and max(shares) < OVERHEAD_TARGET_PCT,
    )


def find_vllm_client(python: Path | None, tokenizer: Path | None) -> VllmClient | None:
    """The given vLLM python/tokenizer, else the managed environment's and the bundled model, if present."""
    from specselect._assets import resolve_model
    from specselect._engines.vllm.envsetup import engine_env_from_python, find_managed_vllm_env

    env = engine_env_from_python(python) if python is not None else find_managed_vllm_env()
    if env is None:
        return None
    if tokenizer is None:
        model = resolve_model("builtin:smollm2-135m", prepare=False)
        if not model.present:
            return None
        tokenizer = model.path
    return VllmClient(python=env.python, tokenizer=tokenizer, engine_version=env.engine_version)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2048)
    parser.add_argument("--tokens", type=int, default=64, help="output tokens (= chunks) per request")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--client-core", type=int, default=0, help="core for the client (-1: no pinning)")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--no-vllm", action="store_true", help="measure specselect's client only")
    parser.add_argument("--vllm-python", type=Path, help="a python with vLLM (default: the managed environment)")
    parser.add_argument("--tokenizer", type=Path, help="a local tokenizer directory (default: the bundled model)")
    tpot = parser.add_mutually_exclusive_group()
    tpot.add_argument("--engine-tpot-ms", type=float, help="TPOT measured on the CPU engine (bench_fidelity.py)")
    tpot.add_argument("--engine-tpot-from", type=Path, help="bench_fidelity.py's record (figures/bench_fidelity.json)")
    parser.add_argument("--dry-run", action="store_true", help="print what would run; start nothing")
    add_results_arguments(parser)
    return parser.parse_args()


def configuration(args: argparse.Namespace, load: Load, pinning: Pinning, vllm: VllmClient | None) -> tuple[str, ...]:
    """What ran, for the section."""
    client = f"vLLM {vllm.engine_version}'s `vllm bench serve` (the engine environment's)" if vllm else "none"
    return (
        f"**Section 1:** the zero-delay stub (every chunk sent at once, one token per chunk); {load.runs} runs per "
        f"concurrency alternating the clients (specselect first in even runs), each {load.requests} requests x "
        f"{load.tokens} tokens over {N_ITEMS} prompts, one warm-up request per concurrent slot, per-chunk usage.",
        f"**Section 2:** the programmed stub, concurrency and passes {list(ACCURACY_LEVELS)}, {args.runs} runs."
        if not args.skip_accuracy
        else "**Section 2:** skipped (--skip-accuracy).",
        f"**Pinning:** {pinning.describe()} (vLLM's client inherits the client's core). **vLLM's client:** {client}. "
        "No vLLM server runs; the server lock keeps other servers off the cores.",
    )


def main() -> int:
    args = _arguments()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    vllm = None if args.no_vllm else find_vllm_client(args.vllm_python, args.tokenizer)
    engine = EngineTpot.of(args)
    load = Load.of(args.runs, args.requests, args.tokens)
    print(f"machine: {machine_description()}")
    if args.dry_run:
        print(f"concurrency {concurrencies}, {load.runs} runs, {load.requests} requests x {load.tokens} tokens")
        print(f"vLLM's client: {vllm.python if vllm else 'none'}; engine TPOT: {engine.source if engine else 'none'}")
        print("dry run: nothing started")
        return 0
    pinning = Pinning.choose(None if args.client_core < 0 else args.client_core)
    with server_lock(args.server_lock):
        clock = RunClock.start()  # the lock's wait is not the run's
        throughput = measure_throughput(load, concurrencies, vllm, pinning)
        accuracy = [] if args.skip_accuracy else measure_accuracy(args.runs, pinning, vllm)
    report = Report()
    throughput_table(report, throughput, load, f"Pinning: {pinning.describe()}")
    targets = [throughput_target(throughput)]
    if accuracy:
        accuracy_table(report, accuracy, args.runs)
    if engine is not None:
        targets.append(overhead_table(report, engine, throughput, accuracy))
    else:
        report.text("(Section 3 not run: give --engine-tpot-ms or --engine-tpot-from, the CPU engine's TPOT.)")
    if args.write_results:
        record = clock.record(
            "bench_client_overhead",
            "Client overhead: zero-delay stub, one core, vs vLLM's client",
            configuration=configuration(args, load, pinning, vllm),
            engine_version=vllm.engine_version if vllm else None,
            model=None,
            model_snapshot=None,
            targets=tuple(targets),
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
