"""build_speculative_config per family and its errors."""

from __future__ import annotations

import json

import pytest

from specselect._engines.base import Proposal
from specselect._engines.vllm.specconfig import (
    FALLBACK_CONFIG_KEYS,
    METHOD_OPTIONS,
    build_speculative_config,
    default_method,
    family_methods,
    option_problem,
    speculative_config_json,
)
from specselect.errors import ConfigError


def test_ngram_keeps_exact_keys_in_order() -> None:
    cfg = build_speculative_config(Proposal("N-Gram", None, 5, None, {"prompt_lookup_min": 2, "prompt_lookup_max": 5}))
    assert cfg == {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 5}
    assert list(cfg) == ["method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"]
    assert speculative_config_json(cfg) == (
        '{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_min":2,"prompt_lookup_max":5}'
    )


def test_ngram_gpu_alias_and_method() -> None:
    assert build_speculative_config(Proposal("ngram_gpu", None, 3, None))["method"] == "ngram_gpu"
    assert build_speculative_config(Proposal("ngram", "ngram_gpu", 3, None))["method"] == "ngram_gpu"


def test_suffix_options_and_optional_budget() -> None:
    cfg = build_speculative_config(Proposal("suffix", None, None, None, {"suffix_decoding_max_tree_depth": 16}))
    # The response cache is off unless stated (test_response_cache).
    assert cfg == {"method": "suffix", "suffix_decoding_max_tree_depth": 16, "suffix_decoding_max_cached_requests": 0}
    cfg = build_speculative_config(Proposal("suffix", "suffix", 8, None, {"suffix_decoding_min_token_prob": 0.2}))
    assert cfg["num_speculative_tokens"] == 8
    assert cfg["suffix_decoding_min_token_prob"] == 0.2


def test_draft_model_carries_model_and_draft_options(tmp_path: object) -> None:
    cfg = build_speculative_config(
        Proposal(
            "draft_model", None, 4, "/models/draft", {"draft_tensor_parallel_size": 1, "use_heterogeneous_vocab": True}
        )
    )
    assert cfg == {
        "method": "draft_model",
        "model": "/models/draft",
        "num_speculative_tokens": 4,
        "draft_tensor_parallel_size": 1,
        "use_heterogeneous_vocab": True,
    }


@pytest.mark.parametrize(
    ("family", "method"),
    [
        ("eagle", "eagle"),
        ("EAGLE-3", "eagle3"),
        ("dflash", "dflash"),
        ("d_spark", "dspark"),
        ("medusa", "medusa"),
        ("mlp_speculator", "mlp_speculator"),
    ],
)
def test_model_based_methods_require_and_record_model(family: str, method: str) -> None:
    cfg = build_speculative_config(Proposal(family, None, 3, "/m/head"))
    assert cfg == {"method": method, "model": "/m/head", "num_speculative_tokens": 3}
    with pytest.raises(ConfigError, match="needs a proposer checkpoint") as info:
        build_speculative_config(Proposal(family, None, 3, None))
    assert info.value.location == "speculative.proposer"


def test_mtp_has_no_model_and_model_specific_names_pass() -> None:
    assert build_speculative_config(Proposal("mtp", None, 1, None)) == {"method": "mtp", "num_speculative_tokens": 1}
    assert build_speculative_config(Proposal("mtp", "deepseek_mtp", 2, None))["method"] == "deepseek_mtp"
    with pytest.raises(ConfigError, match="uses the target's own layers"):
        build_speculative_config(Proposal("mtp", None, 1, "/some/draft"))
    with pytest.raises(ConfigError, match="needs num_speculative_tokens"):
        build_speculative_config(Proposal("mtp", None, None, None))


def test_retrieval_methods_reject_a_proposer() -> None:
    with pytest.raises(ConfigError, match="needs no checkpoint"):
        build_speculative_config(Proposal("ngram", None, 4, "/m"))


def test_unknown_option_names_the_closest_key() -> None:
    with pytest.raises(ConfigError) as info:
        build_speculative_config(
            Proposal("ngram", None, 4, None, {"prompt_lookup_maximum": 3}), location="candidates.ng"
        )
    err = info.value
    assert err.location == "candidates.ng.options.prompt_lookup_maximum"
    assert "did you mean 'prompt_lookup_max'" in err.message
    assert err.fix == "rename it to prompt_lookup_max"


def test_tensor_parallel_size_points_to_draft_key() -> None:
    with pytest.raises(ConfigError, match="draft_tensor_parallel_size"):
        build_speculative_config(Proposal("draft_model", None, 4, "/d", {"tensor_parallel_size": 2}))


@pytest.mark.parametrize("key", ["method", "model", "num_speculative_tokens"])
def test_reserved_keys_cannot_hide_in_options(key: str) -> None:
    with pytest.raises(ConfigError, match="cannot be set in options"):
        build_speculative_config(Proposal("ngram", None, 4, None, {key: "x"}))


def test_option_from_other_method_is_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown option 'use_heterogeneous_vocab'"):
        build_speculative_config(Proposal("eagle", "eagle3", 3, "/h", {"use_heterogeneous_vocab": True}))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"prompt_lookup_min": 0}, "integer >= 1"),
        ({"prompt_lookup_min": True}, "integer >= 1"),
        ({"prompt_lookup_min": 5, "prompt_lookup_max": 2}, "larger than prompt_lookup_max"),
        ({"enforce_eager": "yes"}, "true or false"),
    ],
)
def test_bad_option_values(options: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_speculative_config(Proposal("ngram", None, 4, None, options))


def test_bad_family_method_and_budget() -> None:
    with pytest.raises(ConfigError, match="unknown proposer family"):
        build_speculative_config(Proposal("lookahead", None, 4, None))
    with pytest.raises(ConfigError, match="allowed: eagle, eagle3"):
        build_speculative_config(Proposal("eagle", "medusa", 4, "/h"))
    with pytest.raises(ConfigError, match=">= 1"):
        build_speculative_config(Proposal("ngram", None, 0, None))
    with pytest.raises(ConfigError, match="must be an integer"):
        build_speculative_config(Proposal("ngram", None, 2.5, None))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs num_speculative_tokens"):
        build_speculative_config(Proposal("ngram", None, None, None))
    with pytest.raises(ConfigError, match="not JSON-serialisable"):
        build_speculative_config(Proposal("ngram", None, 4, None, {"num_speculative_tokens_per_batch_size": {1, 2}}))


def test_helpers_and_every_method_has_an_allow_list() -> None:
    assert family_methods("eagle3") == ("eagle", "eagle3")
    assert default_method("eagle") == "eagle"
    assert default_method("Eagle-3") == "eagle3"
    for family in ("ngram", "suffix", "draft_model", "mtp", "eagle", "dflash", "dspark", "medusa", "mlp_speculator"):
        for method in family_methods(family):
            assert method in METHOD_OPTIONS or method == "eagle3"
    cfg = build_speculative_config(Proposal("draft_model", None, 4, "/d"))
    assert json.loads(speculative_config_json(cfg)) == cfg


def test_draft_tensor_parallel_size_against_the_target() -> None:
    # Without the target's size only the value itself is checked.
    assert (
        build_speculative_config(Proposal("eagle", None, 3, "/h", {"draft_tensor_parallel_size": 3}))[
            "draft_tensor_parallel_size"
        ]
        == 3
    )
    with pytest.raises(ConfigError, match="integer >= 1"):
        build_speculative_config(Proposal("eagle", None, 3, "/h", {"draft_tensor_parallel_size": 0}))
    # vLLM accepts 1 or the target's size; a config without the option is left to vLLM's default.
    assert "draft_tensor_parallel_size" not in build_speculative_config(
        Proposal("eagle", None, 3, "/h"), tensor_parallel_size=4
    )
    with pytest.raises(ConfigError) as info:
        build_speculative_config(
            Proposal("mtp", None, 1, None, {"draft_tensor_parallel_size": 2}),
            tensor_parallel_size=4,
            location="candidates.m",
        )
    assert info.value.location == "candidates.m.options.draft_tensor_parallel_size"
    assert "draft_tensor_parallel_size 2 must be 1 or the target's tensor_parallel_size (4)" in info.value.message


def test_a_misspelt_key_is_unknown_with_the_key_it_was_meant_to_be() -> None:
    problem = option_problem("ngram", "prompt_lookup_mx")
    assert problem is not None
    assert (problem.reason, problem.did_you_mean) == ("unknown_speculative_option", "prompt_lookup_max")
    assert "did you mean 'prompt_lookup_max'" in problem.message
    far = option_problem("ngram", "banana")
    assert far is not None and far.did_you_mean is None
    with pytest.raises(ConfigError, match="did you mean 'prompt_lookup_max'"):
        build_speculative_config(Proposal("ngram", None, 4, None, {"prompt_lookup_mx": 4}))


def test_the_engines_keys_decide_which_keys_exist() -> None:
    engine_keys = (*FALLBACK_CONFIG_KEYS, "brand_new_knob")
    # A key only a newer vLLM has passes when that vLLM is installed, and is unknown under the fallback list.
    assert option_problem("draft_model", "brand_new_knob", engine_keys) is None
    assert option_problem("draft_model", "brand_new_knob") is not None
    # A key the hand list gives to another method is refused even though vLLM has it.
    other = option_problem("eagle", "use_heterogeneous_vocab", engine_keys)
    assert other is not None and other.reason == "option_of_other_method"
    # A key the installed vLLM lacks is refused even though the hand list knows it.
    older = option_problem("ngram", "prompt_lookup_min", ("method", "prompt_lookup_max"))
    assert older is not None and older.reason == "unknown_speculative_option"
    cfg = build_speculative_config(
        Proposal("draft_model", None, 4, "/d", {"kv_cache_dtype": "fp8", "brand_new_knob": 1}), engine_keys=engine_keys
    )
    assert cfg["kv_cache_dtype"] == "fp8" and cfg["brand_new_knob"] == 1


def test_a_custom_class_proposer_is_named_by_its_class_path() -> None:
    config = build_speculative_config(Proposal("custom", None, 3, None, {"proposer_class": "my_pkg.spec.MyProposer"}))
    assert config == {"method": "custom_class", "model": "my_pkg.spec.MyProposer", "num_speculative_tokens": 3}
    for proposal, where in (
        (Proposal("custom", None, 3, None, {}), "options.proposer_class"),
        (Proposal("custom", None, 3, None, {"proposer_class": "not a path"}), "options.proposer_class"),
        (Proposal("custom", None, 3, "/models/x", {"proposer_class": "a.B"}), "proposer"),
        (Proposal("ngram", None, 3, None, {"proposer_class": "a.B"}), "options.proposer_class"),
        (Proposal("uno", None, 3, "/models/lora", {}), "family"),
    ):
        with pytest.raises(ConfigError, match=where):
            build_speculative_config(proposal, location="plan.toml: candidates.c1")
