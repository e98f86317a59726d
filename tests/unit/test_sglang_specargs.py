"""SGLang speculative arguments per family/method, their checks, and the backend admission gate."""

from __future__ import annotations

from typing import Any

import pytest

from specselect._core.gates import AdmissionInput, GateCheck, admit
from specselect._core.status import RunStatus
from specselect._engines.base import Proposal
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.sglang.gate import backend_gate
from specselect._engines.sglang.specargs import (
    build_sglang_speculative_args,
    sglang_algorithm,
    sglang_flag,
    supported_methods,
)
from specselect._plan import Plan
from specselect.errors import ConfigError
from specselect.records.capabilities import DeviceInfo, SglangCapabilities

DRAFT = "/models/draft"
TARGET = "/models/target"


def caps(algorithms: tuple[str, ...], *, device_kind: str = "cuda", version: str = "0.5.4") -> SglangCapabilities:
    methods = supported_methods(algorithms)
    return SglangCapabilities(
        engine_version=version,
        python="/envs/sglang/bin/python",
        device_kind=device_kind,  # type: ignore[arg-type]
        devices=(DeviceInfo(name="GPU", memory_mb=81920, index=0),),
        memory_budget_mb=81920,
        memory_budget_basis="test",
        spec_methods=methods,
        method_hardware=dict.fromkeys(methods, "cuda"),
        versions={"sglang": version},
        speculative_algorithms=algorithms,
        algorithm_source="registry",
        speculative_flags=(),
        launch_flags={},
        server_endpoints=(),
        probed_in_s=0.01,
    )


@pytest.mark.parametrize(
    ("family", "method", "algorithm"),
    [
        ("ngram", None, "NGRAM"),
        ("draft_model", None, "STANDALONE"),
        ("standalone", "standalone", "STANDALONE"),
        ("mtp", None, "NEXTN"),
        ("nextn", "nextn", "NEXTN"),
        ("mtp", "deepseek_mtp", "NEXTN"),
        ("mtp", "frozen_kv_mtp", "FROZEN_KV_MTP"),
        ("eagle", None, "EAGLE"),
        ("eagle", "EAGLE3", "EAGLE3"),
        ("dflash", None, "DFLASH"),
        ("suffix", None, None),
        ("dspark", None, "DSPARK"),
        ("uno", None, "UNO"),
        ("custom", "my_spec", "MY_SPEC"),
        ("plugin", "My-Spec", None),
        ("custom", None, None),
        ("custom", "eagle3", None),
        ("medusa", None, None),
        ("mlp_speculator", None, None),
        ("eagle", "ngram", None),
        ("no-such-family", None, None),
    ],
)
def test_family_method_to_algorithm(family: str, method: str | None, algorithm: str | None) -> None:
    assert sglang_algorithm(family, method) == algorithm


def test_supported_methods_follow_the_probed_algorithms() -> None:
    assert supported_methods(("EAGLE", "EAGLE3", "NEXTN")) == ("mtp", "nextn", "eagle", "eagle3")
    assert "dflash" in supported_methods(("DFLASH", "NGRAM", "STANDALONE"))
    assert sglang_flag("speculative_eagle_topk") == "--speculative-eagle-topk"


@pytest.mark.parametrize(
    "case",
    [
        (
            "eagle",
            "eagle3",
            3,
            DRAFT,
            {},
            {
                "speculative_algorithm": "EAGLE3",
                "speculative_draft_model_path": DRAFT,
                "speculative_num_steps": 3,
                "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": 4,
            },
        ),
        (
            "eagle",
            None,
            5,
            DRAFT,
            {"eagle_topk": 4, "num_steps": 3, "token_map": "/maps/freq.pt"},
            {
                "speculative_algorithm": "EAGLE",
                "speculative_draft_model_path": DRAFT,
                "speculative_num_steps": 3,
                "speculative_eagle_topk": 4,
                "speculative_num_draft_tokens": 6,
                "speculative_token_map": "/maps/freq.pt",
            },
        ),
        (
            "draft_model",
            None,
            4,
            DRAFT,
            {"speculative_draft_attention_backend": "triton"},
            {
                "speculative_algorithm": "STANDALONE",
                "speculative_draft_model_path": DRAFT,
                "speculative_num_steps": 4,
                "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": 5,
                "speculative_draft_attention_backend": "triton",
            },
        ),
        (
            "mtp",
            None,
            1,
            None,
            {},
            {
                "speculative_algorithm": "NEXTN",
                "speculative_draft_model_path": TARGET,
                "speculative_num_steps": 1,
                "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": 2,
            },
        ),
        (
            "ngram",
            None,
            7,
            None,
            {"prompt_lookup_min": 2, "prompt_lookup_max": 6},
            {
                "speculative_algorithm": "NGRAM",
                "speculative_num_draft_tokens": 8,
                "speculative_ngram_min_match_window_size": 2,
                "speculative_ngram_max_match_window_size": 6,
            },
        ),
        (
            "dflash",
            None,
            15,
            DRAFT,
            {"dflash_block_size": 16},
            {
                "speculative_algorithm": "DFLASH",
                "speculative_draft_model_path": DRAFT,
                "speculative_num_draft_tokens": 16,
                "speculative_dflash_block_size": 16,
            },
        ),
        (
            "eagle",
            "eagle3",
            None,
            DRAFT,
            {},
            {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": DRAFT},
        ),
        (
            "dspark",
            None,
            7,
            DRAFT,
            {"dspark_block_size": 7},
            {
                "speculative_algorithm": "DSPARK",
                "speculative_draft_model_path": DRAFT,
                "speculative_num_draft_tokens": 8,
                "speculative_dspark_block_size": 7,
            },
        ),
        (
            "uno",
            None,
            3,
            "/models/uno-lora",
            {},
            {"speculative_algorithm": "UNO", "uno_lora_path": "/models/uno-lora", "speculative_num_draft_tokens": 4},
        ),
        (
            "custom",
            "my_spec",
            3,
            None,
            {},
            {"speculative_algorithm": "MY_SPEC", "speculative_num_draft_tokens": 4},
        ),
        (
            "eagle",
            "eagle3",
            3,
            DRAFT,
            {"adaptive": True},
            {
                "speculative_algorithm": "EAGLE3",
                "speculative_draft_model_path": DRAFT,
                "speculative_num_steps": 3,
                "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": 4,
                "speculative_adaptive": True,
            },
        ),
    ],
)
def test_exact_arguments_per_algorithm(case: tuple[Any, ...]) -> None:
    family, method, k, proposer, options, expected = case
    got = build_sglang_speculative_args(Proposal(family, method, k, proposer, options), target_path=TARGET)
    assert got == expected
    assert list(got) == list(expected)  # the recorded object keeps a fixed key order


def test_options_consumed_before_launch_or_matching_the_engine() -> None:
    got = build_sglang_speculative_args(
        Proposal("eagle", None, 2, DRAFT, {"revision": "abc123", "draft_tensor_parallel_size": 2}),
        tensor_parallel_size=2,
    )
    assert "speculative_draft_model_revision" not in got and "draft_tensor_parallel_size" not in str(got)


@pytest.mark.parametrize(
    "case",
    [
        ("suffix", None, 4, None, {}, "no algorithm for family 'suffix'"),
        ("eagle", None, 4, None, {}, "needs a proposer"),
        ("ngram", None, 4, DRAFT, {}, "needs no checkpoint"),
        ("mtp", None, 1, DRAFT, {}, "target's own layers"),
        ("eagle", None, 0, DRAFT, {}, "integer >= 1"),
        ("eagle", None, 3, DRAFT, {"num_steps": 2}, "num_steps must equal"),
        ("eagle", None, 3, DRAFT, {"eagle_topk": 4}, "needs its depth"),
        ("eagle", None, 3, DRAFT, {"algorithm": "EAGLE"}, "family/method"),
        ("eagle", None, 3, DRAFT, {"speculative_num_draft_tokens": 9}, "num_speculative_tokens"),
        ("eagle", None, 3, DRAFT, {"draft_model_path": "/x"}, "proposer"),
        ("eagle", None, 3, DRAFT, {"draft_model_revision": "main"}, "org/name@REVISION"),
        ("eagle", None, 3, DRAFT, {"ngram_capacity": 10}, "belongs to NGRAM"),
        ("ngram", None, 3, None, {"dflash_block_size": 4}, "belongs to DFLASH"),
        ("ngram", None, 3, None, {"eagle_topk": 2}, "unknown SGLang option"),
        ("eagle", None, 3, DRAFT, {"no_such_option": 1}, "unknown SGLang option"),
        ("eagle", None, 3, DRAFT, {"token_map": ["a"]}, "one value each"),
        ("ngram", None, 3, None, {"prompt_lookup_min": 5, "prompt_lookup_max": 2}, "larger than the maximum"),
        ("eagle", None, 3, DRAFT, {"draft_tensor_parallel_size": 1}, "target's tensor parallel size"),
        ("dflash", None, 15, DRAFT, {"dflash_block_size": 8}, "block = tokens \\+ 1"),
        ("dflash", None, 15, DRAFT, {"eagle_topk": 2}, "one block in one step"),
    ],
)
def test_bad_arguments_name_the_field_and_fix(case: tuple[Any, ...]) -> None:
    family, method, k, proposer, options, match = case
    with pytest.raises(ConfigError, match=match) as err:
        build_sglang_speculative_args(
            Proposal(family, method, k, proposer, options), tensor_parallel_size=2, location="plan.toml: candidates.c1"
        )
    assert err.value.location is not None and err.value.location.startswith("plan.toml: candidates.c1")
    assert err.value.fix


def test_the_probed_version_decides_algorithms_and_options() -> None:
    with pytest.raises(ConfigError, match="does not accept --speculative-algorithm DFLASH"):
        build_sglang_speculative_args(
            Proposal("dflash", None, 4, DRAFT), accepted_algorithms=("EAGLE", "EAGLE3", "NEXTN")
        )
    flags = ("--speculative-algorithm", "--speculative-num-draft-tokens", "--speculative-ngram-max-trie-depth")
    # A flag the installed version declares is accepted even when specselect does not know it ...
    got = build_sglang_speculative_args(
        Proposal("ngram", None, 4, None, {"ngram_max_trie_depth": 12}),
        accepted_algorithms=("NGRAM",),
        accepted_flags=flags,
    )
    assert got["speculative_ngram_max_trie_depth"] == 12
    # ... and one it does not declare is refused, naming the missing flag.
    with pytest.raises(ConfigError, match="no --speculative-ngram-max-match-window-size"):
        build_sglang_speculative_args(Proposal("ngram", None, 4, None, {"prompt_lookup_max": 4}), accepted_flags=flags)


def gate(algorithms: tuple[str, ...], family: str, method: str | None = None, **kw: Any) -> GateCheck:
    device = kw.pop("device_kind", "cuda")
    version = kw.pop("version", "0.5.4")
    return backend_gate(family, method, caps(algorithms, device_kind=device, version=version), **kw)


def test_backend_gate_reports_each_refusal() -> None:
    full = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
    assert gate(full, "eagle", "eagle3").passed
    assert gate(full, "suffix").reason == "family_not_in_engine"
    missing = gate(full, "dflash")
    assert missing.reason == "method_not_in_backend"
    assert missing.facts["sglang_algorithm"] == "DFLASH" and "NGRAM" in str(missing.facts["engine_algorithms"])
    assert gate(full, "eagle", min_engine_version="0.6.0").reason == "engine_version_too_old"
    assert gate(full, "eagle", min_engine_version="0.5.0").passed
    assert gate(full, "eagle", version="nightly", min_engine_version="0.5").reason == "backend_probe_failed"
    cpu = gate(full, "mtp", "deepseek_mtp", device_kind="cpu")
    assert cpu.reason == "requires_cuda" and cpu.facts["method_requires_device"] == "cuda"


def test_gate_refusals_become_unsupported() -> None:
    ok = GateCheck.ok()
    result = admit(
        "c1",
        "suffix",
        AdmissionInput(
            enabled=True,
            backend=gate(("EAGLE",), "suffix"),
            asset=ok,
            compatibility=ok,
            capacity=ok,
        ),
    )
    assert result.run_status == RunStatus.UNSUPPORTED and result.reason == "family_not_in_engine"


def test_a_plugin_algorithm_needs_registration_and_an_installed_plugin() -> None:
    algorithms = ("EAGLE", "DSPARK", "UNO")
    base = caps(algorithms)
    without_registration = backend_gate("custom", "my_spec", base)
    assert without_registration.reason == "method_not_in_backend"
    no_plugin = backend_gate("custom", "my_spec", base.model_copy(update={"plugin_registration": True}))
    assert no_plugin.reason == "plugin_not_installed"
    installed = base.model_copy(update={"plugin_registration": True, "plugins": ("myspec=myspec.plugin:register",)})
    passed = backend_gate("custom", "my_spec", installed)
    assert passed.passed and passed.facts["plugin_algorithm_checked_at"] == "server_start"
    on_cpu = installed.model_copy(update={"device_kind": "cpu"})
    assert backend_gate("custom", "my_spec", on_cpu).reason == "requires_cuda"


def test_dspark_and_uno_run_where_the_installed_sglang_declares_them() -> None:
    assert gate(("EAGLE", "DSPARK", "UNO"), "dspark").passed
    assert gate(("EAGLE", "DSPARK", "UNO"), "uno").passed
    assert gate(("EAGLE",), "dspark").reason == "method_not_in_backend"


def test_validate_names_a_relaxed_accept_threshold_as_lossy() -> None:
    def plan(allow: bool, temperature: Any) -> Plan:
        candidate = {
            "name": "g1_eagle3",
            "family": "eagle",
            "method": "eagle3",
            "proposer": DRAFT,
            "num_speculative_tokens": 3,
            "allow_lossy": allow,
            "options": {"accept_threshold_single": 0.7},
        }
        return Plan.model_validate(
            {
                "schema_version": 1,
                "label": "l",
                "target": {"model": "builtin:smollm2-135m"},
                "engine": {"kind": "sglang", "python": "/envs/sglang/bin/python"},
                "sampling": {"temperature": temperature},
                "workloads": {"w": "builtin:general"},
                "candidates": [candidate],
            }
        )

    engine = SglangEngine(python="/envs/sglang/bin/python")
    assert engine.plan_problems(plan(False, [0.0, 0.7])) == [
        "candidates.g1_eagle3.options.accept_threshold_single: accept_threshold_single 0.7 accepts draft tokens the "
        "target would not emit: the outputs are not the target's, so it would fail parity (fix: set allow_lossy = "
        "true in candidates.g1_eagle3 to measure it as lossy, or remove the option)"
    ]
    assert engine.plan_problems(plan(True, [0.0, 0.7])) == []
    (greedy_only,) = engine.plan_problems(plan(True, 0.0))
    assert greedy_only.startswith("candidates.g1_eagle3.allow_lossy: a lossy candidate is judged by the distribution")
