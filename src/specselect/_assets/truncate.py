"""Make a shallow draft checkpoint from a decoder-only model: keep its first N decoder layers.

Embeddings, final norm, lm_head and tokenizer stay the same, so the draft shares the target's
vocabulary exactly. Pure Python (safetensors headers are rewritten, tensor bytes copied unchanged).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from specselect._assets.config_facts import load_config
from specselect._assets.identity import directory_files
from specselect._assets.safetensors_meta import read_header, write_subset
from specselect.errors import EngineSetupError

__all__ = ["keep_first_layers"]

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_INDEX_NAME = "model.safetensors.index.json"


def _keeps(num_layers: int) -> Any:
    def keep(name: str) -> bool:
        match = _LAYER.search(name)
        return match is None or int(match.group(1)) < num_layers

    return keep


def keep_first_layers(base_dir: Path, out_dir: Path, num_layers: int) -> None:
    """Write into the (new, empty) `out_dir` a copy of `base_dir` cut down to its first `num_layers` layers."""
    config = load_config(base_dir)
    total = config.get("num_hidden_layers")
    if not isinstance(total, int) or not 0 < num_layers <= total:
        raise EngineSetupError(
            f"cannot keep {num_layers} of {total} decoder layers",
            location=str(base_dir / "config.json"),
            fix="choose a layer count between 1 and num_hidden_layers",
        )
    out_dir.mkdir(parents=True, exist_ok=False)
    config["num_hidden_layers"] = num_layers
    for key in ("layer_types", "mlp_layer_types"):
        if isinstance(config.get(key), list):
            config[key] = config[key][:num_layers]
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    keep = _keeps(num_layers)
    kept_names: dict[str, str] = {}
    for rel in directory_files(base_dir):
        source = base_dir / rel
        dest = out_dir / rel
        if rel in ("config.json", _INDEX_NAME):
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".safetensors") and "/" not in rel:
            if write_subset(source, dest, keep) == 0:
                dest.unlink()  # a shard holding only dropped layers
                continue
            for tensor in read_header(dest)[0]:
                kept_names[tensor.name] = rel
        else:
            shutil.copyfile(source, dest)
    if (base_dir / _INDEX_NAME).is_file():
        index = json.loads((base_dir / _INDEX_NAME).read_text(encoding="utf-8"))
        index["weight_map"] = dict(sorted(kept_names.items()))
        (out_dir / _INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
