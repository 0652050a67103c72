# The README's quickstart: `make demo` (install + run the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The verdict corpus generator is linted with the rest (the other scripts are not yet).
CORPUS := scripts/verdict_corpus scripts/make_verdict_corpus.py

.PHONY: install demo test test-all test-all-workers test-all-measures test-vllm gpu-check lint bench sample-report clean

$(STAMP): pyproject.toml setup.py instrumentation/pyproject.toml instrumentation/setup.py instrumentation/tracelens_instrumentation/_speedups.c instrumentation/tracelens_instrumentation/_record.c instrumentation/tracelens_instrumentation/_cpusample.c tracelens/ingest/otlp_proto/_native.c tracelens/ingest/_json_native.c tracelens/ingest/_native_common.h tracelens/ingest/_json_builder.h tracelens/ingest/_json_jaeger.h tracelens/ingest/_json_zipkin.h tracelens/ingest/_json_direct.h tracelens/ingest/_json_jaeger_direct.h tracelens/analysis/_walk.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./instrumentation -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## The main job, end to end.
demo: $(STAMP)
	$(PY) scripts/demo.py

## The default tier (pyproject's addopts: not system, not heavy): a few minutes, one smoke test
## per independent truth.  test-all adds the slow acceptance runs (system) and the full-size
## reliability cases (heavy): what CI runs, with the 25 slowest listed to watch its 15 minutes.
## Two workers (pytest-xdist), each taking whole test files (a file's module fixtures, such as
## its collector or the Prometheus run, are built once): most tests wait on servers and
## subprocesses, so a serial run keeps the 2 cores half idle.  The vLLM suite has its own venv.
## Files marked `measures` assert on the process's own CPU and off-CPU clocks: they run after the
## workers, alone, so that the other worker's load is not in their truth (~25 s), and a failed
## one runs again, twice at most (pytest-rerunfailures): a clock on a shared VM has bad moments,
## a wrong rule fails every run.  Both runs always run; the target fails if either did.
XDIST := -n 2 --dist loadfile
DEFAULT_TIER := not system and not heavy
test: $(STAMP)
	$(PY) -m pytest -q $(XDIST) -m "$(DEFAULT_TIER) and not measures"; a=$$?; \
	$(PY) -m pytest -q -m "$(DEFAULT_TIER) and measures" --reruns 2; b=$$?; exit $$(( a ? a : b ))

ALL_WORKERS := $(PY) -m pytest -q $(XDIST) -m "not measures" --durations=25
ALL_MEASURES := $(PY) -m pytest -q -m "measures" --reruns 2
test-all: $(STAMP)
	$(ALL_WORKERS); a=$$?; $(ALL_MEASURES); b=$$?; exit $$(( a ? a : b ))

## test-all's two halves, for .ci/run: it waits between them for its background vLLM set-up, so
## that the measures files run alone, as they do here.
test-all-workers: $(STAMP)
	$(ALL_WORKERS)

test-all-measures: $(STAMP)
	$(ALL_MEASURES)

test-vllm:
	bash scripts/test-vllm.sh

## On a machine with one NVIDIA GPU (no network): issue 24's GPU figures beside the truth.
gpu-check:
	PYTHON=$(if $(wildcard $(PY)),$(PY),python3) bash scripts/gpu-check.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check tracelens instrumentation tests bench $(CORPUS)
	$(VENV)/bin/ruff format --check tracelens instrumentation tests bench $(CORPUS)
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) bench/analyze.py

sample-report: $(STAMP)
	$(PY) scripts/make_sample_report.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis out
