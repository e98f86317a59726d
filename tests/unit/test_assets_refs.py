"""Model references: local directories, the offline Hugging Face cache layout, config facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_assets_files import tiny_llama

from specselect._assets import resolve_model
from specselect._assets.config_facts import estimate_params_from_config, has_native_mtp, mtp_layer_count
from specselect._assets.hf_cache import hub_cache_dir, is_hf_id
from specselect.errors import EngineSetupError

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def fake_hub(hub: Path, repo: str, commits: dict[str, str], *, refs: dict[str, str]) -> None:
    """The hub cache layout: refs/<name> -> commit, snapshots/<commit>/ with files."""
    repo_dir = hub / f"models--{repo.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    for name, commit in refs.items():
        (repo_dir / "refs" / name).write_text(commit)
    for commit, marker in commits.items():
        snapshot = repo_dir / "snapshots" / commit
        tiny_llama(snapshot, layers=2)
        (snapshot / "README.md").write_text(marker)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.chdir(tmp_path)
    fake_hub(hub, "org/tiny", {COMMIT_A: "a", COMMIT_B: "b"}, refs={"main": COMMIT_A, "v2": COMMIT_B})
    return hub


def test_hub_cache_dir_follows_the_usual_variables(tmp_path: Path) -> None:
    assert hub_cache_dir({"HF_HUB_CACHE": str(tmp_path / "x")}) == tmp_path / "x"
    assert hub_cache_dir({"HF_HOME": str(tmp_path / "h")}) == tmp_path / "h" / "hub"
    assert hub_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "huggingface" / "hub"
    assert hub_cache_dir({}).parts[-3:] == (".cache", "huggingface", "hub")


def test_hf_id_shape() -> None:
    assert is_hf_id("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert not is_hf_id("./org/name")
    assert not is_hf_id("a/b/c")
    assert not is_hf_id("../x")


def test_hf_id_resolves_main_branch_and_revisions_offline(hub: Path) -> None:
    main = resolve_model("org/tiny")
    assert main.source == "hf_cache"
    assert main.snapshot == COMMIT_A
    assert main.path.name == COMMIT_A
    assert main.vocab_size == 32
    assert main.architectures == ("LlamaForCausalLM",)
    assert main.num_params_source == "safetensors"
    assert resolve_model("org/tiny", revision="v2").snapshot == COMMIT_B
    assert resolve_model("org/tiny", revision=COMMIT_B).snapshot == COMMIT_B


def test_hf_id_missing_repo_revision_or_snapshot_is_a_clear_error(hub: Path) -> None:
    with pytest.raises(EngineSetupError, match="not in the local Hugging Face cache") as err:
        resolve_model("org/absent")
    assert "size unknown" in err.value.one_line()  # offline: the hub is not asked
    assert "run `specselect fetch org/absent@main`, or set [assets] download = true" in err.value.one_line()
    with pytest.raises(EngineSetupError, match=r"revision 'v9'.*cached refs: main, v2.*specselect fetch org/tiny@v9"):
        resolve_model("org/tiny", revision="v9")
    with pytest.raises(EngineSetupError, match=r"org/tiny at revision 'c+' is not in the local"):
        resolve_model("org/tiny", revision="c" * 40)
    with pytest.raises(EngineSetupError, match=r"two revisions: @v2 in the reference and 'main' beside it"):
        resolve_model("org/tiny@v2", revision="main")
    assert resolve_model("org/tiny@v2").snapshot == COMMIT_B


def test_local_directory_is_identified_by_content(tmp_path: Path) -> None:
    model = tiny_llama(tmp_path / "m")
    home = tmp_path / "home"
    first = resolve_model(str(model), home=home)
    assert first.source == "local_dir"
    assert len(first.snapshot) == 64
    assert first.tokenizer_sha256 is not None
    assert resolve_model(str(model), home=home).snapshot == first.snapshot
    assert any((home / "cache" / "file-hashes").iterdir())  # per-file hashes cached for the next run
    (model / "config.json").write_text(json.dumps({**first.config, "vocab_size": 33}))
    changed = resolve_model(str(model), home=home)
    assert changed.snapshot != first.snapshot
    assert changed.vocab_size == 33


def test_bad_references(tmp_path: Path) -> None:
    with pytest.raises(EngineSetupError, match="does not exist"):
        resolve_model(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(EngineSetupError, match=r"no config\.json"):
        resolve_model(str(tmp_path / "empty"))
    with pytest.raises(EngineSetupError, match="not a model reference"):
        resolve_model("not a ref at all")
    with pytest.raises(EngineSetupError, match="unknown builtin"):
        resolve_model("builtin:gpt-17", prepare=False)
    with pytest.raises(EngineSetupError, match="revision applies to hub ids only"):
        resolve_model(str(tiny_llama(tmp_path / "m")), revision="main")


def test_builtin_not_prepared_is_reported_without_converting(tmp_path: Path) -> None:
    model = resolve_model("builtin:smollm2-135m-draft4l", home=tmp_path, prepare=False)
    assert model.present is False
    assert model.snapshot == ""
    assert model.vocab_size == 49_152
    assert model.num_hidden_layers == 4
    assert model.num_params_source == "builtin"
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize(
    ("config", "layers"),
    [
        ({"model_type": "llama"}, 0),
        ({"model_type": "deepseek_v3", "num_nextn_predict_layers": 1}, 1),
        ({"model_type": "deepseek_v3", "num_nextn_predict_layers": 0}, 0),
        ({"model_type": "qwen3_5", "text_config": {"mtp_num_hidden_layers": 2}}, 2),
        ({"model_type": "glm4_moe_mtp"}, 1),
        ({"model_type": "x_mtp", "n_predict": 3}, 3),
        ({"model_type": "mimo", "num_mtp_modules": 1}, 1),
    ],
)
def test_native_mtp_detection(config: dict[str, object], layers: int) -> None:
    assert mtp_layer_count(config) == layers
    assert has_native_mtp(config) is (layers > 0)


def test_mtp_flag_reaches_the_resolved_model(tmp_path: Path) -> None:
    model = tiny_llama(tmp_path / "m")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 1}))
    assert resolve_model(str(model)).has_native_mtp


def test_param_estimate_from_config_matches_smollm2() -> None:
    smollm2 = {
        "hidden_size": 576,
        "num_hidden_layers": 30,
        "vocab_size": 49152,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "intermediate_size": 1536,
        "tie_word_embeddings": True,
    }
    assert estimate_params_from_config(smollm2) == 134_515_008
    assert estimate_params_from_config({"hidden_size": 8}) is None


def test_config_estimate_is_used_without_safetensors(tmp_path: Path) -> None:
    model = tiny_llama(tmp_path / "m")
    (model / "model.safetensors").unlink()
    resolved = resolve_model(str(model))
    assert resolved.num_params_source == "config"
    assert resolved.weights_bytes is None
    assert resolved.num_params is not None
