"""The exact argv of an SGLang server (`python -m sglang.launch_server`) for a launch spec.

Flag names are SGLang's own (`ServerArgs` fields with dashes): `--model-path`, `--served-model-name`,
`--host`, `--port`, `--dtype`, `--context-length`, `--tp-size`, `--pp-size`, `--dp-size`,
`--enable-metrics` (for the `sglang:*` counters acceptance is read from), the `--speculative-*` flags
of the candidate (see `specargs`), `--disable-radix-cache` for the "disabled" prefix-cache policy and
`--config` naming a mode-0600 YAML file that carries the API key: SGLang reads its key from its arguments
only, and a key on the command line would show in `ps` to every local user. `SglangEngine` writes that file,
removes it when the server stops and scrubs the key from the server log (SGLang logs its `ServerArgs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specselect._common.secrets import is_secret_flag
from specselect._engines.base import LaunchSpec
from specselect._engines.launchargs import command_head, flag_name, repeated_engine_arg, secret_engine_arg, serving_args
from specselect._engines.sglang.specargs import sglang_flag
from specselect.errors import ConfigError

__all__ = ["SGLANG_SERVER_MODULE", "build_sglang_argv", "speculative_argv"]

SGLANG_SERVER_MODULE = "sglang.launch_server"
"""Run with `python -m` (the `sglang serve` script is newer and absent from older releases)."""

# Owned by specselect (with SGLang's aliases of them), even when a launch does not emit them.
_RESERVED_FLAGS = frozenset(
    {
        "--model-path",
        "--model",
        "--served-model-name",
        "--host",
        "--port",
        "--dtype",
        "--context-length",
        "--tp-size",
        "--tp",
        "--tensor-parallel-size",
        "--pp-size",
        "--pipeline-parallel-size",
        "--dp-size",
        "--dp",
        "--data-parallel-size",
        "--enable-metrics",
    }
)
_SPECULATIVE_PREFIX = "--speculative-"


def speculative_argv(args: Mapping[str, Any]) -> list[str]:
    """The `--speculative-*` flags of a speculative-arguments object (True -> bare flag, False/None -> absent)."""
    out: list[str] = []
    for key, value in args.items():
        if not key.startswith("speculative_"):
            raise ConfigError(
                f"{key!r} is not an SGLang speculative argument",
                location="speculative_config",
                fix="build it with specselect._engines.sglang.specargs.build_sglang_speculative_args",
            )
        if value is None or value is False:
            continue
        out.append(sglang_flag(key))
        if value is not True:
            out.append(str(value))
    return out


def _check_engine_args(spec: LaunchSpec, ours: frozenset[str]) -> None:
    for extra in spec.engine_args:
        flag = flag_name(extra)
        if flag and is_secret_flag(flag):
            raise secret_engine_arg(spec, flag)
        if flag.startswith(_SPECULATIVE_PREFIX):
            raise ConfigError(
                f"{flag} is set by specselect from the candidate and cannot be given in engine args",
                location=f"groups.{spec.group}.engine_args",
                fix="use the candidate's family, method, num_speculative_tokens, proposer and options",
            )
        if flag in ours or (flag == "--disable-radix-cache" and spec.disable_prefix_caching):
            raise repeated_engine_arg(spec, flag)


def build_sglang_argv(
    spec: LaunchSpec,
    port: int,
    *,
    python: str | Path | None = None,
    command: Sequence[str] | None = None,
    secrets_file: Path | None = None,
    enable_metrics: bool = True,
) -> list[str]:
    """`[python, -m, sglang.launch_server, ...flags, ...engine_args]` (or `command` as the head).

    `spec.speculative_config` is SGLang's speculative-arguments object (`build_sglang_speculative_args`).
    Parallel sizes become `--tp-size` (always), `--pp-size` / `--dp-size` (when above 1); a distributed
    executor backend is vLLM's and is refused. `per_request_spec_metrics` has no SGLang flag and is ignored.
    `secrets_file` is the YAML file with the API key (`--config`): the key itself is never in the argv.
    """
    head = command_head(
        python,
        command,
        SGLANG_SERVER_MODULE,
        engine="SGLang",
        fix="give the python of the environment with sglang, or a command prefix",
    )
    if spec.distributed_executor_backend:
        raise ConfigError(
            f"distributed_executor_backend {spec.distributed_executor_backend!r} is a vLLM setting",
            location="engine.distributed_executor_backend",
            fix="remove it: SGLang starts its own tensor/pipeline/data parallel workers on one node",
        )
    args = serving_args(spec, port, model_flag="--model-path")
    if spec.max_model_len is not None:
        args += ["--context-length", str(spec.max_model_len)]
    args += ["--tp-size", str(spec.tensor_parallel_size)]
    if spec.pipeline_parallel_size > 1:
        args += ["--pp-size", str(spec.pipeline_parallel_size)]
    if spec.data_parallel_size > 1:
        args += ["--dp-size", str(spec.data_parallel_size)]
    if enable_metrics:
        args.append("--enable-metrics")
    if spec.speculative_config is not None:
        args += speculative_argv(spec.speculative_config)
    if spec.disable_prefix_caching:
        args.append("--disable-radix-cache")
    if secrets_file is not None:
        args += ["--config", str(secrets_file)]
    _check_engine_args(spec, _RESERVED_FLAGS | {a for a in args if a.startswith("--")})
    return head + args + list(spec.engine_args)
