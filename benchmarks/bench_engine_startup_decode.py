"""Start-up time and decode speed of a target-only vLLM server vs an n-gram server, side by side, one run.

Starts the two servers one after the other on the bundled SmolLM2-135M model (CPU, float32, eager by
default) and prints start-up seconds, median decode tokens/s over a few repetitive prompts (streaming,
temperature 0) and the n-gram acceptance the server reported, with candidate/baseline ratios.

    .venv/bin/python benchmarks/bench_engine_startup_decode.py [--python ENGINE_PY --model DIR] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from specselect.engines.base import LaunchSpec, RunningServer
from specselect.engines.telemetry import build_spec_telemetry, spec_decode_delta, summarize_per_request
from specselect.engines.vllm.engine import VllmEngine
from specselect.engines.vllm.specconfig import build_speculative_config

CODE = "\n".join(
    [
        "def total_price(items, tax_rate):",
        "    subtotal = 0",
        "    for item in items:",
        "        subtotal += item.price * item.quantity",
        "    tax = subtotal * tax_rate",
        "    return subtotal + tax",
    ]
)
PROMPTS = (
    "Repeat this list exactly, three times:\n" + "\n".join(f"- item {i}: apple banana cherry" for i in range(8)),
    f"Rewrite this Python function, renaming `total_price` to `compute_total`; change nothing else:\n\n{CODE}",
    "Copy this JSON exactly:\n"
    + json.dumps([{"id": i, "name": f"user{i}", "active": i % 2 == 0, "role": "viewer"} for i in range(6)]),
)


def stream_chat(server: RunningServer, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One streaming temperature-0 chat request; tokens counted from `usage`, never from chunks."""
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=300)
    body = {
        "model": server.served_model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    sent = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
    first = last = None
    usage: dict[str, Any] = {}
    metrics = None
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if any((c.get("delta") or {}).get("content") for c in chunk.get("choices", [])):
            now = time.perf_counter()
            first = first or now
            last = now
        if chunk.get("usage"):
            usage, metrics = chunk["usage"], chunk.get("metrics")
    conn.close()
    tokens = int(usage.get("completion_tokens", 0))
    decode_s = (last - first) if first is not None and last is not None else 0.0
    return {
        "tokens": tokens,
        "ttft_s": (first - sent) if first is not None else None,
        "decode_tok_s": (tokens - 1) / decode_s if decode_s > 0 and tokens > 1 else None,
        "metrics": metrics,
    }


def run_group(engine: VllmEngine, spec: LaunchSpec, max_tokens: int, repeats: int) -> dict[str, Any]:
    launcher = engine.launch(spec)
    with launcher as server:
        stream_chat(server, "Say hello.", 8)  # warm-up
        before = engine.snapshot(server)
        results = [stream_chat(server, p, max_tokens) for _ in range(repeats) for p in PROMPTS]
        after = engine.snapshot(server)
    telemetry = build_spec_telemetry(
        spec_decode_delta(before, after, server.served_model), summarize_per_request([r["metrics"] for r in results])
    )
    rates = [r["decode_tok_s"] for r in results if r["decode_tok_s"] is not None]
    return {
        "startup_s": server.startup_s,
        "decode_tok_s": statistics.median(rates) if rates else None,
        "ttft_ms": statistics.median(r["ttft_s"] * 1000 for r in results if r["ttft_s"] is not None),
        "tokens": sum(r["tokens"] for r in results),
        "telemetry": telemetry,
        "release": launcher.release_check,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, help="engine python (default: the managed CPU vLLM environment)")
    parser.add_argument("--model", type=Path, help="model directory (default: builtin:smollm2-135m)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--compiled", action="store_true", help="omit --enforce-eager (slow start-up)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--k", type=int, default=4, help="num_speculative_tokens of the n-gram group")
    args = parser.parse_args()

    if args.python is None or args.model is None:
        from specselect.assets import resolve_model
        from specselect.engines.vllm.envsetup import engine_env_from_python, ensure_managed_vllm_env

        env = engine_env_from_python(args.python) if args.python else ensure_managed_vllm_env()
        python, model = env.python, args.model or resolve_model("builtin:smollm2-135m", env=env).path
    else:
        python, model = args.python, args.model
    engine = VllmEngine(python=python)
    caps = engine.probe()
    ngram = build_speculative_config("ngram", None, args.k, None, {"prompt_lookup_min": 2, "prompt_lookup_max": 5})
    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    common: dict[str, Any] = {
        "model_path": model,
        "served_model_name": "smollm2",
        "dtype": args.dtype,
        "max_model_len": 2048,
        "engine_args": () if args.compiled else ("--enforce-eager",),
        "env": {"VLLM_CPU_KVCACHE_SPACE": "2"},
        "startup_timeout_s": 900.0,
    }
    rows: dict[str, dict[str, Any]] = {}
    for group, cfg in (("baseline", None), ("ngram", ngram)):
        spec = LaunchSpec(
            group=group,
            speculative_config=cfg,
            per_request_spec_metrics=cfg is not None and caps.per_request_spec_metrics_flag,
            log_path=work / f"{group}.log",
            run_dir=work / group,
            **common,
        )
        print(f"running {group} ...", file=sys.stderr, flush=True)
        rows[group] = run_group(engine, spec, args.max_tokens, args.repeats)

    base, cand = rows["baseline"], rows["ngram"]
    mode = f"{args.dtype}, {'compiled' if args.compiled else 'eager'}, vLLM {caps.engine_version}"
    n = len(PROMPTS) * args.repeats
    print(f"\nengine start-up and decode, {mode}; {n} repetitive prompts x {args.max_tokens} tokens, T=0, streaming")
    print(f"{'metric':<28}{'baseline':>12}{'ngram k=' + str(args.k):>12}{'ratio':>9}")

    def row(name: str, b: float | None, c: float | None, fmt: str = "{:.1f}") -> None:
        ratio = f"{c / b:.2f}x" if b and c else "-"
        shown = [fmt.format(v) if v is not None else "-" for v in (b, c)]
        print(f"{name:<28}{shown[0]:>12}{shown[1]:>12}{ratio:>9}")

    row("start-up s", base["startup_s"], cand["startup_s"])
    row("decode tok/s (median)", base["decode_tok_s"], cand["decode_tok_s"])
    row("TTFT ms (median)", base["ttft_ms"], cand["ttft_ms"], "{:.0f}")
    tel = cand["telemetry"]
    print(
        f"ngram acceptance ({tel.source}): rate {tel.acceptance_rate:.3f}, mean length "
        f"{tel.mean_acceptance_length:.2f}, cross-check agree={tel.cross_check.agree if tel.cross_check else None}"
        if tel.acceptance_rate is not None and tel.mean_acceptance_length is not None
        else f"ngram acceptance: {tel.source}"
    )
    for group, data in rows.items():
        rel = data["release"]
        print(f"{group}: released port={rel.port_free} processes={rel.processes_gone} in {rel.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
