"""Attribute names shared by the instrumentation and the analyzer (the one place they live).

See ``docs/attributes.md``.  The analyzer imports these constants from here, so the
writer and the reader of an attribute can never disagree on its spelling.
"""

from __future__ import annotations

from typing import Final

# Written by the tracelens decorator.
KIND: Final = "tracelens.kind"
CPU_NS: Final = "tracelens.cpu_ns"
IO_NS: Final = "tracelens.io_ns"
WAIT_NS: Final = "tracelens.wait_ns"
ARGS_HASH: Final = "tracelens.args_hash"
RESULT_HASH: Final = "tracelens.result_hash"
ARG_FPS: Final = "tracelens.arg_fps"
RESULT_FPS: Final = "tracelens.result_fps"
ARGS_VALUE: Final = "tracelens.args"
RESULT_VALUE: Final = "tracelens.result"
CPU_STACKS: Final = "tracelens.cpu_stacks"  # folded CPU stacks, see stacks.py
# GPU activity the span caused (docs/attributes.md, "GPU activity").
GPU_NS: Final = "tracelens.gpu_ns"
GPU_WAIT_NS: Final = "tracelens.gpu_wait_ns"
GPU_AFTER_NS: Final = "tracelens.gpu_after_ns"
GPU_LAUNCHES: Final = "tracelens.gpu_launches"
GPU_DEVICE: Final = "tracelens.gpu_device"
GPU_SOURCE: Final = "tracelens.gpu_source"
GPU_LINK: Final = "tracelens.gpu_link"
GPU_MEASURED: Final = "tracelens.gpu_measured"
GPU_SOURCE_CUPTI: Final = "cupti"
GPU_SOURCE_STACKS: Final = "stacks"
GPU_LINK_CORRELATION: Final = "correlation"  # CUPTI external correlation id = the span's id
GPU_LINK_THREAD_TIME: Final = "thread_time"  # launching thread and launch time in the window

# The kinds a span's time can belong to.
CPU: Final = "cpu"
GPU: Final = "gpu"
IO: Final = "io"
WAIT: Final = "wait"
UNKNOWN: Final = "unknown"
KINDS: Final = (CPU, GPU, IO, WAIT, UNKNOWN)
MEASURED_KINDS: Final = (CPU, GPU, IO, WAIT)

# OpenTelemetry semantic conventions the analyzer reads.
SERVICE_NAME: Final = "service.name"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
GEN_AI_USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
GEN_AI_LATENCY_TIME_IN_QUEUE: Final = "gen_ai.latency.time_in_queue"
GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL: Final = "gen_ai.latency.time_in_model_prefill"
GEN_AI_LATENCY_TIME_IN_MODEL_DECODE: Final = "gen_ai.latency.time_in_model_decode"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_ID: Final = "gen_ai.request.id"  # vLLM's name for its request id
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
DB_SYSTEM: Final = "db.system"
DB_SYSTEM_NAME: Final = "db.system.name"
DB_QUERY_TEXT: Final = "db.query.text"
DB_OPERATION_NAME: Final = "db.operation.name"
DB_OPERATION: Final = "db.operation"
DB_QUERY_PARAMETER_PREFIX: Final = "db.query.parameter."
SQL_QUERY: Final = "sql.query"  # older instrumentation (e.g. HotROD)
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
DB_STATEMENT: Final = "db.statement"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_METHOD: Final = "http.method"
URL_FULL: Final = "url.full"
HTTP_URL: Final = "http.url"
RPC_SYSTEM: Final = "rpc.system"
RPC_SYSTEM_NAME: Final = "rpc.system.name"
MESSAGING_SYSTEM: Final = "messaging.system"
ERROR_TYPE: Final = "error.type"
DB_COLLECTION_NAME: Final = "db.collection.name"
GRAPHQL_OPERATION_TYPE: Final = "graphql.operation.type"
GRAPHQL_OPERATION_NAME: Final = "graphql.operation.name"
GRAPHQL_DOCUMENT: Final = "graphql.document"

GEN_AI_MODEL_OPERATIONS: Final = frozenset(
    {"chat", "text_completion", "generate_content", "embeddings"}
)
OPENINFERENCE_MODEL_KINDS: Final = frozenset({"LLM", "EMBEDDING", "RERANKER"})
OPENINFERENCE_RETRIEVER: Final = "RETRIEVER"
