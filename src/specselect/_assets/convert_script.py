"""Convert a GGUF checkpoint into a Hugging Face directory vLLM can load.

Runs INSIDE the engine environment (it imports torch and transformers), as
`<engine python> convert_script.py --gguf FILE --out DIR --dtype bfloat16`; specselect never imports it.
Prints one JSON line with versions and timings on success; exits non-zero with the error otherwise.
Stand-alone on purpose: it must not import specselect.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import resource
import sys
import time

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point: parse arguments, convert, report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gguf", required=True, help="path of the .gguf file")
    parser.add_argument("--out", required=True, help="empty output directory")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument(
        "--drop-config-key", action="append", default=[], help="a key to remove from the saved config.json"
    )
    args = parser.parse_args(argv)

    # Never reach for a hub: the GGUF file is all the input there is.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    started = time.monotonic()

    # Imported by name: these exist only in the engine environment, never in specselect's own.
    torch = importlib.import_module("torch")
    transformers = importlib.import_module("transformers")
    auto_model, auto_tokenizer = transformers.AutoModelForCausalLM, transformers.AutoTokenizer

    directory, filename = os.path.split(os.path.abspath(args.gguf))
    tokenizer = auto_tokenizer.from_pretrained(directory, gguf_file=filename)
    # dequantize=True makes the loaded model a plain (serializable) one; without it save_pretrained refuses.
    model = auto_model.from_pretrained(
        directory,
        gguf_file=filename,
        quantization_config=transformers.GgufConfig(gguf_file=filename, dequantize=True),
        dtype=getattr(torch, args.dtype),
    )
    # The saved config must not point vLLM back at the GGUF file or a quantization it cannot load.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.dtype = args.dtype
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    dropped = _drop_config_keys(os.path.join(args.out, "config.json"), args.drop_config_key)
    report = {
        "ok": True,
        "seconds": round(time.monotonic() - started, 2),
        **{name: _version(name) for name in ("torch", "transformers", "gguf", "accelerate", "tokenizers")},
        "num_parameters": int(sum(p.numel() for p in model.parameters())),
        "dtype": args.dtype,
        # ru_maxrss is in KiB on Linux: the peak of this process, i.e. of the whole conversion.
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "dropped_config_keys": dropped,
    }
    print(json.dumps(report))
    return 0


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _drop_config_keys(path: str, keys: list[str]) -> list[str]:
    """Remove `keys` from a saved config.json (transformers' own layout kept); the keys that were there."""
    if not keys:
        return []
    with open(path, encoding="utf-8") as fh:
        config = json.load(fh)
    dropped = [key for key in keys if config.pop(key, None) is not None]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return dropped


if __name__ == "__main__":
    sys.exit(main())
