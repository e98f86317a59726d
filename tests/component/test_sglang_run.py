"""A whole `specselect run` with kind = "sglang", through the runner, against the stand-in SGLang server.

SGLang needs CUDA, so the stand-in (data/sglang_fake_launch_server.py, installed as a fake `sglang` package)
serves the protocol and a fake NVML module (tests/fakegpu.py) reports one GPU to the probe. What this shows:
the runner builds SGLang's own `--speculative-*` arguments (not vLLM's `--speculative-config`), starts and stops
one server per group, and reads SGLang's acceptance counters into the evidence.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "data"))  # the fake SGLang installer
import sglang_fake_install as FAKE
from test_assets_files import tiny_llama

from specselect._artifacts.verify import verify_run
from specselect._runner.progress import SilentProgress
from specselect._runner.run import RunOptions, run_plan

PLAN = """
schema_version = 1
label = "sglang-run"
[target]
model = "MODEL"
[engine]
kind = "sglang"
python = "ENGINE_PY"
startup_timeout_s = 60.0
env = { PYTHONPATH = "SITE" }
[sampling]
max_tokens = 8
[run]
repeats = 2
rounds = 1
warmup_requests = 1
parity_pass = "off"
[workloads]
general = "builtin:general"
[[candidates]]
name = "g1_eagle3"
family = "eagle"
method = "eagle3"
num_speculative_tokens = 4
proposer = "PROPOSER"
[[candidates]]
name = "g2_ngram"
family = "ngram"
num_speculative_tokens = 3
"""


def test_a_plan_with_kind_sglang_runs_through_the_runner(tmp_path: Path, one_gpu: None) -> None:
    site = tmp_path / "site"
    FAKE.install(site, "registry")
    target = tiny_llama(tmp_path / "target")
    proposer = tiny_llama(tmp_path / "eagle3", layers=1)
    text = (
        PLAN.replace("MODEL", str(target))
        .replace("ENGINE_PY", sys.executable)
        .replace("SITE", str(site))
        .replace("PROPOSER", str(proposer))
    )
    (tmp_path / "plan.toml").write_text(text)
    opts = RunOptions(plan_ref=str(tmp_path / "plan.toml"), results_dir=tmp_path / "res", home=tmp_path / "home")
    out = run_plan(opts, SilentProgress())

    assert out.preflight.engine is not None and out.preflight.engine.kind == "sglang"
    assert [(g.group, g.run_status.value) for g in out.groups] == [
        ("g0_target_only", "completed"),
        ("g1_eagle3", "completed"),
        ("g2_ngram", "completed"),
    ]
    base, eagle, ngram = out.groups
    assert base.launch is not None and "--speculative-algorithm" not in base.launch.command
    assert eagle.launch is not None and eagle.launch.speculative_config is not None
    argv = list(eagle.launch.command)
    assert argv[argv.index("--speculative-algorithm") + 1] == "EAGLE3"
    assert argv[argv.index("--speculative-draft-model-path") + 1] == str(proposer)
    assert "--speculative-config" not in argv
    assert ngram.launch is not None
    assert ngram.launch.command[ngram.launch.command.index("--speculative-algorithm") + 1] == "NGRAM"
    assert all(g.release is not None and g.release.processes_gone and g.release.port_free for g in out.groups)
    # SGLang's request counters, read by the SGLang engine: 4 verify steps of accept length 2 per request.
    entries = {(e.candidate, e.scenario): e for e in out.evidence.entries}  # type: ignore[union-attr]
    telemetry = entries[("g1_eagle3", "general-c1")].telemetry
    assert telemetry is not None and telemetry.source == "prometheus"
    assert telemetry.mean_acceptance_length == pytest.approx(2.0)
    assert telemetry.drafts == 4 * 16
    assert entries[("g1_eagle3", "general-c1")].parity is not None
    assert entries[("g1_eagle3", "general-c1")].parity.verdict.value == "pass"  # type: ignore[union-attr]
    assert verify_run(out.layout.root).ok


def test_an_sglang_length_sweep_gets_proposal_lengths_a_length_choice_and_a_cut_off(
    tmp_path: Path, one_gpu: None
) -> None:
    site = tmp_path / "site"
    FAKE.install(site, "registry")
    target = tiny_llama(tmp_path / "target")
    text = PLAN[: PLAN.index("[[candidates]]")] + (
        '[[candidates]]\nname = "g2_ngram"\nfamily = "ngram"\nnum_speculative_tokens = [2, 3]\n'
    )
    text = text.replace("repeats = 2\n", "repeats = 2\nconcurrency = [1, 2]\nearly_stop = false\n")
    text = text.replace("MODEL", str(target)).replace("ENGINE_PY", sys.executable).replace("SITE", str(site))
    (tmp_path / "plan.toml").write_text(text)
    opts = RunOptions(plan_ref=str(tmp_path / "plan.toml"), results_dir=tmp_path / "res", home=tmp_path / "home")
    out = run_plan(opts, SilentProgress())

    # The SGLang engine states each launch's proposal length; its own arguments name it otherwise (k + 1 wide).
    assert [(g.group, g.proposal_length) for g in out.groups] == [
        ("g0_target_only", None),
        ("g2_ngram.k2", 2),
        ("g2_ngram.k3", 3),
    ]
    k3 = out.groups[2].launch
    assert k3 is not None and k3.command[k3.command.index("--speculative-num-draft-tokens") + 1] == "4"
    sweeps = out.evidence.sweeps  # type: ignore[union-attr]
    assert sweeps is not None
    assert sorted((s.choice.workload, s.choice.concurrency) for s in sweeps.lengths) == [("general", 1), ("general", 2)]
    assert all([row.length for row in s.choice.per_length] == [2, 3] for s in sweeps.lengths)
    assert sorted((c.candidate, c.levels) for c in sweeps.crossovers) == [
        ("g2_ngram.k2", (1, 2)),
        ("g2_ngram.k3", (1, 2)),
    ]
    handoff = out.handoff
    assert handoff is not None and len(handoff.proposal_lengths) == 2 and len(handoff.concurrency_limits) == 2
    assert verify_run(out.layout.root).ok
