"""The plan: one selection experiment, validated and frozen; its hash identifies it in every result."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from specselect._common.canonical import canonical_json, canonical_sha256
from specselect._plan.candidates import Candidate, block_of_error
from specselect._plan.capacity import CapacityConfig
from specselect._plan.cluster import ClusterConfig
from specselect._plan.expand import declared_index, validate_candidates
from specselect._plan.overrides import effective_target
from specselect._plan.rules import BASELINE_GROUP, TRACK_SEPARATOR, NameStr, rule_error
from specselect._plan.schedules import check_schedules
from specselect._plan.sections import (
    AssetsConfig,
    EngineConfig,
    PlanSection,
    RunConfig,
    SamplingConfig,
    TargetConfig,
    ThresholdsConfig,
)
from specselect._plan.tracks import Track, compute_tracks, split_into_blocks, target_key
from specselect._plan.traffic import TrafficConfig, check_traffic
from specselect._plan.workloads import WorkloadsTable, check_workloads
from specselect._workloads.sample import WorkloadSample

__all__ = ["PLAN_SCHEMA_VERSION", "Plan"]

PLAN_SCHEMA_VERSION = 1


class Plan(PlanSection):
    """A selection experiment: target, engine, protocol, workloads, policy and candidate groups."""

    schema_version: Literal[1] = Field(description="plan format version; this specselect reads 1")
    label: NameStr = Field(description="short name of the experiment, used in result paths")
    description: Annotated[str, Strict(), Field(max_length=10_000)] = ""
    target: TargetConfig
    engine: EngineConfig
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    workloads: WorkloadsTable = Field(
        description='name -> "builtin:NAME", a file path (relative to the plan file), or a seeded sample '
        '{ source = "builtin:NAME" or a path, items = N, seed = S }'
    )
    thresholds: ThresholdsConfig = Field(default_factory=ThresholdsConfig)
    candidates: Annotated[tuple[Candidate, ...], Field(max_length=1000)] = Field(
        default=(), description="the groups to compare; a sweep entry is expanded into its sub-candidates here"
    )
    traffic: TrafficConfig | None = Field(
        default=None,
        description="the deployment's mix (shares of requests per workload and concurrency level): the hand-off "
        "then gives one recommendation for it",
    )
    cluster: ClusterConfig = Field(
        default_factory=ClusterConfig,
        description="where the groups run: here, one at a time (the default), or spread over a Ray cluster",
    )
    assets: AssetsConfig = Field(
        default_factory=AssetsConfig,
        description="whether preflight may fetch hub models the local cache lacks (default: never downloads)",
    )
    capacity: CapacityConfig = Field(
        default_factory=CapacityConfig,
        description="what the deployment's KV cache must hold (required concurrency at a request length, the "
        "largest capacity loss): a candidate that cannot is rejected",
    )

    @model_serializer(mode="wrap")
    def _omit_unused_tables(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A plan without [traffic] or [cluster] keeps the dump, and so the plan hash, it had before they existed.
        data: dict[str, Any] = handler(self)
        if self.traffic is None:
            data.pop("traffic", None)
        if self.cluster.is_local:
            data.pop("cluster", None)
        if self.assets == AssetsConfig():
            data.pop("assets", None)
        if self.capacity == CapacityConfig():
            data.pop("capacity", None)
        return data

    @field_validator("schema_version", mode="before")
    @classmethod
    def _integer_version(cls, value: Any) -> Any:
        # Literal[1] alone would also take `true` and `1.0`.
        if type(value) is not int:
            raise rule_error(
                f"must be the integer {PLAN_SCHEMA_VERSION}",
                f"write schema_version = {PLAN_SCHEMA_VERSION}",
            )
        return value

    @field_validator("workloads")
    @classmethod
    def _workload_refs(cls, value: dict[str, str | WorkloadSample]) -> dict[str, str | WorkloadSample]:
        return check_workloads(value)

    @field_validator("candidates", mode="wrap")
    @classmethod
    def _expand_sweeps(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        # Expansion and unique names live in `plan.expand`; the engine decides whether a sweep can run.
        engine = info.data.get("engine")
        return validate_candidates(
            value, handler, engine_kind=engine.kind if isinstance(engine, EngineConfig) else None
        )

    @model_validator(mode="after")
    def _capacity_length(self) -> Plan:
        cap = self.capacity
        if cap.required_concurrency is not None and cap.request_tokens is None and self.target.max_model_len is None:
            raise rule_error(
                "required_concurrency needs a request length, and [target] max_model_len is not set either",
                "add capacity.request_tokens = N (prompt + output tokens per request)",
                field=("capacity", "request_tokens"),
            )
        return self

    @model_validator(mode="after")
    def _tracks(self) -> Plan:
        default = target_key(self.target)
        seen: dict[str, int] = {}
        for index, cand in enumerate(self.candidates):
            if not cand.is_track_baseline:
                continue
            key = target_key(effective_target(self.target, cand.target))
            where = ("candidates", declared_index(self.candidates, index), "target")
            if key == default:
                raise rule_error(
                    f"{cand.name} runs the plan's own [target]: that is the default baseline {BASELINE_GROUP}",
                    "remove this entry, or give it the target of another track",
                    field=where,
                )
            if key in seen:
                other = self.candidates[seen[key]].name
                raise rule_error(
                    f"{cand.name} and {other} are baselines of the same target",
                    "keep one baseline per target",
                    field=where,
                )
            seen[key] = index
        self._check_blocks()
        for track in self.tracks:
            if track.declared and not track.is_default and not track.members:
                index = declared_index(self.candidates, self.candidates.index(track.baseline))
                raise rule_error(
                    f"no candidate runs on the target of {track.name}",
                    "give a candidate the same target, or remove this baseline",
                    field=("candidates", index, "name"),
                )
        return self

    def _check_blocks(self) -> None:
        for index, cand in enumerate(self.candidates):
            if cand.block_of is not None:
                raise block_of_error(("candidates", declared_index(self.candidates, index), "block_of"))
        if self.run.candidates_per_block is None:
            return
        if not self.engine.launches_servers:
            raise rule_error(
                f"kind = '{self.engine.kind}' measures servers you run: it cannot launch a baseline per block",
                "remove candidates_per_block",
                field=("run", "candidates_per_block"),
            )
        names = {c.name for c in self.candidates}
        for track in self.tracks:
            if track.baseline.block_of is not None and track.name in names:
                raise rule_error(
                    f"{track.name} is the name of the baseline of a block of {track.baseline.block_of}",
                    "rename that candidate",
                    field="candidates",
                )

    @model_validator(mode="after")
    def _mix_and_schedules(self) -> Plan:
        if self.traffic is not None:
            check_traffic(self.traffic, list(self.workloads), list(self.run.concurrency))
            if len(self.sampling.temperatures) > 1:
                raise rule_error(
                    "[traffic] weighs workloads and concurrency levels, not temperatures: with several "
                    f"temperatures {list(self.sampling.temperatures)} the mix has no single answer",
                    "list the deployment's one temperature, or run the plan once per temperature",
                    field=("sampling", "temperature"),
                )
        check_schedules(self.candidates, sorted(self.run.concurrency), len(self.sampling.temperatures))
        return self

    @model_validator(mode="after")
    def _assets_apply(self) -> Plan:
        if not self.engine.launches_servers and self.assets.download:
            raise rule_error(
                f"kind = '{self.engine.kind}' measures servers you run and loads no model: there is nothing to fetch",
                "remove [assets] download",
                field=("assets", "download"),
            )
        return self

    @model_validator(mode="after")
    def _endpoints(self) -> Plan:
        if self.engine.launches_servers:
            for index, cand in enumerate(self.candidates):
                if cand.endpoint is not None:
                    raise rule_error(
                        f"endpoint applies to kind = 'openai' only (this plan launches {self.engine.kind} servers)",
                        'remove endpoint, or set [engine] kind = "openai" to measure servers you run yourself',
                        field=("candidates", declared_index(self.candidates, index), "endpoint"),
                    )
            return self
        if not any(c.name == BASELINE_GROUP for c in self.candidates):
            raise rule_error(
                "kind = 'openai' measures servers you run: declare which one is the target-only baseline",
                f'add [[candidates]] name = "{BASELINE_GROUP}" with endpoint = {{ base_url = ..., model = ... }}',
                field="candidates",
            )
        for track in self.tracks:
            if not track.declared:
                raise rule_error(
                    f"candidates {', '.join(track.members)} run on another target and need that track's baseline, "
                    "which kind = 'openai' cannot start",
                    f'declare [[candidates]] name = "{BASELINE_GROUP}{TRACK_SEPARATOR}NAME" with their target '
                    "and the endpoint of a target-only server",
                    field="candidates",
                )
        endpoints: dict[tuple[str, str], str] = {}
        for index, cand in enumerate(self.candidates):
            if cand.endpoint is None:
                raise rule_error(
                    "kind = 'openai': every group measures a server you run and needs its endpoint",
                    'add endpoint = { base_url = "http://127.0.0.1:8000", model = "served-name" }',
                    field=("candidates", declared_index(self.candidates, index), "endpoint"),
                )
            for name in ("engine_args", "env"):
                if getattr(cand, name):
                    raise rule_error(
                        f"kind = 'openai' starts no server: {name} does not apply",
                        f"remove {name}; configure your server yourself",
                        field=("candidates", declared_index(self.candidates, index), name),
                    )
            key = (cand.endpoint.base_url, cand.endpoint.model)
            if key in endpoints:
                raise rule_error(
                    f"{cand.name} measures the same endpoint as {endpoints[key]}: one server cannot be both",
                    "give each group the endpoint of its own server",
                    field=("candidates", declared_index(self.candidates, index), "endpoint"),
                )
            endpoints[key] = cand.name
        return self

    @property
    def controls(self) -> tuple[Candidate, ...]:
        """With `[run] aa_control`: an A/A control of every track's baseline (the default track always, another
        track where it has candidates)."""
        if not self.run.aa_control:
            return ()
        tracks = compute_tracks(self.target, self.candidates)
        return tuple(Candidate.control(t.baseline) for t in tracks if t.is_default or t.members)

    @property
    def tracks(self) -> tuple[Track, ...]:
        """Every target with its baseline (the default `[target]` first), A/A controls first among its members;
        see `specselect._plan.tracks`."""
        tracks = compute_tracks(self.target, (*self.controls, *self.candidates))
        return split_into_blocks(tracks, self.candidates, self.run.candidates_per_block)

    def track_of(self, name: str) -> Track:
        """The track of the group called `name` (a baseline is on its own track); KeyError if there is none."""
        for track in self.tracks:
            if name == track.name or name in track.members:
                return track
        raise KeyError(name)

    @property
    def sweeps(self) -> dict[str, tuple[str, ...]]:
        """Swept entry name -> its sub-candidate names, in plan order (entries that expanded into several)."""
        out: dict[str, list[str]] = {}
        for cand in self.candidates:
            if cand.sweep is not None:
                out.setdefault(cand.sweep.parent, []).append(cand.name)
        return {parent: tuple(names) for parent, names in out.items() if len(names) > 1}

    @property
    def baseline(self) -> Candidate:
        """The default track's target-only baseline group: declared explicitly or added implicitly."""
        for candidate in self.candidates:
            if candidate.name == BASELINE_GROUP:
                return candidate
        return Candidate.implicit_baseline()

    @property
    def groups(self) -> tuple[Candidate, ...]:
        """Every group to run: the baseline first, then its A/A control (`[run] aa_control`), then the candidates
        in file order, each other track's baseline right before the first group of its track."""
        tracks = self.tracks
        by_member = {name: track for track in tracks for name in track.members}
        out: list[Candidate] = [tracks[0].baseline]
        emitted = {tracks[0].name}
        for cand in (*self.controls, *self.candidates):
            if cand.is_baseline:
                continue
            track = by_member[cand.name]
            if track.name not in emitted:
                out.append(track.baseline)
                emitted.add(track.name)
            out.append(cand)
        return tuple(out)

    def group(self, name: str) -> Candidate:
        """The group called `name`; KeyError if there is none."""
        for candidate in self.groups:
            if candidate.name == name:
                return candidate
        raise KeyError(name)

    @property
    def sampling_key(self) -> str:
        """Shortcut for `plan.sampling.sampling_key`."""
        return self.sampling.sampling_key

    def canonical_json(self) -> str:
        """The canonical JSON of the validated plan (defaults filled in, keys sorted)."""
        return canonical_json(self.model_dump(mode="json"))

    @property
    def plan_hash(self) -> str:
        """sha256 (hex) of the canonical JSON: stable across key order, formatting and spelled-out defaults."""
        return canonical_sha256(self.model_dump(mode="json"))
