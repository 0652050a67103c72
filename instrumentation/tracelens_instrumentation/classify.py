"""Telling io from wait: what is a suspended coroutine awaiting, what is a thread blocked in?

Evidence comes from Python frames (a coroutine's ``cr_await`` chain, a thread's stack from
``sys._current_frames()``), judged innermost first:

* a *sleep* (``asyncio.sleep``, ``time.sleep``, retry/backoff libraries) decides ``wait``;
* a frame of an I/O library (sockets, ssl, asyncio streams and transports, HTTP clients, DB
  drivers, subprocess pipes) decides ``io``;
* a synchronisation primitive (locks, semaphores, events, conditions, queues, futures, joins) is
  weak evidence of ``wait``: an I/O library further out overrides it, because HTTP clients and
  drivers wait on their own events and pool queues while the socket is read;
* for the innermost frame of a blocked thread, whose C call has no frame of its own, the source
  text of the call being made (``time.sleep(...)``, ``sock.recv(...)``, ``with lock:``) is read
  through the code object's positions and judged by the callee's name.

No evidence at all means ``wait`` for a suspended coroutine (a bare ``yield``, another
task's future, an executor job) and ``cpu`` for a blocked thread (off-CPU in plain Python
code: waiting for the GIL, which the sampler bounds by the CPU the other Python threads used
meanwhile; the rest is wait).  Waiting for a device (``DEVICE_WAITS``, ``device_wait``) is
judged before all of these: its time is the device's, on-CPU or not.  Judgements are cached per
code object (and per call site), so a classification is a walk over a handful of frames with
dictionary lookups.
"""

from __future__ import annotations

import linecache
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from tracelens_instrumentation import attributes as A

SLEEP: Final = 3  # decisive wait
IO: Final = 2  # decisive io
WAIT: Final = 1  # weak wait: an I/O library further out wins
NONE: Final = 0
CHECKPOINT: Final = 4  # sleep(0): a yield to the loop, weak, and it neutralises its ``sleep``
STOP: Final = -1  # our own stepper: the rest of the chain belongs to a child span
DEFER: Final = "defer"  # the awaited task has not started yet: judge again once it has
MAX_FRAMES: Final = 48

_IO_MODULES: Final = (
    "socket", "ssl", "select", "selectors", "http.client", "urllib.request", "urllib3",
    "requests", "httpx", "httpcore", "h11", "h2", "aiohttp", "websockets", "websocket",
    "asyncio.streams", "asyncio.selector_events", "asyncio.proactor_events", "asyncio.sslproto",
    "asyncio.subprocess", "asyncio.base_subprocess", "asyncio.unix_events", "subprocess",
    "anyio.streams", "anyio._core._sockets", "anyio._core._subprocesses", "aiofiles",
    "aiosqlite", "asyncpg", "aiomysql", "aiopg", "psycopg", "psycopg2", "pymysql", "MySQLdb",
    "redis", "aioredis", "pymongo", "motor", "grpc", "botocore", "aiobotocore", "elasticsearch",
    "elastic_transport", "sqlalchemy.engine", "sqlalchemy.pool", "ftplib", "smtplib", "shutil",
    "paramiko", "dns",
)  # fmt: skip
_SLEEP_MODULES: Final = ("tenacity", "backoff", "stamina")
_WAIT_MODULES: Final = (
    "asyncio.locks", "asyncio.queues", "asyncio.tasks", "asyncio.futures", "asyncio.timeouts",
    "threading", "queue", "concurrent.futures", "multiprocessing", "aiolimiter",
    "asyncio_throttle", "anyio._core._synchronization", "anyio.abc._tasks",
)  # fmt: skip
# Coroutines of modules otherwise judged by the rules above, named by (module, qualname prefix).
_QUALNAME_RULES: Final = (
    ("asyncio.tasks", "sleep", SLEEP),
    ("asyncio.tasks", "__sleep0", CHECKPOINT),
    ("anyio._core._eventloop", "sleep", SLEEP),
    ("asyncio.base_events", "BaseEventLoop.create_connection", IO),
    ("asyncio.base_events", "BaseEventLoop.getaddrinfo", IO),
    ("asyncio.base_events", "BaseEventLoop.getnameinfo", IO),
    ("asyncio.base_events", "BaseEventLoop.sock_", IO),
    ("asyncio.base_events", "BaseEventLoop.sendfile", IO),
    ("asyncio.base_events", "BaseEventLoop.start_tls", IO),
    ("asyncio.base_events", "BaseEventLoop.subprocess_", IO),
    ("asyncio.base_events", "BaseEventLoop.create_datagram_endpoint", IO),
    ("anyio._backends._asyncio", "SocketStream", IO),
    ("anyio._backends._asyncio", "UNIXSocketStream", IO),
    ("anyio._backends._asyncio", "TCPSocketListener", IO),
    ("anyio._backends._asyncio", "UDPSocket", IO),
    ("anyio._backends._asyncio", "ConnectedUDPSocket", IO),
    ("anyio._backends._asyncio", "StreamReaderWrapper", IO),
    ("anyio._backends._asyncio", "StreamWriterWrapper", IO),
    ("anyio._backends._asyncio", "Process", IO),
    ("anyio._backends._asyncio", "AsyncIOBackend.connect_", IO),
    ("anyio._backends._asyncio", "AsyncIOBackend.getaddrinfo", IO),
    ("anyio._backends._asyncio", "AsyncIOBackend.wait_", IO),
    ("anyio._backends._asyncio", "AsyncIOBackend.sleep", SLEEP),
    ("anyio._backends._asyncio", "", WAIT),
)
_SLEEP_CALLEES: Final = frozenset({"sleep", "nap", "usleep"})
_WAIT_CALLEES: Final = frozenset(
    {"acquire", "wait", "join", "lock", "waitpid", "wait4", "sigwait", "pause", "result"}
)
_IO_CALLEES: Final = frozenset(
    {
        "recv", "recv_into", "recvfrom", "recvfrom_into", "recvmsg", "send", "sendall",
        "sendto", "sendmsg", "sendfile", "connect", "connect_ex", "accept", "read", "readinto",
        "readline", "readlines", "readall", "pread", "write", "writelines", "pwrite", "flush",
        "fsync", "fdatasync", "execute", "executemany", "executescript", "fetchone",
        "fetchall", "fetchmany", "commit", "rollback", "getaddrinfo", "gethostbyname",
        "create_connection", "select", "poll", "urlopen", "request", "copyfileobj", "open",
        "communicate", "check_output", "query",
    }
)  # fmt: skip

# Calls in which the host thread waits for a device (GPU): the one table.  Python functions by
# (module, qualname); their time, on-CPU (CUDA's default spin) or off-CPU (blocking sync), is
# the device's, not the CPU's.  ``DEVICE_WAIT_CALLEES``: C methods (no frame of their own),
# named at the call site, that wait for the device only on device data, so they count when a
# device runtime is initialised in the process (``_device_runtime``).
DEVICE_WAITS: Final = frozenset(
    {
        ("torch.cuda", "synchronize"),
        ("torch.cuda.streams", "Stream.synchronize"),
        ("torch.cuda.streams", "Event.synchronize"),
        ("torch.xpu", "synchronize"),
        ("torch.mps", "synchronize"),
        ("torch._tensor", "Tensor.__array__"),
        ("cupy", "asnumpy"),
        ("cupy.cuda.stream", "Stream.synchronize"),
        ("cupy.cuda.stream", "Event.synchronize"),
        ("cupy.cuda.device", "Device.synchronize"),
        ("cupy.cuda.runtime", "deviceSynchronize"),
        ("cupy.cuda.runtime", "streamSynchronize"),
        ("jax._src.api", "block_until_ready"),
        ("jax._src.api", "device_get"),
        ("jax._src.array", "ArrayImpl.block_until_ready"),
        ("jax._src.array", "ArrayImpl.__array__"),
        ("jax._src.array", "ArrayImpl._value"),
        ("numba.cuda.cudadrv.driver", "Stream.synchronize"),
        ("numba.cuda.api", "synchronize"),
    }
)  # fmt: skip
DEVICE_WAIT_CALLEES: Final = frozenset(
    {"item", "cpu", "tolist", "numpy", "synchronize", "block_until_ready", "asnumpy"}
)
_DEVICE_MODULES: Final = ("torch", "cupy", "jax", "numba")

_code_kinds: dict[types.CodeType, int] = {}
_device_codes: dict[types.CodeType, bool] = {}
_device_sites: dict[tuple[types.CodeType, int], bool] = {}
_site_kinds: dict[tuple[types.CodeType, int], int] = {}
_stop_codes: set[types.CodeType] = set()


def register_stop(code: types.CodeType) -> None:
    """Marks one of our own steppers: a chain reaching it continues in a child span."""
    _stop_codes.add(code)


def _module_kind(module: str, qualname: str) -> int:
    for mod, prefix, kind in _QUALNAME_RULES:
        if module == mod and qualname.startswith(prefix):
            return kind
    if _matches(module, _SLEEP_MODULES):
        return SLEEP
    if _matches(module, _IO_MODULES):
        return IO
    if _matches(module, _WAIT_MODULES):
        return WAIT
    return NONE


def _matches(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def code_kind(frame: types.FrameType) -> int:
    code = frame.f_code
    kind = _code_kinds.get(code)
    if kind is None:
        if code in _stop_codes:
            kind = STOP
        else:
            module = frame.f_globals.get("__name__") or ""
            qualname = getattr(code, "co_qualname", code.co_name)
            kind = _module_kind(str(module), qualname)
        if len(_code_kinds) < 100_000:
            _code_kinds[code] = kind
    return kind


def callee_kind(frame: types.FrameType) -> int:
    """Judges the call a frame is making from its source text (Python 3.11+ positions)."""
    code, lasti = frame.f_code, frame.f_lasti
    key = (code, lasti)
    kind = _site_kinds.get(key)
    if kind is None:
        kind = _judge_site(code, lasti)
        if len(_site_kinds) < 100_000:
            _site_kinds[key] = kind
    return kind


def _judge_site(code: types.CodeType, lasti: int) -> int:
    try:
        opname = _opname(code.co_code[lasti])
        if opname in ("BEFORE_WITH", "BEFORE_ASYNC_WITH", "SETUP_WITH"):
            return WAIT  # entering a context manager while off-CPU: a lock
        text = _site_text(code, lasti)
    except Exception:
        return NONE
    if not text or "(" not in text:
        return NONE
    callee = text.split("(", 1)[0].strip().rsplit(".", 1)[-1]
    if callee in _SLEEP_CALLEES:
        return SLEEP
    if callee in _IO_CALLEES:
        return IO
    if callee in _WAIT_CALLEES:
        return WAIT
    return NONE


def _opname(op: int) -> str:
    import dis

    return dis.opname[op]


def _site_text(code: types.CodeType, lasti: int) -> str:
    positions = getattr(code, "co_positions", None)
    if positions is None:
        return ""
    for index, pos in enumerate(positions()):
        if index == lasti // 2:
            line, end_line, col, end_col = pos
            break
    else:
        return ""
    if line is None or col is None or end_col is None:
        return ""
    lines = [linecache.getline(code.co_filename, n) for n in range(line, (end_line or line) + 1)]
    if not lines or not lines[0]:
        return ""
    encoded = [ln.encode("utf-8") for ln in lines]
    if len(encoded) == 1:
        return encoded[0][col:end_col].decode("utf-8", "replace")
    joined = encoded[0][col:] + b"".join(encoded[1:-1]) + encoded[-1][:end_col]
    return joined.decode("utf-8", "replace")


def decide(kinds: list[int], default: str = A.WAIT) -> str:
    """Innermost-first judgement over frame kinds (innermost last in ``kinds``).

    Weak ``WAIT`` frames do not stop the scan (an I/O library further out wins), nor does a
    ``sleep(0)`` checkpoint (libraries such as anyio yield to the loop inside socket reads).
    With only weak evidence the answer is ``wait``; with none at all, ``default``.
    """
    checkpoint = weak = False
    for kind in reversed(kinds):
        if kind == CHECKPOINT:
            checkpoint = True
        elif kind == SLEEP and not checkpoint:
            return A.WAIT
        elif kind == IO:
            return A.IO
        elif kind in (WAIT, SLEEP, CHECKPOINT):
            weak = True
    return A.WAIT if weak else default


def awaiting(obj: Any, yielded: Any) -> str | None:
    """What the suspended coroutine/generator ``obj`` waits for; None when a child span has it,
    ``DEFER`` when it waits for a task that has not run yet (``wait_for`` before 3.12).

    ``yielded`` (what it passed up to the event loop) is not needed by the rules; the frames
    of the ``cr_await`` chain carry the evidence.
    """
    kinds: list[int] = []
    last: types.FrameType | None = None
    for frame, kind in _chain(obj):
        if kind == STOP:
            return None
        kinds.append(kind)
        last = frame
    if kinds and kinds[-1] == WAIT:
        task = _wait_for_task(last)
        if task is not None:
            if _not_started(task):
                return DEFER
            kinds.extend(_task_chain(task))
    return decide(kinds)


def _not_started(task: Any) -> bool:
    try:
        coro = task.get_coro()
    except Exception:
        return False
    if type(coro) is not types.CoroutineType or coro.cr_frame is None or coro.cr_running:
        return False
    suspended = getattr(coro, "cr_suspended", None)
    if suspended is not None:
        return not suspended
    return coro.cr_frame.f_lasti < 0


def _chain(obj: Any) -> Iterator[tuple[types.FrameType, int]]:
    """The frames of the await (or yield-from) chain of the coroutine or generator ``obj``,
    outermost first, with their kinds: at most ``MAX_FRAMES``, the last one a ``STOP`` frame
    when there is one."""
    cur = obj
    for _ in range(MAX_FRAMES):
        frame, nxt = _link(cur)
        if frame is None:
            return
        kind = code_kind(frame)
        yield frame, kind
        if kind == STOP or nxt is None:
            return
        cur = nxt


def _link(obj: Any) -> tuple[types.FrameType | None, Any]:
    typ = type(obj)
    if typ is types.CoroutineType:
        return obj.cr_frame, obj.cr_await
    if typ is types.GeneratorType:
        return obj.gi_frame, obj.gi_yieldfrom
    if typ is types.AsyncGeneratorType:
        return obj.ag_frame, obj.ag_await
    return None, None


def _wait_for_task(frame: types.FrameType | None) -> Any:
    """``asyncio.wait_for`` before 3.12 runs its awaitable as another task: the one to judge."""
    if frame is None or frame.f_code.co_name != "wait_for":
        return None
    if frame.f_globals.get("__name__") != "asyncio.tasks":
        return None
    task = frame.f_locals.get("fut")
    return task if hasattr(task, "get_coro") else None


def _task_chain(task: Any) -> list[int]:
    try:
        coro = task.get_coro()
    except Exception:
        return []
    return [kind for _, kind in _chain(coro) if kind != STOP]  # a STOP frame ends the chain


def blocked_in(frame: types.FrameType | None, stops: frozenset[types.CodeType]) -> str:
    """Where an off-CPU thread whose innermost frame is ``frame`` is (innermost first).

    ``io`` or ``wait`` when its stack or the call it is making says so; otherwise ``cpu``: a
    thread off-CPU in plain Python code is waiting for the GIL (or in a C call we cannot name,
    typically native compute that released the GIL), which is contention for CPU, not a wait
    for some event.
    """
    if frame is None:
        return A.WAIT
    kinds: list[int] = []
    site = callee_kind(frame)
    cur: types.FrameType | None = frame
    depth = 0
    while cur is not None and depth < MAX_FRAMES:
        if cur.f_code in stops:
            break
        kinds.append(code_kind(cur))
        cur = cur.f_back
        depth += 1
    kinds.reverse()  # outermost first, innermost last, as decide() expects
    kinds.append(site)
    return decide(kinds, default=A.CPU)


def device_wait(frame: types.FrameType | None, stops: frozenset[types.CodeType]) -> bool:
    """Whether a thread whose innermost frame is ``frame`` is waiting for a device: a frame of
    ``DEVICE_WAITS`` on its stack (up to its span's wrapper), or its innermost frame calling one
    of ``DEVICE_WAIT_CALLEES`` while a device runtime is initialised."""
    if frame is None:
        return False
    cur: types.FrameType | None = frame
    depth = 0
    while cur is not None and depth < MAX_FRAMES:
        code = cur.f_code
        if code in stops:
            break
        hit = _device_codes.get(code)
        if hit is None:
            hit = _device_code(code, str(cur.f_globals.get("__name__") or ""))
        if hit:
            return True
        cur = cur.f_back
        depth += 1
    return _device_site(frame.f_code, frame.f_lasti)


def device_wait_codes(
    codes: Sequence[types.CodeType | None], lasti: int, module_of: Callable[[types.CodeType], str]
) -> bool:
    """``device_wait`` for a stack the CPU timer sampled (``sampler``), which holds code
    objects only: ``codes`` innermost first up to its span's wrapper, ``lasti`` the innermost
    frame's offset (-1: unknown), ``module_of`` names a code object's module."""
    for code in codes[:MAX_FRAMES]:
        if code is None:
            continue
        hit = _device_codes.get(code)
        if hit is None:
            module = module_of(code)
            hit = _device_code(code, module) if module != "?" else False
        if hit:
            return True
    first = codes[0] if codes else None
    return first is not None and lasti >= 0 and _device_site(first, lasti)


def _device_code(code: types.CodeType, module: str) -> bool:
    hit = (module, getattr(code, "co_qualname", code.co_name)) in DEVICE_WAITS
    if len(_device_codes) < 100_000:
        _device_codes[code] = hit
    return hit


def _device_site(code: types.CodeType, lasti: int) -> bool:
    key = (code, lasti)
    site = _device_sites.get(key)
    if site is None:
        site = _call_site_callee(code, lasti) in DEVICE_WAIT_CALLEES
        if len(_device_sites) < 100_000:
            _device_sites[key] = site
    return site and _device_runtime()


def _call_site_callee(code: types.CodeType, lasti: int) -> str:
    try:
        text = _site_text(code, lasti)
    except Exception:
        return ""
    if not text or "(" not in text:
        return ""
    return text.split("(", 1)[0].strip().rsplit(".", 1)[-1]


def torch_cuda_initialized() -> bool:
    """Whether torch has initialised CUDA in this process (read from the loaded modules, never
    imported: no CUDA import).  The one test of it (the sampler's rules here, ``gpu``)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


def _device_runtime() -> bool:
    """A device runtime initialised in this process (read, never imported: no CUDA import)."""
    return torch_cuda_initialized() or any(name in sys.modules for name in _DEVICE_MODULES[1:])
