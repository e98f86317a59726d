"""What a plan's [cluster] needs, checked before anything starts: Ray installed, an engine that starts servers."""

from __future__ import annotations

import importlib
import os
from typing import Any

from specselect._plan import LoadedPlan
from specselect.errors import ConfigError

__all__ = ["RAY_EXTRA", "cluster_problems", "import_ray"]

RAY_EXTRA = "pip install 'specselect[ray]'"


def import_ray(source: str = "plan") -> Any:
    """The `ray` module; ConfigError with the fix when it is not installed."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(
            '[cluster] backend = "ray" needs Ray, which is not installed',
            location=f"{source}: cluster.backend",
            fix=f"{RAY_EXTRA}, or remove [cluster]",
        ) from None


def cluster_problems(loaded: LoadedPlan, *, launches_servers: bool) -> None:
    """Refuse, before anything starts, a [cluster] the run cannot use: an engine that starts no server (kind
    "openai" measures an endpoint that is already running), a fixed port blocks on one node would share, no
    cluster named, Ray missing."""
    cluster = loaded.plan.cluster
    if cluster.is_local:
        return
    if not launches_servers:
        raise ConfigError(
            f"[cluster] backend = {cluster.backend!r} spreads server launches over nodes, and engine kind "
            f"{loaded.plan.engine.kind!r} starts no server",
            location=f"{loaded.source}: cluster.backend",
            fix="remove [cluster]",
        )
    if loaded.plan.engine.port != 0 and cluster.max_parallel_groups != 1:
        raise ConfigError(
            f"[engine] port = {loaded.plan.engine.port}: blocks that share a node would start their servers on the "
            "same port",
            location=f"{loaded.source}: engine.port",
            fix="set port = 0 (each server picks a free port), or max_parallel_groups = 1 in [cluster]",
        )
    if cluster.address is None and not os.environ.get("RAY_ADDRESS"):
        raise ConfigError(
            '[cluster] backend = "ray" names no cluster, and RAY_ADDRESS is not set',
            location=f"{loaded.source}: cluster.address",
            fix='set address = "auto" (on a node of the cluster), "HOST:PORT" or "ray://HOST:PORT", or RAY_ADDRESS; '
            'address = "local" starts a one-node cluster here for the run',
        )
    import_ray(loaded.source)
