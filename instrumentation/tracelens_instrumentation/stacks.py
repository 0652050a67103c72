"""CPU stacks of a measured span: what the sampler saw its thread run, folded and bounded.

Why: a span's measured CPU time says *that* it computed, not *which code* did.  The sampler
(``sampler.py``) hands each stack sample of a measured span's thread, with the CPU time the
thread used since its previous sample, to ``add``: samples taken by the thread's own CPU clock
(code objects only, folded by ``fold_codes`` with names learnt from live frames by ``note``),
or, where those are not available, the stack its tick reads (``record``, folded by ``fold``).
The span keeps a small table ``folded stack -> CPU ns`` (``Record.prof``) and exports it when it
ends as ``tracelens.cpu_stacks`` (``encode``; the format is in ``docs/attributes.md``).

What a stack holds: ``module:qualname`` frames from the span's own function (the frame right
inside the decorator's wrapper) down to the innermost Python frame.  The wrappers and every other
frame of this package are left out; a C function has no frame, so its time shows in the Python
function that called it.  Bounds: ``MAX_DEPTH`` frames per stack (deeper stacks keep their
outermost and innermost frames around a ``TRUNCATED`` frame), ``MAX_DISTINCT`` distinct stacks
kept per span while it runs (later new stacks are added to ``OTHER`` under the span's own
frame), and at most ``MAX_STACKS`` entries and ``MAX_ATTR_CHARS`` characters exported (the
lightest stacks are merged into ``OTHER``).

On by default (``DEFAULT_ON``); ``configure(profile=False)`` or ``TRACELENS_PROFILE=0`` switch
it off, see ``ENABLED``.
"""

from __future__ import annotations

import os
import sys
import time
import types
from collections.abc import Callable
from typing import Any, Final

MAX_DEPTH: Final = 32  # frames per stack
MAX_WALK: Final = 1024  # frames looked at per sample before giving the sample up
MAX_DISTINCT: Final = 256  # distinct stacks a span collects
MAX_STACKS: Final = 64  # entries exported
MAX_ATTR_CHARS: Final = 16384  # characters exported, separators included
MAX_NAME: Final = 200  # characters of one frame name
OTHER: Final = "[other]"
UNKNOWN: Final = "[unknown]"  # a frame whose code object was gone when its sample was read
TRUNCATED: Final = "[truncated]"
_OWN_PACKAGE: Final = __name__.rpartition(".")[0]  # tracelens_instrumentation
_SEPARATORS: Final = str.maketrans({";": "_", " ": "_", "\t": "_", "\n": "_", "\r": "_"})


def _default() -> bool:
    raw = os.environ.get("TRACELENS_PROFILE", "").strip().lower()
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    return DEFAULT_ON


# On by default: bench/overhead.py --profile measures the cost within budget (README, "CPU
# stacks"): no change per call, the sampler's CPU under 2 % of the measured span time.
DEFAULT_ON: Final = True
ENABLED: list[bool] = [_default()]  # read by the sampler on every tick

# Code object id -> (the code object, its frame name; None: ours, hidden).  Keyed by id because
# hashing a code object hashes its bytecode; the entry keeps the object alive, so ids stay valid.
_names: dict[int, tuple[types.CodeType, str | None]] = {}
_modules: dict[int, tuple[types.CodeType, str]] = {}  # the same, -> its frames' module
_stop_ids: list[tuple[frozenset[types.CodeType] | None, frozenset[int]]] = [(None, frozenset())]


def frame_name(code: types.CodeType, module: str) -> str:
    """``module:qualname``, with the folded format's separators (``;`` and spaces) replaced."""
    qualname = getattr(code, "co_qualname", code.co_name).replace("<locals>.", "")
    return f"{module}:{qualname}".translate(_SEPARATORS)[:MAX_NAME]


def _name(frame: types.FrameType, code: types.CodeType) -> str | None:
    module = frame.f_globals.get("__name__")
    module = module if isinstance(module, str) else "?"
    own = module == _OWN_PACKAGE or module.startswith(_OWN_PACKAGE + ".")
    name = None if own else frame_name(code, module)
    if len(_names) >= 65536:
        _names.clear()
        _modules.clear()
    _names[id(code)] = (code, name)
    _modules[id(code)] = (code, module)
    return name


def fold(
    frame: types.FrameType, rec: Any, stops: frozenset[types.CodeType]
) -> tuple[str, ...] | None:
    """The stack of ``rec``'s span, outermost first, from the innermost ``frame`` of its thread.

    The walk stops at the wrapper that runs ``rec`` (a frame in ``stops`` whose ``call`` is
    ``rec``); another wrapper on the way (a child span starting or ending, or a span that was
    sampled out) is stepped over.  None when ``rec``'s wrapper is not on the stack.
    """
    cached, stop_ids = _stop_ids[0]
    if cached is not stops:
        stop_ids = frozenset(map(id, stops))  # the sampler keeps these code objects alive
        _stop_ids[0] = (stops, stop_ids)
    names_of = _names
    names: list[str] = []
    cur: types.FrameType | None = frame
    walked = 0
    while cur is not None:
        walked += 1
        if walked > MAX_WALK:
            return None
        code = cur.f_code
        key = id(code)
        if key in stop_ids:
            try:
                owner = cur.f_locals.get("call")
            except Exception:
                owner = None
            if owner is rec:
                break
        else:
            entry = names_of.get(key)
            name = entry[1] if entry is not None and entry[0] is code else _name(cur, code)
            if name is not None:
                names.append(name)
        cur = cur.f_back
    else:
        return None
    if not names:
        return None
    names.reverse()
    if len(names) > MAX_DEPTH:
        keep = MAX_DEPTH // 2
        names = [*names[:keep], TRUNCATED, *names[len(names) - (MAX_DEPTH - keep - 1) :]]
    return tuple(names)


def record(
    rec: Any, frame: types.FrameType, used_ns: int, stops: frozenset[types.CodeType]
) -> None:
    """Adds ``used_ns`` of CPU time to the stack ``frame`` shows for ``rec``'s span."""
    key = fold(frame, rec, stops)
    if key is not None:
        add(rec, key, used_ns)


def note(
    frame: types.FrameType | None,
    stops: frozenset[types.CodeType],
    live: dict[int, Any],
    address: Callable[[types.FrameType], int],
) -> dict[int, Any]:
    """One walk over a live stack (``frame`` and its callers), for the samples of the CPU
    timer, which hold code objects and frame addresses only: names its code objects from their
    frames' globals (``fold_codes``), and returns the wrapper frames (code in ``stops``) that run
    a record of ``live`` (by id), by frame address (``address``) -> that record."""
    names_of = _names
    owners: dict[int, Any] = {}
    walked = 0
    while frame is not None and walked < MAX_WALK:
        code = frame.f_code
        entry = names_of.get(id(code))
        if entry is None or entry[0] is not code:
            _name(frame, code)
        if code in stops:
            try:
                owner = frame.f_locals.get("call")
            except Exception:
                owner = None
            owned = live.get(id(owner))  # (``owner`` is alive: its id is its identity)
            if owned is not None:
                owners[address(frame)] = owned
        frame = frame.f_back
        walked += 1
    return owners


def fold_codes(codes: tuple[types.CodeType | None, ...]) -> tuple[str, ...] | None:
    """The folded stack of a CPU-timer sample: its code objects from the innermost one to the
    span's own function (the wrapper excluded), named as ``fold`` names frames.  A code object
    no live frame has shown (``note``) is named by the module whose file defines it."""
    names: list[str] = []
    for code in codes:
        if code is None:
            names.append(UNKNOWN)
            continue
        entry = _names.get(id(code))
        name = entry[1] if entry is not None and entry[0] is code else _name_by_file(code)
        if name is not None:
            names.append(name)
    if not names:
        return None
    names.reverse()
    if len(names) > MAX_DEPTH:
        keep = MAX_DEPTH // 2
        names = [*names[:keep], TRUNCATED, *names[len(names) - (MAX_DEPTH - keep - 1) :]]
    return tuple(names)


def module_of(code: types.CodeType) -> str:
    """The name of the module whose file defines ``code`` ("?" when none is loaded): the
    modules' files are listed again at most once a second, when one is missing."""
    seen = _modules.get(id(code))
    if seen is not None and seen[0] is code:
        return seen[1]
    path = code.co_filename
    module = _by_file.get(path)
    if module is not None:
        return module
    now = time.monotonic()
    if now - _by_file_at[0] >= 1.0:
        _by_file_at[0] = now
        _by_file.clear()
        for name, mod in list(sys.modules.items()):
            try:
                file = vars(mod).get("__file__")
            except Exception:  # not a module: nothing to learn from it
                continue
            if isinstance(file, str):
                _by_file.setdefault(file, name)
        module = _by_file.get(path)
    return module or "?"


_by_file: dict[str, str] = {}
_by_file_at: list[float] = [-1e9]


def _name_by_file(code: types.CodeType) -> str | None:
    module = module_of(code)
    if module == _OWN_PACKAGE or module.startswith(_OWN_PACKAGE + "."):
        return None
    name = frame_name(code, module)
    if module != "?":
        if len(_names) >= 65536:
            _names.clear()
        _names[id(code)] = (code, name)
    return name


def add(rec: Any, key: tuple[str, ...], used_ns: int) -> None:
    """Adds ``used_ns`` of CPU time to the folded stack ``key`` of ``rec``'s span."""
    prof = rec.prof
    if prof is None:
        prof = rec.prof = {}
    if key not in prof and len(prof) >= MAX_DISTINCT:
        key = (key[0], OTHER)
    prof[key] = prof.get(key, 0) + used_ns


def encode(prof: dict[tuple[str, ...], int]) -> tuple[str, ...]:
    """The ``tracelens.cpu_stacks`` value: ``"frame;frame;frame MICROSECONDS"`` entries,
    heaviest first, within ``MAX_STACKS`` entries and ``MAX_ATTR_CHARS`` characters; the rest
    is one ``"<outermost frame>;[other] MICROSECONDS"`` entry."""
    items = sorted(prof.items(), key=lambda kv: (-kv[1], kv[0]))
    out: list[str] = []
    chars = 0
    rest = 0
    rest_root = ""
    full = False
    reserve = MAX_NAME + len(OTHER) + 24  # room kept for the [other] entry
    for key, ns in items:
        if not full and key[-1] != OTHER:
            line = f"{';'.join(key)} {max(1, round(ns / 1000))}"
            full = len(out) >= MAX_STACKS - 1 or chars + len(line) + 1 > MAX_ATTR_CHARS - reserve
            if not full:
                out.append(line)
                chars += len(line) + 1
                continue
        rest += ns
        rest_root = rest_root or key[0]
    if rest:
        out.append(f"{rest_root};{OTHER} {max(1, round(rest / 1000))}")
    return tuple(out)
