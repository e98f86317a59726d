"""`specselect schema [NAME]`: the JSON Schema of a file format specselect reads or writes."""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict

from specselect.errors import UsageError

__all__ = ["SCHEMAS", "SchemaEntry", "register", "run", "schema_for"]


class SchemaEntry(BaseModel):
    """A schema by name: the pydantic model (`module:Class`, imported lazily) and what it describes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    description: str


SCHEMAS: Mapping[str, SchemaEntry] = MappingProxyType(
    {
        "plan": SchemaEntry(model="specselect._plan:Plan", description="a plan file (TOML), schema_version 1"),
        "workload-item": SchemaEntry(
            model="specselect.records.workloads:WorkloadItem", description="one line of a workload file (JSON Lines)"
        ),
        "manifest": SchemaEntry(
            model="specselect.records.results:Manifest", description="results/<label>/manifest.json"
        ),
        "preflight": SchemaEntry(
            model="specselect.records.results:PreflightFile", description="results/<label>/preflight.json"
        ),
        "admission": SchemaEntry(
            model="specselect.records.results:AdmissionFile", description="results/<label>/admission.json"
        ),
        "group": SchemaEntry(
            model="specselect.records.group:GroupResult", description="results/<label>/groups/<group>.json"
        ),
        "record": SchemaEntry(
            model="specselect.records.measurement:RequestRecord",
            description="one line of results/<label>/records/<group>/<scenario>.jsonl (one request)",
        ),
        "evidence": SchemaEntry(
            model="specselect.records.results:EvidenceFile", description="results/<label>/evidence.json"
        ),
        "handoff": SchemaEntry(model="specselect.records.handoff:Handoff", description="results/<label>/handoff.json"),
        "cluster": SchemaEntry(
            model="specselect.records.results:ClusterFile",
            description="results/<label>/cluster.json (a cluster run's nodes)",
        ),
        "check": SchemaEntry(
            model="specselect._artifacts.check:CheckReport", description="<label>-check/check.json (specselect check)"
        ),
    }
)
"""Known schemas; a new result format is one line here."""

_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_for(name: str) -> dict[str, Any]:
    """The JSON Schema of the format called `name`; UsageError naming the known ones otherwise."""
    entry = SCHEMAS.get(name)
    if entry is None:
        close = difflib.get_close_matches(name, list(SCHEMAS), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(
            f"unknown schema {name[:60]!r}{hint}",
            location="specselect schema",
            fix="use one of: " + ", ".join(SCHEMAS),
        )
    module_name, _, attribute = entry.model.partition(":")
    model: type[BaseModel] = getattr(importlib.import_module(module_name), attribute)
    return {"$schema": _DIALECT, **model.model_json_schema()}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `schema` command."""
    parser = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of a file format",
        description="Print the JSON Schema of a file format; without NAME, list the known ones.",
    )
    parser.add_argument("name", metavar="NAME", nargs="?", help="one of: " + ", ".join(SCHEMAS))
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print one schema as JSON, or list the known schema names."""
    if args.name is None:
        width = max(len(name) for name in SCHEMAS)
        for name, entry in SCHEMAS.items():
            print(f"{name:<{width}}  {entry.description}")
        return 0
    print(json.dumps(schema_for(args.name), indent=2, sort_keys=True))
    return 0
