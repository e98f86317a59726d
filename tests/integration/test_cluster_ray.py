"""Groups fanned out over a real local Ray cluster (several raylets on this machine) on the stand-in vLLM.

Each raylet offers one `slot`, and a block needs one, so blocks that may run at once land on different nodes.
Ray and the raylets are real; the engine is the stand-in of tests/component/test_fault_harness.py (a real vLLM per
node would need more cores than this machine has; tests/integration/test_cluster_real_engine.py runs one real
group through a one-node cluster).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "component"))  # the stand-in vLLM (test support)
from test_fault_harness import (
    FakeRun,
    assert_no_orphans,
    fake_engine_processes,
    fake_run_fixture,
    make_fake_vllm,
    ngram,
    plan_text,
)

import specselect
from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_run
from specselect._evidence.pipeline import InMemoryRecords
from specselect._runner.resume import keep_records
from specselect.records.evidence.result import Evidence
from specselect.records.results import EvidenceFile

ray = pytest.importorskip("ray", reason="the cluster backend needs the ray extra (pip install 'specselect[ray]')")
Cluster = pytest.importorskip("ray.cluster_utils").Cluster
pytestmark = pytest.mark.integration
__all__ = ["fake_run_fixture"]  # the harness's per-test run directory, over this module's fake_vllm

SLOT = {"slot": 1.0}
OTHER_MODEL = "other-model"


@pytest.fixture(scope="module", name="fake_vllm")
def fake_vllm_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = make_fake_vllm(tmp_path_factory.mktemp("fake-vllm"))
    other = python.parents[2] / OTHER_MODEL
    other.mkdir()
    (other / "config.json").write_text((python.parents[2] / "model" / "config.json").read_text())
    return python


@pytest.fixture(name="cluster")
def cluster_fixture() -> Iterator[Cluster]:
    """A head without slots and two workers with one each (blocks run on the workers); the plans name its
    address."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    yield cluster
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


def cluster_plan(
    run: FakeRun, address: str, *, rounds: int = 3, token_delay: float = 0.0, per_block: int | None = None
) -> Path:
    """Two tracks (g1, g2 on the model; g3 on another), `rounds` rounds, one slot per block, on the cluster at
    `address`; with `per_block`, that many candidates per block."""
    slow = ("--fake-token-delay", str(token_delay)) if token_delay else ()
    g3 = {**ngram("g3", *slow), "target": {"model": str(run.python.parents[2] / OTHER_MODEL)}}
    design: dict[str, Any] = {"rounds": rounds} | ({"candidates_per_block": per_block} if per_block else {})
    text = plan_text(run.python, candidates=[ngram("g1", *slow), ngram("g2", *slow), g3], run=design)
    text += f'\n[cluster]\nbackend = "ray"\naddress = "{address}"\n\n[cluster.resources_per_group]\nslot = 1\n'
    path = run.dir / "plan.toml"
    path.write_text(text)
    return path


def _groups(results: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (results / "groups").glob("*.json")}


def _nodes(group: dict[str, Any]) -> list[str | None]:
    return [group["node"], *(r["node"] for r in group["relaunches"])]


def _local_evidence(root: Path) -> Evidence:
    """The evidence a local run draws from the same records: the run's documents and its records read from disk
    in plan order, through the local path's conclusion."""
    from specselect._engines import EngineSetup
    from specselect._runner.conclusion import look
    from specselect._runner.context import RunContext
    from specselect._runner.progress import SilentProgress
    from specselect._workloads.loader import load_workload

    docs = load_run(root)
    records = InMemoryRecords()
    layout = RunLayout(root)
    for group in docs.groups:
        keep_records(layout, group, records)
    loaded = specselect.load_plan(str(root.parent.parent / "plan.toml"))
    setup = EngineSetup(kind=docs.preflight.engine_kind, caps=docs.preflight.engine)
    workloads = {n: load_workload(ref, name=n, base_dir=loaded.base_dir) for n, ref in loaded.plan.workloads.items()}
    run = RunContext(loaded, layout, None, setup, workloads, records, SilentProgress())  # type: ignore[arg-type]
    return look(run, list(docs.groups))


def test_a_plan_fans_out_over_the_nodes_pairing_within_each_node(fake_run: FakeRun, cluster: Cluster) -> None:
    cluster_plan(fake_run, cluster.address)
    done = fake_run.cli("run", "plan.toml", "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    root = fake_run.results / "faults"
    groups = _groups(root)
    assert {name: g["run_status"] for name, g in groups.items()} == dict.fromkeys(
        ["g0_target_only", "g0_target_only@other-model", "g1", "g2", "g3"], "completed"
    )
    assert all(len(_nodes(g)) == 3 and None not in _nodes(g) for g in groups.values())
    for track, members in (("g0_target_only", ("g1", "g2")), ("g0_target_only@other-model", ("g3",))):
        assert all(_nodes(groups[m]) == _nodes(groups[track]) for m in members)  # launch j next to baseline launch j
    used = {node for g in groups.values() for node in _nodes(g)}
    assert len(used) >= 2  # blocks that could run at once did
    nodes = json.loads((root / "cluster.json").read_text())["nodes"]
    assert set(nodes) == used and all(n["host"]["logical_cpus"] >= 1 for n in nodes.values())
    assert sum(n["launches"] for n in nodes.values()) == 15 and sum(n["baseline_launches"] for n in nodes.values()) == 6
    assert "## Nodes" in (root / "report.md").read_text()
    written = EvidenceFile.model_validate_json((root / "evidence.json").read_text())
    local = _local_evidence(root)
    assert written.model_dump(include=set(Evidence.model_fields)) == local.model_dump()
    assert fake_run.cli("verify", str(root)).returncode == 0


def _launches(group: dict[str, Any]) -> list[tuple[str, datetime, datetime]]:
    """Each launch of a group: its node, start and end."""
    lives = [group, *group["relaunches"]]
    return [
        (life["node"], datetime.fromisoformat(life["started_at"]), datetime.fromisoformat(life["finished_at"]))
        for life in lives
    ]


def test_a_tracks_candidates_split_into_blocks_run_at_once_each_paired_with_its_own_baseline_launch(
    fake_run: FakeRun, cluster: Cluster
) -> None:
    cluster_plan(fake_run, cluster.address, rounds=2, token_delay=0.02, per_block=1)
    done = fake_run.cli("run", "plan.toml", "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    root = fake_run.results / "faults"
    groups = _groups(root)
    tracks = {"g1": "g0_target_only", "g2": "g0_target_only.block2", "g3": "g0_target_only@other-model"}
    assert set(groups) == {*tracks, *tracks.values()}
    assert all(g["run_status"] == "completed" for g in groups.values())
    for member, track in tracks.items():
        assert groups[member]["track"] == track and groups[track]["role"] == "baseline"
        assert _nodes(groups[member]) == _nodes(groups[track])  # each block on one node, its own baseline in it
    baselines = [launch for track in tracks.values() for launch in _launches(groups[track])]
    assert any(
        a[0] != b[0] and a[1] < b[2] and b[1] < a[2] for a in baselines for b in baselines
    )  # blocks of one round ran at once, on different nodes
    written = EvidenceFile.model_validate_json((root / "evidence.json").read_text())
    assert {e.candidate: e.track for e in written.entries} == tracks
    assert written.model_dump(include=set(Evidence.model_fields)) == _local_evidence(root).model_dump()
    assert fake_run.cli("verify", str(root)).returncode == 0


def _node_serving(cluster: Cluster, marker: Path) -> Any | None:
    """The worker node one of whose workers runs a stand-in server right now (its raylet is an ancestor)."""
    for server in fake_engine_processes(marker):
        ancestors = {p.pid for p in server.parents()}
        for node in cluster.worker_nodes:
            raylet = node.all_processes.get("raylet", [None])[0]
            if raylet is not None and raylet.process.pid in ancestors:
                return node
    return None


def _kill_a_serving_node(cluster: Cluster, marker: Path, stop: threading.Event) -> list[str]:
    """Remove the first worker node seen serving: the block on it is lost mid-launch."""
    while not stop.is_set():
        node = _node_serving(cluster, marker)
        if node is not None:
            cluster.remove_node(node, allow_graceful=False)
            return [node.node_id]
        time.sleep(0.05)
    return []


def _run_killing(fake_run: FakeRun, cluster: Cluster, *, nodes: int) -> tuple[Any, list[str]]:
    """`specselect run plan.toml` while up to `nodes` worker nodes are removed, each as soon as it serves."""
    stop = threading.Event()
    killed: list[str] = []
    marker = fake_run.python.parents[1]

    def kill() -> None:
        while len(killed) < nodes and not stop.is_set():
            killed.extend(_kill_a_serving_node(cluster, marker, stop))

    watcher = threading.Thread(target=kill)
    watcher.start()
    try:
        return fake_run.cli("run", "plan.toml", timeout=300), killed
    finally:
        stop.set()
        watcher.join()


def test_a_node_lost_mid_run_has_its_block_placed_again_and_leaves_no_server(
    fake_run: FakeRun, cluster: Cluster
) -> None:
    cluster_plan(fake_run, cluster.address, token_delay=0.05)
    root = fake_run.results / "faults"
    done, killed = _run_killing(fake_run, cluster, nodes=1)
    assert killed, "no node was removed while the run was going"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "lost: " in done.stderr and "placement 2" in done.stderr
    groups = _groups(root)
    assert all(g["run_status"] == "completed" and len(_nodes(g)) == 3 for g in groups.values())
    assert killed[0] not in {node for g in groups.values() for node in _nodes(g)[1:]}
    assert fake_run.cli("verify", str(root)).returncode == 0


def test_a_run_whose_blocks_find_no_node_stops_and_resume_finishes_it(fake_run: FakeRun, cluster: Cluster) -> None:
    cluster_plan(fake_run, cluster.address, token_delay=0.05)
    root = fake_run.results / "faults"
    marker = fake_run.python.parents[1]
    done, _ = _run_killing(fake_run, cluster, nodes=2)  # both workers: no node can hold a block any more
    assert done.returncode == 4, done.stderr[-3000:]
    assert "was lost 2 times" in done.stderr and "--resume" in done.stderr
    assert json.loads((root / "manifest.json").read_text())["status"] == "interrupted"
    assert_no_orphans(marker, root)
    cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    resumed = fake_run.cli("run", "plan.toml", "--resume", timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    groups = _groups(root)
    assert all(g["run_status"] == "completed" and len(_nodes(g)) == 3 for g in groups.values())
    assert fake_run.cli("verify", str(root)).returncode == 0


def test_without_ray_a_cluster_plan_is_refused_before_anything_starts(
    fake_run: FakeRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_plan(fake_run, "auto")
    blocked = fake_run.dir / "no-ray"
    blocked.mkdir()
    (blocked / "ray.py").write_text("raise ImportError('ray is not installed here')\n")
    env = {"PYTHONPATH": f"{blocked}:{specselect_src()}"}
    done = fake_run.cli("probe", "plan.toml", env=env)
    assert done.returncode == 2, done.stderr
    assert "pip install 'specselect[ray]'" in done.stderr
    assert not (fake_run.results / "faults").exists()


def specselect_src() -> str:
    return str(Path(specselect.__file__).resolve().parents[1])
