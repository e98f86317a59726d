"""Fake installed SGLang package layouts for the probe and engine tests (never imported as sglang).

`install(site, style)` writes `site/sglang/...` and `site/sglang-<version>.dist-info/METADATA` in the
structure real SGLang releases have used to declare their speculative algorithms (learned from the
project's sources, written here in miniature):

- "v0.4-argparse": `add_argument("--speculative-algorithm", choices=["EAGLE", "EAGLE3", "NEXTN"])`,
  no pipeline parallelism flag, only `/get_server_info`;
- "v0.5-argparse": choices through a module constant, STANDALONE and NGRAM with n-gram window flags;
- "registry": no choices; `register_speculative_algorithm("EAGLE", aliases=("NEXTN",))` calls in
  `spec_info.py`, annotated dataclass fields (`name: A[type, help]`) as flags;
- "annotated-split": an Enum `SpeculativeAlgorithm` with DFLASH and FROZEN_KV_MTP, flags split into
  `srt/arg_groups/*.py`, NEXTN rewritten by an argument hook, `/server_info` and `/get_server_info`.

`sglang/__init__.py` raises when SGLANG_FAKE_FORBID_IMPORT is set, so a probe that imported sglang fails.
`sglang/launch_server.py` is the stand-in server `sglang_fake_launch_server.py` (with its `fake_http_server.py`).
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

STYLES = ("v0.4-argparse", "v0.5-argparse", "registry", "annotated-split")
VERSIONS = {"v0.4-argparse": "0.4.3", "v0.5-argparse": "0.5.2", "registry": "0.5.4", "annotated-split": "0.5.9"}

_INIT = """
import os
if os.environ.get("SGLANG_FAKE_FORBID_IMPORT"):
    raise RuntimeError("the probe must not import sglang")
"""

_ARGPARSE_COMMON = """
        parser.add_argument("--model-path", "--model", type=str, required=True)
        parser.add_argument("--served-model-name", type=str)
        parser.add_argument("--host", type=str, default=ServerArgs.host)
        parser.add_argument("--port", type=int, default=ServerArgs.port)
        parser.add_argument("--dtype", type=str, default="auto")
        parser.add_argument("--context-length", type=int)
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=1)
        parser.add_argument("--data-parallel-size", "--dp-size", type=int, default=1)
        parser.add_argument("--api-key", type=str)
        parser.add_argument("--enable-metrics", action="store_true")
        parser.add_argument("--disable-radix-cache", action="store_true")
        parser.add_argument("--speculative-draft-model-path", type=str)
        parser.add_argument("--speculative-num-steps", type=int)
        parser.add_argument("--speculative-eagle-topk", type=int)
        parser.add_argument("--speculative-num-draft-tokens", type=int)
        parser.add_argument("--speculative-token-map", type=str)
"""

_V04 = (
    """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    host: str = "127.0.0.1"
    port: int = 30000
    speculative_algorithm: str = None

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
"""
    + _ARGPARSE_COMMON
    + """
        parser.add_argument(
            "--speculative-algorithm",
            type=str,
            choices=["EAGLE", "EAGLE3", "NEXTN"],
            help="Speculative algorithm.",
        )
"""
)

_V05 = (
    """
import argparse
import dataclasses

SPECULATIVE_ALGORITHMS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    host: str = "127.0.0.1"
    port: int = 30000

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
"""
    + _ARGPARSE_COMMON
    + """
        parser.add_argument("--pipeline-parallel-size", "--pp-size", type=int, default=1)
        parser.add_argument("--speculative-algorithm", type=str, choices=SPECULATIVE_ALGORITHMS)
        parser.add_argument("--speculative-ngram-min-match-window-size", type=int, default=1)
        parser.add_argument("--speculative-ngram-max-match-window-size", type=int, default=12)
        parser.add_argument("--speculative-ngram-branch-length", type=int, default=18)
"""
)

_ANNOTATED_FIELDS = """
    model_path: A[str, Arg(help="The path of the model weights.", aliases=["--model"])]
    served_model_name: A[Optional[str], "Override the model name."] = None
    host: A[str, "The host of the HTTP server."] = "127.0.0.1"
    port: A[int, "The port of the HTTP server."] = 30000
    dtype: A[str, "Data type."] = "auto"
    context_length: A[Optional[int], "The model's maximum context length."] = None
    tp_size: A[int, Arg(help="The tensor parallelism size.", aliases=["--tensor-parallel-size"])] = 1
    pp_size: A[int, Arg(help="The pipeline parallelism size.", aliases=["--pipeline-parallel-size"])] = 1
    dp_size: A[int, Arg(help="The data parallelism size.", aliases=["--data-parallel-size"])] = 1
    api_key: A[Optional[str], "Set API key of the server."] = None
    enable_metrics: A[bool, "Enable log prometheus metrics."] = False
    disable_radix_cache: A[bool, "Disable RadixAttention for prefix caching."] = False
    _internal_cache: dict = None
"""

_SPEC_FIELDS = """
    speculative_algorithm: A[
        Optional[str],
        "Speculative algorithm. Builtins: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM. Or any registered name.",
    ] = None
    speculative_draft_model_path: A[
        Optional[str], Arg(help="Draft model.", aliases=["--speculative-draft-model"])
    ] = None
    speculative_num_steps: A[Optional[int], "Steps sampled from the draft model."] = None
    speculative_eagle_topk: A[Optional[int], "Top-k per drafting step."] = None
    speculative_num_draft_tokens: A[Optional[int], "Tokens verified per step."] = None
    speculative_ngram_max_trie_depth: A[int, "Trie depth of the n-gram proposer."] = 18
"""

_REGISTRY_ARGS = (
    """
import dataclasses
from typing import Optional

from sglang.srt.arg_groups.arg_utils import A, Arg


@dataclasses.dataclass
class ServerArgs:
"""
    + _ANNOTATED_FIELDS
    + _SPEC_FIELDS
    + """
    def _handle_speculative_decoding(self):
        if self.speculative_algorithm == "NEXTN":
            self.speculative_algorithm = "EAGLE"
"""
)

_REGISTRY_SPEC_INFO = """
from enum import IntEnum, auto


class SpeculativeAlgorithm(metaclass=_SpeculativeAlgorithmMeta):
    _registry_by_name = {}

    @classmethod
    def register(cls, name, *, aliases=None, value=None):
        return cls(name.upper(), value)


def register_speculative_algorithm(name, worker_cls, *, aliases=None, flags=None):
    return SpeculativeAlgorithm.register(name, aliases=aliases)


SpeculativeAlgorithm.register("NONE")
register_speculative_algorithm("EAGLE", aliases=("NEXTN",), worker_cls=_eagle, flags=("EAGLE",))
register_speculative_algorithm("EAGLE3", worker_cls=_eagle, flags=("EAGLE", "EAGLE3"))
register_speculative_algorithm("STANDALONE", worker_cls=_standalone, flags=("STANDALONE",))
register_speculative_algorithm("NGRAM", worker_cls=_ngram, flags=("NGRAM",))


class SpecInputType(IntEnum):
    EAGLE_DRAFT = auto()
    EAGLE_VERIFY = auto()
"""

_SPLIT_ARGS = (
    """
import dataclasses
from typing import Optional

from sglang.srt.arg_groups.arg_utils import A, Arg, NS


@dataclasses.dataclass
class ServerArgs:
"""
    + _ANNOTATED_FIELDS
)

_SPLIT_SPEC_GROUP = (
    """
import dataclasses
from typing import Optional

from sglang.srt.arg_groups.arg_utils import A, Arg


@dataclasses.dataclass
class Spec:
    _NS_PATH = "spec"
"""
    + _SPEC_FIELDS
    + """
    speculative_dflash_block_size: A[Optional[int], "DFlash block size."] = None
"""
)

_SPLIT_HOOK = """
def _resolve_speculative_algorithm_alias(server_args):
    if server_args.speculative_algorithm == "NEXTN":
        server_args.speculative_algorithm = "EAGLE"
"""

_ENUM_SPEC_INFO = """
from enum import Enum, auto


class SpeculativeAlgorithm(Enum):
    DFLASH = auto()
    EAGLE = auto()
    EAGLE3 = auto()
    FROZEN_KV_MTP = auto()
    STANDALONE = auto()
    NGRAM = auto()
    NONE = auto()

    @classmethod
    def from_string(cls, name):
        return cls.NONE if name is None else cls[name.upper()]

    def is_none(self):
        return self == SpeculativeAlgorithm.NONE
"""

_V04_SPEC_INFO = """
from enum import IntEnum, auto


class SpeculativeAlgorithm(IntEnum):
    NONE = auto()
    EAGLE = auto()
    EAGLE3 = auto()
    NEXTN = auto()
"""


def _http_server(paths: tuple[str, ...]) -> str:
    routes = "\n".join(f'@app.get("{p}")\nasync def route_{i}():\n    return {{}}\n\n' for i, p in enumerate(paths))
    return "app = FastAPI()\n\n" + routes


_LAYOUTS: dict[str, dict[str, str]] = {
    "v0.4-argparse": {
        "srt/server_args.py": _V04,
        "srt/speculative/spec_info.py": _V04_SPEC_INFO,
        "srt/entrypoints/http_server.py": _http_server(("/health", "/health_generate", "/get_server_info")),
    },
    "v0.5-argparse": {
        "srt/server_args_config_parser.py": "class ConfigArgumentMerger: ...\n",
        "srt/server_args.py": _V05,
        "srt/speculative/spec_info.py": _V04_SPEC_INFO,
        "srt/entrypoints/http_server.py": _http_server(
            ("/health", "/health_generate", "/get_server_info", "/server_info")
        ),
    },
    "registry": {
        "srt/server_args_config_parser.py": "class ConfigArgumentMerger: ...\n",
        "srt/server_args.py": _REGISTRY_ARGS,
        "srt/speculative/spec_info.py": _REGISTRY_SPEC_INFO,
        "srt/entrypoints/http_server.py": _http_server(("/health", "/server_info", "/get_server_info")),
    },
    "annotated-split": {
        "srt/server_args_config_parser.py": "class ConfigArgumentMerger: ...\n",
        "srt/server_args.py": _SPLIT_ARGS,
        "srt/arg_groups/__init__.py": "",
        "srt/arg_groups/spec.py": _SPLIT_SPEC_GROUP,
        "srt/arg_groups/speculative_hook.py": _SPLIT_HOOK,
        "srt/speculative/spec_info.py": _ENUM_SPEC_INFO,
        "srt/entrypoints/http_server.py": _http_server(("/health", "/health_generate", "/server_info")),
    },
}


def install(site: Path, style: str, *, version: str | None = None) -> Path:
    """Write a fake SGLang of `style` into the directory `site`; returns the package directory."""
    version = version or VERSIONS[style]
    package = site / "sglang"
    for rel, text in {"__init__.py": _INIT, **_LAYOUTS[style]}.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    shutil.copy(Path(__file__).with_name("sglang_fake_launch_server.py"), package / "launch_server.py")
    shutil.copy(Path(__file__).with_name("fake_http_server.py"), package / "fake_http_server.py")
    dist = site / f"sglang-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n", encoding="utf-8")
    return package
