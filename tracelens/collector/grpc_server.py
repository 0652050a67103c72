"""OTLP/gRPC: ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` on grpc.aio.

The method is registered with no deserializer, so the handler gets the request's bytes and decodes
them with the same fast decoder as HTTP (the generated stubs would build every attribute as a
Python object first).  Refusals carry a ``google.rpc.RetryInfo`` twice: in the rich status
(``grpc-status-details-bin``, which the Go collector and most SDKs read) and as
``google.rpc.retryinfo-bin`` trailing metadata (what the Python exporter reads), so every standard
exporter backs off and retries.
"""

from __future__ import annotations

from typing import Any, Final

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2

from tracelens.collector import otlp
from tracelens.collector.auth import bearer_matches
from tracelens.collector.http import Budget
from tracelens.collector.receive import Outcome, Receiver, Status

SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"
# One connection may hold at most 1/STREAM_SHARE of the concurrent RPCs (HTTP/2
# SETTINGS_MAX_CONCURRENT_STREAMS): a client opening 40 streams and sending none of their
# messages holds its own share, and every other connection still finds RPC slots.
STREAM_SHARE: Final = 4
HANDSHAKE_TIMEOUT_MS: Final = 10_000  # a connection that never completes its HTTP/2 preface
IDLE_CONNECTION_MS: Final = 120_000  # a connection with no RPC for this long gets a GOAWAY


def per_connection_streams(rpcs: int) -> int:
    return max(1, rpcs // STREAM_SHARE)


_CODES: Final = {
    Status.BAD: grpc.StatusCode.INVALID_ARGUMENT,
    Status.UNSUPPORTED: grpc.StatusCode.INVALID_ARGUMENT,
    Status.TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Status.BUSY: grpc.StatusCode.UNAVAILABLE,
    Status.FAILED: grpc.StatusCode.UNAVAILABLE,
}


class GrpcServer:
    def __init__(self, receiver: Receiver, token: str | None, budget: Budget) -> None:
        self._receiver = receiver
        self._token = token
        self._budget = budget
        config = receiver.config
        self._server = grpc.aio.server(
            options=[
                # Larger messages are refused from their length prefix, before any is buffered.
                ("grpc.max_receive_message_length", config.max_grpc_message_bytes),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
                # No flow-control windows grown by bandwidth probing: a refused or waiting stream
                # then buffers 64 KiB, not megabytes (measured: 40 concurrent 60 MiB messages
                # with 2 admitted peaked at 568 MiB with probing, 312 MiB without).
                ("grpc.http2.bdp_probe", 0),
                ("grpc.max_concurrent_streams", per_connection_streams(config.max_grpc_rpcs)),
                ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_MS),
                ("grpc.max_connection_idle_ms", IDLE_CONNECTION_MS),
            ],
            maximum_concurrent_rpcs=config.max_grpc_rpcs,
        )
        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(self._export)}
        )
        self._server.add_generic_rpc_handlers((handler,))

    async def start(self, host: str, port: int) -> int:
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        bound = self._server.add_insecure_port(target)
        if not bound:
            raise OSError(f"cannot listen on {target} for OTLP/gRPC")
        await self._server.start()
        return bound

    async def stop(self, grace: float) -> None:
        await self._server.stop(grace)

    async def _export(self, request: bytes, context: Any) -> bytes:
        if self._token and not self._authorized(context):
            self._receiver.stats.add(requests_unauthorized=1)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        if self._budget.take(len(request)):
            try:
                outcome = await self._receiver.export(request, otlp.PROTOBUF, None)
            finally:
                self._budget.give(len(request))
        else:
            self._receiver.stats.add(requests_refused_busy=1)
            outcome = Outcome(Status.BUSY, "tracelens collect is busy (request data); retry later")
        # ``context.abort`` raises, and grpc keeps that exception (whose traceback holds this
        # frame) in a reference cycle: without this, a refused 60 MiB message stayed alive until
        # the next full garbage collection.
        del request
        if outcome.status is Status.OK:
            assert outcome.checked is not None
            return otlp.success_body(outcome.checked, otlp.PROTOBUF)
        code = _CODES[outcome.status]
        trailers: tuple[tuple[str, bytes], ...] = ()
        if code is grpc.StatusCode.UNAVAILABLE:
            trailers = self._retry_trailers(outcome.message)
        await context.abort(code, outcome.message, trailers)
        raise AssertionError("abort returns only by raising")  # pragma: no cover

    def _authorized(self, context: Any) -> bool:
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                given = value if isinstance(value, str) else value.decode("latin-1")
                return bearer_matches(given, self._token or "")
        return False

    def _retry_trailers(self, message: str) -> tuple[tuple[str, bytes], ...]:
        delay = duration_pb2.Duration(seconds=self._receiver.config.retry_after_s)
        info = error_details_pb2.RetryInfo(retry_delay=delay)
        detail = any_pb2.Any()
        detail.Pack(info)
        status = status_pb2.Status(
            code=grpc.StatusCode.UNAVAILABLE.value[0], message=message, details=[detail]
        )
        return (
            ("grpc-status-details-bin", status.SerializeToString()),
            ("google.rpc.retryinfo-bin", info.SerializeToString()),
        )
