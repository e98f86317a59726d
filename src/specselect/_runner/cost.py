"""What a plan will cost before it starts (`specselect validate`): server starts, device-hours, disk to fetch.

`estimate_cost` is pure: the plan, each workload's item count and each target's parameter count in, an estimate
out. Its time figures are ESTIMATES from the typical figures in `TYPICAL` (per device kind, with their source),
never a measurement of the run; a first run's manifest gives the real launch and decode times. `plan_facts`
finds the inputs on this machine (the local model cache, the workload catalog) without starting anything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from specselect._assets.config_facts import estimate_params_from_config, load_config
from specselect._assets.hf_cache import is_hf_id
from specselect._assets.snapshot_files import cached_state
from specselect._plan import LoadedPlan, Plan, ServedModel, TargetConfig
from specselect._runner.scenario import SAMPLE_PASS_CONCURRENCY
from specselect._workloads.catalog import builtin_catalog
from specselect._workloads.loader import load_workload
from specselect._workloads.sample import WorkloadSample
from specselect.errors import EngineSetupError, SpecselectError

__all__ = [
    "TYPICAL",
    "CostEstimate",
    "Launch",
    "LocalModel",
    "PlanFacts",
    "Typical",
    "cost_lines",
    "disk_line",
    "estimate_cost",
    "params_from_name",
    "plan_cost_lines",
    "plan_device",
    "plan_facts",
]

Device = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class Typical:
    """Typical serving figures of one device kind: a server start is `start_fixed_s` plus its weights read at
    `load_gb_s`; a decode step reads the target's weights once at `bandwidth_gb_s` (one step serves every
    sequence of a batch: decode is weight-bound), but takes at least `step_floor_s`."""

    start_fixed_s: float
    load_gb_s: float
    bandwidth_gb_s: float
    step_floor_s: float
    source: str


TYPICAL: Mapping[Device, Typical] = MappingProxyType(
    {
        "gpu": Typical(
            start_fixed_s=90.0,
            load_gb_s=2.0,
            bandwidth_gb_s=2500.0,
            step_floor_s=0.003,
            source="vLLM on one H100-class GPU, assumed (specselect's machines have no GPU): "
            "decode 2,500 GB/s effective = Llama-3.1-8B-Instruct's 158 tokens/s at batch 1 on one H100 as "
            "SGLang's speculative-decoding documentation reports its baseline (16 GB of bf16 weights per step); start "
            "90 s of process start, torch.compile and CUDA-graph capture plus weights read at 2 GB/s from "
            "local NVMe; a 3 ms floor per step for small models (scheduler, sampler)",
        ),
        "cpu": Typical(
            start_fixed_s=31.0,
            load_gb_s=0.125,
            bandwidth_gb_s=13.0,
            step_floor_s=1 / 17,
            source="measured on specselect's 2-core development machines (vLLM 0.32 CPU): start 31-40 s for "
            "SmolLM2-135M in eager mode, 80 s for the 1.5B (6.2 GB in float32: ~8 s per GB); decode reads "
            "~13 GB/s of float32 weights, at most ~17 tokens/s (SmolLM2-135M, float32, eager)",
        ),
    }
)
"""The figures every estimate uses, by device kind. Speculation's own speed-up is left out: every group is
costed at the baseline's decode rate, so a winning candidate takes less time than estimated."""

_DTYPE_BYTES = MappingProxyType({"float32": 4, "bfloat16": 2, "float16": 2, "auto": 2})
_SIZE_IN_NAME = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)([bBmM])(?![A-Za-z])")


@dataclass(frozen=True)
class CostEstimate:
    """Server starts and device-hours at the first look and if every candidate runs to the last look."""

    device: Device
    devices_per_server: int
    starts_first_look: int
    starts_last_look: int
    hours_first_look: float | None
    """Device-hours (wall hours x devices per server); None when a target's size is unknown."""
    hours_last_look: float | None
    launches: Mapping[str, Launch]
    """Track name -> one launch of a group on it, estimated (tracks whose target's size is unknown left out)."""


def params_from_name(ref: str) -> int | None:
    """A parameter count from a model name's size tag (`Llama-3.1-8B-Instruct` -> 8e9, `smollm2-135m`), if any."""
    match = _SIZE_IN_NAME.search(ref.rstrip("/").rsplit("/", 1)[-1].removeprefix("builtin:"))
    if match is None:
        return None
    return round(float(match.group(1)) * (1e9 if match.group(2) in "bB" else 1e6))


def plan_device(plan: Plan) -> Device:
    """`cpu` for an engine environment specselect installs (every managed environment is a CPU build), else `gpu`:
    a plan naming its own engine is taken to serve on GPUs (`specselect probe` reads the device itself)."""
    python = plan.engine.python or ""
    return "cpu" if python.startswith("managed:") else "gpu"


def _scenario_s(requests: int, level: int, max_tokens: int, step_s: float) -> float:
    # `level` requests decode together, one weight-bound step per token: ceil(n / level) waves of max_tokens steps.
    return math.ceil(requests / level) * max_tokens * step_s


@dataclass(frozen=True)
class Launch:
    """One launch of a group on a track, estimated: its start, its decode step, its scenarios' time, and what
    only a group's first launch adds (the distribution test's untimed samples)."""

    start_s: float
    step_s: float
    measuring_s: float
    first_only_s: float = 0.0

    @property
    def total_s(self) -> float:
        """A launch after the first: start and scenarios."""
        return self.start_s + self.measuring_s


def _launch(plan: Plan, target: TargetConfig, items: Mapping[str, int], params: int, typical: Typical) -> Launch:
    weights_gb = params * _DTYPE_BYTES[target.dtype] / 1e9
    step_s = max(typical.step_floor_s, weights_gb / typical.bandwidth_gb_s)
    run, sampling = plan.run, plan.sampling
    measuring = sum(
        _scenario_s(n * run.repeats + run.warmup_at(level), level, sampling.max_tokens, step_s)
        for n in items.values()
        for level in run.concurrency
    ) * len(sampling.temperatures)
    first_only = 0.0
    if sampling.sampled:  # the distribution test's untimed samples, in each group's first launch only
        prompts = sum(min(sampling.parity_prompts, n) for n in items.values())
        untimed = prompts * sampling.parity_samples * sum(t > 0 for t in sampling.temperatures)
        first_only = _scenario_s(untimed, SAMPLE_PASS_CONCURRENCY, sampling.max_tokens, step_s)
    return Launch(typical.start_fixed_s + weights_gb / typical.load_gb_s, step_s, measuring, first_only)


def estimate_cost(
    plan: Plan, items: Mapping[str, int], params: Mapping[str, int | None], device: Device
) -> CostEstimate:
    """Server starts and device-hours of `plan` (`items`: workload -> item count; `params`: model reference ->
    parameter count, None when unknown). Every group launches once per round (baselines, blocks and A/A
    controls too); the first look comes after `rounds`, the last after `looks[-1]`. A candidate decided at the
    first look runs no more rounds, so the first-look figure is what a run costs when every candidate is
    decided then, and the last-look one its upper bound (also without early stops of higher levels)."""
    typical = TYPICAL[device]
    run = plan.run
    launch: dict[str, Launch] = {}
    for track in plan.tracks:
        size = params.get(track.target.model)
        if size is not None:
            launch[track.name] = _launch(plan, track.target, items, size, typical)
    engine = plan.engine
    gpus = engine.tensor_parallel_size * engine.pipeline_parallel_size * engine.data_parallel_size
    per_round = len(plan.groups)
    hours: list[float | None] = [None, None]
    if len(launch) == len(plan.tracks):
        groups = {t.name: 1 + len(t.members) for t in plan.tracks}
        once = sum(launch[name].first_only_s * n for name, n in groups.items())
        per_round_s = sum(launch[name].total_s * n for name, n in groups.items())
        hours = [(once + per_round_s * rounds) * gpus / 3600 for rounds in (run.rounds, run.max_rounds)]
    return CostEstimate(
        device=device,
        devices_per_server=gpus,
        starts_first_look=per_round * run.rounds,
        starts_last_look=per_round * run.max_rounds,
        hours_first_look=hours[0],
        hours_last_look=hours[1],
        launches=launch,
    )


@dataclass(frozen=True)
class LocalModel:
    """What the local model cache holds of a hub id the plan names."""

    ref: str
    complete: bool
    """Its snapshot is complete by the fetch's rule (`snapshot_files.cached_state`); else it is to be fetched."""
    params: int | None = None
    """From its local config.json, when that is there."""
    bytes_per_param: int | None = None
    """From the config's dtype, when it names one."""
    revision: str | None = None
    """The revision the plan asks for (None: the default branch)."""
    missing: tuple[str, ...] = ()
    """What a snapshot that is there in part lacks (`name (why)`); empty when absent or complete."""

    @property
    def label(self) -> str:
        """`org/name`, or `org/name@REVISION` when the plan names one."""
        return f"{self.ref}@{self.revision}" if self.revision else self.ref

    @property
    def size_gb(self) -> float | None:
        """Its weights' size on disk (params x dtype bytes), when both are known."""
        if self.params is None or self.bytes_per_param is None:
            return None
        return self.params * self.bytes_per_param / 1e9


@dataclass(frozen=True)
class PlanFacts:
    """The estimate's inputs as this machine knows them."""

    items: Mapping[str, int]
    params: Mapping[str, int | None]
    models: tuple[LocalModel, ...]
    """Every hub id the plan names (targets, proposers), in plan order."""


def _local_model(model: ServedModel) -> LocalModel:
    ref, revision = model
    try:
        cached = cached_state(ref, revision)
    except EngineSetupError:  # an unusable ref or record: fetching writes it again
        return LocalModel(ref, complete=False, revision=revision)
    if cached.snapshot is None:
        return LocalModel(ref, complete=False, revision=revision)
    known = LocalModel(ref, complete=cached.present, revision=revision, missing=cached.missing)
    try:
        config = load_config(cached.snapshot)
    except EngineSetupError:
        return known
    dtype = config.get("torch_dtype") or config.get("dtype")
    size = _DTYPE_BYTES.get(dtype) if isinstance(dtype, str) and dtype != "auto" else None
    return replace(known, params=estimate_params_from_config(config), bytes_per_param=size)


def _item_count(ref: str | WorkloadSample, loaded: LoadedPlan, catalog: Mapping[str, int]) -> int | None:
    source = ref.source if isinstance(ref, WorkloadSample) else ref
    total = catalog.get(source.removeprefix("builtin:")) if source.startswith("builtin:") else None
    if total is None:
        try:
            total = len(load_workload(source, base_dir=loaded.base_dir).items)
        except SpecselectError:
            return ref.items if isinstance(ref, WorkloadSample) else None
    return min(ref.items, total) if isinstance(ref, WorkloadSample) else total


def plan_facts(loaded: LoadedPlan) -> PlanFacts:
    """Item counts (the catalog's, a sample's, a file's), target sizes (a local config's, else the size tag in
    the name) and the local cache's state of every hub id the plan names; nothing is downloaded or started."""
    plan = loaded.plan
    catalog = {entry.name: entry.item_count for entry in builtin_catalog()}
    counts = {name: _item_count(ref, loaded, catalog) for name, ref in loaded.workload_sources().items()}
    models = tuple(_local_model(m) for m in loaded.served_models() if is_hf_id(m.ref))
    local = {ServedModel(m.ref, m.revision): m.params for m in models}
    params = {
        t.target.model: local.get(loaded.served_model(t.target.model, t.target.revision))
        or params_from_name(t.target.model)
        for t in plan.tracks
    }
    return PlanFacts(items={k: v for k, v in counts.items() if v is not None}, params=params, models=models)


def _hours(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1f}" if value >= 1 else f"{value:.2f}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds / 60:.1f} min"


def cost_lines(estimate: CostEstimate, figures: Typical) -> list[str]:
    """The estimate as `validate` prints it: starts, device-hours with one launch's parts, and the figures'
    source (they are estimates, and the lines say so)."""
    e = estimate
    unit = "GPU" if e.device == "gpu" else "CPU"
    starts = f"cost: {e.starts_first_look} server starts by the first look"
    if e.starts_last_look != e.starts_first_look:
        starts += f", up to {e.starts_last_look} if every candidate runs to the last look"
    starts += " (a candidate admission refuses starts none)"
    if e.hours_first_look is None:
        return [
            starts,
            f"cost: {unit}-hours unknown: a target's size is unknown (no local config.json, no size in its name)",
        ]
    hours = f"cost: ~{_hours(e.hours_first_look)} {unit}-hours estimated"
    if e.hours_last_look != e.hours_first_look:
        hours += f" (up to ~{_hours(e.hours_last_look)})"
    per = (
        "on this machine's CPUs"
        if e.device == "cpu"
        else f"with {e.devices_per_server} GPU{'s' if e.devices_per_server != 1 else ''} per server"
    )
    parts = "; ".join(
        f"one launch ~{_minutes(launch.total_s)} (start ~{_minutes(launch.start_s)}, "
        f"decode {launch.step_s * 1000:.1f} ms per step{'' if len(e.launches) == 1 else f', {track}'})"
        for track, launch in e.launches.items()
    )
    return [
        starts,
        f"{hours} {per}: {parts}",
        f"cost: estimates from typical figures, not measurements: {figures.source}",
    ]


def _named(model: LocalModel) -> str:
    """The model's label, and what a snapshot that is there in part lacks."""
    if not model.missing:
        return model.label
    more = f" and {len(model.missing) - 1} more" if len(model.missing) > 1 else ""
    return f"{model.label} (partial here: {model.missing[0]}{more})"


def disk_line(models: Sequence[LocalModel]) -> str | None:
    """The models to fetch with their sizes on disk; None when every hub id the plan names is complete here."""
    missing = [m for m in models if not m.complete]
    if not missing:
        return None
    sizes = [m.size_gb for m in missing]
    shown = ", ".join(
        f"{_named(m)} {'unknown until fetched' if gb is None else f'~{gb:.1f} GB (from its local config)'}"
        for m, gb in zip(missing, sizes, strict=True)
    )
    known = sum(gb for gb in sizes if gb is not None)
    many = f"{len(missing)} model{'s' if len(missing) != 1 else ''} to fetch"
    if not known:
        return f"disk: {many}, sizes unknown until fetched: {', '.join(map(_named, missing))}"
    return f"disk: {many}, ~{known:.1f} GB{' + the unknown' if None in sizes else ''}: {shown}"


def plan_cost_lines(loaded: LoadedPlan) -> list[str]:
    """What `validate` prints about the cost of `loaded`: nothing for an engine that starts no server."""
    plan = loaded.plan
    if not plan.engine.launches_servers:
        return []
    facts = plan_facts(loaded)
    device = plan_device(plan)
    lines = cost_lines(estimate_cost(plan, facts.items, facts.params, device), TYPICAL[device])
    disk = disk_line(facts.models)
    return [*lines, disk] if disk is not None else lines
