"""Gate 4 on tokenizer fingerprints: the Qwen pair passes, SmolLM2's draft for the Qwen target is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

from test_assets_tokenizer_id import FIXTURES, edit_tokenizer, fixture_model

from specselect._admission.compat import check_compatibility
from specselect._assets.builtin import BUILTIN_MODELS
from specselect._assets.refs import describe_model_dir, resolve_model


def test_gate_4_passes_the_qwen_pair_on_fingerprints() -> None:
    check = check_compatibility(
        "draft_model", fixture_model("qwen2.5-coder-1.5b"), fixture_model("qwen2.5-coder-0.5b"), {}
    )
    assert check.passed, check
    assert check.facts["target_tokenizer_fingerprint"] == check.facts["proposer_tokenizer_fingerprint"]
    assert check.facts["target_tokenizer_sha256"] != check.facts["proposer_tokenizer_sha256"]


def test_gate_4_refuses_the_smollm2_draft_for_the_qwen_target() -> None:
    check = check_compatibility("draft_model", fixture_model("qwen2.5-coder-1.5b"), fixture_model("smollm2-135m"), {})
    assert (check.passed, check.reason) == (False, "vocab_size_mismatch")


def test_gate_4_refuses_another_tokenizer_with_the_same_vocab_size(tmp_path: Path) -> None:
    draft_root = tmp_path / "draft"
    shutil.copytree(FIXTURES / "qwen2.5-coder-0.5b", draft_root)
    edit_tokenizer(draft_root, "vocab")
    draft = describe_model_dir(draft_root, ref="draft", snapshot="d" * 64, source="local_dir")
    check = check_compatibility("draft_model", fixture_model("qwen2.5-coder-1.5b"), draft, {})
    assert (check.passed, check.reason) == (False, "tokenizer_mismatch")
    assert check_compatibility(
        "draft_model", fixture_model("qwen2.5-coder-1.5b"), draft, {"use_heterogeneous_vocab": True}
    ).passed


def test_builtins_carry_their_fingerprints_before_they_are_prepared(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = resolve_model("builtin:qwen2.5-coder-1.5b", home=home, prepare=False)
    draft = resolve_model("builtin:qwen2.5-coder-0.5b", home=home, prepare=False)
    smol = resolve_model("builtin:smollm2-135m-draft4l", home=home, prepare=False)
    assert not (target.present or draft.present or smol.present)
    assert not (home / "assets").exists()  # nothing was downloaded
    assert (
        target.tokenizer_fingerprint
        == draft.tokenizer_fingerprint
        == BUILTIN_MODELS["qwen2.5-coder-0.5b"].tokenizer_fingerprint
    )
    assert check_compatibility("draft_model", target, draft, {}).passed
    assert check_compatibility("draft_model", target, smol, {}).reason == "vocab_size_mismatch"
