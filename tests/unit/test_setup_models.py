"""`specselect setup --models`: which builtin models a set-up prepares."""

from __future__ import annotations

import pytest

from specselect._cli.setup import BUILTIN_MODELS, parse_models
from specselect.errors import UsageError


def test_plain_setup_prepares_only_the_default_plans_models() -> None:
    assert BUILTIN_MODELS == ("builtin:smollm2-135m", "builtin:smollm2-135m-draft4l")


def test_models_are_named_with_or_without_the_prefix() -> None:
    assert parse_models("qwen2.5-coder-1.5b, builtin:qwen2.5-coder-0.5b,qwen2.5-coder-1.5b") == (
        "builtin:qwen2.5-coder-1.5b",
        "builtin:qwen2.5-coder-0.5b",
    )
    assert len(parse_models("all")) == 4


@pytest.mark.parametrize("text", ["qwen-7b", " , "])
def test_an_unknown_model_names_the_known_ones(text: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_models(text)
    line = err.value.one_line()
    assert line.startswith("--models: ")
    assert "qwen2.5-coder-1.5b, qwen2.5-coder-0.5b (or all)" in line
