"""The proposer-family registry: names, aliases, normalisation, errors and immutability."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from specselect._core import FAMILIES, AssetKind, Dependency, UnknownFamilyError, classify_family, family_names
from specselect.contract import classify_speculative_strategy

BASIC = ("proposed_tokens", "accepted_tokens")

# The contract's table (section 1), row by row.
CONTRACT_TABLE = {
    "ngram": ("none", "retrieval", BASIC),
    "suffix": ("none", "retrieval", BASIC),
    "draft_model": ("draft_checkpoint", "autoregressive", BASIC),
    "mtp": ("target_native", "model_native", BASIC),
    "eagle": ("paired_checkpoint", "feature_autoregressive", BASIC),
    "dflash": ("paired_checkpoint", "parallel_block", BASIC),
    "dspark": ("paired_checkpoint", "semi_autoregressive", (*BASIC, "verified_tokens")),
}


@pytest.mark.parametrize(("family", "row"), CONTRACT_TABLE.items())
def test_contract_table_rows(family: str, row: tuple[str, str, tuple[str, ...]]) -> None:
    spec = classify_family(family)
    assert (spec.family, spec.asset_kind.value, spec.dependency.value, spec.telemetry) == (family, *row)
    assert classify_speculative_strategy(family) == {
        "family": family,
        "asset_kind": row[0],
        "dependency": row[1],
        "telemetry": row[2],
    }


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("N-Gram", "ngram"),
        ("NGRAM", "ngram"),
        ("n_gram", "ngram"),
        (" ngram ", "ngram"),
        ("prompt_lookup", "ngram"),
        ("Suffix-Decoding", "suffix"),
        ("Draft-Model", "draft_model"),
        ("draftmodel", "draft_model"),
        ("draft", "draft_model"),
        ("MTP", "mtp"),
        ("EAGLE-3", "eagle"),
        ("eagle_3", "eagle"),
        ("Eagle3", "eagle"),
        ("eagle", "eagle"),
        ("D-Flash", "dflash"),
        ("d_spark", "dspark"),
        ("DSpark", "dspark"),
        ("MLP-Speculator", "mlp_speculator"),
        ("medusa", "medusa"),
    ],
)
def test_names_match_ignoring_case_dash_underscore(name: str, family: str) -> None:
    assert classify_family(name).family == family
    assert classify_speculative_strategy(name)["family"] == family


def test_every_family_and_alias_resolves_to_itself() -> None:
    assert set(CONTRACT_TABLE) <= set(family_names())
    for family, spec in FAMILIES.items():
        for name in (family, *spec.aliases):
            assert classify_family(name) is spec
            assert classify_family(name.upper().replace("_", "-")) is spec
        assert isinstance(spec.asset_kind, AssetKind)
        assert isinstance(spec.dependency, Dependency)


def test_mtp_is_target_native_not_a_draft_model() -> None:
    assert classify_family("mtp").asset_kind is AssetKind.TARGET_NATIVE


@pytest.mark.parametrize(("typo", "suggestion"), [("egale", "eagle"), ("ngrm", "ngram"), ("dsprak", "dspark")])
def test_unknown_family_suggests_and_names_known(typo: str, suggestion: str) -> None:
    with pytest.raises(UnknownFamilyError) as info:
        classify_family(typo)
    message = str(info.value)
    assert f"did you mean {suggestion!r}" in message
    for family in CONTRACT_TABLE:
        assert family in message


@pytest.mark.parametrize("bad", ["", "lookahead-decoding-xyz", "qwerty"])
def test_unknown_family_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="unknown proposer family"):
        classify_speculative_strategy(bad)


@pytest.mark.parametrize("bad", [None, 3, ["ngram"]])
def test_non_string_family_is_a_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="family must be a string"):
        classify_family(bad)  # type: ignore[arg-type]


def test_returned_dict_is_fresh_and_mutation_never_leaks() -> None:
    first = classify_speculative_strategy("dspark")
    first["family"] = "hacked"
    first["telemetry"] = ("nothing",)
    first["extra"] = 1
    second = classify_speculative_strategy("dspark")
    assert second is not first
    assert second == {
        "family": "dspark",
        "asset_kind": "paired_checkpoint",
        "dependency": "semi_autoregressive",
        "telemetry": (*BASIC, "verified_tokens"),
    }
    assert all(type(value) is str for key, value in second.items() if key != "telemetry")
    assert type(second["telemetry"]) is tuple


def test_registry_values_cannot_be_changed() -> None:
    spec = classify_family("ngram")
    with pytest.raises(ValidationError):
        spec.family = "suffix"  # type: ignore[misc]
    with pytest.raises(TypeError):
        FAMILIES["ngram"] = spec  # type: ignore[index]
    with pytest.raises(AttributeError):
        spec.telemetry.append("x")  # type: ignore[attr-defined]
    changed = spec.model_copy(update={"family": "changed"})
    assert changed.family == "changed"
    assert classify_family("ngram").family == "ngram"
