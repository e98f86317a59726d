"""builtin:cpu-draft: the real draft-model pair, opt-in (the default plan stays cpu-smoke)."""

from __future__ import annotations

from specselect._cli.run import DEFAULT_PLAN
from specselect._plan import builtin_plan_text, load_plan
from specselect._workloads.catalog import catalog_lines
from specselect._workloads.sample import WorkloadSample


def test_cpu_draft_content() -> None:
    plan = load_plan("builtin:cpu-draft").plan
    assert DEFAULT_PLAN == "builtin:cpu-smoke"
    assert plan.target.model == "builtin:qwen2.5-coder-1.5b"
    assert (plan.target.dtype, plan.engine.args, plan.sampling.temperature) == ("float32", ("--enforce-eager",), 0.0)
    assert plan.workloads == {
        "code": WorkloadSample(source="builtin:humaneval", items=8, seed=0),
        "chat": WorkloadSample(source="builtin:alpacaeval", items=8, seed=0),
    }
    assert (plan.run.concurrency, plan.run.rounds, plan.sampling.max_tokens) == ((1,), 2, 24)


def test_cpu_draft_groups() -> None:
    groups = load_plan("builtin:cpu-draft").plan.groups
    summary = [(g.name, g.family, g.num_speculative_tokens, g.proposer) for g in groups]
    assert summary == [
        ("g0_target_only", "target_only", None, None),
        ("g1_draft.k2", "draft_model", 2, "builtin:qwen2.5-coder-0.5b"),
        ("g1_draft.k3", "draft_model", 3, "builtin:qwen2.5-coder-0.5b"),
        ("g1_draft.k5", "draft_model", 5, "builtin:qwen2.5-coder-0.5b"),
        ("g2_ngram", "ngram", 5, None),
        ("g3_smollm2_draft", "draft_model", 3, "builtin:smollm2-135m-draft4l"),
    ]


def test_cpu_draft_names_its_prompt_sets_provenance() -> None:
    text = builtin_plan_text("cpu-draft")
    lines = catalog_lines()
    for name in ("humaneval", "alpacaeval"):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"builtin:{name} "))
        assert f"#   {lines[at]}\n#   {lines[at + 1]}\n" in text
