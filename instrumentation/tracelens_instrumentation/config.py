"""``configure()`` and ``flush()``: getting spans out of the process.

Rules (OpenTelemetry conventions, and "instrumentation never breaks the host"):

* Arguments win over ``OTEL_*`` variables, which win over defaults.  Read here:
  ``OTEL_SDK_DISABLED``, ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (through the SDK's
  ``Resource.create``), ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``),
  ``OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL``; the exporters and the batch processor read their own
  (``OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT``, ``_HEADERS``, ``_TIMEOUT``, ``OTEL_BSP_*``), and the
  SDK reads ``OTEL_TRACES_SAMPLER[_ARG]`` when ``sample_rate`` is left at 1.0.
* An SDK ``TracerProvider`` the application already installed is reused, never replaced: only
  the exporters asked for by argument (``endpoint=``, ``file=``) are added to it.
* ``file=PATH`` appends OTLP JSON Lines (``jsonl.OTLPJsonLinesExporter``); with ``file=`` and no
  endpoint (argument or variable), nothing is sent over the network.
* Spans are flushed at interpreter exit (our processors are shut down, giving up after
  ``EXIT_TIMEOUT_MS`` on an unreachable endpoint) and by ``flush()``.
* ``profile=True`` switches on CPU stacks (``stacks.py``); ``TRACELENS_PROFILE=1``/``0`` is
  the variable for it.
* Calling ``configure`` again adds destinations not configured yet and otherwise does nothing;
  every failure is logged, never raised.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any, Final

from opentelemetry import trace as otel_trace

from tracelens_instrumentation import _runtime, gpu, stacks

HTTP: Final = "http/protobuf"
GRPC: Final = "grpc"
PROTOCOLS: Final = (HTTP, GRPC, "http/json")

EXIT_TIMEOUT_MS: Final = 5000  # what an unreachable endpoint may cost at interpreter exit

_added: set[tuple[str, str]] = set()
_processors: list[Any] = []
_state: dict[str, Any] = {"provider": None, "atexit": False}


def configure(
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    file: str | os.PathLike[str] | None = None,
    sample_rate: float = 1.0,
    profile: bool | None = None,
    gpu_fraction: float | None = None,
) -> None:
    """Send the spans of ``@trace`` (and of any OpenTelemetry instrumentation) somewhere.

    ``service_name``: ``service.name`` of a provider created here (else ``OTEL_SERVICE_NAME``).
    ``endpoint``: an OTLP collector, e.g. ``http://127.0.0.1:4318`` (``/v1/traces`` is added for
    HTTP) or ``127.0.0.1:4317`` for gRPC.  ``protocol``: ``"http/protobuf"`` (default) or
    ``"grpc"``.  ``file``: also append the spans to this OTLP JSON Lines file.  ``sample_rate``:
    the fraction of traces kept, decided at the root and followed by children.  ``profile``:
    record which code a measured span ran on the CPU (``tracelens.cpu_stacks``, see
    ``stacks.py``); None keeps the current setting (``TRACELENS_PROFILE``, else the default).
    ``gpu_fraction``: the fraction of traces whose GPU activity is recorded with CUPTI when a
    CUDA runtime is in use (``gpu.py``; decided from the trace id at the root); None keeps the
    current setting (``TRACELENS_GPU_FRACTION``, else ``gpu.DEFAULT_FRACTION``).
    """
    if profile is not None:
        stacks.ENABLED[0] = bool(profile)
    if gpu_fraction is not None:
        try:
            gpu.set_fraction(gpu_fraction)
        except (TypeError, ValueError):
            _runtime.log.warning("tracelens: gpu_fraction %r is not a number", gpu_fraction)
    try:
        _configure(service_name, endpoint, protocol, file, sample_rate)
    except Exception:
        _runtime.complain("configure", "tracelens: configure() failed; calls pass through")


def flush(timeout_s: float = 30.0) -> bool:
    """Export every finished span now; False when that did not complete in ``timeout_s``.

    The SDK's batch processor ignores flush timeouts (an unreachable endpoint retries for as
    long as the exporter's own timeout allows, batch after batch), so the flush runs in a
    helper thread and this returns when it is done or the time is up, whichever comes first.
    """
    try:
        gpu.flush()  # the spans held for their device records end first
        provider = otel_trace.get_tracer_provider()
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is None:
            return True
        done: list[bool] = []
        worker = threading.Thread(
            target=lambda: done.append(bool(force_flush(int(timeout_s * 1000)))),
            name="tracelens-flush",
            daemon=True,
        )
        worker.start()
        worker.join(timeout_s)
        return bool(done and done[0])
    except Exception:
        _runtime.complain("flush", "tracelens: flush() failed")
        return False


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("true", "1", "yes")


def _configure(
    service_name: str | None,
    endpoint: str | None,
    protocol: str | None,
    file: str | os.PathLike[str] | None,
    sample_rate: float,
) -> None:
    if _env_true("OTEL_SDK_DISABLED"):
        _runtime.log.info("tracelens: OTEL_SDK_DISABLED is set; tracing stays off")
        _runtime.DISABLED[0] = True
        return
    from opentelemetry.sdk.trace import TracerProvider

    current: Any = otel_trace.get_tracer_provider()
    provider: Any
    if isinstance(current, TracerProvider):
        provider = current
        ours = provider is _state["provider"]
        if not ours:
            _runtime.log.info("tracelens: reusing the application's TracerProvider")
            if sample_rate != 1.0:
                _runtime.log.warning(
                    "tracelens: sample_rate ignored; the existing TracerProvider samples"
                )
        _add_exporters(provider, endpoint, protocol, file, defaults=ours and not _added)
    elif isinstance(current, (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider)):
        provider = _new_provider(service_name, sample_rate)
        _add_exporters(provider, endpoint, protocol, file, defaults=True)
        otel_trace.set_tracer_provider(provider)
        if otel_trace.get_tracer_provider() is not provider:  # lost a race with the app
            _runtime.log.warning("tracelens: another TracerProvider was installed first")
            provider.shutdown()
            provider = otel_trace.get_tracer_provider()
        else:
            _state["provider"] = provider
    else:
        _runtime.log.warning(
            "tracelens: the installed tracer provider (%s) is not the OpenTelemetry SDK's; "
            "spans go wherever it sends them",
            type(current).__name__,
        )
        provider = current
    _runtime.activate(provider)
    _register_exit_flush()


def _new_provider(service_name: str | None, sample_rate: float) -> Any:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    attributes = {SERVICE_NAME: service_name} if service_name else {}
    resource = Resource.create(attributes)
    return TracerProvider(resource=resource, sampler=_sampler(sample_rate))


def _sampler(sample_rate: float) -> Any:
    from opentelemetry.sdk.trace import sampling

    rate = float(sample_rate)
    if not 0.0 <= rate <= 1.0:
        _runtime.log.warning("tracelens: sample_rate %r outside [0, 1]; clamped", sample_rate)
        rate = min(1.0, max(0.0, rate))
    if rate >= 1.0:
        return None  # the SDK default (parent-based always-on) or OTEL_TRACES_SAMPLER
    return sampling.ParentBased(sampling.TraceIdRatioBased(rate))


def _add_exporters(
    provider: Any,
    endpoint: str | None,
    protocol: str | None,
    file: str | os.PathLike[str] | None,
    defaults: bool,
) -> None:
    """Batch processors for the requested destinations not added yet.

    ``defaults``: also add what the environment asks for (a provider created here); a reused
    application provider already exports where the application wants.
    """
    for key, make in _destinations(endpoint, protocol, file, defaults):
        if key in _added:
            continue
        exporter = make()
        if exporter is None:
            continue
        processor = _batch_processor(exporter)
        provider.add_span_processor(processor)
        _processors.append(processor)
        _added.add(key)


def _batch_processor(exporter: Any) -> Any:
    """A BatchSpanProcessor whose shutdown (at exit) gives up after ``EXIT_TIMEOUT_MS``.

    The SDK's waits up to 30 s, retrying an unreachable endpoint, before the process can end.
    """
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    class BoundedBatchSpanProcessor(BatchSpanProcessor):
        def shutdown(self) -> None:
            inner = getattr(self, "_batch_processor", None)
            if inner is not None and hasattr(inner, "shutdown"):
                try:
                    inner.shutdown(timeout_millis=EXIT_TIMEOUT_MS)
                    return
                except TypeError:  # an SDK without the timeout parameter
                    pass
            super().shutdown()

    return BoundedBatchSpanProcessor(exporter)


def _destinations(
    endpoint: str | None,
    protocol: str | None,
    file: str | os.PathLike[str] | None,
    defaults: bool,
) -> list[tuple[tuple[str, str], Any]]:
    out: list[tuple[tuple[str, str], Any]] = []
    if file is not None:
        path = os.path.abspath(os.fspath(file))
        out.append((("file", path), lambda: _file_exporter(path)))
    names = _env_exporters()
    env_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    want_otlp = endpoint is not None or (
        defaults and "otlp" in names and (file is None or env_endpoint is not None)
    )
    if want_otlp:
        proto = _protocol(protocol)
        target = endpoint or env_endpoint or "default"
        out.append((("otlp", f"{proto} {target}"), lambda: _otlp_exporter(proto, endpoint)))
    if defaults and "console" in names:
        out.append((("console", ""), _console_exporter))
    return out


def _env_exporters() -> set[str]:
    raw = os.environ.get("OTEL_TRACES_EXPORTER", "otlp")
    return {part.strip().lower() for part in raw.split(",") if part.strip()}


def _protocol(protocol: str | None) -> str:
    chosen = (
        protocol
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or HTTP
    ).strip()
    if chosen not in PROTOCOLS:
        _runtime.log.warning("tracelens: unknown OTLP protocol %r; using %s", chosen, HTTP)
        return HTTP
    if chosen == "http/json":
        _runtime.log.warning("tracelens: no OTLP http/json exporter in the SDK; using %s", HTTP)
        return HTTP
    return chosen


def _file_exporter(path: str) -> Any:
    from tracelens_instrumentation.jsonl import OTLPJsonLinesExporter

    return OTLPJsonLinesExporter(path)


def _otlp_exporter(protocol: str, endpoint: str | None) -> Any:
    if protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        if endpoint is None:
            return OTLPSpanExporter()
        insecure = not endpoint.startswith("https://")
        return OTLPSpanExporter(endpoint=endpoint, insecure=insecure)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HTTPExporter,
    )

    return HTTPExporter(endpoint=_http_url(endpoint)) if endpoint else HTTPExporter()


def _http_url(endpoint: str) -> str:
    """A base URL gets the traces path appended, as for OTEL_EXPORTER_OTLP_ENDPOINT."""
    url = endpoint if "://" in endpoint else f"http://{endpoint}"
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    if not path.strip("/"):
        return f"{scheme}://{host}/v1/traces"
    return url


def _console_exporter() -> Any:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter()


def _register_exit_flush() -> None:
    """Flushes (by shutting down) the processors added here when the interpreter exits.

    A provider created here is also shut down by the SDK's own exit hook; a reused provider
    may not be, and its application may never flush what we added.  Processors shut down once.
    """
    if _state["atexit"]:
        return
    _state["atexit"] = True
    atexit.register(_shutdown_ours)


def _shutdown_ours() -> None:
    gpu.flush()  # spans held for their device records end before the exporters stop
    for processor in list(_processors):
        try:
            processor.shutdown()
        except Exception:
            _runtime.complain("shutdown", "tracelens: shutting down an exporter failed")
