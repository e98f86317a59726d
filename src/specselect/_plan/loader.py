"""Reading plans: a TOML file or a built-in plan -> a validated `LoadedPlan`, or a `PlanError` listing problems."""

from __future__ import annotations

import copy
import difflib
import re
import tomllib
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from specselect._assets.hf_cache import split_revision
from specselect._plan.model import Plan
from specselect._plan.problems import PlanProblem, secret_problem, translate_errors
from specselect._plan.rules import find_secrets
from specselect._plan.workloads import workload_source
from specselect._workloads.sample import WorkloadSample
from specselect.errors import PlanError

__all__ = [
    "BUILTIN_PREFIX",
    "MAX_PLAN_BYTES",
    "LoadedPlan",
    "ServedModel",
    "builtin_plan_names",
    "builtin_plan_text",
    "load_plan",
    "parse_plan_text",
]

BUILTIN_PREFIX = "builtin:"
MAX_PLAN_BYTES = 1 << 20
_TOML_POSITION_RE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_PATH_LIKE_PREFIXES = ("/", "./", "../", "~")


class ServedModel(NamedTuple):
    """A model the plan serves: its reference (`resolve_model_ref` applied, an `@REVISION` pin split off) and the
    revision asked for (the pin, else `[target] revision` or a proposer's `options.revision`; None: the default)."""

    ref: str
    revision: str | None


class LoadedPlan(BaseModel):
    """A validated plan with where it came from; relative paths in it resolve against `base_dir`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan: Plan
    source: str
    """`builtin:NAME` or the plan file path as given."""
    plan_hash: str
    base_dir: Path
    text: str
    """The TOML text exactly as read."""

    def resolve_path(self, ref: str) -> Path:
        """A file path from the plan: `~` expanded, relative paths joined to `base_dir`."""
        path = Path(ref).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    def workload_sources(self) -> dict[str, str | WorkloadSample]:
        """Workload name -> `builtin:NAME` or an absolute file path, or a sample of one (`load_workload` takes both)."""
        out: dict[str, str | WorkloadSample] = {}
        for name, ref in self.plan.workloads.items():
            source = workload_source(ref)
            resolved = source if source.startswith(BUILTIN_PREFIX) else str(self.resolve_path(source))
            out[name] = ref.model_copy(update={"source": resolved}) if isinstance(ref, WorkloadSample) else resolved
        return out

    def resolve_model_ref(self, ref: str) -> str:
        """`builtin:` and `org/name` references unchanged; local directories made absolute.

        A reference is a local directory when it starts with `/`, `./`, `../` or `~`, or names an existing
        directory relative to the plan file.
        """
        if ref.startswith(BUILTIN_PREFIX):
            return ref
        if ref.startswith(_PATH_LIKE_PREFIXES) or self.resolve_path(ref).is_dir():
            return str(self.resolve_path(ref))
        return ref

    def served_model(self, ref: str, revision: str | None = None) -> ServedModel:
        """`ref` as served: resolved, with its `@REVISION` pin (which wins over `revision`) split off."""
        repo, pinned = split_revision(self.resolve_model_ref(ref))
        return ServedModel(repo, pinned or revision)

    def served_models(self) -> tuple[ServedModel, ...]:
        """Every model the plan serves, once each: each track's target, then each enabled candidate's proposer."""
        found = [self.served_model(t.target.model, t.target.revision) for t in self.plan.tracks]
        for cand in self.plan.groups:
            if cand.enabled and cand.proposer is not None:
                revision = cand.options.get("revision")
                found.append(self.served_model(cand.proposer, revision if isinstance(revision, str) else None))
        return tuple(dict.fromkeys(found))


def _builtin_dir() -> Traversable:
    return files("specselect._plan").joinpath("builtin")


def builtin_plan_names() -> tuple[str, ...]:
    """Names of the built-in plans (use as `builtin:NAME`), sorted."""
    return tuple(
        sorted(entry.name[: -len(".toml")] for entry in _builtin_dir().iterdir() if entry.name.endswith(".toml"))
    )


def builtin_plan_text(name: str) -> str:
    """The TOML text of a built-in plan (`NAME` or `builtin:NAME`); PlanError naming the known ones otherwise."""
    bare = name.removeprefix(BUILTIN_PREFIX)
    known = builtin_plan_names()
    if bare not in known:
        close = difflib.get_close_matches(bare, known, n=1, cutoff=0.6)
        hint = f"; did you mean {BUILTIN_PREFIX}{close[0]}?" if close else ""
        raise PlanError(
            f"no built-in plan {bare[:60]!r}{hint}",
            location=f"{BUILTIN_PREFIX}{bare[:60]}",
            fix="use one of: " + ", ".join(BUILTIN_PREFIX + k for k in known) + " (see `specselect plan list`)",
        )
    return _builtin_dir().joinpath(f"{bare}.toml").read_text(encoding="utf-8")


def _read_plan_file(path: Path) -> str:
    where = str(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise PlanError("is a directory, not a plan file", location=where, fix="give the path of a .toml plan")
        if size > MAX_PLAN_BYTES:
            raise PlanError(
                f"plan file is {size} bytes; plans are at most {MAX_PLAN_BYTES} bytes",
                location=where,
                fix="check that this is the plan file; keep large data in workload files",
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise PlanError(
            "plan file not found",
            location=where,
            fix="check the path, or use a built-in plan such as builtin:cpu-smoke (see `specselect plan list`)",
        ) from None
    except OSError as exc:
        raise PlanError(
            f"cannot read plan file: {exc.strerror or exc}", location=where, fix="check permissions"
        ) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise PlanError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, column {column})",
            location=where,
            fix="save the plan as UTF-8",
        ) from None


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        position = _TOML_POSITION_RE.search(message)
        if position is None:
            raise PlanError(f"invalid TOML: {message}", location=source, fix="correct the TOML syntax") from None
        line, column = position.group(1), position.group(2)
        raise PlanError(
            f"invalid TOML: {message[: position.start()]}",
            location=f"{source}:{line}:{column}",
            fix=f"correct the TOML syntax at line {line}, column {column}",
        ) from None
    except RecursionError:
        raise PlanError("invalid TOML: nested too deeply", location=source, fix="flatten the nested arrays") from None


def _without(data: Any, loc: tuple[str | int, ...]) -> None:
    """Remove (dict) or blank (list) the value at `loc` so the secret reaches neither pydantic nor a message."""
    parent = data
    for part in loc[:-1]:
        parent = parent[part]
    if isinstance(parent, dict):
        del parent[loc[-1]]
    else:
        parent[loc[-1]] = "<redacted>"


def _missing_files(plan: Plan, loaded_base: Path) -> list[PlanProblem]:
    problems: list[PlanProblem] = []
    for name, ref in plan.workloads.items():
        source = workload_source(ref)
        if source.startswith(BUILTIN_PREFIX):
            continue
        path = Path(source).expanduser()
        path = path if path.is_absolute() else loaded_base / path
        if not path.is_file():
            problems.append(
                PlanProblem(
                    field=f"workloads.{name}" + (".source" if isinstance(ref, WorkloadSample) else ""),
                    message=f"workload file not found: {path}",
                    fix=f"check the path; relative paths are resolved against {loaded_base}",
                )
            )
    return problems


def parse_plan_text(text: str, *, source: str, base_dir: Path, check_files: bool = True) -> LoadedPlan:
    """Validate plan TOML text. `source` names it in messages; `check_files` checks workload files exist."""
    data = _parse_toml(text, source)
    secrets = find_secrets(data)
    problems = [secret_problem(loc) for loc in secrets]
    if secrets:
        data = copy.deepcopy(data)
        for loc in sorted(secrets, key=len, reverse=True):
            _without(data, loc)
    plan: Plan | None = None
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        problems.extend(translate_errors(exc.errors(), Plan))
    if plan is not None and check_files:
        problems.extend(_missing_files(plan, base_dir))
    if problems or plan is None:
        count = len(problems)
        raise PlanError(
            f"plan does not validate ({count} problem{'s' if count != 1 else ''})",
            location=source,
            problems=[problem.line(source) for problem in problems],
        )
    return LoadedPlan(plan=plan, source=source, plan_hash=plan.plan_hash, base_dir=base_dir, text=text)


def load_plan(path_or_builtin: str | Path, *, check_files: bool = True) -> LoadedPlan:
    """Load and validate a plan file or `builtin:NAME`; PlanError (one line per problem) otherwise."""
    ref = str(path_or_builtin)
    if ref.startswith(BUILTIN_PREFIX):
        name = ref.removeprefix(BUILTIN_PREFIX)
        text = builtin_plan_text(name)
        directory = _builtin_dir()
        base_dir = directory if isinstance(directory, Path) else Path.cwd()
        return parse_plan_text(text, source=BUILTIN_PREFIX + name, base_dir=base_dir, check_files=check_files)
    path = Path(ref).expanduser()
    text = _read_plan_file(path)
    return parse_plan_text(text, source=ref, base_dir=path.resolve().parent, check_files=check_files)
