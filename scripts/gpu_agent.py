"""The GPU check's workload: adapted from shared/data/gpu/gpu_agent.py (recorded on one NVIDIA
H200, 2026-12-04; see fixtures/README.md), so that scripts/gpu-check.sh reads nothing outside
the repository at run time.

Changes from the original: the CUPTI probe mode is gone (the instrumentation's own collector,
``tracelens_instrumentation.gpu``, is what is checked; ``TRACELENS_GPU_FRACTION`` chooses how
many traces it measures); the collector is started explicitly after CUDA is initialised and its
state printed; ``REQS`` defaults to 3; and the truth pass profiles each call in its own
``torch.profiler`` session and sums the kernels' self device time (``llm_generate``'s
``record_function`` range time, which the original read, spans the whole range on the device
timeline and is not kernel time).

    python scripts/gpu_agent.py spin|block        (OUT=dir, REQS=n)

Writes $OUT/spans_<mode>.jsonl (the traced pass) and $OUT/truth_<mode>.json: per call of the
traced pass its wall and thread-CPU time, and per call of the profiled pass its wall,
thread-CPU and kernel (device) time.
"""

import ctypes
import glob
import http.server
import json
import os
import sys
import threading
import time

MODE = sys.argv[1]
OUT = os.environ.get("OUT", "/tmp/out")
if MODE == "block":
    libs = [p for d in sys.path for p in glob.glob(os.path.join(d, "nvidia", "cu*", "lib", "libcudart.so*"))]
    libs += glob.glob(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libcudart.so*"))
    if not libs:
        sys.exit("gpu_agent: no libcudart found to set cudaDeviceScheduleBlockingSync")
    rt = ctypes.CDLL(libs[0])
    rc = rt.cudaSetDeviceFlags(4)
    print("cudaSetDeviceFlags(BlockingSync) ->", rc, libs[0], flush=True)
    if rc != 0:
        sys.exit(f"gpu_agent: cudaSetDeviceFlags failed ({rc})")

import torch  # noqa: E402
from opentelemetry import trace as ot  # noqa: E402

from tracelens_instrumentation import configure, flush, gpu, trace  # noqa: E402

configure(service_name="gpu-agent", file=f"{OUT}/spans_{MODE}.jsonl")
dev = "cuda"
torch.manual_seed(0)
A = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

model = GPT2LMHeadModel(GPT2Config()).to(dev).half().eval()
COLLECTOR = gpu.start()
print("collector", COLLECTOR, gpu.STATE, "fraction", gpu.FRACTION[0], flush=True)


class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(0.03)
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
threading.Thread(target=srv.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{srv.server_address[1]}/search"

calls = []  # (name, wall_ns, thread_cpu_ns, device_ns or None)
PROFILE = [False]


def _device_ns(prof):
    """Kernel, memcpy and memset time of one session: the self device time of the events on
    the device (Kineto gives the CPU ops the device time of what they launched as well, so
    only device events are summed, as torch's own table total does; no user annotations are
    recorded here, whose device range would count twice)."""
    total = 0.0
    for e in prof.key_averages():
        if str(getattr(e, "device_type", "")).endswith("CPU"):
            continue
        total += getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
    return int(total * 1000)  # microseconds -> ns


def timed(name, fn, *a):
    if PROFILE[0]:
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            w, c = time.perf_counter_ns(), time.thread_time_ns()
            r = fn(*a)
            w, c = time.perf_counter_ns() - w, time.thread_time_ns() - c
        calls.append((name, w, c, _device_ns(prof)))
        return r
    w, c = time.perf_counter_ns(), time.thread_time_ns()
    r = fn(*a)
    calls.append((name, time.perf_counter_ns() - w, time.thread_time_ns() - c, None))
    return r


@trace()
def gpu_matmul(n):
    for _ in range(n):
        A @ A
    torch.cuda.synchronize()


@trace(kind="gpu")
def gpu_matmul_declared(n):
    for _ in range(n):
        A @ A
    torch.cuda.synchronize()


@trace()
def llm_generate(ids, new_tokens):
    span = ot.get_current_span()
    span.set_attribute("gen_ai.operation.name", "text_completion")
    span.set_attribute("gen_ai.request.model", "gpt2-random")
    span.set_attribute("gen_ai.usage.input_tokens", int(ids.shape[1]))
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    span.set_attribute("gen_ai.usage.output_tokens", int(out.shape[1] - ids.shape[1]))
    return out


@trace()
def cpu_tool(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


@trace()
def search_tool():
    import urllib.request
    return urllib.request.urlopen(URL).read()


def request(i, f):
    ids = torch.randint(0, 50000, (1, 64 + 96 * (i % 4)), device=dev)
    timed("llm_generate", f(llm_generate), ids, 32 + 16 * (i % 3))
    timed("cpu_tool", f(cpu_tool), 2_000_000)
    timed("search_tool", f(search_tool))
    timed("gpu_matmul", f(gpu_matmul), 150)
    timed("gpu_matmul_declared", f(gpu_matmul_declared), 150)
    timed("llm_generate", f(llm_generate), ids, 48)


@trace()
def handle_request(i):
    request(i, lambda fn: fn)


def bare(fn):
    return getattr(fn, "__wrapped__", fn)


# warm-up (kernels, cuBLAS handles, generate caches), not traced as requests
with torch.no_grad():
    model.generate(torch.randint(0, 50000, (1, 64), device=dev), max_new_tokens=4, pad_token_id=0)
(A @ A).sum().item()

t0 = time.perf_counter()
for i in range(int(os.environ.get("REQS", "3"))):
    handle_request(i)
flushed = flush()
traced_s = time.perf_counter() - t0
first = len(calls)

# the truth: the same calls untraced, each under its own profiler session
PROFILE[0] = True
for i in range(int(os.environ.get("TRUTH_REQS", "2"))):
    request(i, bare)

json.dump({"mode": MODE, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
           "collector": COLLECTOR, "collector_state": dict(gpu.STATE), "fraction": gpu.FRACTION[0],
           "flushed": flushed, "traced_s": traced_s,
           "traced": [(n, w, c) for n, w, c, _ in calls[:first]],
           "profiled": [(n, w, c, d) for n, w, c, d in calls[first:]]},
          open(f"{OUT}/truth_{MODE}.json", "w"), indent=1)
print(MODE, "done", flush=True)
