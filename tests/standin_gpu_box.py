#!/usr/bin/env python3
"""A stand-in GPU box for tests and the walk-through of docs/first-gpu-selection.md (ONLY stand-ins: no GPU here).

What it builds under a directory:
- `vllm/env`: the stand-in vLLM of tests/component/test_fault_harness.py installed as a GPU build (vLLM 0.32.0, no
  `+cpu`), whose `vllm/config/speculative.py` declares the methods and keys vLLM 0.32's does for the GPU recipes,
  with a `bin/vllm` console script (`vllm serve MODEL ...`) as a real install has;
- `models/ORG/NAME`: a directory per model the GPU recipes name, holding its real config.json fields, a generation
  config, a tokenizer config and a header-only `model.safetensors` (the tensor names and shapes of a Llama-style
  checkpoint of that config, no tensor data: a few KB, but the parameter count admission reads is the model's):
  what `tests/stubs/hub_stub.py --dir` serves; `hub_cache_snapshot` puts the same files minus the weights into a
  stand-in hub cache.
The GPU itself is the fake NVML of tests/fakenvml (`FAKE_NVML_GPUS`, `H100_JSON` below).

By hand: `python tests/standin_gpu_box.py DIR` builds it and prints the paths (docs/walkthrough/standin-gpu-box.sh
runs the page's commands on it).
"""

from __future__ import annotations

import json
import struct
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "component"))  # the stand-in vLLM (test support)
from test_fault_harness import make_fake_vllm

__all__ = [
    "CONFIGS",
    "GATED",
    "H100_JSON",
    "gpu_vllm",
    "header_only_safetensors",
    "hub_cache_snapshot",
    "model_dirs",
]

SPECULATIVE = textwrap.dedent(
    """
    from typing import Literal
    MTPModelTypes = Literal["mimo_mtp", "qwen3_next_mtp", "mtp"]
    EagleModelTypes = Literal["eagle", "eagle3", MTPModelTypes]
    SpeculativeMethod = Literal["ngram", "draft_model", "suffix", EagleModelTypes, "ngram_gpu"]
    class SpeculativeConfig:
        method: SpeculativeMethod | None = None
        model: str | None = None
        num_speculative_tokens: int = None
        prompt_lookup_max: int | None = None
        prompt_lookup_min: int | None = None
        use_heterogeneous_vocab: bool = False
        draft_tensor_parallel_size: int | None = None
        suffix_decoding_max_tree_depth: int = 24
    """
)

H100_JSON = '[{"uuid": "GPU-0h100", "name": "NVIDIA H100 80GB HBM3", "total_mb": 81559}]'
"""FAKE_NVML_GPUS for one idle H100 80 GB."""

GATED = ("meta-llama/Llama-3.1-8B-Instruct",)
"""The models a hub gates behind a licence (a token is needed to download them)."""

_LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
_QWEN_CODER = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "torch_dtype": "bfloat16"}
CONFIGS: dict[str, dict[str, Any]] = {
    "meta-llama/Llama-3.1-8B-Instruct": _LLAMA_8B,
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": {
        **_LLAMA_8B,
        "architectures": ["LlamaForCausalLMEagle3"],
        "num_hidden_layers": 1,
        "draft_vocab_size": 32000,
        "max_position_embeddings": 2048,
        "torch_dtype": "float16",
    },
    "XiaomiMiMo/MiMo-7B-RL": {
        "architectures": ["MiMoForCausalLM"],
        "model_type": "mimo",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 151680,
        "num_nextn_predict_layers": 1,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    },
    "Qwen/Qwen2.5-Coder-7B-Instruct": {
        **_QWEN_CODER,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
    },
    "Qwen/Qwen2.5-Coder-0.5B-Instruct": {
        **_QWEN_CODER,
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": True,
    },
}
"""The real config.json fields of every model the GPU recipes name (what admission and the estimates read)."""


def _model_files(config: dict[str, Any]) -> dict[str, str]:
    return {
        "config.json": json.dumps(config),
        "generation_config.json": json.dumps({"bos_token_id": 1, "eos_token_id": 2}),
        "tokenizer_config.json": json.dumps({"model_max_length": 32768}),
    }


def _tensor_shapes(config: dict[str, Any]) -> dict[str, list[int]]:
    """A Llama-style checkpoint's tensors for `config` (an EAGLE-3 head: one layer over 3 hidden states and its
    draft vocabulary's head, no embedding of its own)."""
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = hidden // config["num_attention_heads"] * config["num_key_value_heads"]
    eagle3 = "draft_vocab_size" in config
    qkv_in = 2 * hidden if eagle3 else hidden
    layer = {
        "self_attn.q_proj.weight": [hidden, qkv_in],
        "self_attn.k_proj.weight": [kv, qkv_in],
        "self_attn.v_proj.weight": [kv, qkv_in],
        "self_attn.o_proj.weight": [hidden, hidden],
        "mlp.gate_proj.weight": [inter, hidden],
        "mlp.up_proj.weight": [inter, hidden],
        "mlp.down_proj.weight": [hidden, inter],
        "input_layernorm.weight": [hidden],
        "post_attention_layernorm.weight": [hidden],
    }
    if eagle3:
        head = {f"midlayer.{name}": shape for name, shape in layer.items()}
        return {
            "fc.weight": [hidden, 3 * hidden],
            **head,
            "norm.weight": [hidden],
            "lm_head.weight": [config["draft_vocab_size"], hidden],
        }
    shapes = {"model.embed_tokens.weight": [vocab, hidden]}
    for i in range(config.get("num_hidden_layers", 0) + config.get("num_nextn_predict_layers", 0)):
        shapes.update({f"model.layers.{i}.{name}": shape for name, shape in layer.items()})
    shapes["model.norm.weight"] = [hidden]
    if not config.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = [vocab, hidden]
    return shapes


def header_only_safetensors(config: dict[str, Any]) -> bytes:
    """A safetensors header declaring `config`'s tensors in bf16, without their data (what admission reads)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt", "stand_in": "header only, no tensor data"}}
    offset = 0
    for name, shape in _tensor_shapes(config).items():
        size = 2
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw


def model_dirs(root: Path) -> dict[str, Path]:
    """`root/ORG/NAME` for every model of `CONFIGS` with its files (header-only weights); repo id -> directory."""
    out: dict[str, Path] = {}
    for repo, config in CONFIGS.items():
        directory = root / repo
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in _model_files(config).items():
            (directory / name).write_text(text)
        (directory / "model.safetensors").write_bytes(header_only_safetensors(config))
        out[repo] = directory
    return out


def hub_cache_snapshot(hub: Path, repo: str, commit: str) -> Path:
    """A snapshot of `repo` at `commit` in a Hugging Face cache at `hub` (refs/main + snapshots/<commit>/), as a
    copy by hand leaves it (no fetch record); its directory."""
    root = hub / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    for name, text in _model_files(CONFIGS[repo]).items():
        (snapshot / name).write_text(text)
    return snapshot


def gpu_vllm(root: Path) -> Path:
    """The stand-in vLLM as a GPU build at `root/env` (with `bin/vllm`); its python."""
    python = make_fake_vllm(root)
    site = next((python.parents[1] / "lib").glob("python3*/site-packages"))
    (site / "vllm-0.32.0+cpu.dist-info").rename(site / "vllm-0.32.0.dist-info")
    (site / "vllm-0.32.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    (site / "vllm" / "config" / "speculative.py").write_text(SPECULATIVE)
    # A console script as pip writes it (its python on the shebang line), running the stand-in's module.
    script = python.parent / "vllm"
    script.write_text(
        f"#!{python}\nimport runpy, sys\nsys.argv[0] = 'vllm'\n"
        "runpy.run_module('vllm.entrypoints.cli.main', run_name='__main__')\n"
    )
    script.chmod(0o755)
    return python


def main(argv: list[str]) -> int:
    """Build the box under argv[0]; print `python=...` and `model=REPO=DIR` lines."""
    if len(argv) != 1:
        print("usage: standin_gpu_box.py DIR", file=sys.stderr)
        return 2
    root = Path(argv[0]).resolve()
    print(f"python={gpu_vllm(root / 'vllm')}")
    for repo, directory in model_dirs(root / "models").items():
        print(f"model={repo}={directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
