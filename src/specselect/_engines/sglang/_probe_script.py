"""Report what an installed SGLang can do, WITHOUT importing sglang (or torch).

Runs INSIDE the engine environment (stand-alone: standard library only, no specselect imports) and
prints one JSON object. Everything is read from package metadata and the installed source files with
`ast`, because `import sglang.srt.server_args` pulls in torch and may initialise devices.

SGLang has declared its speculative algorithms in three ways over its history, all handled here:
- argparse era: `parser.add_argument("--speculative-algorithm", choices=[...])` in `srt/server_args.py`;
- registry era: no `choices`; the accepted names are the members of `SpeculativeAlgorithm` in
  `srt/speculative/spec_info.py` (an Enum, or `register_speculative_algorithm("EAGLE", aliases=...)`
  calls), with `NEXTN` rewritten to `EAGLE` by the server-argument code;
- annotated-dataclass era: flags are `ServerArgs` fields declared as `name: A[type, ...]` (the flag is
  the field name with dashes, or `Arg(cli_name=...)`, plus `Arg(aliases=[...])`; `Arg(no_cli=True)` has
  none), split into `srt/arg_groups/*.py` and, from 0.5.2x, into namespaces under `srt/arg_groups/fields/`
  (`spec.py` holds the speculative fields). The algorithms are the `SpeculativeAlgorithm` members plus the
  reserved aliases of `spec_registry.py` (`_RESERVED_ALIASES`, NEXTN), and any name a plugin registers with
  `SpeculativeAlgorithm.register`: plugins are entry points of the `sglang.srt.plugins` group, listed here
  without loading them (what they register is known only once they run).
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import json
import re
import sys
import time
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

__all__ = ["ArgSource", "main", "parse_arg_source", "plugin_entry_points", "probe", "registry_algorithms"]

_CONFIG_PARSER = "server_args_config_parser.py"
"""SGLang's YAML `--config` support (`ConfigArgumentMerger`); its presence means the flag is read."""
_DISTS = ("sglang", "sgl-kernel", "torch", "transformers", "flashinfer-python")
_ALGORITHM_FLAG = "--speculative-algorithm"
_ALGORITHM_FIELD = "speculative_algorithm"
_ANNOTATED = frozenset({"A", "Annotated"})
_REGISTER_CALLS = frozenset({"register", "register_speculative_algorithm"})
_NEXTN = "NEXTN"
_ENDPOINTS = ("/server_info", "/get_server_info", "/health", "/health_generate", "/metrics")
_LITERAL_WRAPPERS = frozenset({"list", "tuple", "sorted", "set", "frozenset"})
_FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")
"""A flag's shape: error messages that begin with a flag (`"--dcp-size > 1 ..."`) are not declarations."""
_RESERVED_ALIASES = "_RESERVED_ALIASES"
_PLUGIN_GROUP = "sglang.srt.plugins"
_BOOLEAN_OPTIONAL = "BooleanOptionalAction"
_PLUGIN_REGISTER = "def register("


def _strings(node: ast.expr, constants: dict[str, ast.expr], depth: int = 0) -> list[str] | None:
    """The strings of a list/tuple/set literal (None members skipped), following module constants."""
    if depth > 4:
        return None
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        out: list[str] = []
        for element in node.elts:
            if not isinstance(element, ast.Constant):
                return None
            if isinstance(element.value, str):
                out.append(element.value)
            elif element.value is not None:
                return None
        return out
    if isinstance(node, ast.Name) and node.id in constants:
        return _strings(constants[node.id], constants, depth + 1)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _LITERAL_WRAPPERS
        and len(node.args) == 1
    ):
        return _strings(node.args[0], constants, depth + 1)
    return None


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    constants: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            constants[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            constants[node.target.id] = node.value
    return constants


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in node.keywords if kw.arg == name), None)


def _is_annotated(annotation: ast.expr) -> bool:
    return (
        isinstance(annotation, ast.Subscript)
        and isinstance(annotation.value, ast.Name | ast.Attribute)
        and (annotation.value.id if isinstance(annotation.value, ast.Name) else annotation.value.attr) in _ANNOTATED
    )


class ArgSource(NamedTuple):
    """What one server-argument source file declares."""

    flags: list[str]
    """Every `--flag` declared (argparse names, annotated dataclass fields, aliases)."""
    declared: bool
    """Whether `--speculative-algorithm` is declared here."""
    choices: list[str] | None
    """Its literal choices; None when it has none or they are computed at run time."""
    nextn_alias: bool
    """Whether the string "NEXTN" appears (the code rewrites that alias to EAGLE)."""


class _Declaration(NamedTuple):
    """What one call or class of a server-argument file declares."""

    flags: list[str]
    algorithm: bool
    """Whether it declares `--speculative-algorithm`."""
    choices: ast.expr | None
    """The last `choices=` given with that declaration (None without one)."""


def _call_declaration(node: ast.Call, constants: dict[str, ast.expr]) -> _Declaration:
    """An `add_argument("--flag", ..., aliases=..., choices=...)`-style call."""
    names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    flags = [n for n in names if _FLAG.fullmatch(n)]
    algorithm = _ALGORITHM_FLAG in flags
    aliases = _keyword(node, "aliases")
    if aliases is not None:
        flags += [s for s in (_strings(aliases, constants) or []) if _FLAG.fullmatch(s)]
    return _Declaration(flags, algorithm, _keyword(node, "choices") if algorithm else None)


def _annotation_choices(annotation: ast.expr) -> ast.expr | None:
    """The `choices=` of the last call inside a field's annotation that has one (`A[str, Field(choices=...)]`)."""
    found = None
    for sub in ast.walk(annotation):
        choices = _keyword(sub, "choices") if isinstance(sub, ast.Call) else None
        if choices is not None:
            found = choices
    return found


def _arg_call(annotation: ast.expr) -> ast.Call | None:
    """The `Arg(...)` call inside a field's annotation (`A[str, Arg(help=..., aliases=[...])]`), if any."""
    return next((n for n in ast.walk(annotation) if isinstance(n, ast.Call) and _call_name(n) == "Arg"), None)


def _field_flags(name: str, annotation: ast.expr) -> list[str]:
    """The flags of one annotated field: none with `no_cli=True`, else its CLI name, aliases and `--no-` form."""
    arg = _arg_call(annotation)
    if arg is None:
        return ["--" + name.replace("_", "-")]
    no_cli = _keyword(arg, "no_cli")
    if isinstance(no_cli, ast.Constant) and no_cli.value is True:
        return []
    cli_name = _keyword(arg, "cli_name")
    main = cli_name.value if isinstance(cli_name, ast.Constant) and isinstance(cli_name.value, str) else None
    flags = [main or "--" + name.replace("_", "-")]
    aliases = _keyword(arg, "aliases")
    if aliases is not None:
        flags += _strings(aliases, {}) or []
    action = _keyword(arg, "action")
    if action is not None and ast.unparse(action).endswith(_BOOLEAN_OPTIONAL):
        flags.append("--no-" + flags[0].removeprefix("--"))
    return [f for f in flags if _FLAG.fullmatch(f)]


def _class_declaration(node: ast.ClassDef) -> _Declaration:
    """The public annotated fields of a `ServerArgs`-style dataclass (or msgspec namespace), as flags."""
    flags: list[str] = []
    algorithm = False
    choices: ast.expr | None = None
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        if item.target.id.startswith("_") or not _is_annotated(item.annotation):
            continue
        flags += _field_flags(item.target.id, item.annotation)
        if item.target.id == _ALGORITHM_FIELD:
            algorithm = True
            found = _annotation_choices(item.annotation)
            if found is not None:
                choices = found
    return _Declaration(flags, algorithm, choices)


def parse_arg_source(source: str) -> ArgSource:
    """Flags, and the `--speculative-algorithm` declaration, of one server-argument source file."""
    tree = ast.parse(source)
    constants = _module_constants(tree)
    flags: set[str] = set()
    declared = False
    choices: list[str] | None = None
    nextn = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == _NEXTN:
            nextn = True
            continue
        if isinstance(node, ast.Call):
            found = _call_declaration(node, constants)
        elif isinstance(node, ast.ClassDef):
            found = _class_declaration(node)
        else:
            continue
        flags.update(found.flags)
        declared = declared or found.algorithm
        # The last declaration with choices wins, even when its choices are computed (then None).
        if found.choices is not None:
            choices = _strings(found.choices, constants)
    return ArgSource(flags=sorted(flags), declared=declared, choices=choices, nextn_alias=nextn)


def registry_algorithms(source: str) -> list[str]:
    """Algorithm names declared in `spec_info.py`: enum members and `register...("NAME", aliases=...)` calls."""
    tree = ast.parse(source)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "SpeculativeAlgorithm":
            for item in node.body:
                if isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
                    target = item.targets[0].id
                    value = item.value
                    enum_like = (isinstance(value, ast.Call) and _call_name(value) == "auto") or (
                        isinstance(value, ast.Constant) and isinstance(value.value, int)
                    )
                    if target.isupper() and enum_like:
                        names.append(target)
        elif isinstance(node, ast.Call) and _call_name(node) in _REGISTER_CALLS and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.isupper():
                names.append(first.value)
                aliases = _keyword(node, "aliases")
                if aliases is not None:
                    names.extend(s.upper() for s in (_strings(aliases, {}) or []))
    return [n for n in dict.fromkeys(names) if n != "NONE"]


def reserved_aliases(source: str) -> list[str]:
    """The CLI spellings `spec_registry.py` reserves for builtins (`_RESERVED_ALIASES = frozenset({"NEXTN"})`)."""
    tree = ast.parse(source)
    constants = _module_constants(tree)
    found = constants.get(_RESERVED_ALIASES)
    if isinstance(found, ast.Call) and _call_name(found) in _LITERAL_WRAPPERS and found.args:
        inner = found.args[0]
        if isinstance(inner, ast.Set | ast.List | ast.Tuple):
            return [s.upper() for s in (_strings(inner, constants) or [])]
    return [s.upper() for s in (_strings(found, constants) or [])] if found is not None else []


def plugin_entry_points(paths: Sequence[str] | None) -> list[dict[str, str | None]]:
    """SGLang's general plugins installed beside it (entry points of `sglang.srt.plugins`), never loaded here:
    a plugin may register speculative algorithms when SGLang loads it at start-up."""
    dists = metadata.distributions() if paths is None else metadata.distributions(path=list(paths))
    found: dict[str, dict[str, str | None]] = {}
    for dist in dists:
        for entry in dist.entry_points:
            if entry.group == _PLUGIN_GROUP:
                found[entry.name] = {"name": entry.name, "value": entry.value, "dist": dist.metadata["Name"]}
    return [found[name] for name in sorted(found)]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _version(dist: str, paths: Sequence[str] | None) -> str | None:
    if paths is None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None
    wanted = dist.lower().replace("_", "-")
    for found in metadata.distributions(path=list(paths)):
        name = (found.metadata["Name"] or "").lower().replace("_", "-")
        if name == wanted:
            return found.version
    return None


def _find_package(paths: Sequence[str] | None) -> Path | None:
    # A top-level find_spec locates the package without executing sglang/__init__.py.
    if paths is None:
        spec = importlib.util.find_spec("sglang")
    else:
        spec = importlib.machinery.PathFinder.find_spec("sglang", list(paths))
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _registry(speculative: Path, nextn: bool) -> list[str]:
    """The registry's algorithms: `spec_info.py`'s, then the reserved aliases (NEXTN, also when only a server
    argument hook spells it)."""
    algorithms = registry_algorithms(_read(speculative / "spec_info.py"))
    registry = _read(speculative / "spec_registry.py")
    aliases = reserved_aliases(registry) if registry else []
    if nextn and _NEXTN not in aliases:
        aliases.append(_NEXTN)
    return [*algorithms, *(a for a in aliases if a not in algorithms)]


def _endpoints(http_server: str) -> list[str]:
    if not http_server:
        return []
    try:
        tree = ast.parse(http_server)
    except SyntaxError:
        return []
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return [e for e in _ENDPOINTS if e in strings]


def _arg_sources(srt: Path) -> Iterable[Path]:
    yield srt / "server_args.py"
    groups = srt / "arg_groups"
    if groups.is_dir():
        yield from sorted(groups.glob("*.py"))
        yield from sorted(groups.glob("fields/*.py"))


def probe(paths: Sequence[str] | None = None) -> dict[str, object]:
    """Collect the facts of the SGLang installed for this interpreter (or on `paths`, for tests)."""
    started = time.monotonic()
    out: dict[str, object] = {
        "python_version": ".".join(str(part) for part in sys.version_info[:3]),
        "prefix": sys.prefix,
        "versions": {dist: _version(dist, paths) for dist in _DISTS},
    }
    package = _find_package(paths)
    if package is None:
        out["error"] = "sglang is not installed in this environment"
        return out
    out["sglang_dir"] = str(package)
    srt = package / "srt"
    server_args = srt / "server_args.py"
    if not _read(server_args):
        out["error"] = f"cannot read {server_args}"
        return out
    flags: set[str] = set()
    declared = False
    choices: list[str] | None = None
    nextn = False
    for path in _arg_sources(srt):
        source = _read(path)
        if not source:
            continue
        try:
            parsed = parse_arg_source(source)
        except SyntaxError as exc:
            out["error"] = f"cannot parse {path}: {exc}"
            return out
        flags.update(parsed.flags)
        declared = declared or parsed.declared
        choices = choices if choices is not None else parsed.choices
        nextn = nextn or parsed.nextn_alias
    if choices is not None:
        algorithms, source_kind = [c.upper() for c in choices], "argparse_choices"
    elif declared:
        try:
            algorithms = _registry(srt / "speculative", nextn)
        except SyntaxError as exc:
            out["error"] = f"cannot parse {srt / 'speculative'}: {exc}"
            return out
        source_kind = "registry"
    else:
        algorithms, source_kind = [], "none"
    out["algorithms"] = list(dict.fromkeys(algorithms))
    out["algorithm_source"] = source_kind
    # `SpeculativeAlgorithm.register` (0.5.2x): installed plugins may add algorithms when SGLang starts.
    out["plugin_registration"] = _PLUGIN_REGISTER in _read(srt / "speculative" / "spec_info.py")
    out["plugins"] = plugin_entry_points(paths)
    if (srt / _CONFIG_PARSER).exists():
        flags.add("--config")  # read by prepare_server_args, outside the argparse declarations
    out["flags"] = sorted(flags)
    out["server_endpoints"] = _endpoints(_read(srt / "entrypoints" / "http_server.py"))
    out["seconds"] = round(time.monotonic() - started, 4)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print the probe as one JSON line (extra arguments: directories to search instead of sys.path)."""
    args = list(sys.argv[1:] if argv is None else argv)
    print(json.dumps(probe(args or None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
