"""One real CPU vLLM group through a one-node Ray cluster that specselect starts for the run (address "local").

The lease holds both cores (`cpus_per_group = 2`: Ray sets OMP_NUM_THREADS to a task's CPUs, and the CPU build of
vLLM runs on OpenMP threads); the server is the task's child, records and the log come back into the results tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reduced_plan import copy_list_item, cpu_plan_head, specselect, write_workload

pytest.importorskip("ray", reason="the cluster backend needs the ray extra (pip install 'specselect[ray]')")
pytestmark = pytest.mark.integration

PLAN = (
    cpu_plan_head("ray-one-node", max_tokens=16)
    + """
[run]
concurrency = [1]
warmup_requests = 1
repeats = 1
rounds = 1
request_timeout_s = 120.0

[workloads]
copy = "copy.jsonl"

[cluster]
backend = "ray"
address = "local"
cpus_per_group = 2.0
"""
)


def test_a_real_vllm_group_runs_through_a_one_node_ray_cluster(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(PLAN)
    write_workload(tmp_path / "copy.jsonl", [copy_list_item()])
    done = specselect("run", "plan.toml", "--results-dir", "results", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    root = tmp_path / "results" / "ray-one-node"
    group = json.loads((root / "groups" / "g0_target_only.json").read_text())
    assert group["run_status"] == "completed" and group["node"]
    (scenario,) = group["scenarios"]
    assert scenario["status"] == "completed" and scenario["summary"]["output_throughput_tok_s"] > 0
    assert (root / scenario["records_path"]).is_file() and (root / "logs" / "g0_target_only.log").is_file()
    nodes = json.loads((root / "cluster.json").read_text())["nodes"]
    assert list(nodes) == [group["node"]] and nodes[group["node"]]["launches"] == 1
    assert specselect("verify", str(root), cwd=tmp_path).returncode == 0
