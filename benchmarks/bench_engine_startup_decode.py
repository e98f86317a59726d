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

The n-gram configuration is the default plan's n-gram candidate (`--plan`, `--candidate`; `--k` and `--lookup`
override it), so the section's label is always the configuration that ran.

Run holding the machine's server lock (one vLLM server at a time):
    .venv/bin/python benchmarks/bench_engine_startup_decode.py --server-lock /tmp/specselect-vllm.lock \\
        [--write-results benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    CPU_ENGINE_ARGS,
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
    publish,
    ratio,
    server_lock,
)
from specselect._engines.base import LaunchSpec, Proposal, RunningServer
from specselect._engines.prometheus import MetricsSnapshot
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.specconfig import build_speculative_config
from specselect._engines.vllm.telemetry import spec_decode_delta
from specselect._measure import e2e_ms, run_load, ttft_ms
from specselect._workloads.loader import load_workload
from specselect.records.measurement import Endpoint, SamplingParams, ScenarioSpec
from specselect.records.telemetry import SpecTelemetry, build_spec_telemetry, summarize_per_request
from specselect.records.workloads import Workload

GROUPS = ("baseline", "ngram")


def measure_workload(
    engine: VllmEngine, server: RunningServer, workload: Workload, sampling: SamplingParams, repeats: int
) -> dict[str, Any]:
    """One workload at concurrency 1 on a running server; telemetry deltas cover the measured requests only."""
    name = workload.identity.name
    endpoint = Endpoint(base_url=server.base_url, model=server.served_model)
    snapshots: list[MetricsSnapshot] = []
    result = asyncio.run(
        run_load(
            endpoint,
            workload.items,
            ScenarioSpec(scenario=f"{name}-c1", warmup=1, repeats=repeats, sampling=sampling),
            before_measured=lambda: snapshots.append(engine.snapshot(server)),
            read_spec_metrics=engine.request_spec_metrics,
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
        summarize_per_request(r.speculative for r in measured),
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


def _gain_row(name: str, b: dict[str, Any], c: dict[str, Any]) -> tuple[list[str], float | None]:
    """One workload's row and its pooled decode speedup / L."""
    rate, length = acceptance(c["telemetry"])
    pooled = ratio(c["pooled_decode_tok_s"], b["pooled_decode_tok_s"])
    same = sum(1 for key, text in c["texts"].items() if b["texts"].get(key) == text)
    row = [
        name,
        fmt(b["decode_tok_s"], ".1f"),
        fmt(c["decode_tok_s"], ".1f"),
        fmt(ratio(c["decode_tok_s"], b["decode_tok_s"]), ".2f", "x"),
        fmt(pooled, ".2f", "x"),
        fmt(ratio(c["out_tok_s"], b["out_tok_s"]), ".2f", "x"),
        fmt(rate, ".3f"),
        fmt(length, ".2f", "x"),
        fmt(ratio(pooled, length), ".2f"),
        f"{same}/{len(c['texts'])}",
    ]
    return row, ratio(pooled, length)


def gain_table(report: Report, rows_in: dict[str, dict[str, Any]], workloads: list[str], label: str) -> None:
    """The per-workload gain table (`label`: the candidate and mode) and how close each came to its ideal."""
    base, cand = rows_in["baseline"], rows_in["ngram"]
    rows, closeness = [], []
    for name in workloads:
        row, close = _gain_row(name, base["workloads"][name], cand["workloads"][name])
        rows.append(row)
        closeness.append(f"{fmt(close, '.2f')} on {name}")
    report.table(
        f"{label}; concurrency 1, T=0, median per-request decode speed",
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
            "L = 1 + accepted / drafts (engine counters over the measured requests): tokens per speculative step, the "
            "speedup if drafting and verification cost nothing and every step drafted. Decode speedup (medians) = "
            "ratio of the median per-request decode tok/s; (pooled) = ratio of all decoded tokens / all decode "
            "seconds, the quantity comparable to L. Throughput speedup = output tokens/s of the whole scenario (TTFT "
            f"included). The measured pooled speedup reached {', '.join(closeness)} of its ideal L."
        ],
    )


def startup_table(report: Report, rows_in: dict[str, dict[str, Any]], k: int) -> None:
    """Both servers' start-up and release."""
    base, cand = rows_in["baseline"], rows_in["ngram"]
    report.table(
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
        [_release_sentence(rows_in)],
    )


def _release_sentence(rows_in: dict[str, dict[str, Any]]) -> str:
    checks = [(group, data.get("release")) for group, data in rows_in.items()]
    parts = [
        f"{group}: port {'free' if rel.port_free else 'STILL BOUND'}, processes "
        f"{'gone' if rel.processes_gone else 'LEFT'} after {rel.seconds:.1f} s"
        for group, rel in checks
        if rel is not None
    ]
    return f"Teardown: {'; '.join(parts)}." if parts else "Teardown: no release check recorded."


def acceptance_target(rows_in: dict[str, dict[str, Any]], workloads: list[str]) -> TargetCheck | None:
    """n-gram acceptance on builtin:repetition above builtin:general (None unless both were measured)."""
    if "repetition" not in workloads or "general" not in workloads:
        return None
    rep, gen = (acceptance(rows_in["ngram"]["workloads"][w]["telemetry"])[0] for w in ("repetition", "general"))
    return TargetCheck(
        target="n-gram acceptance on `builtin:repetition` higher than on `builtin:general`",
        result=f"{fmt(rep, '.3f')} vs {fmt(gen, '.3f')} ({fmt(ratio(rep, gen), '.1f', 'x')})",
        met=None if rep is None or gen is None else rep > gen,
    )


@dataclass(frozen=True)
class NgramSetting:
    """The n-gram configuration to measure and where it came from (a plan's candidate or the arguments)."""

    k: int
    lookup_min: int | None
    lookup_max: int | None
    """None: the engine's default."""
    source: str

    @classmethod
    def of(cls, args: argparse.Namespace) -> NgramSetting:
        """The plan candidate's k and prompt lookup window, each overridden by --k / --lookup when given."""
        from specselect._plan import load_plan

        plan = load_plan(args.plan).plan
        named = [c for c in plan.candidates if c.family == "ngram" and (args.candidate in (None, c.name))]
        if not named:
            raise SystemExit(f"{args.plan}: candidates: no n-gram candidate {args.candidate or ''}; fix: --candidate")
        cand = named[0]
        k = args.k if args.k is not None else cand.num_speculative_tokens
        options = cand.options or {}
        lo, hi = (
            (int(v) for v in args.lookup.split(","))
            if args.lookup
            else (options.get("prompt_lookup_min"), options.get("prompt_lookup_max"))
        )
        overridden = [flag for flag, value in (("--k", args.k), ("--lookup", args.lookup)) if value is not None]
        source = f"candidate {cand.name} of {args.plan}" + (f", {' and '.join(overridden)} given" if overridden else "")
        return cls(k=k, lookup_min=lo, lookup_max=hi, source=source)

    def proposal(self) -> Proposal:
        """The engine-neutral proposal the speculative config is built from."""
        options = {"prompt_lookup_min": self.lookup_min, "prompt_lookup_max": self.lookup_max}
        return Proposal("ngram", None, self.k, None, {key: v for key, v in options.items() if v is not None})

    @property
    def lookup(self) -> str:
        """The prompt lookup window as the labels state it (an unset bound is the engine's default)."""
        return "-".join("default" if v is None else str(v) for v in (self.lookup_min, self.lookup_max))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, help="engine python (default: the managed CPU vLLM environment)")
    parser.add_argument("--model", type=Path, help="model directory (default: builtin:smollm2-135m)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--compiled", action="store_true", help="omit --enforce-eager (slow start-up)")
    parser.add_argument("--workloads", default="builtin:repetition,builtin:general")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1, help="measured passes over each workload")
    parser.add_argument("--plan", default="builtin:cpu-smoke", help="the plan whose n-gram candidate to measure")
    parser.add_argument("--candidate", help="that candidate's name (default: the plan's first n-gram candidate)")
    parser.add_argument("--k", type=int, help="num_speculative_tokens (default: the candidate's)")
    parser.add_argument("--lookup", help="prompt_lookup_min,max (default: the candidate's)")
    parser.add_argument("--dry-run", action="store_true", help="print the two launch configurations; start nothing")
    add_results_arguments(parser)
    return parser.parse_args()


@dataclass(frozen=True)
class Measured:
    """What both servers measured, with the engine and launch specs that ran."""

    setup: EngineSetup
    engine_version: str
    rows: dict[str, dict[str, Any]]
    specs: tuple[LaunchSpec, ...]


def measure(args: argparse.Namespace, workloads: list[Workload], ngram: dict[str, Any]) -> Measured:
    """Both servers one after the other, every workload on each."""
    setup = engine_setup(args.python, args.model)
    engine = VllmEngine(python=setup.python)
    caps = engine.probe()
    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    print(f"work directory (server logs, prompt files): {work}", file=sys.stderr)
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=0.0)
    rows: dict[str, dict[str, Any]] = {}
    specs = []
    for group, cfg in zip(GROUPS, (None, ngram), strict=True):
        spec = cpu_launch_spec(
            group,
            setup.model,
            work,
            dtype=args.dtype,
            engine_args=() if args.compiled else CPU_ENGINE_ARGS,
            speculative_config=cfg,
            per_request_spec_metrics=cfg is not None and caps.per_request_spec_metrics_flag,
        )
        specs.append(spec)
        rows[group] = run_group(engine, spec, workloads, sampling, args.repeats)
    return Measured(setup=setup, engine_version=caps.engine_version, rows=rows, specs=tuple(specs))


def configuration(
    args: argparse.Namespace, workloads: list[Workload], setting: NgramSetting, measured: Measured
) -> tuple[str, ...]:
    """What ran, for the section."""
    names = ", ".join(f"`{w.identity.source}` ({w.identity.item_count} items)" for w in workloads)
    setup = measured.setup
    snapshot = f" (snapshot `{setup.snapshot[:12]}...`)" if setup.snapshot else ""
    return (
        f"**Workloads:** {names}; {args.max_tokens} tokens at most (natural outputs), T=0, concurrency 1, one "
        f"warm-up request, {args.repeats} measured pass(es); specselect's client; acceptance from the engine's "
        "Prometheus counters over the measured requests only.",
        f"**n-gram:** k={setting.k}, prompt lookup {setting.lookup} ({setting.source}).",
        f"**Servers:** target-only, then n-gram, one after the other; vLLM {measured.engine_version}, "
        f"{setup.model_ref}{snapshot}; " + "; ".join(f"{s.group}: {describe_launch(s)}" for s in measured.specs),
    )


def main() -> int:
    args = _arguments()
    workloads = [load_workload(ref) for ref in args.workloads.split(",")]
    setting = NgramSetting.of(args)
    ngram = build_speculative_config(setting.proposal())
    mode = f"{args.dtype}, {'compiled' if args.compiled else 'eager'}"
    print(f"machine: {machine_description()}")
    print(f"workloads {[w.identity.source for w in workloads]}, max_tokens {args.max_tokens}, {mode}; ngram {ngram}")
    print(f"n-gram setting: {setting.source}")
    if args.dry_run:
        print("dry run: nothing started")
        return 0
    with server_lock(args.server_lock):
        clock = RunClock.start()  # the lock's wait is not the run's
        measured = measure(args, workloads, ngram)
    names = [w.identity.name for w in workloads]
    report = Report()
    label = f"n-gram (k={setting.k}, prompt lookup {setting.lookup}) vs target-only, {mode}, vLLM"
    gain_table(report, measured.rows, names, f"{label} {measured.engine_version}")
    startup_table(report, measured.rows, setting.k)
    target = acceptance_target(measured.rows, names)
    if target is not None:
        report.text(
            f"n-gram acceptance rate, builtin:repetition vs builtin:general: {target.result}; "
            f"repetition higher: {'yes' if target.met else 'NO'}."
        )
    if args.write_results:
        record = clock.record(
            "bench_engine_startup_decode",
            "The embedded engine's speculative gain (n-gram vs target-only)",
            configuration=configuration(args, workloads, setting, measured),
            engine_version=measured.engine_version,
            model=measured.setup.model_ref,
            model_snapshot=measured.setup.snapshot,
            targets=(target,) if target is not None else (),
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
