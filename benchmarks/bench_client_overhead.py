"""How fast is specselect's measurement client, and how accurate are its timings?

Starts the local stub server (tests/stubs/openai_stub.py) in its own process and drives it with
`specselect.measure.run_scenario`:

1. Overhead: the zero-delay stub (every chunk is sent as fast as possible) at concurrency 1, 16, 64 for a
   fixed number of requests; medians over several runs of requests/s and chunks/s in the measured phase,
   client and stub CPU per request, and the post-processing time per request (decoding the recorded
   streams after the scenario, off the hot path).
2. Accuracy: the stub with programmed delays at concurrency 1 and 32; median of measured - programmed TTFT,
   TPOT and E2E per request.
3. Optional, separate: the same zero-delay load driven by vLLM's own benchmark client, when a vLLM install
   is given (`--vllm-python`, `--tokenizer`); skipped with a message otherwise.

Run: .venv/bin/python benchmarks/bench_client_overhead.py [--runs 3] [--requests 512]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.stubs is test support, not in the package
from tests.stubs.openai_stub import StubBehavior, StubServer, programmed

from specselect.measure import Endpoint, e2e_ms, run_scenario, tpot_ms, ttft_ms
from specselect.workloads.model import ChatMessage, WorkloadItem

N_ITEMS = 64


def _items(directives: list[dict[str, Any]] | None = None) -> list[WorkloadItem]:
    items = []
    for i in range(N_ITEMS):
        text = f"benchmark item {i}"
        if directives:
            text += f" [[stub:{json.dumps(directives[i])}]]"
        items.append(WorkloadItem(id=f"b{i}", messages=(ChatMessage(role="user", content=text),)))
    return items


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _overhead_run(stub: StubServer, concurrency: int, n_requests: int) -> dict[str, float]:
    endpoint = Endpoint(base_url=stub.base_url, model="stub-model")
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
    measured = result.measured()
    if summary.n_error or not summary.duration_s:
        raise SystemExit(f"benchmark run failed: {summary.errors}")
    chunks = sum(len(r.chunk_times_s) for r in measured)
    n_all = len(result.records)
    return {
        "rps": summary.n_success / summary.duration_s,
        "chunks_per_s": chunks / summary.duration_s,
        "client_cpu_ms": 1000 * cpu / n_all,
        "stub_cpu_ms": 1000 * stub_cpu / n_all,
        "post_ms": 1000 * max(0.0, wall - summary.duration_s) / n_all,
    }


def overhead_table(runs: int, n_requests: int, tokens: int, concurrencies: list[int]) -> None:
    """Section 1: medians over `runs` runs per concurrency."""
    behavior = StubBehavior(ttft_s=0.0, chunk_delay_s=0.0, output_tokens=tokens)
    print(f"\n== client overhead: zero-delay stub, {tokens} tokens = {tokens} chunks per request, chat API ==")
    print(f"{n_requests} measured requests per run, medians of {runs} runs; CPU and post-processing per request")
    header = f"{'concurrency':>11} | {'requests/s':>10} | {'chunks/s':>9} | {'client CPU ms':>13} | "
    print(header + f"{'stub CPU ms':>11} | {'post-proc ms':>12}")
    with StubServer(behavior) as stub:
        for c in concurrencies:
            rows = [_overhead_run(stub, c, n_requests) for _ in range(runs)]
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            print(
                f"{c:>11} | {med['rps']:>10.0f} | {med['chunks_per_s']:>9.0f} | {med['client_cpu_ms']:>13.3f} | "
                f"{med['stub_cpu_ms']:>11.3f} | {med['post_ms']:>12.3f}"
            )


def accuracy_table(runs: int) -> None:
    """Section 2: measured - programmed latencies (medians over requests, then over runs)."""
    base = StubBehavior(ttft_s=0.03, chunk_delay_s=0.01, output_tokens=12)
    directives = [{"ttft_s": 0.02 + 0.002 * (i % 11), "output_tokens": 6 + (i * 7) % 17} for i in range(N_ITEMS)]
    expected = {f"b{i}": programmed(dataclasses.replace(base, **d)) for i, d in enumerate(directives)}  # type: ignore[arg-type]
    print("\n== timing accuracy: programmed stub (TTFT 20-40 ms, 10 ms per token, 6-22 tokens) ==")
    print("median over requests of (measured - programmed), ms; median over runs")
    print(f"{'concurrency':>11} | {'requests':>8} | {'TTFT err':>8} | {'TPOT err':>8} | {'E2E err':>8}")
    with StubServer(base) as stub:
        endpoint = Endpoint(base_url=stub.base_url, model="stub-model")
        for c, repeats in ((1, 1), (32, 3)):
            per_run: dict[str, list[float]] = {"ttft_ms": [], "tpot_ms": [], "e2e_ms": []}
            items = _items(directives)[: 16 if c == 1 else N_ITEMS]
            for _ in range(runs):
                scenario = run_scenario(endpoint, items, scenario=f"acc-c{c}", concurrency=c, warmup=c, repeats=repeats)
                records = asyncio.run(scenario).measured()
                for name, fn in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("e2e_ms", e2e_ms)):
                    errors = [v - expected[r.item_id][name] for r in records if (v := fn(r)) is not None]
                    per_run[name].append(float(np.median(errors)))
            med = {k: statistics.median(v) for k, v in per_run.items()}
            n = len(items) * repeats
            print(f"{c:>11} | {n:>8} | {med['ttft_ms']:>8.3f} | {med['tpot_ms']:>8.3f} | {med['e2e_ms']:>8.3f}")


# ---------------------------------------------------------------------------------------------------------
# Optional: vLLM's own benchmark client against the same zero-delay stub (to be wired by the lead).
# ---------------------------------------------------------------------------------------------------------


def vllm_bench_section(vllm_python: str | None, tokenizer: str | None, n_requests: int, tokens: int) -> None:
    """Run `vllm bench serve` (random dataset, chat endpoint) against the zero-delay stub, if available."""
    print("\n== optional: vLLM's benchmark client against the same zero-delay stub ==")
    if not vllm_python or not tokenizer:
        print("skipped: give --vllm-python (a Python with vLLM installed) and --tokenizer (a local tokenizer dir)")
        return
    probe = subprocess.run([vllm_python, "-c", "import vllm"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        print(f"skipped: {vllm_python} cannot import vllm ({probe.stderr.strip().splitlines()[-1:]})")
        return
    behavior = StubBehavior(ttft_s=0.0, chunk_delay_s=0.0, output_tokens=tokens)
    with StubServer(behavior) as stub:
        for c in (1, 16, 64):
            cmd = [
                vllm_python, "-m", "vllm.entrypoints.cli.main", "bench", "serve",
                "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
                "--base-url", stub.base_url, "--model", "stub-model", "--tokenizer", tokenizer,
                "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", str(tokens),
                "--num-prompts", str(n_requests), "--max-concurrency", str(c), "--request-rate", "inf",
                "--ignore-eos", "--disable-tqdm",
            ]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            lines = [ln for ln in done.stdout.splitlines() if "throughput" in ln.lower() or "duration" in ln.lower()]
            status = "ok" if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
            print(f"concurrency {c}: {status}")
            for line in lines:
                print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=64, help="output tokens (= chunks) per request")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--vllm-python", default=None, help="a Python interpreter with vLLM (optional section)")
    parser.add_argument("--tokenizer", default=None, help="a local tokenizer directory for vLLM's client")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {psutil.cpu_count()} CPUs, load average {psutil.getloadavg()[0]:.2f}")
    overhead_table(args.runs, args.requests, args.tokens, [int(c) for c in args.concurrency.split(",")])
    if not args.skip_accuracy:
        accuracy_table(args.runs)
    vllm_bench_section(args.vllm_python, args.tokenizer, args.requests, args.tokens)


if __name__ == "__main__":
    main()
