"""The CPU engine as its documentation says: baseline tokens/s and the n-gram speedup with vLLM's prescribed runtime
preloaded (tcmalloc + Intel OpenMP in the server's LD_PRELOAD) and without, side by side in one run.

vLLM 0.32 on CPU warns at every start without them ("Speculative decoding on CPU without Intel OpenMP in LD_PRELOAD
will cause significant performance loss"). This script starts, per round, four servers on the bundled SmolLM2-135M
(float32, eager, 2 GiB KV cache, the worker in the engine process as specselect runs it): target-only and n-gram,
each without and with the preload, in alternating order (round 1: plain base, preloaded base, plain n-gram,
preloaded n-gram; round 2 the reverse), and measures one workload at concurrency 1 on each with specselect's
client. It prints, per configuration, the median over rounds of the baseline's pooled decode tokens/s and of the
n-gram speedup (n-gram / baseline of the same configuration and round), their ratios preloaded / plain, the
start-up seconds, and the warnings the engine logged at start-up. Its last line says what
`specselect._engines.vllm.cpuruntime.PRELOAD_BY_DEFAULT` should be on this evidence.

The libraries are the ones specselect preloads (`cpu_preload`): Intel OpenMP from the engine environment
(`intel-openmp`), tcmalloc where the system has it (Debian: libtcmalloc-minimal4); without either, nothing can be
compared and the script says so.

Two rounds take ~12 minutes on a 2-core machine (8 server starts of ~30 s, ~45 s of decoding each). Run it on a
quiet machine, holding the server lock:
    .venv/bin/python benchmarks/bench_cpu_runtime.py --server-lock /tmp/specselect-vllm.lock \\
        [--write-results benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    CPU_SERVER_ENV,
    EngineSetup,
    Report,
    RunClock,
    TargetCheck,
    add_results_arguments,
    cpu_launch_spec,
    describe_launch,
    engine_setup,
    fmt,
    machine_description,
    median,
    publish,
    ratio,
    server_lock,
)
from bench_engine_startup_decode import NgramSetting, measure_workload
from specselect._engines.base import LaunchSpec
from specselect._engines.vllm.cpuruntime import cpu_preload
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.specconfig import build_speculative_config
from specselect._engines.vllm.startuplog import startup_warnings
from specselect._workloads.loader import load_workload
from specselect.records.measurement import SamplingParams
from specselect.records.workloads import Workload

CONFIGS = ("plain", "preloaded")
GROUPS = ("baseline", "ngram")
RUNTIME_ENV = {**CPU_SERVER_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
"""As specselect starts a CPU server (`engines.vllm.engine._CPU_DEFAULT_ENV`), with the bench's 2 GiB KV cache."""
TOLERANCE = 0.03
"""How much worse (3 %) the preloaded runtime may measure and still be the default: two launches of one
configuration differ by about this much on these machines (bench_rerun)."""


@dataclass(frozen=True)
class Launch:
    """One measured server: its configuration, group, round, and what it measured."""

    config: str
    group: str
    round: int
    startup_s: float | None
    decode_tok_s: float | None
    warnings: tuple[str, ...]


def launch_order(rounds: int) -> list[tuple[str, str, int]]:
    """(config, group, round) in start order: plain and preloaded alternate next to each other, the order reversed
    every other round, so a drift of the machine over the run touches both configurations alike."""
    one = [(config, group) for group in GROUPS for config in CONFIGS]
    return [(c, g, r) for r in range(rounds) for c, g in (one if r % 2 == 0 else one[::-1])]


def _spec(setup: EngineSetup, work: Path, config: str, group: str, r: int, preload: str, ngram: Any) -> LaunchSpec:
    env = dict(RUNTIME_ENV) | ({"LD_PRELOAD": preload} if config == "preloaded" else {})
    return cpu_launch_spec(
        f"{config}-{group}-r{r + 1}",
        setup.model,
        work,
        env=env,
        speculative_config=ngram if group == "ngram" else None,
    )


def run_launch(engine: VllmEngine, spec: LaunchSpec, workload: Workload, sampling: SamplingParams) -> dict[str, Any]:
    """Start, measure the workload, stop; the engine's start-up warnings from its log."""
    with engine.launch(spec) as server:
        measured = measure_workload(engine, server, workload, sampling, repeats=1)
        startup_s = server.startup_s
    log = spec.log_path.read_text(encoding="utf-8", errors="replace")
    return {"startup_s": startup_s, **measured, "warnings": tuple(w.message for w in startup_warnings(log))}


def measure(args: argparse.Namespace, workload: Workload, ngram: dict[str, Any]) -> tuple[list[Launch], str]:
    """Every launch of `launch_order`, one at a time; the preload that was compared."""
    setup = engine_setup(args.python, args.model)
    engine = VllmEngine(python=setup.python)
    preload = ":".join(str(p) for p in cpu_preload(setup.python.parent.parent))
    if not preload:
        raise SystemExit("neither Intel OpenMP nor tcmalloc was found: nothing to compare; fix: `specselect setup`")
    work = Path(tempfile.mkdtemp(prefix="bench-runtime-"))
    print(f"work directory (server logs): {work}; preload {preload}", file=sys.stderr)
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=0.0)
    out = []
    for config, group, r in launch_order(args.rounds):
        spec = _spec(setup, work, config, group, r, preload, ngram)
        print(f"{spec.group} ...", file=sys.stderr, flush=True)
        got = run_launch(engine, spec, workload, sampling)
        out.append(Launch(config, group, r, got["startup_s"], got["pooled_decode_tok_s"], got["warnings"]))
    return out, preload


def summary(launches: list[Launch]) -> dict[str, dict[str, float | None]]:
    """Per configuration: median baseline tokens/s, median n-gram speedup (paired by round), median start-up."""
    out: dict[str, dict[str, float | None]] = {}
    for config in CONFIGS:
        mine = [x for x in launches if x.config == config]
        base = {x.round: x.decode_tok_s for x in mine if x.group == "baseline"}
        cand = {x.round: x.decode_tok_s for x in mine if x.group == "ngram"}
        out[config] = {
            "baseline_tok_s": median(base.values()),
            "ngram_tok_s": median(cand.values()),
            "speedup": median(ratio(cand[r], base.get(r)) for r in cand),
            "startup_s": median(x.startup_s for x in mine),
        }
    return out


def verdict(figures: dict[str, dict[str, float | None]]) -> tuple[bool | None, str]:
    """Whether the preload should be the default: it is what the engine's documentation tells its CPU users to run,
    so yes unless it serves slower (baseline or n-gram tokens/s worse than `TOLERANCE`). The speedup it measures is
    then the one users get, whichever way it moved: the line states it, for the README's figures."""
    pre, plain = figures["preloaded"], figures["plain"]
    base = ratio(pre["baseline_tok_s"], plain["baseline_tok_s"])
    served = ratio(pre["ngram_tok_s"], plain["ngram_tok_s"])
    gain = ratio(pre["speedup"], plain["speedup"])
    if base is None or served is None or gain is None:
        return None, "not measured: keep PRELOAD_BY_DEFAULT as it is"
    keep = base >= 1 - TOLERANCE and served >= 1 - TOLERANCE
    setting = "PRELOAD_BY_DEFAULT = True" if keep else "PRELOAD_BY_DEFAULT = False"
    return keep, (
        f"preloaded / plain: baseline tok/s x{base:.3f}, n-gram tok/s x{served:.3f}, n-gram speedup x{gain:.3f} "
        f"({plain['speedup']:.2f}x -> {pre['speedup']:.2f}x): set {setting}"
    )


def tables(report: Report, launches: list[Launch], figures: dict[str, dict[str, float | None]]) -> None:
    """The side-by-side table, the per-launch table, and the engine's warnings per configuration."""
    plain, pre = figures["plain"], figures["preloaded"]
    report.table(
        "vLLM's CPU runtime preloaded (tcmalloc + Intel OpenMP) vs not; medians over rounds",
        ["", "plain", "preloaded", "preloaded / plain"],
        [
            [name, fmt(plain[key], spec), fmt(pre[key], spec), fmt(ratio(pre[key], plain[key]), ".3f", "x")]
            for name, key, spec in (
                ("baseline decode tok/s (pooled)", "baseline_tok_s", ".2f"),
                ("n-gram decode tok/s (pooled)", "ngram_tok_s", ".2f"),
                ("n-gram speedup (same round)", "speedup", ".3f"),
                ("start-up s", "startup_s", ".1f"),
            )
        ],
    )
    report.table(
        "every launch in start order",
        ["launch", "configuration", "group", "round", "start-up s", "decode tok/s"],
        [
            [str(i + 1), x.config, x.group, str(x.round + 1), fmt(x.startup_s, ".1f"), fmt(x.decode_tok_s, ".2f")]
            for i, x in enumerate(launches)
        ],
    )
    for config in CONFIGS:
        said = sorted({w for x in launches if x.config == config for w in x.warnings})
        report.text(f"Engine warnings at start-up, {config}: " + ("; ".join(said) if said else "none."))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, help="engine python (default: the managed CPU vLLM environment)")
    parser.add_argument("--model", type=Path, help="model directory (default: builtin:smollm2-135m)")
    parser.add_argument("--workload", default="builtin:repetition")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="each round starts all four servers once")
    parser.add_argument("--plan", default="builtin:cpu-smoke", help="the plan whose n-gram candidate to measure")
    parser.add_argument("--candidate", help="that candidate's name (default: the plan's first n-gram candidate)")
    parser.add_argument("--dry-run", action="store_true", help="print the launch order; start nothing")
    add_results_arguments(parser)
    args = parser.parse_args()
    args.k, args.lookup = None, None  # NgramSetting reads them: the candidate's own
    return args


def main() -> int:
    args = _arguments()
    workload = load_workload(args.workload)
    setting = NgramSetting.of(args)
    ngram = build_speculative_config(setting.proposal())
    print(f"machine: {machine_description()}")
    print(f"workload {workload.identity.source}, max_tokens {args.max_tokens}, rounds {args.rounds}; ngram {ngram}")
    print("launch order: " + ", ".join(f"{c}-{g}-r{r + 1}" for c, g, r in launch_order(args.rounds)))
    if args.dry_run:
        print("dry run: nothing started")
        return 0
    with server_lock(args.server_lock):
        clock = RunClock.start()
        launches, preload = measure(args, workload, ngram)
    figures = summary(launches)
    keep, line = verdict(figures)
    report = Report()
    tables(report, launches, figures)
    report.text(f"Preload: `LD_PRELOAD={preload}` on the server only. Verdict: {line}.")
    print(line)
    if args.write_results:
        setup = engine_setup(args.python, args.model)
        spec = _spec(setup, Path("work"), "preloaded", "ngram", 0, preload, ngram)
        record = clock.record(
            "bench_cpu_runtime",
            "The CPU engine as its documentation says (tcmalloc + Intel OpenMP preloaded vs not)",
            configuration=(
                f"**Workload:** `{workload.identity.source}` ({workload.identity.item_count} items), {args.max_tokens} "
                f"tokens at most, T=0, concurrency 1, one warm-up request; {args.rounds} rounds of four launches.",
                f"**n-gram:** k={setting.k}, prompt lookup {setting.lookup} ({setting.source}).",
                f"**Servers:** {describe_launch(spec)}",
            ),
            engine_version=setup.engine_version,
            model=setup.model_ref,
            model_snapshot=setup.snapshot,
            figures={f"{c}_{k}": v for c, values in figures.items() for k, v in values.items()},
            targets=(
                TargetCheck(
                    target="the preloaded runtime serves no slower than plain, by more than 3 % (baseline, n-gram)",
                    result=line,
                    met=keep,
                ),
            ),
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
