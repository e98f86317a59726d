"""The follow-along of `specselect run` in DEVELOPERS.md is the code's: at most eight modules, each imported by one
listed before it (directly or through its package), none importing one listed before it (no climb back up)."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Follow `specselect run`"


def _listed(text: str) -> list[str]:
    part = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    paths = re.findall(r"^\d+\. `src/(specselect/[\w/]+)\.py`", part, flags=re.M)
    return [path.replace("/", ".") for path in paths]


def _enters(graph: grimp.ImportGraph, importer: str, module: str) -> bool:
    """`importer` imports `module`, or a package above it whose `__init__` imports it."""
    if graph.direct_import_exists(importer=importer, imported=module):
        return True
    parts = module.split(".")
    packages = [".".join(parts[:n]) for n in range(2, len(parts))]
    return any(
        graph.direct_import_exists(importer=importer, imported=package)
        and graph.direct_import_exists(importer=package, imported=module)
        for package in packages
    )


def problems(listed: list[str], graph: grimp.ImportGraph) -> list[str]:
    """What is wrong with a follow-along: too long, a module nothing above enters, a call back up."""
    out = [f"{len(listed)} modules, more than 8"] if len(listed) > 8 else []
    for i, module in enumerate(listed):
        if module not in graph.modules:
            out.append(f"{module}: no such module")
            continue
        if i and not any(_enters(graph, earlier, module) for earlier in listed[:i]):
            out.append(f"{module}: not entered from any module above it")
        out += [f"{module} imports {earlier}, above it" for earlier in listed[:i] if _enters(graph, module, earlier)]
    return out


def test_the_follow_along_in_developers_md_matches_the_import_graph() -> None:
    listed = _listed((ROOT / "DEVELOPERS.md").read_text(encoding="utf-8"))
    assert listed[0] == "specselect._cli.run" and listed[-1] == "specselect._artifacts.handoff.build"
    assert problems(listed, grimp.build_graph("specselect")) == []


def test_the_check_finds_a_climb_back_up_and_a_module_entered_from_nowhere() -> None:
    graph = grimp.build_graph("specselect")
    upward = ["specselect._runner.scenario", "specselect._runner.group"]  # group imports scenario, listed above it
    assert problems(upward, graph) == [
        "specselect._runner.group: not entered from any module above it",
        "specselect._runner.group imports specselect._runner.scenario, above it",
    ]
    nine = [*_listed((ROOT / "DEVELOPERS.md").read_text(encoding="utf-8")), "specselect.records.telemetry"]
    assert problems(nine, graph)[0] == "9 modules, more than 8"
