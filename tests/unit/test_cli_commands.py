"""The commands `validate`, `plan list|show` and `schema`, run in-process through `main`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specselect._cli.main import main
from specselect._cli.schema import SCHEMAS, schema_for
from specselect._plan import Plan, builtin_plan_text, load_plan


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_ok_prints_the_hash_then_what_the_plan_will_cost(capsys: pytest.CaptureFixture[str]) -> None:
    plan_hash = load_plan("builtin:cpu-smoke").plan_hash
    code, out, err = run_cli(capsys, "validate", "builtin:cpu-smoke")
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[0] == (
        f"OK builtin:cpu-smoke: plan 'cpu-smoke' is valid: baseline + 5 candidates, 2 workloads, plan_hash {plan_hash}"
    )
    # 6 groups x 3 rounds by the first look, x 4 by the last; CPU-hours from this machine's figures.
    assert lines[1].startswith("cost: 18 server starts by the first look, up to 24 if every candidate runs to")
    assert lines[2].startswith("cost: ~0.35 CPU-hours estimated (up to ~0.46) on this machine's CPUs: one launch")
    assert lines[3].startswith("cost: estimates from typical figures, not measurements: measured on specselect's")
    assert len(lines) == 4  # a builtin target is fetched by nobody: no disk line


def test_validate_counts_every_baseline_a_plan_launches(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = builtin_plan_text("cpu-smoke").replace("\n[run]\n", "\n[run]\ncandidates_per_block = 2\n", 1)
    (tmp_path / "p.toml").write_text(text, encoding="utf-8")
    code, out, _ = run_cli(capsys, "validate", str(tmp_path / "p.toml"))
    assert code == 0 and ": 3 baselines + 5 candidates, 2 workloads, " in out


def test_validate_bad_plan_exits_2_with_one_line_per_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = builtin_plan_text("cpu-smoke")
    text = text.replace("concurrency = [1]", "concurrency = [0]").replace('family = "dspark"', 'family = "dsprak"')
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    code, out, err = run_cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert lines[0] == f"specselect: error: {path}: plan does not validate (2 problems)"
    assert lines[1].startswith(f"{path}: run.concurrency[0]: must be > 0 (got 0) (fix: ")
    assert lines[2].startswith(
        f"{path}: candidates[4].family: unknown proposer family 'dsprak'; did you mean 'dspark'?"
    )
    assert "Traceback" not in err


def test_validate_names_the_option_key_a_misspelt_one_was_meant_to_be(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = builtin_plan_text("cpu-smoke")
    path = tmp_path / "p.toml"
    path.write_text(text.replace("prompt_lookup_max = 5 }", "prompt_lookup_mx = 5 }", 1), encoding="utf-8")
    code, out, err = run_cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert "options.prompt_lookup_mx: vLLM's speculative config has no key 'prompt_lookup_mx'" in err
    assert "did you mean 'prompt_lookup_max'?" in err
    # Misspelt in a sweep grid: one line naming the grid of the entry the user wrote, not one per sub-candidate.
    sweep = builtin_plan_text("cpu-sweep").replace("measure_schedule = true", "measure_schedule = false")
    sweep = sweep.replace(
        "prompt_lookup_min = 3, prompt_lookup_max = 5 }",
        "prompt_lookup_min = 3 }\nsweep = { prompt_lookup_mx = [3, 5] }",
    )
    path.write_text(sweep, encoding="utf-8")
    code, out, err = run_cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err.splitlines()[1:] == [
        "candidates.g1_ngram.sweep.prompt_lookup_mx: vLLM's speculative config has no key 'prompt_lookup_mx'; "
        "did you mean 'prompt_lookup_max'? (fix: rename it to prompt_lookup_max)"
    ]
    # A key vLLM 0.32 has passes, and so does one nothing resembles: a newer installed vLLM may have it (the probe
    # of the installed engine decides).
    for key in ("kv_cache_dtype = 'auto'", "brand_new_knob = 1"):
        path.write_text(text.replace("prompt_lookup_max = 5 }", f"prompt_lookup_max = 5, {key} }}", 1))
        assert run_cli(capsys, "validate", str(path))[0] == 0


def test_validate_refuses_a_lossy_verification_setting_unless_the_candidate_opts_in(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    synthetic = 'prompt_lookup_max = 5, rejection_sample_method = "synthetic", synthetic_acceptance_length = 3.0 }'
    path = tmp_path / "p.toml"
    sampled = builtin_plan_text("cpu-sampled").replace("prompt_lookup_max = 5 }", synthetic, 1)
    path.write_text(sampled, encoding="utf-8")
    code, out, err = run_cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err.splitlines()[1:] == [
        "candidates.g1_ngram.options.rejection_sample_method: rejection_sample_method 'synthetic' accepts drafts at a "
        "set rate whatever the target says: the outputs are not the target's, so it would fail parity (fix: set "
        "allow_lossy = true in candidates.g1_ngram to measure it as lossy, or remove the option)"
    ]
    opted_in = sampled.replace('name = "g1_ngram"\n', 'name = "g1_ngram"\nallow_lossy = true\n', 1)
    path.write_text(opted_in, encoding="utf-8")
    assert run_cli(capsys, "validate", str(path))[0] == 0
    # Judged by the distribution test: a plan that samples nothing above temperature 0 cannot judge it.
    path.write_text(opted_in.replace("temperature = [0.0, 0.7]", "temperature = 0.0", 1), encoding="utf-8")
    code, _, err = run_cli(capsys, "validate", str(path))
    assert code == 2 and "candidates.g1_ngram.allow_lossy: a lossy candidate is judged by the distribution test" in err


def test_validate_toml_error_names_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('schema_version = 1\nlabel = "x\n', encoding="utf-8")
    code, _, err = run_cli(capsys, "validate", str(path))
    assert code == 2
    assert err.startswith(f"specselect: error: {path}:2:")
    assert err.count("\n") == 1


def test_plan_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "plan", "list")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "builtin:cpu-smoke           CPU smoke test:" in lines[4]  # sorted: cpu-aa, -draft, -ngram, -sampled, -smoke
    assert lines[5].startswith("builtin:cpu-suffix          CPU suffix decoding:")
    # The GPU recipes a user copies to a GPU box are listed after the CPU plans.
    assert [line.split()[0] for line in lines[7:]] == [
        "builtin:gpu-coder-draft",
        "builtin:gpu-llama8b-eagle3",
        "builtin:gpu-mtp",
    ]


def test_plan_show_prints_the_toml_verbatim(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "plan", "show", "builtin:cpu-smoke")
    assert (code, err) == (0, "")
    assert out == builtin_plan_text("cpu-smoke")
    copy = tmp_path / "mine.toml"
    copy.write_text(out, encoding="utf-8")
    first = run_cli(capsys, "validate", str(copy))[1].splitlines()[0]
    assert first.endswith(f"plan_hash {load_plan('builtin:cpu-smoke').plan_hash}")


def test_plan_show_unknown_builtin(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "plan", "show", "builtin:nope")
    assert (code, out) == (2, "")
    assert err == (
        "specselect: error: builtin:nope: no built-in plan 'nope' "
        "(fix: use one of: builtin:cpu-aa, builtin:cpu-draft, builtin:cpu-ngram, builtin:cpu-sampled, "
        "builtin:cpu-smoke, builtin:cpu-suffix, builtin:cpu-sweep, builtin:gpu-coder-draft, "
        "builtin:gpu-llama8b-eagle3, builtin:gpu-mtp "
        "(see `specselect plan list`))\n"
    )


def test_plan_show_refuses_a_file_path(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "plan", "show", "./mine.toml")
    assert code == 2
    assert err.startswith("specselect: error: ./mine.toml: `plan show` prints built-in plans only (fix: ")


def test_schema_plan_is_the_plan_models_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "schema", "plan")
    assert (code, err) == (0, "")
    schema = json.loads(out)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"schema_version", "label", "target", "engine", "workloads"}
    assert set(schema["properties"]) == set(Plan.model_fields)
    assert schema == schema_for("plan")


def test_schema_lists_known_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "schema")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == list(SCHEMAS)


def test_schema_unknown_name_exits_2_listing_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "schema", "results")
    assert (code, out) == (2, "")
    assert err == (
        "specselect: error: specselect schema: unknown schema 'results' (fix: use one of: plan, workload-item, "
        "manifest, preflight, admission, group, record, evidence, handoff, cluster, check)\n"
    )


def test_every_registered_schema_builds() -> None:
    for name in SCHEMAS:
        assert schema_for(name)["type"] == "object"


def test_every_results_file_has_a_schema() -> None:
    # The artifacts a run writes (issue: "JSON Schemas for them via `specselect schema NAME`").
    titles = {schema_for(name)["title"] for name in SCHEMAS}
    assert titles >= {
        "Manifest",
        "PreflightFile",
        "AdmissionFile",
        "GroupResult",
        "RequestRecord",
        "EvidenceFile",
        "Handoff",
    }
    evidence = schema_for("evidence")
    assert {"entries", "policy", "verdicts", "sweeps", "schema_version"} <= set(evidence["properties"])
