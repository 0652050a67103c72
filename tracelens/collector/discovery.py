"""``<db>.collector.json``: how another process finds the collector that holds a store.

Written (mode 0600, atomically) once the listeners are bound, removed at shutdown.  It holds the
HTTP address, the process id and the token, so ``tracelens analyze --db`` can read through the
collector without being told anything; a file left by a killed collector is recognised by its dead
process id (or a refused connection) and ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CollectorInfo:
    pid: int
    http: str  # base URL, e.g. http://127.0.0.1:4318
    grpc: str | None
    token: str | None


def info_path(db: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(db)}.collector.json")


def publish(db: str, info: CollectorInfo) -> Path:
    path = info_path(db)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(info.__dict__, out)
    os.replace(tmp, path)
    return path


def withdraw(db: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        info_path(db).unlink()


def find(db: str | os.PathLike[str]) -> CollectorInfo | None:
    """The running collector of ``db``, if its file names a live process."""
    try:
        raw = json.loads(info_path(db).read_text())
        info = CollectorInfo(int(raw["pid"]), str(raw["http"]), raw.get("grpc"), raw.get("token"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if _alive(info.pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
