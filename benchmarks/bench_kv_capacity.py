"""KV capacity per mechanism: what each speculative configuration of builtin:cpu-sweep and builtin:cpu-draft
leaves of the KV cache, as the real CPU engine reports it, against its target alone.

Each configuration's server is started once (as a run starts it: float32, eager, the plans' 2 GiB of KV cache,
max_model_len 2048) and read the way a run reads every launch (`Engine` -> `kv_capacity`: vLLM's
`cache_config_info` metric and its start-up line); no load is sent, so these are the engine's own figures, not
timings, and a busy machine does not change them. A draft model's layers take their KV cache from the same
budget as the target's: the server holds fewer tokens and fewer requests at once. n-gram lookup has no layers
and is the control (it must cost nothing).

cpu-draft's pair needs its two Qwen models prepared (`specselect setup --models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b`,
1.6 GB download); without them (or without --with-cpu-draft) those rows say so and are not measured.

    .venv/bin/python benchmarks/bench_kv_capacity.py --server-lock /tmp/specselect-vllm.lock [--with-cpu-draft] \\
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
from specselect._assets.builtin import resolve_builtin
from specselect._engines.vllm.engine import VllmEngine
from specselect.records.capacity import KvCapacity

TITLE = "KV capacity per mechanism: the draft model's share of the cache, as the engine reports it"
REQUEST_TOKENS = 2048
"""The plans' max_model_len: the request length the engine states its maximum concurrency for."""


@dataclass(frozen=True)
class Config:
    """One server configuration: its plan, its name, the target and (for a candidate) its speculative config."""

    plan: str
    name: str
    target: str
    speculative: dict[str, Any] | None = None


def _draft(model: str, k: int) -> dict[str, Any]:
    return {"method": "draft_model", "model": model, "num_speculative_tokens": k}


def configs(sweep_draft: Path, qwen: tuple[Path, Path] | None) -> list[Config]:
    """cpu-sweep's target, its draft and its n-gram control; cpu-draft's target and its draft at k 2/3/5."""
    out = [
        Config("cpu-sweep", "target only", "smollm2-135m"),
        Config(
            "cpu-sweep",
            "g1_ngram.k5 (n-gram, control)",
            "smollm2-135m",
            {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 3, "prompt_lookup_max": 5},
        ),
        Config("cpu-sweep", "g2_draft_model (4-layer draft, k 3)", "smollm2-135m", _draft(str(sweep_draft), 3)),
    ]
    if qwen is not None:
        out.append(Config("cpu-draft", "target only", "qwen2.5-coder-1.5b"))
        out.extend(
            Config("cpu-draft", f"g1_draft.k{k} (0.5B draft)", "qwen2.5-coder-1.5b", _draft(str(qwen[1]), k))
            for k in (2, 3, 5)
        )
    return out


def measure(engine: VllmEngine, config: Config, model: Path, work: Path, index: int) -> KvCapacity | None:
    """Start the configuration's server, read its KV capacity as a run does, stop it."""
    spec = cpu_launch_spec(
        f"{config.plan}-{index}", model, work, speculative_config=config.speculative, startup_timeout_s=900.0
    )
    with engine.launch(spec) as server:
        return engine.kv_capacity(server, server.log_path.read_text(errors="replace"))


def _row(config: Config, kv: KvCapacity | None, base: KvCapacity | None) -> list[str]:
    if kv is None:
        return [config.plan, config.name, "-", "-", "-", "-", "-"]
    lost = base.tokens - kv.tokens if base is not None else None
    share = f"{lost:,} ({lost / base.tokens:.1%})" if lost is not None and base is not None else "-"
    return [
        config.plan,
        config.name,
        f"{kv.tokens:,}",
        f"{kv.blocks:,}" if kv.blocks is not None else "-",
        f"{kv.concurrency_at(REQUEST_TOKENS):.2f}",
        share,
        kv.source,
    ]


def tabulate(report: Report, found: list[tuple[Config, KvCapacity | None]], missing: str | None) -> TargetCheck:
    """The table, and the check the issue asks for: every draft holds fewer tokens than its target alone, the
    n-gram control as many."""
    bases = {c.plan: kv for c, kv in found if c.speculative is None}
    rows = [_row(c, kv, None if c.speculative is None else bases.get(c.plan)) for c, kv in found]
    notes = [f"Concurrency: requests of {REQUEST_TOKENS:,} tokens held at once (whole blocks per request)."]
    if missing:
        notes.append(missing)
    headers = [
        "plan",
        "configuration",
        "KV tokens",
        "blocks",
        f"concurrency at {REQUEST_TOKENS:,}",
        "lost",
        "read from",
    ]
    report.table("KV cache per server configuration", headers, rows, notes)
    judged = []
    for config, kv in found:
        base = bases.get(config.plan)
        if config.speculative is None:
            continue
        if kv is None or base is None:
            judged.append(None)
        elif config.speculative["method"] == "draft_model":
            judged.append(kv.tokens < base.tokens)
        else:
            judged.append(kv.tokens == base.tokens)
    met = None if None in judged else all(judged)
    return TargetCheck(
        target="KV capacity: every draft model holds fewer KV tokens than its target alone; n-gram as many",
        result="; ".join(r[1] + ": " + r[5] for r, (c, _) in zip(rows, found, strict=True) if c.speculative) or "-",
        met=met,
    )


def _qwen(with_cpu_draft: bool) -> tuple[tuple[Path, Path] | None, str | None]:
    if not with_cpu_draft:
        return None, "builtin:cpu-draft's pair not measured in this run (--with-cpu-draft measures it)."
    target, draft = (resolve_builtin(n, prepare=False) for n in ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"))
    if not (target.present and draft.present):
        return None, (
            "builtin:cpu-draft's pair not measured: its models are not prepared here "
            "(`specselect setup --models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b`)."
        )
    return (target.path, draft.path), None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--with-cpu-draft", action="store_true", help="also cpu-draft's Qwen pair (if prepared)")
    add_results_arguments(parser)
    args = parser.parse_args(argv)
    clock = RunClock.start()
    setup = engine_setup()
    engine = VllmEngine(python=setup.python)
    caps = engine.probe()
    sweep_draft = resolve_builtin("smollm2-135m-draft4l", python=setup.python)
    qwen, missing = _qwen(args.with_cpu_draft)
    models = {"smollm2-135m": setup.model, **({"qwen2.5-coder-1.5b": qwen[0]} if qwen else {})}
    work = Path(tempfile.mkdtemp(prefix="bench-kv-capacity-"))
    found = []
    for index, config in enumerate(configs(sweep_draft.path, qwen)):
        with server_lock(args.server_lock):
            found.append((config, measure(engine, config, models[config.target], work, index)))
    report = Report()
    check = tabulate(report, found, missing)
    if args.write_results:
        spec = cpu_launch_spec("example", setup.model, work, engine_args=CPU_ENGINE_ARGS, env=dict(CPU_SERVER_ENV))
        record = clock.record(
            "bench_kv_capacity",
            TITLE,
            engine_version=caps.engine_version,
            model=setup.model_ref,
            model_snapshot=setup.snapshot,
            configuration=(
                f"**Servers:** {describe_launch(spec)}; the speculative configurations of the plans' candidates.",
                "**Read:** once each server is ready, as every run's launch is read; no load sent.",
            ),
            targets=(check,),
        )
        publish(Path(args.write_results), record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
