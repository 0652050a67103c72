"""One export request from body to durable spans, whichever transport it came by.

Decoding runs on worker threads so the event loop keeps answering health checks and refusals
while a large body is decoded; the writer answers through a future once the request is journaled
(fsynced; see ``journal``).  Bodies over ``LARGE_BODY`` (inflated) are decoded one at a time, so
one expensive body holds one of the two threads, never both: small requests keep being decoded
on the other.  Python threads cannot be cancelled, so there is no per-request deadline; what one
body can cost is bounded by the decoders instead: its size (``max_body_bytes``, also inflated),
at most 10,000 resource or scope entries without spans, shared values stored per span at most 8x
the body, JSON nesting (worst measured: ~0.12 s per MiB, every span with its own resource).
Every failure becomes an ``Outcome`` the transports translate; nothing here raises to them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar, cast

from tracelens.collector import journal, otlp
from tracelens.collector.config import LARGE_BODY, CollectorConfig
from tracelens.collector.stats import Stats
from tracelens.collector.writer import BatchWriter, Committed
from tracelens.errors import InputError
from tracelens.ingest._common import json_cost
from tracelens.ingest.otlp_proto import CheckedSpans

log = logging.getLogger("tracelens.collector")
_T = TypeVar("_T")


class Status(Enum):
    OK = "ok"
    BAD = "bad"  # malformed body: 400 / INVALID_ARGUMENT
    UNSUPPORTED = "unsupported"  # 415
    TOO_LARGE = "too_large"  # 413 / RESOURCE_EXHAUSTED
    BUSY = "busy"  # queue full or shutting down: 503 / UNAVAILABLE with a retry delay
    FAILED = "failed"  # the journal failed: 503 / UNAVAILABLE, nothing was stored


@dataclass(frozen=True)
class Outcome:
    status: Status
    message: str = ""
    checked: CheckedSpans | None = None


class Receiver:
    def __init__(self, config: CollectorConfig, writer: BatchWriter, stats: Stats) -> None:
        self.config = config
        self.writer = writer
        self.stats = stats
        self.accepting = True
        self._pool = ThreadPoolExecutor(
            max(2, config.decode_threads), thread_name_prefix="tl-decode"
        )
        self._large = asyncio.Semaphore(max(1, config.decode_threads - 1))

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    async def export(self, body: bytes, media: str, encoding: str | None) -> Outcome:
        started = time.perf_counter()
        self.stats.add(requests=1)
        outcome = await self._export(body, media, encoding)
        self.stats.request(time.perf_counter() - started)
        if outcome.status is Status.BUSY:
            self.stats.add(requests_refused_busy=1)
        elif outcome.status in (Status.BAD, Status.UNSUPPORTED):
            self.stats.add(requests_bad=1)
        elif outcome.status is Status.TOO_LARGE:
            self.stats.add(requests_too_large=1)
        return outcome

    async def _export(self, body: bytes, media: str, encoding: str | None) -> Outcome:
        if not self.accepting or not self.writer.has_room():
            return Outcome(Status.BUSY, "tracelens collect is busy; retry later")
        loop = asyncio.get_running_loop()
        try:
            data, checked = await self._decode(loop, body, media, encoding)
        except otlp.BodyTooLarge as exc:
            return Outcome(Status.TOO_LARGE, str(exc))
        except otlp.UnsupportedMedia as exc:
            return Outcome(Status.UNSUPPORTED, str(exc))
        except InputError as exc:
            return Outcome(Status.BAD, str(exc))
        except Exception as exc:  # a decoder bug must not take the collector down
            log.exception("decoding a request failed")
            return Outcome(Status.BAD, f"cannot decode the request: {type(exc).__name__}: {exc}")
        self.stats.add(
            spans_received=checked.spans.num_rows + checked.rejected,
            spans_rejected=checked.rejected,
        )
        if checked.spans.num_rows == 0:
            return Outcome(Status.OK, checked=checked)
        kind = journal.PROTOBUF if media == otlp.PROTOBUF else journal.JSON
        return await self._commit(loop, checked, (kind, data))

    async def _decode(
        self, loop: asyncio.AbstractEventLoop, body: bytes, media: str, encoding: str | None
    ) -> tuple[bytes, CheckedSpans]:
        data = body
        if (encoding or "identity").strip().lower() not in ("", "identity"):
            data = await self._in_pool(otlp.decompress, body, encoding, self.config.max_body_bytes)
        if media == otlp.JSON:
            cost = json_cost(data)
            if cost > self.config.decode_bytes:
                raise otlp.BodyTooLarge(
                    f"this JSON body would take about {cost >> 20} MiB as objects while decoded, "
                    f"more than the {self.config.decode_bytes >> 20} MiB --memory-mb allows for "
                    "decoding; send protobuf (about 20x leaner to decode) or smaller batches"
                )
        # Large bodies are decoded one at a time and may use the whole decoding share; the
        # small ones share it between the two threads.
        share = self.config.decode_bytes
        if len(data) <= LARGE_BODY:
            return data, await self._in_pool(_decode_within, data, media, share // 2)
        async with self._large:
            return data, await self._in_pool(_decode_within, data, media, share)

    async def _in_pool(self, work: Callable[..., _T], *args: Any) -> _T:
        """``work(*args)`` on a decoding thread.  A refusal is raised here without the
        thread's traceback and without the reference cycle an executor future makes (exception
        -> traceback -> the future's frame -> the future -> exception): that cycle kept each
        refused body (60 MiB) alive until the next full garbage collection, and 40 refused in a
        row took the collector past its budget."""
        ok, value = await asyncio.get_running_loop().run_in_executor(
            self._pool, _captured, work, args
        )
        if ok:
            return cast(_T, value)
        try:
            raise cast(BaseException, value)
        finally:
            del value

    async def _commit(
        self, loop: asyncio.AbstractEventLoop, checked: CheckedSpans, record: tuple[int, bytes]
    ) -> Outcome:
        future: asyncio.Future[Committed | BaseException] = loop.create_future()

        def done(result: Committed | BaseException) -> None:
            loop.call_soon_threadsafe(_resolve, future, result)

        if not self.writer.try_submit(checked.spans, record, done):
            return Outcome(Status.BUSY, "tracelens collect is busy; retry later")
        result = await asyncio.shield(future)
        if isinstance(result, BaseException):
            log.debug("the store refused a batch: %s", result)  # the writer logs it once
            return Outcome(Status.FAILED, f"the journal failed; nothing was stored: {result}")
        return Outcome(Status.OK, checked=checked)


def _captured(work: Callable[..., object], args: tuple[Any, ...]) -> tuple[bool, object]:
    """``work(*args)``'s result, or a refusal it raised (bad or too large a body) without its
    traceback; anything else (a decoder bug) propagates whole, to be logged with it."""
    try:
        return True, work(*args)
    except (InputError, otlp.BodyTooLarge, otlp.UnsupportedMedia) as exc:
        return False, exc.with_traceback(None)


def _decode_within(data: bytes, media: str, allowance: int) -> CheckedSpans:
    """``otlp.decode``, refused first (``BodyTooLarge``) when its spans and attributes would
    take more than ``allowance`` bytes (JSON is bounded by ``json_cost`` before this)."""
    if media == otlp.PROTOBUF:
        otlp.check_decode_cost(data, allowance)
    return otlp.decode(data, media)


def _resolve(
    future: asyncio.Future[Committed | BaseException], result: Committed | BaseException
) -> None:
    if not future.done():
        future.set_result(result)
