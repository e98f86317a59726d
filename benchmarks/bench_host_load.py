"""Host load: how much a neighbour's CPU use slows a CPU vLLM server here, measured, and the limit it sets.

One target-only server (the default plan's: SmolLM2-135M, float32, eager) measures builtin:general at concurrency 1
over and over, each pass metered by specselect's own host-load meter (`measure.hostload`, the figure the runner
compares with `max_host_foreign_cpu_share`). Next to it a foreign load runs or does not: busy-loop processes that
each spin a duty cycle of every 20 ms. Each level is measured in pairs of passes, quiet and loaded in alternating
order (quiet first, then loaded first), so a loaded pass is compared with the quiet pass next to it.

Per level: the foreign share the meter saw, the quiet and loaded rates (output tokens / request seconds, THE
speedup statistic's rate) and the slowdown of each loaded pass against its own quiet pass. The limit is the
largest foreign share whose median slowdown stays within the quiet passes' own pass-to-pass spread; a launch
crowded past it is a different machine, and the runner leaves its round out.

    .venv/bin/python benchmarks/bench_host_load.py --server-lock /tmp/specselect-vllm.lock \\
        [--write-results benchmarks/RESULTS.md]
(nothing else may run on the machine meanwhile: the quiet passes are the reference).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _common import (
    CPU_ENGINE_ARGS,
    CPU_SERVER_ENV,
    Report,
    RunClock,
    TargetCheck,
    add_results_arguments,
    cpu_launch_spec,
    describe_launch,
    engine_setup,
    publish,
    server_lock,
)
from specselect._engines.base import RunningServer
from specselect._engines.vllm.engine import VllmEngine
from specselect._measure import run_load
from specselect._measure.hostload import HostLoadMeter
from specselect._plan.sections import DEFAULT_MAX_HOST_FOREIGN_CPU_SHARE
from specselect._workloads.loader import load_workload
from specselect.records.measurement import Endpoint, SamplingParams, ScenarioSpec
from specselect.records.workloads import Workload

TITLE = "Host load: a neighbour's CPU share against the server's slowdown"
LEVELS = ((1, 0.05), (1, 0.1), (1, 0.2), (1, 0.4), (2, 0.4))
"""(processes, duty cycle): about 2.5, 5, 10, 20 and 40 % of a 2-core machine."""

SPINNER = """
import time, sys
duty, period = float(sys.argv[1]), 0.02
while True:
    start = time.perf_counter()
    while time.perf_counter() - start < duty * period:
        pass
    time.sleep((1 - duty) * period)
"""


@dataclass(frozen=True)
class Pass:
    """One metered pass over the workload."""

    loaded: bool
    rate: float
    foreign_share: float | None


class Neighbour:
    """`with Neighbour(n, duty):` n busy-loop processes spinning `duty` of every 20 ms (none when n = 0)."""

    def __init__(self, processes: int, duty: float) -> None:
        self.processes, self.duty = processes, duty
        self._procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Neighbour:
        self._procs = [subprocess.Popen([sys.executable, "-c", SPINNER, str(self.duty)]) for _ in range(self.processes)]
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._procs:
            proc.kill()
            proc.wait()


def one_pass(server: RunningServer, workload: Workload, sampling: SamplingParams, *, loaded: bool) -> Pass:
    """The workload once at concurrency 1, metered; its rate is output tokens over request seconds."""
    endpoint = Endpoint(base_url=server.base_url, model=server.served_model)
    spec = ScenarioSpec(scenario="general-c1", warmup=1, repeats=1, sampling=sampling)
    with HostLoadMeter(server.pid) as meter:
        result = asyncio.run(run_load(endpoint, workload.items, spec))
    measured = result.measured()
    tokens = sum(r.completion_tokens or 0 for r in measured)
    seconds = sum((r.end_time_s or 0.0) - (r.send_time_s or 0.0) for r in measured)
    share = meter.result.foreign_share if meter.result is not None else None
    return Pass(loaded=loaded, rate=tokens / seconds, foreign_share=share)


def measure_level(
    server: RunningServer, workload: Workload, sampling: SamplingParams, level: tuple[int, float], pairs: int
) -> list[tuple[Pass, Pass]]:
    """`pairs` (quiet, loaded) pairs, the order alternating from pair to pair."""
    out = []
    for k in range(pairs):
        order = (False, True) if k % 2 == 0 else (True, False)
        done: dict[bool, Pass] = {}
        for loaded in order:
            with Neighbour(*level) if loaded else Neighbour(0, 0.0):
                done[loaded] = one_pass(server, workload, sampling, loaded=loaded)
            print(f"  {level}: {'loaded' if loaded else 'quiet '} {done[loaded]}", file=sys.stderr, flush=True)
        out.append((done[False], done[True]))
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def tabulate(report: Report, found: dict[tuple[int, float], list[tuple[Pass, Pass]]]) -> TargetCheck:
    """The curve, the quiet passes' spread and the limit it supports."""
    quiet = [q for pairs in found.values() for q, _ in pairs]
    rates = [q.rate for q in quiet]
    spread = statistics.median(abs(r / statistics.median(rates) - 1.0) for r in rates)
    rows, curve = [], []
    for (n, duty), pairs in found.items():
        shares = [p.foreign_share for _, p in pairs if p.foreign_share is not None]
        slow = [1.0 - loaded.rate / q.rate for q, loaded in pairs]
        share, slowdown = statistics.median(shares), statistics.median(slow)
        curve.append((share, slowdown))
        rows.append(
            [
                f"{n} x {duty:.0%}",
                _pct(share),
                _pct(statistics.median(q.foreign_share or 0.0 for q, _ in pairs)),
                f"{statistics.median(q.rate for q, _ in pairs):.1f}",
                f"{statistics.median(p.rate for _, p in pairs):.1f}",
                _pct(slowdown),
                ", ".join(f"{s:+.1%}" for s in slow),
            ]
        )
    report.table(
        "the server's rate with a neighbour (builtin:general, concurrency 1, pairs of adjacent passes)",
        ("neighbour", "foreign share", "quiet passes' share", "quiet tok/s", "loaded tok/s", "slowdown", "each pair"),
        rows,
        (f"Quiet passes' own spread (median |rate / median - 1|): {spread:.1%}.",),
    )
    within = [share for share, slowdown in sorted(curve) if slowdown <= spread]
    first_slow = next((share for share, slowdown in sorted(curve) if slowdown > spread), None)
    limit = max((s for s in within if first_slow is None or s < first_slow), default=None)
    report.text(
        f"The largest foreign share whose median slowdown stayed within the quiet spread ({spread:.1%}): "
        f"{_pct(limit)}; the first that slowed the server past it: {_pct(first_slow)}. specselect's default "
        f"max_host_foreign_cpu_share is {DEFAULT_MAX_HOST_FOREIGN_CPU_SHARE:.1%}."
    )
    met = first_slow is None or first_slow > DEFAULT_MAX_HOST_FOREIGN_CPU_SHARE
    return TargetCheck(
        target="host load: the default limit lies below the first foreign share that slowed the server measurably",
        result=f"limit {DEFAULT_MAX_HOST_FOREIGN_CPU_SHARE:.1%}, first slowing share {_pct(first_slow)}",
        met=met,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="quiet/loaded pairs per level")
    parser.add_argument("--max-tokens", type=int, default=32)
    add_results_arguments(parser)
    args = parser.parse_args(argv)
    clock = RunClock.start()
    setup = engine_setup()
    engine = VllmEngine(python=setup.python)
    caps = engine.probe()
    workload = load_workload("builtin:general", name="general")
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=0.0)
    work = Path(tempfile.mkdtemp(prefix="bench-host-load-"))
    # As a run starts it on CPU: the model worker inside the engine-core process (the runner's CPU default).
    env = {**CPU_SERVER_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    spec = cpu_launch_spec("baseline", setup.model, work, engine_args=CPU_ENGINE_ARGS, env=env)
    found: dict[tuple[int, float], list[tuple[Pass, Pass]]] = {}
    with server_lock(args.server_lock), engine.launch(spec) as server:
        for level in LEVELS:
            found[level] = measure_level(server, workload, sampling, level, args.pairs)
    report = Report()
    check = tabulate(report, found)
    if args.write_results:
        record = clock.record(
            "bench_host_load",
            TITLE,
            engine_version=caps.engine_version,
            model=setup.model_ref,
            model_snapshot=setup.snapshot,
            configuration=(
                f"**Server:** {describe_launch(spec)}.",
                f"**Passes:** builtin:general (8 items), {args.max_tokens} tokens, T=0, one warm-up request; "
                f"{args.pairs} quiet/loaded pairs per level; neighbour = busy-loop processes (20 ms period).",
            ),
            targets=(check,),
        )
        publish(Path(args.write_results), record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
