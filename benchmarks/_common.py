"""Shared helpers of the benchmark scripts (not part of the specselect package).

Machine description, medians and ratios, markdown tables, the CPU engine set-up the integration tests use
(float32, eager, 2 GiB KV cache), the machine's server lock, a runner for `vllm bench serve` -- vLLM's own
benchmark client -- over a prompt file written from the same workload items specselect sends, and RESULTS.md:
each script's section between its own markers and the record of its run (`figures/<script>.json`) that
`run_all.py` builds the header and the targets table from.

The prompt file uses vLLM's ShareGPT format: its `custom` JSONL dataset needs pandas, which the managed
engine environment does not have, and ShareGPT prompts go to the chat endpoint verbatim (no client-side
chat template), exactly like specselect's single-message chat requests.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specselect._common.fileio import atomic_write_text
from specselect._engines.base import LaunchSpec
from specselect.records.measurement import Endpoint
from specselect.records.workloads import WorkloadItem

__all__ = [
    "CPU_ENGINE_ARGS",
    "CPU_SERVER_ENV",
    "RECORD_SCHEMA_VERSION",
    "ROOT",
    "SECTIONS",
    "EngineSetup",
    "Report",
    "RunClock",
    "SectionRecord",
    "TargetCheck",
    "VllmBenchRun",
    "add_results_arguments",
    "chat_prompts",
    "compose_sections",
    "cpu_launch_spec",
    "describe_launch",
    "engine_setup",
    "fmt",
    "fmt_range",
    "load_average",
    "load_record",
    "machine_description",
    "machine_summary",
    "markdown_table",
    "median",
    "publish",
    "ratio",
    "record_path",
    "replace_section",
    "run_vllm_bench",
    "script_command",
    "section_block",
    "section_end",
    "section_names",
    "section_start",
    "server_lock",
    "utc_stamp",
    "vllm_bench_argv",
    "write_section",
    "write_sharegpt_prompts",
]

_NUMBER = re.compile(r"-|[-+]?[\d.,]+ ?(%|x|s|ms)?")

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (also put on sys.path: the scripts use `tests.stubs`, test support outside the package)."""
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CPU_SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2"}
"""A 2 GiB KV cache keeps one server near 5 GB RSS (same as tests/integration/conftest.py)."""
CPU_ENGINE_ARGS = ("--enforce-eager",)
"""Eager start-up is ~35 s instead of ~100 s; float32 keeps temperature-0 outputs identical under speculation."""


# ------------------------------------------------------------------------------------------------ numbers


def median(values: Iterable[float | None]) -> float | None:
    """Median of the non-None values (None when there are none)."""
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, None when either is missing or den is zero."""
    if num is None or den is None or den == 0:
        return None
    return num / den


def fmt(value: float | None, spec: str = ".1f", suffix: str = "") -> str:
    """Format a number, '-' for None."""
    return "-" if value is None else f"{value:{spec}}{suffix}"


def fmt_range(values: Iterable[float | None], spec: str = ".2f", suffix: str = "") -> str:
    """'low-high' of the non-None values ('low' when they are all equal, '-' when there are none)."""
    kept = [v for v in values if v is not None]
    if not kept:
        return "-"
    low, high = fmt(min(kept), spec, suffix), fmt(max(kept), spec, suffix)
    return low if low == high else f"{low}-{high}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table; columns of numbers (and '-') right-aligned, text columns left-aligned."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    right = [bool(rows) and all(_NUMBER.fullmatch(r[i].strip()) for r in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        padded = (c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True))
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join("-" * (w + 1) + ":" if r else ":" + "-" * (w + 1) for w, r in zip(widths, right, strict=True))
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


class Report:
    """The markdown a script prints as it goes and later writes as its RESULTS.md section."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def table(
        self, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
    ) -> None:
        """A titled markdown table followed by its notes."""
        self._add(f"### {title}", markdown_table(headers, rows) if rows else "(none)", *notes)

    def text(self, *paragraphs: str) -> None:
        """Paragraphs of text (each one sentence or more generated from the run's data)."""
        self._add(*paragraphs)

    def _add(self, *blocks: str) -> None:
        self._parts.extend(blocks)
        print("\n" + "\n\n".join(blocks))
        sys.stdout.flush()

    def markdown(self) -> str:
        """Everything added so far, blocks separated by a blank line."""
        return "\n\n".join(self._parts)


# ------------------------------------------------------------------------------------------------ machine


def load_average() -> tuple[float, float, float]:
    """The 1/5/15-minute load averages (two decimals)."""
    one, five, fifteen = psutil.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_summary() -> str:
    """What stays the same between runs on this machine: CPU, cores, memory, OS, Python."""
    mem_gib = psutil.virtual_memory().total / 2**30
    return (
        f"{_cpu_model()}, {psutil.cpu_count()} logical CPUs, {mem_gib:.0f} GiB, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def machine_description() -> str:
    """One line: the machine, its load average now and the time."""
    load = load_average()
    return (
        f"{machine_summary()}, load average {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}, "
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
    )


@contextmanager
def server_lock(path: Path | None) -> Iterator[None]:
    """Hold an flock(2) on `path` (the lock `flock PATH cmd` takes: one vLLM server on the machine) for the block."""
    if path is None:
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------------------ engine


@dataclass(frozen=True)
class EngineSetup:
    """The engine python and the target model directory a benchmark uses, with what identifies them."""

    python: Path
    model: Path
    engine_version: str
    model_ref: str
    snapshot: str | None
    """The model's content snapshot (None for a directory given by path: specselect did not prepare it)."""


def engine_setup(python: Path | None = None, model: Path | None = None) -> EngineSetup:
    """The given python/model, or the managed CPU vLLM environment and builtin:smollm2-135m (`specselect setup`)."""
    from specselect._assets import resolve_model
    from specselect._engines.vllm.envsetup import engine_env_from_python, ensure_managed_vllm_env

    env = engine_env_from_python(python) if python is not None else ensure_managed_vllm_env()
    if model is not None:
        return EngineSetup(env.python, model, env.engine_version, str(model), None)
    resolved = resolve_model("builtin:smollm2-135m", python=env.python)
    return EngineSetup(env.python, resolved.path, env.engine_version, resolved.ref, resolved.snapshot)


def cpu_launch_spec(group: str, model: Path, work: Path, **overrides: Any) -> LaunchSpec:
    """A CPU launch spec for `model`: float32, eager, 2 GiB KV cache, files under `work/group`."""
    fields: dict[str, Any] = {
        "group": group,
        "model_path": model,
        "served_model_name": "smollm2-135m",
        "dtype": "float32",
        "max_model_len": 2048,
        "engine_args": CPU_ENGINE_ARGS,
        "env": dict(CPU_SERVER_ENV),
        "startup_timeout_s": 600.0,
        "log_path": work / group / "server.log",
        "run_dir": work / group / "run",
    }
    fields.update(overrides)
    return LaunchSpec(**fields)


def describe_launch(spec: LaunchSpec) -> str:
    """The server configuration a launch spec runs: dtype, context, engine arguments, environment, caching."""
    parts = [spec.dtype, f"--max-model-len {spec.max_model_len}", *spec.engine_args]
    parts += [f"{key}={value}" for key, value in sorted(spec.env.items())]
    if spec.disable_prefix_caching:
        parts.append("prefix caching off")
    if spec.speculative_config is not None:
        parts.append(f"speculative config {json.dumps(spec.speculative_config, sort_keys=True)}")
    return ", ".join(f"`{p}`" if p.startswith("-") else p for p in parts)


# ------------------------------------------------------------------------------------------------ vLLM bench


def chat_prompts(items: Sequence[WorkloadItem]) -> list[str]:
    """The user message of each single-message chat item (what both clients send verbatim)."""
    prompts = []
    for item in items:
        if item.messages is None or len(item.messages) != 1 or item.messages[0].role != "user":
            raise SystemExit(f"item {item.id}: vLLM's benchmark client takes one user message per request")
        prompts.append(item.messages[0].content)
    return prompts


def write_sharegpt_prompts(path: Path, prompts: Sequence[str]) -> None:
    """Write `prompts` in order as a ShareGPT JSON file (the reply turn is a placeholder vLLM ignores
    when the output length is given)."""
    rows = [
        {"id": f"p{i}", "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "-"}]}
        for i, p in enumerate(prompts)
    ]
    path.write_text(json.dumps(rows))


@dataclass(frozen=True)
class VllmBenchRun:
    """The saved result JSON of one `vllm bench serve` run and its wall time (process start to exit)."""

    result: dict[str, Any]
    wall_s: float


def vllm_bench_argv(
    python: Path,
    endpoint: Endpoint,
    *,
    tokenizer: Path,
    dataset: Path,
    n_prompts: int,
    output_len: int,
    concurrency: int,
    result_path: Path,
) -> list[str]:
    """`vllm bench serve` with the prompts of `dataset` in file order, greedy, exactly `output_len` tokens.

    It first sends one warm-up request per concurrent slot, as specselect's warm-up does.

    `--extra-body` asks for the same per-chunk usage specselect requests, so the server streams the same
    bytes to both clients.
    """
    extra_body = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    return [
        str(python), "-m", "vllm.entrypoints.cli.main", "bench", "serve",
        "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
        "--base-url", endpoint.base_url, "--model", endpoint.model, "--tokenizer", str(tokenizer),
        "--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--disable-shuffle",
        "--sharegpt-output-len", str(output_len), "--num-prompts", str(n_prompts),
        "--max-concurrency", str(concurrency), "--request-rate", "inf", "--num-warmups", str(concurrency),
        "--ignore-eos", "--temperature", "0", "--extra-body", json.dumps(extra_body),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm",
        "--save-result", "--result-dir", str(result_path.parent), "--result-filename", result_path.name,
    ]  # fmt: skip


def run_vllm_bench(argv: Sequence[str], result_path: Path, timeout_s: float = 3600.0) -> VllmBenchRun:
    """Run vLLM's benchmark client (offline: no hub access) and load its saved result."""
    result_path.unlink(missing_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0 or not result_path.exists():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SystemExit(f"vllm bench serve failed (exit {done.returncode}):\n{tail}")
    result: dict[str, Any] = json.loads(result_path.read_text())
    if result.get("failed"):
        raise SystemExit(f"vllm bench serve: {result['failed']} of {result.get('num_prompts')} requests failed")
    return VllmBenchRun(result=result, wall_s=wall)


# ------------------------------------------------------------------------------------------------ RESULTS.md

SECTIONS = (
    "run_all",
    "bench_fidelity",
    "bench_client_overhead",
    "bench_selection_cost",
    "bench_engine_startup_decode",
    "bench_cpu_draft",
    "bench_rerun",
    "bench_decision_calibration",
    "bench_host_load",
    "bench_sampled_parity",
    "bench_cpu_sampled",
    "bench_cluster_cost",
    "bench_kv_capacity",
    "bench_cpu_runtime",
)
"""RESULTS.md's sections in document order, each named by the script that writes it: run_all.py's header and
targets table, then one numbered section per benchmark (its number is its place here)."""

_MARKER = re.compile(r"^<!-- (?P<name>[A-Za-z0-9_]+): (?P<edge>start|end)\b.*-->[ \t]*$", re.MULTILINE)


def section_start(name: str) -> str:
    """The line that opens `name`'s section (bench_cpu_draft.py writes the same form)."""
    return f"<!-- {name}: start (written by benchmarks/{name}.py) -->"


def section_end(name: str) -> str:
    """The line that closes `name`'s section."""
    return f"<!-- {name}: end -->"


@dataclass(frozen=True)
class _Span:
    """One section of a document: its name and where its block starts and ends (end: after its last newline)."""

    name: str
    start: int
    end: int


def _spans(text: str, where: str) -> list[_Span]:
    """Every section of `text` in order; SystemExit naming `where` for a marker out of place or repeated."""
    spans: list[_Span] = []
    opened: re.Match[str] | None = None
    for marker in _MARKER.finditer(text):
        name, edge = marker["name"], marker["edge"]
        if edge == "start" and opened is None and all(s.name != name for s in spans):
            opened = marker
            continue
        if edge == "end" and opened is not None and opened["name"] == name:
            end = marker.end() + (1 if text[marker.end() : marker.end() + 1] == "\n" else 0)
            spans.append(_Span(name, opened.start(), end))
            opened = None
            continue
        raise SystemExit(
            f"{where}: section marker '{marker.group(0)}' out of place (a section opened twice, inside another or "
            f"closed without opening); fix: restore one start and one end marker per section, then rerun its script"
        )
    if opened is not None:
        raise SystemExit(f"{where}: section '{opened['name']}' has no end marker; fix: rerun its script's writer")
    return spans


def section_names(text: str, where: str = "RESULTS.md") -> list[str]:
    """The names of the sections in `text`, in document order."""
    return [span.name for span in _spans(text, where)]


def section_block(name: str, body: str) -> str:
    """`body` between `name`'s markers, newline-terminated; the body may hold no marker of its own."""
    if _MARKER.search(body):
        raise SystemExit(f"section {name}: its text contains a section marker; fix: the writer must not emit markers")
    return f"{section_start(name)}\n{body.strip(chr(10))}\n{section_end(name)}\n"


def _order(name: str) -> int:
    return SECTIONS.index(name) if name in SECTIONS else len(SECTIONS)


def replace_section(text: str, name: str, body: str, where: str = "RESULTS.md") -> str:
    """`text` with `name`'s section replaced by `body`; every other byte stays as it was.

    A missing section goes before the first section that follows it in `SECTIONS`, else at the end.
    """
    block = section_block(name, body)
    spans = _spans(text, where)
    mine = next((s for s in spans if s.name == name), None)
    if mine is not None:
        return text[: mine.start] + block + text[mine.end :]
    later = next((s for s in spans if _order(s.name) > _order(name)), None)
    if later is not None:
        return text[: later.start] + block + "\n" + text[later.start :]
    return f"{text.rstrip(chr(10))}\n\n{block}" if text.strip() else block


def compose_sections(text: str, where: str = "RESULTS.md") -> tuple[str, int]:
    """Only the sections of `text`, in `SECTIONS` order (others after them, as they stand), one blank line apart,
    and how many non-blank lines outside every section were dropped (text no script wrote)."""
    spans = _spans(text, where)
    outside = "".join(text[a:b] for a, b in _gaps(spans, len(text)))
    dropped = sum(1 for line in outside.splitlines() if line.strip())
    blocks = [text[s.start : s.end] for s in sorted(spans, key=lambda s: _order(s.name))]
    return "\n".join(b if b.endswith("\n") else b + "\n" for b in blocks), dropped


def _gaps(spans: Sequence[_Span], size: int) -> Iterator[tuple[int, int]]:
    edge = 0
    for span in spans:
        yield edge, span.start
        edge = span.end
    yield edge, size


def write_section(results_md: Path, name: str, body: str) -> None:
    """Replace (or add) `name`'s section of `results_md` atomically; the file is created when missing."""
    old = results_md.read_text(encoding="utf-8") if results_md.exists() else ""
    atomic_write_text(results_md, replace_section(old, name, body, where=str(results_md)))


# ------------------------------------------------------------------------------------------------ run records

RECORD_SCHEMA_VERSION = 1


class TargetCheck(BaseModel):
    """One target a benchmark checks: what it asks, what this run measured, whether it was met."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str
    result: str
    met: bool | None
    """None: this run could not assess it (e.g. vLLM's client was not available)."""


class SectionRecord(BaseModel):
    """`figures/<script>.json`: one script's run as the header needs it (when, where, what ran, its targets)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = RECORD_SCHEMA_VERSION
    section: str
    title: str
    command: str
    started_at: datetime
    finished_at: datetime
    machine: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    engine_version: str | None
    """The vLLM the run served (or whose client it ran); None when it used none."""
    model: str | None
    model_snapshot: str | None
    configuration: tuple[str, ...]
    """What ran, one markdown line each, read from the plan and arguments the run used."""
    lock_wait_s: float = 0.0
    """Time between `started_at` and `finished_at` spent waiting for the machine's server lock."""
    figures: dict[str, float | None] = Field(default_factory=dict)
    """Headline numbers other scripts may read (e.g. the engine TPOT the client-overhead run compares with)."""
    targets: tuple[TargetCheck, ...] = ()

    @property
    def wall_s(self) -> float:
        """Seconds from the script's start to its record, without waiting for the server lock."""
        return (self.finished_at - self.started_at).total_seconds() - self.lock_wait_s


def utc_stamp(when: datetime) -> str:
    """'YYYY-MM-DD HH:MM:SS UTC'."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def record_path(results_md: Path, name: str) -> Path:
    """Where the record of `name`'s last run that wrote `results_md` is kept."""
    return results_md.parent / "figures" / f"{name}.json"


def load_record(path: Path) -> SectionRecord:
    """A saved record; SystemExit naming the file and the fix when it is not one this version reads."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{path}: not a readable run record ({exc}); fix: rerun its script") from None
    if not isinstance(raw, dict) or raw.get("schema_version") != RECORD_SCHEMA_VERSION:
        version = raw.get("schema_version") if isinstance(raw, dict) else None
        raise SystemExit(
            f"{path}: schema_version: {version!r}, this script reads {RECORD_SCHEMA_VERSION}; fix: rerun its script"
        )
    try:
        return SectionRecord.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SystemExit(f"{path}: {where}: {first['msg']}; fix: rerun its script") from None


def script_command(argv: Sequence[str] | None = None) -> str:
    """The command line this script runs as, run from the repository root: paths inside it made relative."""

    def local(arg: str) -> str:
        path = Path(arg)
        if not path.is_absolute() or not path.is_relative_to(ROOT):
            return arg
        return str(path.relative_to(ROOT))

    args = list(sys.argv if argv is None else argv)
    return shlex.join([local(sys.executable), local(str(Path(args[0]).absolute())), *map(local, args[1:])])


@dataclass(frozen=True)
class RunClock:
    """When a script's run began and how loaded the machine was then."""

    started_at: datetime
    load_before: tuple[float, float, float]

    @classmethod
    def start(cls) -> RunClock:
        """Now."""
        return cls(started_at=datetime.now(UTC), load_before=load_average())

    def record(self, section: str, title: str, **fields: Any) -> SectionRecord:
        """The run's record, finished now (`fields`: the rest of `SectionRecord`)."""
        return SectionRecord(
            section=section,
            title=title,
            command=script_command(),
            started_at=self.started_at,
            finished_at=datetime.now(UTC),
            machine=machine_summary(),
            load_before=self.load_before,
            load_after=load_average(),
            **fields,
        )


def _section_body(record: SectionRecord, report: Report) -> str:
    load = f"1-minute load average {record.load_before[0]:.2f} at the start, {record.load_after[0]:.2f} at the end"
    wait = f", after {record.lock_wait_s:.0f} s waiting for the server lock" if record.lock_wait_s >= 1 else ""
    span = f"{utc_stamp(record.started_at)} to {utc_stamp(record.finished_at)[11:]}"
    ran = f"{span} ({record.wall_s:.0f} s{wait}); {load}"
    lines = [
        f"## {SECTIONS.index(record.section)}. {record.title}",
        "",
        f"    {record.command}",
        "",
        f"- **Ran:** {ran}.",
        *(f"- {line}" for line in record.configuration),
        "",
        report.markdown(),
    ]
    return "\n".join(lines)


def publish(results_md: Path, record: SectionRecord, report: Report) -> None:
    """Save the run's record next to `results_md` and write its section there."""
    atomic_write_text(record_path(results_md, record.section), record.model_dump_json(indent=2) + "\n")
    write_section(results_md, record.section, _section_body(record, report))
    number, saved = SECTIONS.index(record.section), record_path(results_md, record.section)
    print(f"wrote section {number} of {results_md} and {saved}")


def add_results_arguments(parser: Any) -> None:
    """--server-lock and --write-results, the same in every script."""
    parser.add_argument("--server-lock", type=Path, help="flock this file while measuring (one vLLM server at a time)")
    parser.add_argument("--write-results", type=Path, help="write this run's section of this RESULTS.md")
