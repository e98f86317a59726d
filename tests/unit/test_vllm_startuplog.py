"""A vLLM server's start-up in phases and its warnings, read from its own log lines (vLLM 0.32's wording)."""

from __future__ import annotations

import datetime as dt

from specselect._engines.base import RunningServer
from specselect._engines.vllm.startuplog import read_startup, startup_split, startup_warnings

SPAWN = dt.datetime(2026, 12, 7, 20, 11, 20).timestamp()

# An eager CPU start with n-gram speculation, as vLLM 0.32 logged it on this machine (trimmed).
EAGER = """\
# specselect: vLLM server for g1_ngram attempt 1 on port 35917: python -m vllm.entrypoints.cli.main serve ...
(APIServer pid=13032) INFO 12-07 20:11:28 [api_utils.py:347]  version 0.32.0
(APIServer pid=13032) WARNING 12-07 20:11:28 [vllm.py:1703] Enforce eager set, disabling torch.compile, CUDAGraphs, \
and JIT kernel warmup.
(EngineCore pid=13055) WARNING 12-07 20:11:39 [cpu_worker.py:114] libtcmalloc is not found in LD_PRELOAD. For best \
performance, please follow the section `set LD_PRELOAD`
(EngineCore pid=13055) WARNING 12-07 20:11:39 [cpu_worker.py:114] libiomp is not found in LD_PRELOAD. For best \
performance, please follow the section `set LD_PRELOAD`
(EngineCore pid=13055) WARNING 12-07 20:11:39 [cpu_worker.py:130] Speculative decoding on CPU without Intel OpenMP \
in LD_PRELOAD will cause significant performance loss.
(EngineCore pid=13055) INFO 12-07 20:11:40 [cpu_model_runner.py:68] Starting to load model /models/smollm2-135m...
(EngineCore pid=13055) INFO 12-07 20:11:40 [default_loader.py:501] Loading weights took 0.39 seconds
(EngineCore pid=13055) INFO 12-07 20:11:42 [kv_cache_utils.py:2327] CPU KV cache size: 46,592 tokens
(EngineCore pid=13055) INFO 12-07 20:11:42 [core.py:402] init engine (profile, create kv cache, warmup model) took \
0.80 s
(APIServer pid=13032) INFO 12-07 20:11:44 [entry.py:140] Starting vLLM server on http://127.0.0.1:35917
"""

# A compiled start on CUDA: the first launch of a configuration compiles, a later one loads from the cache.
COMPILED = """\
(EngineCore pid=7) INFO 12-07 20:11:30 [gpu_model_runner.py:5040] Starting to load model /models/llama...
(EngineCore pid=7) INFO 12-07 20:11:40 [gpu_model_runner.py:5150] Model loading took 15.0 GiB memory and 9.8 seconds
(EngineCore pid=7) INFO 12-07 20:11:41 [backends.py:1105] Using cache directory: \
/runs/work/g0.l1/cache/vllm/torch_compile_cache/5c1e0a9b2d/rank_0_0/backbone for vLLM's torch.compile
(EngineCore pid=7) INFO 12-07 20:11:50 [backends.py:{line}] {cache_line}
(EngineCore pid=7) INFO 12-07 20:12:20 [gpu_model_runner.py:6582] Graph capturing finished in 12 secs, took 0.5 GiB
(EngineCore pid=7) INFO 12-07 20:12:21 [core.py:402] init engine (profile, create kv cache, warmup model) took \
40.00 s (compilation: {compile_s} s)
"""
MISS = "Compiling a graph for compile range (1, 8192) takes 20.50 s"
HIT = "Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 1.20 s"


def test_an_eager_start_splits_into_imports_weights_kv_and_ready_with_no_compile() -> None:
    split = startup_split(EAGER, started_at=SPAWN, ready_at=SPAWN + 25.0)
    assert split.total_s == 25.0
    assert split.process_and_imports_s == 20.5  # spawn at :20, "Starting to load model" in second :40
    assert split.compile_and_graphs_s == 0.0
    assert split.profile_and_kv_s == 0.8  # the engine's own "init engine ... took 0.80 s"
    assert split.compile_cache == "off"
    parts = (split.process_and_imports_s, split.weight_load_s, split.profile_and_kv_s, split.compile_and_graphs_s)
    assert sum(p or 0.0 for p in parts) + (split.ready_s or 0.0) == split.total_s


def test_a_compiling_start_states_its_compile_and_capture_and_the_engines_cache_directory() -> None:
    log = COMPILED.format(line=399, cache_line=MISS, compile_s="21.00")
    split = startup_split(log, started_at=SPAWN, ready_at=SPAWN + 65.0, cache_key="k1")
    assert split.compile_and_graphs_s == 33.0  # 21 s compilation + 12 s graph capture, as the engine states them
    assert split.profile_and_kv_s == 7.0  # the rest of its 40 s initialisation
    assert split.compile_cache == "miss"
    assert split.compile_cache_dir == "torch_compile_cache/5c1e0a9b2d"
    assert split.cache_key == "k1"


def test_a_later_start_of_the_configuration_reads_as_a_cache_hit() -> None:
    log = COMPILED.format(line=296, cache_line=HIT, compile_s="1.30")
    split = startup_split(log, started_at=SPAWN, ready_at=SPAWN + 35.0)
    assert split.compile_cache == "hit"
    assert split.compile_and_graphs_s == 13.3


def test_a_compile_the_engine_does_not_time_is_left_inside_its_initialisation() -> None:
    # vLLM 0.32 on CPU without --enforce-eager traces once with Inductor and states no compile time.
    log = EAGER.replace("Enforce eager set", "Compile settings").replace("took 0.80 s", "took 95.00 s")
    split = startup_split(log, started_at=SPAWN, ready_at=SPAWN + 125.0)
    assert split.init_s == 95.0
    assert split.compile_and_graphs_s is None and split.profile_and_kv_s is None
    assert split.compile_cache == "unknown"


def test_a_log_without_the_engines_lines_gives_only_the_total() -> None:
    split = startup_split("Traceback (most recent call last):\n", started_at=SPAWN, ready_at=SPAWN + 3.0)
    assert split.total_s == 3.0
    assert split.process_and_imports_s is None and split.weight_load_s is None
    assert split.compile_cache == "unknown"


def test_the_warnings_that_bear_on_the_measurement_are_collected_once_each() -> None:
    topics = [w.topic for w in startup_warnings(EAGER + EAGER)]
    assert topics == ["tcmalloc", "intel_openmp", "intel_openmp_speculative"]
    assert startup_warnings(EAGER)[2].message.startswith("Speculative decoding on CPU without Intel OpenMP")


def test_a_preloaded_start_logs_none_of_those_warnings() -> None:
    preloaded = "\n".join(line for line in EAGER.splitlines() if "LD_PRELOAD" not in line)
    assert startup_warnings(preloaded) == ()


def test_read_startup_adds_the_split_the_warnings_and_the_preloaded_libraries_to_the_server() -> None:
    server = RunningServer(
        base_url="http://127.0.0.1:1",
        served_model="m",
        pid=1,
        pgid=1,
        port=1,
        log_path="server.log",
        command=("vllm",),
        startup_s=25.0,
        started_at=SPAWN,
    )
    read = read_startup(server, EAGER, cache_key="k", preload="/usr/lib/libtcmalloc_minimal.so.4:/env/lib/libiomp5.so")
    assert read.startup is not None and read.startup.total_s == 25.0 and read.startup.cache_key == "k"
    assert read.preload == ("/usr/lib/libtcmalloc_minimal.so.4", "/env/lib/libiomp5.so")
    assert len(read.engine_warnings) == 3
