"""``<db>.collector.json``: how another process finds the collector that holds a store.

Written once the listeners are bound, removed at shutdown: created with O_EXCL | O_NOFOLLOW, mode
0600, under a fresh temporary name (so a planted file or symlink is never followed or reused), then
renamed over the final name (a rename replaces a symlink, never writes through it).  On a full
disk, where no new file can be made, a file left by a killed predecessor is overwritten in place
(O_NOFOLLOW, no new blocks needed); readers that catch it half-written just look again.

It holds the HTTP address, the process id and the token, so ``tracelens analyze --db`` can read
through the collector without being told anything; a file left by a killed collector is recognised
by its dead process id (or a refused connection) and ignored.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final


@dataclass(frozen=True)
class CollectorInfo:
    pid: int
    http: str  # base URL, e.g. http://127.0.0.1:4318
    grpc: str | None
    token: str | None


def info_path(db: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(db)}.collector.json")


_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def publish(db: str, info: CollectorInfo) -> Path:
    path = info_path(db)
    data = json.dumps(info.__dict__).encode()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(tmp, _CREATE, 0o600)
        try:
            _write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        _overwrite(path, data)  # or raise: no room for a new file and none to reuse
    return path


def _overwrite(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    try:
        if os.fstat(fd).st_uid != os.getuid():
            raise PermissionError(f"{path} belongs to another user")
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)
        _write(fd, data)
    finally:
        os.close(fd)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        done = os.write(fd, view)
        if done <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[done:]
    os.fsync(fd)


def withdraw(db: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        info_path(db).unlink()


def find(db: str | os.PathLike[str]) -> CollectorInfo | None:
    """The running collector of ``db``, if its file names a live process."""
    try:
        fd = os.open(info_path(db), os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as src:
            raw = json.loads(src.read(65_536))
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
