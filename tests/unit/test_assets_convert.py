"""The conversion script's config clean-up and its report (the script itself runs in the engine python)."""

from __future__ import annotations

import json
from pathlib import Path

from specselect._assets import convert_script
from specselect._assets.gguf import ConverterReport


def test_the_gguf_name_is_dropped_from_the_saved_config(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"_model_name_or_path": "Qwen2.5 Coder 0.5B Instruct AWQ", "vocab_size": 151936}))
    assert convert_script._drop_config_keys(str(config), ["_model_name_or_path", "absent"]) == ["_model_name_or_path"]
    assert json.loads(config.read_text()) == {"vocab_size": 151936}
    assert convert_script._drop_config_keys(str(config), []) == []


def test_the_report_keeps_versions_and_costs() -> None:
    line = {"ok": True, "seconds": 65.7, "torch": "2.13.0+cpu", "gguf": "0.19.0", "peak_rss_mb": 8930.6}
    report = ConverterReport.model_validate(line)
    assert (report.gguf, report.peak_rss_mb, report.transformers) == ("0.19.0", 8930.6, None)
