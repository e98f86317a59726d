"""The public surface is a list: every module a user may import is named here, every other one is private."""

from __future__ import annotations

from pathlib import Path

import specselect

PACKAGE = Path(specselect.__file__).parent

PUBLIC_ROOTS = ("specselect", "specselect.api", "specselect.records", "specselect.errors", "specselect.contract")
"""What users import (DEVELOPERS.md, "Public and private"); `specselect.records` with its modules."""


def public_modules(package: Path, name: str = "specselect") -> set[str]:
    """The modules of a source tree none of whose path components starts with an underscore."""
    found: set[str] = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            found.add(".".join((name, *parts)))
    return found


def outside_the_list(modules: set[str]) -> list[str]:
    """Public modules that are neither a listed root nor inside `specselect.records`."""
    return sorted(m for m in modules if m not in PUBLIC_ROOTS and not m.startswith("specselect.records."))


def test_every_public_module_is_on_the_list() -> None:
    assert outside_the_list(public_modules(PACKAGE)) == []


def test_the_listed_roots_exist() -> None:
    assert set(PUBLIC_ROOTS) <= public_modules(PACKAGE)


def test_the_implementation_layers_are_private() -> None:
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert {"_core", "_evidence", "_runner", "_engines", "_measure"} <= layers
    assert layers - {"records"} == {name for name in layers if name.startswith("_")}


def test_a_public_module_left_in_a_layer_is_found(tmp_path: Path) -> None:
    (tmp_path / "_runner").mkdir()
    (tmp_path / "_runner" / "__init__.py").write_text("")
    (tmp_path / "_runner" / "run.py").write_text("")
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "__init__.py").write_text("")
    (tmp_path / "evidence" / "stats.py").write_text("")
    (tmp_path / "api.py").write_text("")
    assert outside_the_list(public_modules(tmp_path)) == ["specselect.evidence", "specselect.evidence.stats"]
