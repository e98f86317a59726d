"""The embedded engine's speculative gain: target-only vs n-gram vLLM servers on the built-in workloads.

Starts a target-only server, then an n-gram server, on the bundled SmolLM2-135M model (CPU, float32, eager
by default) and measures each workload (default: builtin:repetition and builtin:general) with specselect's
client: concurrency 1, temperature 0, natural outputs (no ignore_eos). Prints per workload:

- median per-request decode tokens/s of both groups and the measured decode speedup;
- the n-gram acceptance rate (accepted / drafted tokens) and the mean acceptance length
  L = 1 + accepted / drafts from the engine's counters: the tokens produced per target forward pass, i.e. the
  ideal speedup if drafting and verification cost nothing; and measured / ideal;
- whether every output equals the baseline's (temperature-0 parity);

then both servers' start-up seconds, and the n-gram acceptance on the repetition workload next to the general
one (the embedded engine should accept clearly more on repetitive text).

Run under the machine's server lock (one vLLM server at a time):
    flock /tmp/specselect-vllm.lock .venv/bin/python benchmarks/bench_engine_startup_decode.py
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import cpu_launch_spec, engine_setup, fmt, machine_description, print_table, ratio
from specselect.engines.base import LaunchSpec, RunningServer
from specselect.engines.telemetry import (
    MetricsSnapshot,
    SpecTelemetry,
    build_spec_telemetry,
    spec_decode_delta,
    summarize_per_request,
)
from specselect.engines.vllm.engine import VllmEngine
from specselect.engines.vllm.specconfig import build_speculative_config
from specselect.measure import Endpoint, SamplingParams, e2e_ms, run_scenario, ttft_ms
from specselect.workloads.loader import load_workload
from specselect.workloads.model import Workload

GROUPS = ("baseline", "ngram")


def measure_workload(
    engine: VllmEngine, server: RunningServer, workload: Workload, sampling: SamplingParams, repeats: int
) -> dict[str, Any]:
    """One workload at concurrency 1 on a running server; telemetry deltas cover the measured requests only."""
    name = workload.identity.name
    endpoint = Endpoint(base_url=server.base_url, model=server.served_model)
    snapshots: list[MetricsSnapshot] = []
    result = asyncio.run(
        run_scenario(
            endpoint,
            workload.items,
            scenario=f"{name}-c1",
            warmup=1,
            repeats=repeats,
            sampling=sampling,
            before_measured=lambda: snapshots.append(engine.snapshot(server)),
        )
    )
    after = engine.snapshot(server)
    if result.summary.n_error:
        raise SystemExit(f"{name}: {result.summary.errors}")
    measured = result.measured()
    decoding = [(r.completion_tokens or 0) - 1 for r in measured]
    seconds = [((e2e_ms(r) or 0.0) - (ttft_ms(r) or 0.0)) / 1000 for r in measured]
    telemetry = build_spec_telemetry(
        spec_decode_delta(snapshots[0], after, server.served_model),
        summarize_per_request(r.spec_metrics for r in measured),
    )
    return {
        "decode_tok_s": result.summary.decode_tok_s.p50,
        "pooled_decode_tok_s": sum(decoding) / sum(seconds) if sum(seconds) > 0 else None,
        "out_tok_s": result.summary.output_throughput_tok_s,
        "tokens": result.summary.total_output_tokens,
        "texts": {(r.item_id, r.repeat): r.output_text for r in measured},
        "telemetry": telemetry,
    }


def run_group(
    engine: VllmEngine, spec: LaunchSpec, workloads: list[Workload], sampling: SamplingParams, repeats: int
) -> dict[str, Any]:
    """Start one server, measure every workload on it, stop it."""
    out: dict[str, Any] = {"workloads": {}}
    launcher = engine.launch(spec)
    with launcher as server:
        out["startup_s"] = server.startup_s
        for workload in workloads:
            print(f"{spec.group}: {workload.identity.name} ...", file=sys.stderr, flush=True)
            out["workloads"][workload.identity.name] = measure_workload(engine, server, workload, sampling, repeats)
    out["release"] = launcher.release_check
    return out


def acceptance(tel: SpecTelemetry | None) -> tuple[float | None, float | None]:
    """(acceptance rate, mean acceptance length L = 1 + accepted / drafts)."""
    if tel is None:
        return None, None
    return tel.acceptance_rate, tel.mean_acceptance_length


def gain_table(rows_in: dict[str, dict[str, Any]], workloads: list[str], k: int, mode: str) -> None:
    """Print the per-workload gain table, start-up, and the repetition-vs-general acceptance line."""
    base, cand = rows_in["baseline"], rows_in["ngram"]
    rows = []
    for name in workloads:
        b, c = base["workloads"][name], cand["workloads"][name]
        rate, length = acceptance(c["telemetry"])
        speedup = ratio(c["decode_tok_s"], b["decode_tok_s"])
        pooled = ratio(c["pooled_decode_tok_s"], b["pooled_decode_tok_s"])
        same = sum(1 for key, text in c["texts"].items() if b["texts"].get(key) == text)
        rows.append(
            [
                name,
                fmt(b["decode_tok_s"], ".1f"),
                fmt(c["decode_tok_s"], ".1f"),
                fmt(speedup, ".2f", "x"),
                fmt(pooled, ".2f", "x"),
                fmt(ratio(c["out_tok_s"], b["out_tok_s"]), ".2f", "x"),
                fmt(rate, ".3f"),
                fmt(length, ".2f", "x"),
                fmt(ratio(pooled, length), ".2f"),
                f"{same}/{len(c['texts'])}",
            ]
        )
    print_table(
        f"n-gram (k={k}) vs target-only, {mode}; concurrency 1, T=0, median per-request decode speed",
        [
            "workload",
            "baseline decode tok/s",
            "ngram decode tok/s",
            "decode speedup (medians)",
            "decode speedup (pooled)",
            "throughput speedup",
            "acceptance rate",
            "ideal speedup L",
            "pooled / ideal",
            "outputs = baseline",
        ],
        rows,
        [
            "L = 1 + accepted / drafts (engine counters over the measured requests): tokens per speculative "
            "step, the speedup if drafting and verification cost nothing and every step drafted. Decode speedup "
            "(medians) = ratio of the median per-request decode tok/s; (pooled) = ratio of all decoded tokens / "
            "all decode seconds, the quantity comparable to L. Throughput speedup = output tokens/s of the whole "
            "scenario (TTFT included)."
        ],
    )
    print_table(
        "server start-up (process start to /health ready)",
        ["", "baseline", f"ngram k={k}", "ratio"],
        [
            [
                "start-up s",
                fmt(base["startup_s"], ".1f"),
                fmt(cand["startup_s"], ".1f"),
                fmt(ratio(cand["startup_s"], base["startup_s"]), ".2f"),
            ]
        ],
    )
    if "repetition" in workloads and "general" in workloads:
        rep, gen = (acceptance(cand["workloads"][w]["telemetry"])[0] for w in ("repetition", "general"))
        higher = rep is not None and gen is not None and rep > gen
        print(
            f"\nn-gram acceptance rate: builtin:repetition {fmt(rep, '.3f')} vs builtin:general {fmt(gen, '.3f')} "
            f"({fmt(ratio(rep, gen), '.1f', 'x')}); repetition higher: {'yes' if higher else 'NO'}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, help="engine python (default: the managed CPU vLLM environment)")
    parser.add_argument("--model", type=Path, help="model directory (default: builtin:smollm2-135m)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--compiled", action="store_true", help="omit --enforce-eager (slow start-up)")
    parser.add_argument("--workloads", default="builtin:repetition,builtin:general")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1, help="measured passes over each workload")
    parser.add_argument("--k", type=int, default=5, help="num_speculative_tokens (the default plan's 5)")
    parser.add_argument("--lookup", default="2,5", help="prompt_lookup_min,max (the default plan's 2,5)")
    parser.add_argument("--dry-run", action="store_true", help="print the two launch configurations; start nothing")
    args = parser.parse_args()

    workloads = [load_workload(ref) for ref in args.workloads.split(",")]
    lo, hi = (int(v) for v in args.lookup.split(","))
    ngram = build_speculative_config("ngram", None, args.k, None, {"prompt_lookup_min": lo, "prompt_lookup_max": hi})
    mode = f"{args.dtype}, {'compiled' if args.compiled else 'eager'}"
    print(f"machine: {machine_description()}")
    print(f"workloads {[w.identity.source for w in workloads]}, max_tokens {args.max_tokens}, {mode}; ngram {ngram}")
    if args.dry_run:
        print("dry run: nothing started")
        return 0

    setup = engine_setup(args.python, args.model)
    engine = VllmEngine(python=setup.python)
    caps = engine.probe()
    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    print(f"work directory (server logs, prompt files): {work}", file=sys.stderr)
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=0.0)
    rows: dict[str, dict[str, Any]] = {}
    for group, cfg in zip(GROUPS, (None, ngram), strict=True):
        spec = cpu_launch_spec(
            group,
            setup.model,
            work,
            dtype=args.dtype,
            engine_args=() if args.compiled else ("--enforce-eager",),
            speculative_config=cfg,
            per_request_spec_metrics=cfg is not None and caps.per_request_spec_metrics_flag,
        )
        rows[group] = run_group(engine, spec, workloads, sampling, args.repeats)
    gain_table(rows, [w.identity.name for w in workloads], args.k, f"{mode}, vLLM {caps.engine_version}")
    for group, data in rows.items():
        rel = data["release"]
        print(f"{group}: released port={rel.port_free} processes={rel.processes_gone} in {rel.seconds:.1f} s")
    print(f"machine after: {machine_description()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
