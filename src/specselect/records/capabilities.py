"""What a probe found about an engine installation on this host: the models `preflight.json` records.

Every launching engine answers the fields of `EngineCapabilities` (admission and the memory gate read only
those); an engine adds its own facts in a subclass whose `kind` tells them apart when a results file is read
back (`AnyCapabilities`). The probes that fill them live with each engine (`engines/<kind>/probe.py`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AnyCapabilities",
    "DeviceInfo",
    "EngineCapabilities",
    "RuntimeController",
    "SglangCapabilities",
    "VllmCapabilities",
]


class DeviceInfo(BaseModel):
    """One device the engine can run on: a GPU, a MIG instance of one (its own memory), or the host's RAM."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    memory_mb: int
    index: int | None = None
    uuid: str | None = None
    """`GPU-...` or `MIG-...`: how NVML and CUDA_VISIBLE_DEVICES name it independently of enumeration order."""
    parent_uuid: str | None = None
    """The GPU a MIG instance is carved from (None for a whole GPU)."""

    @property
    def nvml_id(self) -> str | None:
        """The id memory sampling opens the device by (its UUID, else its index); None for host RAM."""
        return self.uuid or (str(self.index) if self.index is not None else None)


class RuntimeController(BaseModel):
    """A control the engine applies by itself while serving that changes how much it speculates (adaptive proposal
    length, speculation by batch size), as the engine's probe found it in the installed version."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    option: str
    """The speculative-configuration key that turns it on or configures it."""
    methods: tuple[str, ...] = ()
    """The methods it applies to; empty: every method (but `excluded_methods`)."""
    excluded_methods: tuple[str, ...] = ()
    """Methods the engine accepts it with but cannot run it for (a crash or a silent fallback)."""
    max_data_parallel_size: int | None = None
    """The largest data parallel size it works at (the engine turns it off above); None: any."""
    requires_device: Literal["cpu", "cuda"] | None = None
    description: str


class EngineCapabilities(BaseModel):
    """The probed capabilities of one engine environment on this host (the fields every engine answers)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    kind: str
    engine_version: str
    python: str
    device_kind: Literal["cpu", "cuda"]
    devices: tuple[DeviceInfo, ...]
    memory_budget_mb: int
    """The memory one server may use on one device (CUDA: the smallest visible GPU; CPU: host RAM minus a
    reserve for the OS and specselect)."""
    memory_budget_basis: str
    host_devices: tuple[DeviceInfo, ...] = ()
    """Every GPU and MIG instance found on the host, before CUDA_VISIBLE_DEVICES (empty for a CPU build)."""
    device_source: Literal["nvml", "nvidia-smi", "none", "not_queried"] = "not_queried"
    """Where `host_devices` were read; `not_queried` for a CPU build of the engine."""
    device_problem: str | None = None
    """Why no GPU was found (no driver, nvidia-smi failing, ...), when none was."""
    cuda_visible_devices: str | None = None
    """The CUDA_VISIBLE_DEVICES the engine's environment had ([engine.env], else specselect's own)."""
    spec_methods: tuple[str, ...]
    """specselect method names this installation can run."""
    mtp_methods: tuple[str, ...] = ()
    per_request_spec_metrics_flag: bool = False
    method_hardware: dict[str, str]
    """Method -> the device kind it needs (`cuda`), when it needs one."""
    optional_modules: dict[str, bool] = Field(default_factory=dict)
    optional_module_setup: dict[str, str] = Field(default_factory=dict)
    """Optional module -> how the managed environment's set-up built it, or why it could not (its one line)."""
    versions: dict[str, str | None]
    probed_in_s: float
    from_cache: bool = False
    runtime_controllers: tuple[RuntimeController, ...] = ()
    """The engine's own speculation controllers in this installation (empty: none found, or none exist)."""

    def controller(self, option: str) -> RuntimeController | None:
        """The runtime controller configured by speculative-configuration key `option`, when this engine has it."""
        return next((c for c in self.runtime_controllers if c.option == option), None)

    @property
    def on_cpu(self) -> bool:
        """True when servers run on the host's CPU (no GPU visible, or a CPU build of the engine)."""
        return self.device_kind == "cpu"


class VllmCapabilities(EngineCapabilities):
    """vLLM: speculative methods parsed from its sources, the per-request metrics flag, optional modules."""

    kind: Literal["vllm"] = "vllm"
    per_request_spec_metrics_flag: bool
    optional_modules: dict[str, bool]
    speculative_config_keys: tuple[str, ...] = ()
    """The fields of the installed `SpeculativeConfig` a user may set (read from its sources by the probe)."""
    synthetic_rejection_on_cpu: bool = True
    """Whether the CPU build verifies with `rejection_sample_method = "synthetic"` (vLLM 0.32's CPU kernels assert it
    off: the server starts, then dies at the first request)."""
    speculative_config_keys_source: Literal["engine_source", "fallback_list"] = "fallback_list"
    """`engine_source`: read from the installed vLLM; `fallback_list`: the probe could not read them, so
    specselect's hand-kept list of vLLM 0.32's keys is checked instead."""


class SglangCapabilities(EngineCapabilities):
    """SGLang: `spec_methods` are specselect method names (`eagle3`, `draft_model`, ...) whose SGLang algorithm
    this version accepts; SGLang has no per-request acceptance flag on its OpenAI routes."""

    kind: Literal["sglang"] = "sglang"
    speculative_algorithms: tuple[str, ...]
    """`--speculative-algorithm` values as SGLang spells them (NEXTN included when the alias exists)."""
    algorithm_source: Literal["argparse_choices", "registry", "none"]
    """Where they were read: argparse `choices`, or the `SpeculativeAlgorithm` registry in spec_info.py."""
    speculative_flags: tuple[str, ...]
    launch_flags: dict[str, bool]
    """Each flag of `LAUNCH_FLAGS` -> declared by this version."""
    server_endpoints: tuple[str, ...]
    probed_in_s: float
    from_cache: bool = False
    plugin_registration: bool = False
    """Whether this version lets plugins register speculative algorithms (`SpeculativeAlgorithm.register`)."""
    plugins: tuple[str, ...] = ()
    """SGLang's general plugins installed beside it (`sglang.srt.plugins` entry points, as `name=module:attr`);
    what algorithms they register is known only once SGLang loads them."""


AnyCapabilities = Annotated[VllmCapabilities | SglangCapabilities, Field(discriminator="kind")]
"""The capabilities of any launching engine, as a results file records them."""
