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
3. Overhead vs the engine: the client's CPU per chunk and its TPOT error next to `--engine-tpot-ms` (the TPOT
   bench_fidelity.py measured on the CPU engine; target: under 1%).

vLLM's client is the managed engine environment's (`specselect setup`) unless --vllm-python is given; the
tokenizer is the bundled model's unless --tokenizer is given. Without them section 1 shows specselect only.

Run: .venv/bin/python benchmarks/bench_client_overhead.py [--runs 3] [--requests 2048] [--engine-tpot-ms 60]
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
    fmt,
    machine_description,
    median,
    print_table,
    ratio,
    run_vllm_bench,
    vllm_bench_argv,
    write_sharegpt_prompts,
)
from specselect.measure import Endpoint, e2e_ms, run_scenario, tpot_ms, ttft_ms
from specselect.workloads.model import ChatMessage, WorkloadItem

N_ITEMS = 64
MODEL = "stub-model"


@dataclasses.dataclass(frozen=True)
class VllmClient:
    """vLLM's benchmark client: a python with vLLM and a local tokenizer directory."""

    python: Path
    tokenizer: Path

    def bench_argv(
        self, stub: StubServer, dataset: Path, result_path: Path, *, n: int, output_len: int, concurrency: int
    ) -> list[str]:
        """`vllm bench serve` against the stub with specselect's warm-up: one request per concurrent slot."""
        return vllm_bench_argv(
            self.python,
            base_url=stub.base_url,
            model=MODEL,
            tokenizer=self.tokenizer,
            dataset=dataset,
            n_prompts=n,
            output_len=output_len,
            concurrency=concurrency,
            warmups=concurrency,
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
    scenario = run_scenario(
        endpoint,
        _items(),
        scenario=f"bench-c{concurrency}",
        concurrency=concurrency,
        warmup=concurrency,
        repeats=repeats,
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


def throughput_table(
    runs: int, n_requests: int, tokens: int, *, concurrencies: list[int], vllm: VllmClient | None, pinning: Pinning
) -> dict[int, dict[str, float | None]]:
    """Section 1; returns specselect's medians per concurrency."""
    behavior = StubBehavior(ttft_s=0.0, chunk_delay_s=0.0, output_tokens=tokens)
    n = max(1, n_requests // N_ITEMS) * N_ITEMS
    out: dict[int, dict[str, float | None]] = {}
    rows = []
    with StubServer(behavior) as stub, tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        pinning.apply(stub)
        dataset = Path(tmp) / "prompts.json"
        write_sharegpt_prompts(dataset, [_prompt(i) for i in range(N_ITEMS)] * (n // N_ITEMS))
        for c in concurrencies:
            mine: list[dict[str, float]] = []
            theirs: list[dict[str, float]] = []
            for k in range(runs):
                order = ("specselect", "vllm") if k % 2 == 0 else ("vllm", "specselect")
                for client in order:
                    if client == "specselect":
                        mine.append(specselect_overhead_run(stub, c, n))
                    elif vllm is not None:
                        theirs.append(vllm_overhead_run(stub, vllm, dataset, concurrency=c, n=n, tokens=tokens))
            med = {key: median(r[key] for r in mine) for key in mine[0]}
            ref = {key: median(r[key] for r in theirs) for key in ("rps", "chunks_per_s", "stub_cpu_pct")}
            out[c] = med
            rows.append(
                [
                    str(c),
                    fmt(med["rps"], ".0f"),
                    fmt(ref["rps"], ".0f"),
                    fmt(ratio(med["rps"], ref["rps"]), ".2f"),
                    fmt(med["chunks_per_s"], ".0f"),
                    fmt(ref["chunks_per_s"], ".0f"),
                    fmt(ratio(med["chunks_per_s"], ref["chunks_per_s"]), ".2f"),
                    fmt(med["cpu_us_per_chunk"], ".1f"),
                    f"{fmt(med['stub_cpu_pct'], '.0f')} / {fmt(ref['stub_cpu_pct'], '.0f')}",
                ]
            )
    print_table(
        f"client throughput: zero-delay stub, {n} requests x {tokens} tokens (= chunks), medians of {runs} runs",
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
            f"pinning: {pinning.describe()}; vLLM's client: {vllm.python if vllm else 'not available'}",
            "specselect CPU per chunk includes warm-up and decoding the recorded streams after the run.",
        ],
    )
    return out


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


def accuracy_table(runs: int, pinning: Pinning, vllm: VllmClient | None) -> dict[int, dict[str, float]]:
    """Section 2: measured - programmed latencies (medians over requests, then over runs), both clients."""
    base = StubBehavior(ttft_s=0.03, chunk_delay_s=0.01, output_tokens=12)
    directives = [{"ttft_s": 0.02 + 0.002 * (i % 11), "output_tokens": 6 + (i * 7) % 17} for i in range(N_ITEMS)]
    expected = {f"b{i}": programmed(dataclasses.replace(base, **d)) for i, d in enumerate(directives)}  # type: ignore[arg-type]
    rows = []
    out: dict[int, dict[str, float]] = {}
    with StubServer(base) as stub, tempfile.TemporaryDirectory(prefix="bench-accuracy-") as tmp:
        pinning.apply(stub)
        endpoint = Endpoint(base_url=stub.base_url, model=MODEL)
        for c, repeats in ((1, 1), (32, 3)):
            mine: dict[str, list[float]] = {k: [] for k in _LATENCIES}
            theirs: dict[str, list[float]] = {k: [] for k in _LATENCIES}
            items = _items(directives)[: 16 if c == 1 else N_ITEMS]
            sent = [item for _ in range(repeats) for item in items]
            dataset = Path(tmp) / f"acc-c{c}.json"
            write_sharegpt_prompts(dataset, [item.messages[0].content for item in sent if item.messages])
            for _ in range(runs):
                scenario = run_scenario(endpoint, items, scenario=f"acc-c{c}", concurrency=c, warmup=c, repeats=repeats)
                records = asyncio.run(scenario).measured()
                for name, fn in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("e2e_ms", e2e_ms)):
                    errors = [v - expected[r.item_id][name] for r in records if (v := fn(r)) is not None]
                    mine[name].append(float(np.median(errors)))
                if vllm is not None:
                    measured = vllm_latencies(stub, vllm, dataset, c, len(sent))
                    for name in _LATENCIES:
                        errs = [m[name] - expected[item.id][name] for m, item in zip(measured, sent, strict=True)]
                        theirs[name].append(float(np.nanmedian(errs)))
            med = {k: statistics.median(v) for k, v in mine.items()}
            ref = {k: median(v) for k, v in theirs.items()}
            out[c] = med
            rows.append([str(c), str(len(sent)), *(f"{fmt(med[k], '.3f')} / {fmt(ref[k], '.3f')}" for k in _LATENCIES)])
    print_table(
        "timing accuracy: programmed stub (TTFT 20-40 ms, 10 ms per token, 6-22 tokens)",
        [
            "concurrency",
            "requests",
            "TTFT error ms (ss / vLLM)",
            "TPOT error ms (ss / vLLM)",
            "E2E error ms (ss / vLLM)",
        ],
        rows,
        ["median over requests of (measured - programmed), then median over runs; '-' = vLLM's client not available"],
    )
    return out


def engine_table(
    engine_tpot_ms: float | None, throughput: dict[int, dict[str, float | None]], accuracy: dict[int, dict[str, float]]
) -> None:
    """Section 3: the client's own costs as a share of the engine's TPOT."""
    if engine_tpot_ms is None:
        print("\n(section 3 skipped: give --engine-tpot-ms, the TPOT bench_fidelity.py measured on the CPU engine)")
        return
    rows = []
    for c, med in throughput.items():
        cpu_ms = (med["cpu_us_per_chunk"] or 0.0) / 1000
        rows.append([f"client CPU per chunk, c={c}", f"{cpu_ms:.4f}", f"{100 * cpu_ms / engine_tpot_ms:.3f}%"])
    for c, errors in accuracy.items():
        err = abs(errors["tpot_ms"])
        rows.append([f"|TPOT error| on the programmed stub, c={c}", f"{err:.4f}", f"{100 * err / engine_tpot_ms:.3f}%"])
    print_table(
        f"client overhead vs the CPU engine's TPOT ({engine_tpot_ms:.1f} ms per token)",
        ["quantity", "ms", "share of engine TPOT (target < 1%)"],
        rows,
    )


def find_vllm_client(python: Path | None, tokenizer: Path | None) -> VllmClient | None:
    """The given vLLM python/tokenizer, else the managed environment's and the bundled model, if present."""
    if python is None or tokenizer is None:
        from specselect.assets import resolve_model
        from specselect.engines.vllm.envsetup import find_managed_vllm_env

        env = find_managed_vllm_env()
        if env is None:
            return None
        python = python or env.python
        if tokenizer is None:
            model = resolve_model("builtin:smollm2-135m", env=env, prepare=False)
            if not model.present:
                return None
            tokenizer = model.path
    return VllmClient(python=python, tokenizer=tokenizer)


def main() -> None:
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
    parser.add_argument("--engine-tpot-ms", type=float, help="TPOT measured on the CPU engine (bench_fidelity.py)")
    parser.add_argument("--dry-run", action="store_true", help="print what would run; start nothing")
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    vllm = None if args.no_vllm else find_vllm_client(args.vllm_python, args.tokenizer)
    print(f"machine: {machine_description()}")
    if args.dry_run:
        print(f"concurrency {concurrencies}, {args.runs} runs, {args.requests} requests x {args.tokens} tokens")
        print(f"vLLM's client: {vllm.python if vllm else 'none'}; dry run: nothing started")
        return
    pinning = Pinning.choose(None if args.client_core < 0 else args.client_core)
    throughput = throughput_table(
        args.runs, args.requests, args.tokens, concurrencies=concurrencies, vllm=vllm, pinning=pinning
    )
    accuracy = {} if args.skip_accuracy else accuracy_table(args.runs, pinning, vllm)
    engine_table(args.engine_tpot_ms, throughput, accuracy)
    print(f"\nmachine after: {machine_description()}")


if __name__ == "__main__":
    main()
