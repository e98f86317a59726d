"""What `validate` says a plan will cost: the pure estimate against hand counts, and the lines it prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specselect._plan import builtin_plan_text, load_plan
from specselect._runner.cost import (
    TYPICAL,
    LocalModel,
    cost_lines,
    disk_line,
    estimate_cost,
    params_from_name,
    plan_cost_lines,
    plan_device,
    plan_facts,
)

EAGLE3 = "builtin:gpu-llama8b-eagle3"


def test_sizes_are_read_from_the_size_tag_of_a_model_name() -> None:
    assert params_from_name("meta-llama/Llama-3.1-8B-Instruct") == 8_000_000_000
    assert params_from_name("Qwen/Qwen2.5-Coder-0.5B-Instruct") == 500_000_000  # not the "2.5" of the family
    assert params_from_name("builtin:smollm2-135m") == 135_000_000
    assert params_from_name("Qwen/Qwen3-Next-80B-A3B-Instruct") == 80_000_000_000  # total, not active
    assert params_from_name("org/no-size-here") is None


def test_gpu_recipes_are_costed_on_gpus_and_cpu_plans_on_this_machine() -> None:
    assert plan_device(load_plan(EAGLE3).plan) == "gpu"
    assert plan_device(load_plan("builtin:cpu-smoke").plan) == "cpu"


def test_the_estimate_counts_each_group_once_per_round_and_decode_as_weight_bound_waves() -> None:
    plan = load_plan(EAGLE3).plan
    items = {"chat": 128, "hard": 32, "code": 32}
    estimate = estimate_cost(plan, items, {plan.target.model: 8_000_000_000}, "gpu")
    # baseline + eagle3 k2, k4 + ngram + suffix = 5 groups; rounds = 2, looks = [2, 3].
    assert (estimate.starts_first_look, estimate.starts_last_look) == (10, 15)
    gpu = TYPICAL["gpu"]
    step = 16.0 / gpu.bandwidth_gb_s  # 8e9 bf16 parameters read once per step
    launch = estimate.launches["g0_target_only"]
    assert launch.step_s == pytest.approx(step)
    assert launch.start_s == pytest.approx(gpu.start_fixed_s + 16.0 / gpu.load_gb_s)
    # Per workload and level: ceil((items + 4 warm-up waves of `level` requests) / level) waves of 512 steps.
    waves = sum(-(-(n + 4 * level) // level) for n in items.values() for level in (1, 4, 16, 64))
    assert launch.measuring_s == pytest.approx(waves * 512 * step)
    assert estimate.hours_first_look == pytest.approx(10 * launch.total_s / 3600)


def test_looks_that_stop_early_make_the_upper_bound_differ_from_the_first_look_and_a_naive_count() -> None:
    plan = load_plan(EAGLE3).plan
    estimate = estimate_cost(plan, {"chat": 128, "hard": 32, "code": 32}, {plan.target.model: 8_000_000_000}, "gpu")
    assert estimate.hours_first_look is not None and estimate.hours_last_look is not None
    assert estimate.hours_last_look == pytest.approx(estimate.hours_first_look * 3 / 2)
    # A naive count (groups x rounds x requests x tokens, one request at a time) ignores concurrency's waves:
    # it says several times more than the estimate at the first look.
    naive_s = 10 * sum(n + 4 for n in (128, 32, 32)) * 4 * 512 * estimate.launches["g0_target_only"].step_s
    assert naive_s / 3600 > 2 * estimate.hours_first_look


def test_tensor_parallel_servers_cost_that_many_gpu_hours() -> None:
    one_gpu = load_plan(EAGLE3).plan
    four_gpus = one_gpu.model_copy(update={"engine": one_gpu.engine.model_copy(update={"tensor_parallel_size": 4})})
    size = {one_gpu.target.model: 8_000_000_000}
    one, four = (estimate_cost(p, {"chat": 8}, size, "gpu") for p in (one_gpu, four_gpus))
    assert (one.devices_per_server, four.devices_per_server) == (1, 4)
    assert four.hours_first_look == pytest.approx(4 * (one.hours_first_look or 0))


def test_an_unknown_target_size_says_so_instead_of_guessing() -> None:
    plan = load_plan(EAGLE3).plan
    estimate = estimate_cost(plan, {"chat": 8}, {plan.target.model: None}, "gpu")
    assert estimate.hours_first_look is None
    assert cost_lines(estimate, TYPICAL["gpu"])[1].startswith("cost: GPU-hours unknown: a target's size is unknown")


def test_cost_lines_say_the_figures_are_estimates_and_where_they_come_from() -> None:
    plan = load_plan(EAGLE3).plan
    lines = cost_lines(estimate_cost(plan, {"chat": 8}, {plan.target.model: 8_000_000_000}, "gpu"), TYPICAL["gpu"])
    assert lines[0].startswith("cost: 10 server starts by the first look, up to 15 if every candidate runs to")
    assert " GPU-hours estimated " in lines[1] and "with 1 GPU per server" in lines[1]
    assert lines[2].startswith("cost: estimates from typical figures, not measurements: vLLM on one H100-class GPU")


def test_the_disk_line_sums_what_local_configs_know_and_names_what_is_unknown_until_fetched() -> None:
    llama = LocalModel("meta-llama/Llama-3.1-8B-Instruct", complete=False, params=8_030_261_248, bytes_per_param=2)
    head = LocalModel("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", complete=False)
    here = LocalModel("Qwen/Qwen2.5-Coder-0.5B-Instruct", complete=True, params=494_032_768, bytes_per_param=2)
    assert disk_line([here]) is None
    assert disk_line([llama, head, here]) == (
        "disk: 2 models to fetch, ~16.1 GB + the unknown: meta-llama/Llama-3.1-8B-Instruct ~16.1 GB (from its "
        "local config), yuhuili/EAGLE3-LLaMA3.1-Instruct-8B unknown until fetched"
    )
    assert (
        disk_line([head]) == "disk: 1 model to fetch, sizes unknown until fetched: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    )


MIMO_CONFIG = {
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 11008,
    "vocab_size": 151680,
    "torch_dtype": "bfloat16",
}
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")


def hand_copied(hub: Path, repo: str, *, ref: str = "main", shards: tuple[str, ...] = SHARDS[:1]) -> Path:
    """A snapshot copied into the hub cache by hand (no fetch record): config.json, an index naming both shards,
    and the shards given."""
    snapshot = hub / f"models--{repo.replace('/', '--')}" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / ref).write_text("a" * 40)
    (snapshot / "config.json").write_text(json.dumps(MIMO_CONFIG))
    index = {"weight_map": {"layer.0": SHARDS[0], "layer.1": SHARDS[1]}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    for shard in shards:
        (snapshot / shard).write_bytes(b"weights")
    return snapshot


def test_plan_facts_read_a_snapshot_missing_a_shard_as_to_fetch_with_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = hand_copied(tmp_path / "hub", "XiaomiMiMo/MiMo-7B-RL")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    facts = plan_facts(load_plan("builtin:gpu-mtp"))
    (mimo,) = facts.models
    assert (mimo.complete, mimo.bytes_per_param) == (False, 2)  # a shard its index names is missing: still to fetch
    assert mimo.missing == (f"{SHARDS[1]} (missing)",)
    assert mimo.params is not None and 7.0e9 < mimo.params < 8.0e9
    assert facts.params["XiaomiMiMo/MiMo-7B-RL"] == mimo.params  # the local config beats the name's "7B"
    assert facts.items == {"math": 64, "code": 64, "hard": 32}
    (snapshot / SHARDS[1]).write_bytes(b"weights")
    assert plan_facts(load_plan("builtin:gpu-mtp")).models[0].complete


def test_validates_disk_line_names_a_snapshot_missing_a_shard_as_still_to_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = hand_copied(tmp_path / "hub", "XiaomiMiMo/MiMo-7B-RL")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    disk = plan_cost_lines(load_plan("builtin:gpu-mtp"))[-1]
    assert disk.startswith("disk: 1 model to fetch, ~15.")
    assert f"XiaomiMiMo/MiMo-7B-RL (partial here: {SHARDS[1]} (missing)) ~15." in disk
    (snapshot / SHARDS[1]).write_bytes(b"weights")
    assert not plan_cost_lines(load_plan("builtin:gpu-mtp"))[-1].startswith("disk:")  # complete: nothing to fetch


def test_a_proposer_pinned_at_a_revision_is_costed_at_that_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    draft = "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    text = builtin_plan_text("gpu-coder-draft").replace(f'proposer = "{draft}"', f'proposer = "{draft}@dev"', 1)
    (tmp_path / "plan.toml").write_text(text)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    hand_copied(tmp_path / "hub", draft, ref="main", shards=SHARDS)  # complete, but at main: not what is served
    loaded = load_plan(tmp_path / "plan.toml")
    (proposer,) = (m for m in plan_facts(loaded).models if m.ref == draft)
    assert (proposer.revision, proposer.complete) == ("dev", False)
    assert f"{draft}@dev" in plan_cost_lines(loaded)[-1]
    (tmp_path / "hub" / f"models--{draft.replace('/', '--')}" / "refs" / "dev").write_text("a" * 40)
    (proposer,) = (m for m in plan_facts(load_plan(tmp_path / "plan.toml")).models if m.ref == draft)
    assert (proposer.revision, proposer.complete) == ("dev", True)


def test_the_distribution_tests_samples_are_costed_once_per_group_at_the_concurrency_they_are_sent_at() -> None:
    plan = load_plan("builtin:cpu-sampled").plan
    estimate = estimate_cost(plan, {"general": 8, "repetition": 8}, {plan.target.model: 135_000_000}, "cpu")
    launch = estimate.launches["g0_target_only"]
    # 16 prompts x 16 samples at temperature 0.7, sent 8 at a time: 32 waves of 32 steps, in the first launch only.
    assert launch.first_only_s == pytest.approx(32 * 32 * launch.step_s)
    groups, rounds = 3, 2  # the baseline, its A/A control and g1_ngram
    expected_s = groups * launch.first_only_s + groups * rounds * launch.total_s
    assert estimate.hours_first_look == pytest.approx(expected_s / 3600)
