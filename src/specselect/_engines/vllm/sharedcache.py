"""What every vLLM server of one specselect home may reuse: vLLM's inspection of a model class.

Before it loads a model, vLLM inspects the model's class in a fresh Python process (importing vLLM and torch once
more: ~18 s of a ~66 s server start on a 2-core machine) unless `$VLLM_CACHE_ROOT/modelinfos` holds the answer, a
JSON file per class keyed by the hash of vLLM's own source file for it. Each server keeps its own cache
directory, so no compiled kernel or other state passes from one measured server to the next; only `modelinfos`
is shared. Start-up time is recorded but never compared, so sharing it cannot move a decision.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from specselect._engines.server import cache_root

__all__ = ["MODELINFO_DIR", "share_model_class_cache"]

MODELINFO_DIR = "modelinfos"
"""vLLM's directory (under VLLM_CACHE_ROOT) of inspected model classes."""


def share_model_class_cache(run_dir: Path, shared: Path) -> Path:
    """Make `run_dir`'s vLLM `modelinfos` a link to `shared/modelinfos` (both created); returns the link.

    A server whose cache already has its own `modelinfos` directory (an earlier attempt's) keeps it.
    """
    target = shared.absolute() / MODELINFO_DIR
    target.mkdir(parents=True, exist_ok=True)
    link = cache_root(run_dir) / "vllm" / MODELINFO_DIR
    link.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        link.symlink_to(target, target_is_directory=True)
    return link
