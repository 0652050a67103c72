#!/usr/bin/env bash
# The GPU check of issue 24, on a machine with one NVIDIA GPU and no network (<= 5 minutes).
# Runs scripts/gpu_agent.py with the current instrumentation under CUDA's default (spin) and
# blocking-sync scheduling with every trace measured by CUPTI, then blocking sync with CUPTI off
# (the stack rules alone), prints tracelens's figures beside the truth (scripts/gpu_check.py),
# and the GPU overhead figures (bench/overhead.py --gpu-only).  Exit status: the FAIL count.
# Needs: torch with CUDA, transformers, cupti-python (pip install ./instrumentation[gpu]).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
export PYTHONPATH="$PWD:$PWD/instrumentation${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OTEL_TRACES_EXPORTER=none
mkdir -p "$OUT"
fail=0
missing=$("$PY" - <<'PY'
import importlib.util as u
need = ["torch", "transformers", "cupti", "opentelemetry.sdk"]
print(" ".join(n for n in need if u.find_spec(n) is None))
PY
)
if [ -n "$missing" ]; then
  echo "FAIL  missing Python packages: $missing (pip install torch transformers ./instrumentation[gpu])"
  exit 1
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "FAIL  no CUDA device visible to torch"; exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
run() {  # mode fraction label checker-flags...
  local mode=$1 fraction=$2 label=$3; shift 3
  mkdir -p "$OUT/$label"
  echo "== running $label (mode $mode, TRACELENS_GPU_FRACTION=$fraction)"
  if ! OUT="$OUT/$label" TRACELENS_GPU_FRACTION=$fraction REQS=${REQS:-3} \
      timeout 150 "$PY" scripts/gpu_agent.py "$mode" > "$OUT/$label/agent.log" 2>&1; then
    echo "FAIL  $label: the agent failed (last lines of $OUT/$label/agent.log):"
    tail -20 "$OUT/$label/agent.log"; fail=$((fail + 1)); return
  fi
  grep -E "^collector|cudaSetDeviceFlags" "$OUT/$label/agent.log"
  "$PY" scripts/gpu_check.py "$OUT/$label" "$mode" "$@"
  fail=$((fail + $?))
}
run spin 1 spin-cupti --expect-cupti --findings
run block 1 block-cupti --expect-cupti
run block 0 block-stacks
echo "== GPU overhead (bench/overhead.py --gpu-only)"
timeout 120 "$PY" bench/overhead.py --gpu-only --gpu-rounds "${GPU_ROUNDS:-9}" || fail=$((fail + 1))
echo "== gpu-check: $fail FAIL (outputs in $OUT)"
exit "$fail"
