"""Frozen workloads: built-in prompt sets and validated user files (JSON Lines / ShareGPT), with identities."""

from specselect.workloads.builtin import builtin_workload_names
from specselect.workloads.canonical import canonical_json, content_sha256
from specselect.workloads.loader import categories, load_workload
from specselect.workloads.model import ChatMessage, Workload, WorkloadIdentity, WorkloadItem
from specselect.workloads.reader import WorkloadHeader

__all__ = [
    "ChatMessage",
    "Workload",
    "WorkloadHeader",
    "WorkloadIdentity",
    "WorkloadItem",
    "builtin_workload_names",
    "canonical_json",
    "categories",
    "content_sha256",
    "load_workload",
]
