"""Fidelity: specselect's client vs `vllm bench serve` on the same real CPU vLLM server, same prompts.

One target-only vLLM server (bundled SmolLM2-135M, float32, eager; prefix caching off so neither client warms
the cache for the other) serves both clients alternately -- A B in even rounds, B A in odd rounds -- at each
concurrency. Both send the same requests in the same order (specselect's seeded order of the workload items,
written to a prompt file for vLLM's client), greedy, `ignore_eos` and the same max tokens, so both generate
exactly the same number of tokens; both ask for per-chunk usage, so the server streams the same bytes.

Prints, per concurrency, the median over rounds of each run's median TTFT, TPOT and E2E and of the output
throughput for both clients, and the ratio specselect / vLLM (target: every ratio within 0.95-1.05).

Run holding the machine's server lock (one vLLM server at a time); `--write-results` writes section 1 of
RESULTS.md from this run and saves its record (`figures/bench_fidelity.json`, the TPOT bench_client_overhead.py
compares with):
    .venv/bin/python benchmarks/bench_fidelity.py --server-lock /tmp/specselect-vllm.lock [--rounds 5] \\
        [--write-results benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    EngineSetup,
    Report,
    RunClock,
    TargetCheck,
    add_results_arguments,
    chat_prompts,
    cpu_launch_spec,
    describe_launch,
    engine_setup,
    fmt,
    fmt_range,
    machine_description,
    median,
    publish,
    ratio,
    run_vllm_bench,
    server_lock,
    vllm_bench_argv,
    write_sharegpt_prompts,
)
from specselect._engines.base import LaunchSpec
from specselect._measure import request_order, run_load
from specselect._workloads.loader import load_workload
from specselect.records.measurement import Endpoint, SamplingParams, ScenarioSpec
from specselect.records.workloads import WorkloadItem

METRICS = (
    ("TTFT p50 (ms)", "ttft_ms", ".1f"),
    ("TPOT p50 (ms)", "tpot_ms", ".2f"),
    ("E2E p50 (ms)", "e2e_ms", ".0f"),
    ("output throughput (tok/s)", "out_tok_s", ".2f"),
)
CLIENTS = ("specselect", "vllm")
TARGET = (0.95, 1.05)
TPOT = METRICS[1][0]
ENGINE_TPOT = "specselect_tpot_p50_ms_c1"
"""The figure bench_client_overhead.py compares its client's costs with: specselect's c=1 TPOT median."""


def ordered_prompts(items: list[WorkloadItem], passes: int, seed: int) -> list[str]:
    """The prompts in the order specselect sends its measured passes 0..passes-1."""
    prompts = chat_prompts(items)
    return [prompts[i] for rep in range(passes) for i in request_order(len(items), rep, seed)]


def passes_for(concurrency: int, n_items: int, per_slot: int) -> int:
    """Enough passes over the items that every concurrent slot serves at least `per_slot` requests."""
    return max(1, math.ceil(per_slot * concurrency / n_items))


def specselect_run(
    endpoint: Endpoint, items: list[WorkloadItem], *, c: int, passes: int, max_tokens: int, seed: int
) -> dict[str, Any]:
    """One measured specselect run; medians of the run."""
    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    scenario = run_load(
        endpoint,
        items,
        ScenarioSpec(scenario=f"fidelity-c{c}", concurrency=c, warmup=c, repeats=passes, seed=seed, sampling=sampling),
    )
    s = asyncio.run(scenario).summary
    if s.n_error:
        raise SystemExit(f"specselect run failed: {s.errors}")
    return {
        "ttft_ms": s.ttft_ms.p50,
        "tpot_ms": s.tpot_ms.p50,
        "e2e_ms": s.e2e_ms.p50,
        "out_tok_s": s.output_throughput_tok_s,
        "tokens": s.total_output_tokens,
        "prompt_tokens": s.total_prompt_tokens,
        "requests": s.n_success,
    }


def vllm_run(argv: list[str], result_path: Path) -> dict[str, Any]:
    """One `vllm bench serve` run; medians of the run."""
    r = run_vllm_bench(argv, result_path).result
    return {
        "ttft_ms": r["median_ttft_ms"],
        "tpot_ms": r["median_tpot_ms"],
        "e2e_ms": r["median_e2el_ms"],
        "out_tok_s": r["output_throughput"],
        "tokens": r["total_output_tokens"],
        "prompt_tokens": r["total_input_tokens"],
        "requests": r["completed"],
    }


def spread(values: list[float]) -> float | None:
    """(max - min) / median in percent: how much one client's runs varied (None for fewer than two runs)."""
    mid = median(values)
    return None if len(values) < 2 or not mid else 100 * (max(values) - min(values)) / mid


@dataclass(frozen=True)
class Comparison:
    """One metric at one concurrency: both clients' medians over rounds, their ratio and each client's spread."""

    concurrency: int
    metric: str
    specselect: float | None
    vllm: float | None
    paired: float | None
    spreads: dict[str, float | None]

    @property
    def ratio(self) -> float | None:
        """specselect / vLLM of the medians over rounds."""
        return ratio(self.specselect, self.vllm)

    @property
    def on_target(self) -> bool:
        """The ratio lies within TARGET."""
        return self.ratio is not None and TARGET[0] <= self.ratio <= TARGET[1]


def compare(runs: list[dict[str, Any]], c: int) -> list[Comparison]:
    """Every metric of METRICS at concurrency `c`."""
    mine = [r for r in runs if r["concurrency"] == c]
    out = []
    for label, key, _ in METRICS:
        values = {client: [r[key] for r in mine if r["client"] == client] for client in CLIENTS}
        by_round = {client: {r["round"]: r[key] for r in mine if r["client"] == client} for client in CLIENTS}
        paired = median(ratio(v, by_round["vllm"].get(rnd)) for rnd, v in by_round["specselect"].items())
        spreads = {client: spread(v) for client, v in values.items()}
        out.append(Comparison(c, label, median(values["specselect"]), median(values["vllm"]), paired, spreads))
    return out


def _token_counts(runs: list[dict[str, Any]], c: int) -> dict[str, list[tuple[int, int]]]:
    mine = [r for r in runs if r["concurrency"] == c]
    return {
        client: sorted({(r["prompt_tokens"], r["tokens"]) for r in mine if r["client"] == client}) for client in CLIENTS
    }


def fidelity_tables(runs: list[dict[str, Any]], concurrencies: list[int], report: Report) -> list[Comparison]:
    """The summary table per concurrency, the token counts, the per-run table and the largest spread."""
    found: list[Comparison] = []
    for c in concurrencies:
        rows = []
        for cmp, (_, _, spec) in zip(compare(runs, c), METRICS, strict=True):
            found.append(cmp)
            spreads = " / ".join(fmt(cmp.spreads[client], ".0f", "%") for client in CLIENTS)
            ok = "yes" if cmp.on_target else "NO"
            rows.append(
                [
                    cmp.metric,
                    fmt(cmp.specselect, spec),
                    fmt(cmp.vllm, spec),
                    fmt(cmp.ratio, ".3f"),
                    ok,
                    fmt(cmp.paired, ".3f"),
                    spreads,
                ]
            )
        tokens = _token_counts(runs, c)
        same = "the same for both clients" if tokens["specselect"] == tokens["vllm"] else "DIFFERENT between clients"
        report.table(
            f"fidelity at concurrency {c}: median over {len({r['round'] for r in runs})} rounds of each run's value",
            [
                "metric",
                "specselect",
                "vllm bench serve",
                "ratio",
                f"in {TARGET[0]}-{TARGET[1]}",
                "median per-round ratio",
                "run-to-run spread (ss / vLLM)",
            ],
            rows,
            [f"(prompt, output) tokens per run: specselect {tokens['specselect']}, vLLM {tokens['vllm']}: {same}."],
        )
    per_run = [
        [
            f"c={r['concurrency']} round {r['round']}",
            r["client"],
            str(r["requests"]),
            *(fmt(r[key], spec) for _, key, spec in METRICS),
        ]
        for r in runs
    ]
    report.table("every run (in the order run)", ["run", "client", "requests", *(m[0] for m in METRICS)], per_run)
    report.text(_noise_sentence(found))
    return found


def _noise_sentence(found: list[Comparison]) -> str:
    spreads = [(value, cmp, client) for cmp in found for client, value in cmp.spreads.items() if value is not None]
    if not spreads:
        return "Spread = (max - min) / median of one client's runs; with one round there is none."
    value, cmp, client = max(spreads, key=lambda s: s[0])
    return (
        f"Spread = (max - min) / median of one client's runs. The largest, {value:.0f}% ({cmp.metric} at c="
        f"{cmp.concurrency}, {client}), is the noise a ratio's distance from 1.0 must be read against."
    )


def fidelity_target(found: list[Comparison], rounds: int) -> TargetCheck:
    """All ratios within TARGET, as the targets table states it."""
    levels = ", ".join(str(c) for c in sorted({cmp.concurrency for cmp in found}))
    return TargetCheck(
        target=f"fidelity: specselect / `vllm bench serve` within {TARGET[0]}-{TARGET[1]} on median TTFT, TPOT, "
        f"E2E and output throughput at c={levels}",
        result=f"ratios {fmt_range((cmp.ratio for cmp in found), '.3f')} ({rounds} rounds)",
        met=bool(found) and all(cmp.on_target for cmp in found),
    )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, help="engine python (default: the managed CPU vLLM environment)")
    parser.add_argument("--model", type=Path, help="model directory (default: builtin:smollm2-135m)")
    parser.add_argument("--workload", default="builtin:general", help="single-message chat workload")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--rounds", type=int, default=5, help="A/B rounds per concurrency")
    parser.add_argument("--per-slot", type=int, default=4, help="measured requests per concurrent slot, at least")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, help="write every run's numbers to this JSON file")
    parser.add_argument("--dry-run", action="store_true", help="print the plan of runs; start nothing")
    add_results_arguments(parser)
    return parser.parse_args()


@dataclass(frozen=True)
class Measured:
    """Every run in the order run, vLLM's client command of the last run and the server's start-up."""

    runs: list[dict[str, Any]]
    vllm_argv: list[str]
    startup_s: float


def measure(args: argparse.Namespace, items: list[WorkloadItem], setup: EngineSetup, spec: LaunchSpec) -> Measured:
    """Start the server and run both clients alternately, every round at every concurrency."""
    from specselect._engines.vllm.engine import VllmEngine

    runs: list[dict[str, Any]] = []
    argv: list[str] = []
    with VllmEngine(python=setup.python).launch(spec) as server:
        print(f"server ready in {server.startup_s:.1f} s: {' '.join(server.command)}", file=sys.stderr)
        endpoint = Endpoint(base_url=server.base_url, model=server.served_model)
        specselect_run(endpoint, items[:2], c=1, passes=1, max_tokens=8, seed=args.seed)  # warm the server up once
        for rnd, c in round_plan(args):
            passes = passes_for(c, len(items), args.per_slot)
            prompts = ordered_prompts(items, passes, args.seed)
            dataset = spec.log_path.parent / f"prompts-c{c}.json"
            write_sharegpt_prompts(dataset, prompts)
            result_path = spec.log_path.parent / f"vllm-c{c}-r{rnd}.json"
            argv = vllm_bench_argv(
                setup.python,
                endpoint,
                tokenizer=setup.model,
                dataset=dataset,
                n_prompts=len(prompts),
                output_len=args.max_tokens,
                concurrency=c,
                result_path=result_path,
            )
            for client in client_order(rnd):
                print(f"round {rnd} c={c}: {client} ...", file=sys.stderr, flush=True)
                if client == "specselect":
                    row = specselect_run(
                        endpoint, items, c=c, passes=passes, max_tokens=args.max_tokens, seed=args.seed
                    )
                else:
                    row = vllm_run(argv, result_path)
                runs.append({"round": rnd, "concurrency": c, "client": client, **row})
    return Measured(runs=runs, vllm_argv=argv, startup_s=server.startup_s)


def concurrencies_of(args: argparse.Namespace) -> list[int]:
    """The concurrency levels asked for."""
    return [int(c) for c in args.concurrency.split(",")]


def round_plan(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(round, concurrency) in the order run."""
    return [(rnd, c) for rnd in range(args.rounds) for c in concurrencies_of(args)]


def client_order(rnd: int) -> tuple[str, ...]:
    """A B in even rounds, B A in odd ones."""
    return CLIENTS if rnd % 2 == 0 else CLIENTS[::-1]


def configuration(
    args: argparse.Namespace, items: list[WorkloadItem], setup: EngineSetup, spec: LaunchSpec, measured: Measured
) -> tuple[str, ...]:
    """What ran, for the section: the workload and schedule, the server, the clients."""
    per_run = ", ".join(
        f"c={c}: {len(items) * passes_for(c, len(items), args.per_slot)}" for c in concurrencies_of(args)
    )
    vllm_cmd = shlex.join(["vllm", *measured.vllm_argv[measured.vllm_argv.index("bench") :]])
    snapshot = f" (snapshot `{setup.snapshot[:12]}...`)" if setup.snapshot else ""
    return (
        f"**Workload:** `{args.workload}` ({len(items)} items) in specselect's seeded order (seed {args.seed}), "
        f"{args.max_tokens} tokens per request (`ignore_eos`, T=0, per-chunk usage); {args.rounds} rounds per "
        f"concurrency, clients alternating (A B, then B A); requests per run {per_run}, one warm-up request per "
        "concurrent slot for both clients.",
        f"**Server:** one target-only vLLM {setup.engine_version} server, {setup.model_ref}{snapshot}, "
        f"{describe_launch(spec)} (so neither client warms the cache for the other); "
        f"ready in {measured.startup_s:.1f} s.",
        "**Clients:** specselect's load generator, and vLLM's own client from the same engine environment with "
        "the same prompts written as a ShareGPT-format file (its `custom` JSONL loader needs pandas, which the "
        f"engine environment does not have), last run as `{vllm_cmd}`.",
    )


def main() -> int:
    args = _arguments()
    items = list(load_workload(args.workload).items)
    chat_prompts(items)  # fail early on multi-message items
    print(f"machine: {machine_description()}")
    print(
        f"workload {args.workload} ({len(items)} items), max_tokens {args.max_tokens}, ignore_eos, T=0; "
        f"{args.rounds} rounds x concurrency {concurrencies_of(args)}"
    )
    if args.dry_run:
        for rnd, c in round_plan(args):
            print(f"round {rnd} c={c}: {' then '.join(client_order(rnd))}")
        print("dry run: nothing started")
        return 0
    setup = engine_setup(args.python, args.model)
    work = Path(tempfile.mkdtemp(prefix="bench-fidelity-"))
    print(f"work directory (server logs, prompt files): {work}", file=sys.stderr)
    spec = cpu_launch_spec("fidelity", setup.model, work, disable_prefix_caching=True)
    with server_lock(args.server_lock):
        clock = RunClock.start()  # the lock's wait is not the run's
        measured = measure(args, items, setup, spec)
    if args.save:
        args.save.write_text(json.dumps(measured.runs, indent=1))
    report = Report()
    found = fidelity_tables(measured.runs, concurrencies_of(args), report)
    target = fidelity_target(found, args.rounds)
    print(f"\nall ratios within {TARGET[0]}-{TARGET[1]}: {'yes' if target.met else 'NO'}")
    if args.write_results:
        tpot = next((cmp.specselect for cmp in found if cmp.concurrency == 1 and cmp.metric == TPOT), None)
        record = clock.record(
            "bench_fidelity",
            "Fidelity: specselect vs `vllm bench serve` on one real CPU server",
            configuration=configuration(args, items, setup, spec, measured),
            engine_version=setup.engine_version,
            model=setup.model_ref,
            model_snapshot=setup.snapshot,
            figures={ENGINE_TPOT: tpot},
            targets=(target,),
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
