"""`specselect fetch REPO[@REVISION] ...`: download hub models into the Hugging Face cache, pinned and verified."""

from __future__ import annotations

import argparse

from specselect._assets.hf_cache import is_hf_id, is_revision, split_revision
from specselect._assets.hub_fetch import FetchResult, fetch_model, format_size
from specselect._runner.progress import make_progress
from specselect.errors import UsageError

__all__ = ["parse_hub_ref", "register", "run", "summary"]

_EPILOG = """\
what is fetched: config.json, generation_config.json, tokenizer and chat-template files, and the safetensors
weights (the shards model.safetensors.index.json names); nothing else in the repository.

environment:
  HF_TOKEN              a read token, for gated or private models (accept the model's licence on its hub page
                        first); never printed or recorded
  HF_HOME, HF_HUB_CACHE where the Hugging Face cache is (default ~/.cache/huggingface/hub)
  HF_ENDPOINT           the hub to fetch from (a mirror)

The revision (a branch, tag or commit; default main) is resolved to a commit, printed and recorded. Every file is
checked against the hub's listing: its size, and its sha256 where the hub lists one. Run the same command again
after an interruption: files already complete are kept.
"""


def parse_hub_ref(text: str) -> tuple[str, str | None]:
    """`org/name[@REVISION]` -> (repo, revision or None); UsageError otherwise."""
    repo, revision = split_revision(text.strip())
    if not is_hf_id(repo) or (revision is not None and not is_revision(revision)):
        raise UsageError(
            f"{text[:120]!r} is not a hub model id",
            location="REPO[@REVISION]",
            fix="write org/name or org/name@REVISION (a branch, tag or commit hash)",
        )
    return repo, revision


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `fetch` command."""
    parser = subparsers.add_parser(
        "fetch",
        help="download hub models (weights, config, tokenizer) into the Hugging Face cache, pinned and verified",
        description="Download each model into the Hugging Face cache, where plans naming it find it: the "
        "revision resolved to a commit, every file verified against the hub's listing.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "models", metavar="REPO[@REVISION]", nargs="+", help="e.g. meta-llama/Llama-3.1-8B-Instruct@main"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the one line per model")
    parser.set_defaults(handler=run)


def summary(result: FetchResult) -> str:
    """One line: the model, its commit, what was verified and where it is."""
    listing = result.listing
    return (
        f"{listing.repo}@{listing.revision} -> commit {listing.commit}: {len(result.files)} files, "
        f"{format_size(result.total_bytes)}, verified (size; sha256 of {result.hashed}) in {result.snapshot}"
    )


def run(args: argparse.Namespace) -> int:
    """Fetch every model named; the first failure stops with its one-line error."""
    refs = [parse_hub_ref(text) for text in args.models]
    progress = make_progress(quiet=args.quiet)
    for repo, revision in refs:
        progress.stage(f"fetch {repo}@{revision or 'main'}")
        print(summary(fetch_model(repo, revision, progress=progress.info, bars=not args.quiet)), flush=True)
    return 0
