"""Fidelity: specselect's client vs `vllm bench serve` on the same real CPU vLLM server, same prompts.

One target-only vLLM server (bundled SmolLM2-135M, float32, eager; prefix caching off so neither client warms
the cache for the other) serves both clients alternately -- A B in even rounds, B A in odd rounds -- at each
concurrency. Both send the same requests in the same order (specselect's seeded order of the workload items,
written to a prompt file for vLLM's client), greedy, `ignore_eos` and the same max tokens, so both generate
exactly the same number of tokens; both ask for per-chunk usage, so the server streams the same bytes.

Prints, per concurrency, the median over rounds of each run's median TTFT, TPOT and E2E and of the output
throughput for both clients, and the ratio specselect / vLLM (target: every ratio within 0.95-1.05).

Run under the machine's server lock (one vLLM server at a time):
    flock /tmp/specselect-vllm.lock .venv/bin/python benchmarks/bench_fidelity.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import (
    chat_prompts,
    cpu_launch_spec,
    engine_setup,
    fmt,
    machine_description,
    median,
    print_table,
    ratio,
    run_vllm_bench,
    vllm_bench_argv,
    write_sharegpt_prompts,
)
from specselect.measure import Endpoint, SamplingParams, request_order, run_scenario
from specselect.workloads.loader import load_workload
from specselect.workloads.model import WorkloadItem

METRICS = (
    ("TTFT p50 (ms)", "ttft_ms", ".1f"),
    ("TPOT p50 (ms)", "tpot_ms", ".2f"),
    ("E2E p50 (ms)", "e2e_ms", ".0f"),
    ("output throughput (tok/s)", "out_tok_s", ".2f"),
)
CLIENTS = ("specselect", "vllm")
TARGET = (0.95, 1.05)


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
    scenario = run_scenario(
        endpoint,
        items,
        scenario=f"fidelity-c{c}",
        concurrency=c,
        warmup=c,
        repeats=passes,
        seed=seed,
        sampling=sampling,
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
    """(max - min) / median in percent: how much one client's runs varied."""
    mid = median(values)
    return None if not values or not mid else 100 * (max(values) - min(values)) / mid


def fidelity_tables(runs: list[dict[str, Any]], concurrencies: list[int]) -> bool:
    """Print the summary table per concurrency and the per-run table; True when every ratio is on target."""
    on_target = True
    for c in concurrencies:
        mine = [r for r in runs if r["concurrency"] == c]
        rows = []
        for label, key, spec in METRICS:
            values = {client: [r[key] for r in mine if r["client"] == client] for client in CLIENTS}
            a, b = median(values["specselect"]), median(values["vllm"])
            q = ratio(a, b)
            ok = q is not None and TARGET[0] <= q <= TARGET[1]
            on_target = on_target and ok
            by_round = {client: {r["round"]: r[key] for r in mine if r["client"] == client} for client in CLIENTS}
            paired = median(ratio(v, by_round["vllm"].get(rnd)) for rnd, v in by_round["specselect"].items())
            rows.append(
                [
                    label,
                    fmt(a, spec),
                    fmt(b, spec),
                    fmt(q, ".3f"),
                    "yes" if ok else "NO",
                    fmt(paired, ".3f"),
                    f"{fmt(spread(values['specselect']), '.0f', '%')} / {fmt(spread(values['vllm']), '.0f', '%')}",
                ]
            )
        tokens = {
            client: sorted({(r["prompt_tokens"], r["tokens"]) for r in mine if r["client"] == client})
            for client in CLIENTS
        }
        n_rounds = len({r["round"] for r in mine})
        print_table(
            f"fidelity at concurrency {c}: median over {n_rounds} rounds of each run's value",
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
            [
                f"(prompt, output) tokens per run: specselect {tokens['specselect']}, vLLM {tokens['vllm']}; "
                "spread = (max - min) / median over rounds, the noise the ratio must be read against"
            ],
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
    print_table(
        "every run (in the order run)",
        ["run", "client", "requests", *(m[0] for m in METRICS)],
        per_run,
    )
    return on_target


def main() -> int:
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
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    items = list(load_workload(args.workload).items)
    chat_prompts(items)  # fail early on multi-message items

    print(f"machine: {machine_description()}")
    plan = [(rnd, c) for rnd in range(args.rounds) for c in concurrencies]
    print(
        f"workload {args.workload} ({len(items)} items), max_tokens {args.max_tokens}, ignore_eos, T=0; "
        f"{args.rounds} rounds x concurrency {concurrencies}; requests per run: "
        + ", ".join(f"c={c}: {len(items) * passes_for(c, len(items), args.per_slot)}" for c in concurrencies)
    )
    if args.dry_run:
        for rnd, c in plan:
            order = CLIENTS if rnd % 2 == 0 else CLIENTS[::-1]
            print(f"round {rnd} c={c}: {' then '.join(order)}")
        print("dry run: nothing started")
        return 0

    from specselect.engines.vllm.engine import VllmEngine

    setup = engine_setup(args.python, args.model)
    engine = VllmEngine(python=setup.python)
    work = Path(tempfile.mkdtemp(prefix="bench-fidelity-"))
    print(f"work directory (server logs, prompt files): {work}", file=sys.stderr)
    spec = cpu_launch_spec("fidelity", setup.model, work, disable_prefix_caching=True)
    runs: list[dict[str, Any]] = []
    with engine.launch(spec) as server:
        print(f"server ready in {server.startup_s:.1f} s: {' '.join(server.command)}", file=sys.stderr)
        endpoint = Endpoint(base_url=server.base_url, model=server.served_model)
        specselect_run(endpoint, items[:2], c=1, passes=1, max_tokens=8, seed=args.seed)  # warm the server up once
        for rnd, c in plan:
            passes = passes_for(c, len(items), args.per_slot)
            prompts = ordered_prompts(items, passes, args.seed)
            dataset = work / f"prompts-c{c}.json"
            write_sharegpt_prompts(dataset, prompts)
            result_path = work / f"vllm-c{c}-r{rnd}.json"
            argv = vllm_bench_argv(
                setup.python,
                base_url=server.base_url,
                model=server.served_model,
                tokenizer=setup.model,
                dataset=dataset,
                n_prompts=len(prompts),
                output_len=args.max_tokens,
                concurrency=c,
                warmups=c,
                result_path=result_path,
            )
            for client in CLIENTS if rnd % 2 == 0 else CLIENTS[::-1]:
                print(f"round {rnd} c={c}: {client} ...", file=sys.stderr, flush=True)
                if client == "specselect":
                    row = specselect_run(
                        endpoint, items, c=c, passes=passes, max_tokens=args.max_tokens, seed=args.seed
                    )
                else:
                    row = vllm_run(argv, result_path)
                runs.append({"round": rnd, "concurrency": c, "client": client, **row})
    print(f"vLLM's client command (last run): {' '.join(argv)}")
    if args.save:
        args.save.write_text(json.dumps(runs, indent=1))
    on_target = fidelity_tables(runs, concurrencies)
    print(f"\nall ratios within {TARGET[0]}-{TARGET[1]}: {'yes' if on_target else 'NO'}")
    print(f"machine after: {machine_description()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
