"""Per-span facts the detectors share: what a call's arguments were, whether it changes state.

Spans from the tracelens decorator carry ``args_hash`` / ``result_hash`` and value fingerprints.
Spans from other instrumentation only have attributes, so a call's arguments are taken from the
attribute that holds them (``gen_ai.tool.call.arguments``, ``db.query.text``, ``url.full``) or
else, for a caller's span (client or internal), from its non-timing attributes.  A URL holds
the arguments only of a read: a POST's are in its body.  Attributes that name the operation
rather than its input (``rpc.method``, ``http.route``, a model name, sampling settings) or that
describe the outcome (status, sizes, token counts, timings, peer addresses) are left out; when
nothing is left the arguments are *unknown*, and unknown arguments never make two calls look
the same.  A parameterised SQL text without its parameters is unknown too: ``WHERE id=$1`` says
nothing about which row.

A call's result is its ``result_hash``, else the output it recorded (``gen_ai.tool.call.result``,
``gen_ai.output.messages``).  A child span without fingerprints of its own under an
instrumented parent also carries the parent's ``args_hash`` in its key (and the parent's
``result_hash`` as its result): the parent's arguments decide what the child fetches, which its
URL or query text alone may not show.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation.fingerprint import (
    DERIVED_FP,
    MAX_FPS,
    OPAQUE_FP,
    TEXT_FP,
    has_derived,
    recorded_forms,
)
from tracelens_instrumentation.fingerprint import py_result_fingerprint as result_fingerprint

DB_OPERATION_NAME = A.DB_OPERATION_NAME
DB_OPERATION = A.DB_OPERATION
DB_QUERY_PARAMETER_PREFIX = A.DB_QUERY_PARAMETER_PREFIX
SQL_QUERY = A.SQL_QUERY
GEN_AI_TOOL_CALL_RESULT = A.GEN_AI_TOOL_CALL_RESULT
GEN_AI_OUTPUT_MESSAGES = A.GEN_AI_OUTPUT_MESSAGES
_RESULT_KEYS = (GEN_AI_TOOL_CALL_RESULT, GEN_AI_OUTPUT_MESSAGES)


_NOISE_KEYS = (
    r"^(http\.|url\.(scheme|path|template)$|network\.|net\.|server\.|client\.|user_agent\."
    r"|service\.|peer\.|otel\.|telemetry\.|thread\.|code\.|process\.|host\.|os\.|error\."
    r"|exception\.|rpc\.|gen_ai\.(usage|response|latency|operation|provider|system|request\.model"
    r"|request\.id|tool\.(name|type|description|call\.id|call\.result)|output|agent|conversation)"
    r"|db\.(system|namespace|response|client|collection|operation|query\.summary)"
    r"|messaging\.|tracelens\.|openinference\.span|llm\.(model|provider|system|token)"
    r"|component$|request$|status|span\.|event\.)"
    r"|(^|[._])(request_id|trace_id|span_id|thread_id|pid|tid)$"
    r"|(duration|latency|elapsed|timestamp|_ms|_ns|\.ms|\.ns|size|bytes|count|tokens)$"
    r"|^gen_ai\.request\."  # sampling settings, not the input
    # Names of the thing called rather than what it was called with.
    r"|(^|[._])(class|method|function|handler|component|topic|queue|exchange|destination"
    r"|route|path|endpoint|operation|type|kind|name|version|host|port|address|instance|system"
    r"|namespace|collection|table|bucket|language|framework|library|sdk)$"
)
_PARAMETERISED = r"\?|\$\d+|%s|%\(\w+\)s|(^|[^:\w]):[A-Za-z_]\w*"

# --- The effects table: every signal that a call changes state, in one place. -------------
# (docs/verdicts.md, "Effects by evidence"; the README's "How it decides").  A call changes
# state when any row says so: its HTTP method, its SQL statement type or a side-effect function
# in its SQL, its database operation, its GraphQL operation type, its tool name, or a word of its
# name or URL path.  A call that returns nothing and is not known to only read changes state too
# (see ``_write_reasons``).
# Words (whole words of the span name, tool name or URL path, camelCase split).
_WRITE_VERBS = (
    "edit|write|writes|update|updates|delete|del|remove|create|creates|insert|send|sends|post"
    "|put|patch|upsert|set|save|submit|publish|commit|drop|alter|truncate|merge|replace|append"
    "|modify|mutate|mutation|register|pay|charge|purchase|cancel|transfer|email|notify|upload"
    "|deploy|increment|incr|decrement|decr|push|enqueue|lpush|rpush|hset|hdel|expire|store"
    "|persist|approve|reject|rename|move|grant|revoke|reset|clear|flush|purge|add"
    # Shell, exec and code-running tools: what they change is the file system and the world.
    "|exec|shell|bash|sh|zsh|terminal|subprocess|run|interpreter|repl|apply|checkout|install"
    "|uninstall|migrate|git|npm|pip|make|kubectl|docker"
    "|reserve|allocate|claim|acquire|assign|enroll|subscribe|unsubscribe|refund|restart|kill"
    # Orders, queues, contexts, archives: what they change is an account, a queue, the CLI state
    # or the working directory (issue 25).
    "|place|buy|sell|trade|pop|dequeue|consume|ack|nack|lease|switch|use|cd"
    "|login|logout|unzip|untar|extract|unpack|decompress|mkdir|touch|chmod|chown|copy|cp|mv|rm"
    "|signup|invite|schedule|trigger|enable|disable|lock|unlock|init"
)
# Verbs that say a call only reads (the shared-resource rule trusts these, nothing less).
_READ_VERBS = (
    "get|gets|fetch|fetches|read|reads|list|lists|search|searches|query|lookup|find|load|loads"
    "|describe|retrieve|retrieves|show|count|view|select|scan|head|stat|exists|peek|browse"
    "|resolve|download|similarity|embed|embedding|embeddings|rank|rerank|recall|check|inspect"
)
# SQL functions with effects (a sequence advanced, a notification sent, a lock taken): the
# statement changes state whatever its verb.
_EFFECT_SQL = (
    r"(?i)\b(nextval|setval|pg_notify|pg_advisory_lock|pg_advisory_xact_lock|pg_try_advisory_lock"
    r"|lo_import|lo_unlink|dblink_exec|txid_current|last_insert_id|get_lock|sp_getapplock)\b\s*\("
)
# SQL that is different on every call: never a cache candidate.
_VOLATILE_SQL_NAMES = (
    r"nextval|setval|currval|lastval|now|random|rand|uuid_generate_v\d|gen_random_uuid"
    r"|newid|sysdate|sysdatetime|getdate|current_timestamp|current_date|current_time"
    r"|clock_timestamp|statement_timestamp|localtimestamp|txid_current|last_insert_id"
    r"|uuid"
)
_VOLATILE_SQL = rf"(?i)\b({_VOLATILE_SQL_NAMES})\b\s*(\(|$|[\s,;)])"
# Reads whose answer changes with every call by nature (the clock, a random pick, a fresh id, a
# nonce): never cacheable, at any confidence.  Whole words of the name, tool or URL path.
_VOLATILE_WORDS = (
    "time|now|clock|timestamp|date|today|random|rand|uuid|nonce|otp|token|captcha|shuffle"
    "|sample|dice|roll|live|realtime|ticker|quote|price|prices|stream|tail"
    # Time-relative reads: what is current, latest, next or pending now is not what it was.
    "|current|latest|recent|newest|next|pending|unread|inbox|feed|trending|status|health"
    "|heartbeat|ping"
)
# GraphQL: the operation type says whether it writes (``graphql.operation.type``), else the
# document's first keyword (``graphql.document``).
_GRAPHQL_WRITES = ("mutation", "subscription")
# Child spans that say a hop waits on a shared resource: a lock, a semaphore, a rate limit, a
# pool.  Hops that hold the same one cannot really run together (``hops.contention``).
_CONTENTION_WORDS = (
    r"(?i)(^|[^a-z])(lock|locks|locked|mutex|semaphore|sem|slot|slots|permit|permits|ratelimit"
    r"|rate_limit|rate-limit|rate limit|throttle|throttled|token_bucket|bucket|pool|pool_wait"
    r"|acquire|acquire_\w+|checkout_connection|connection_pool|queue_wait|admission)([^a-z]|$)"
)
# Arguments that page through a result: each call takes what the previous one returned.
_PAGED = (
    r"(?i)(^|[?&\s\"'{,._])(cursor|page_?token|next_?token|next_?page|next|offset|after"
    r"|starting_after|continuation(_?token)?|page|marker|since_id|max_id|skip)"
    r"(\"|')?\s*[=:]"
)
_SQL_PAGED = r"(?i)\boffset\s+\d+|\bwhere\b.*\b(id|cursor|created_at)\s*>\s*"
_PAGED_KEY = r"(?i)(^|[._])(cursor|page_?token|next_?token|offset|after|starting_after|page)$"
# A boolean result is a decision (may the user see it? is the file clean?): what runs after it
# may run only because of it, with no value flowing into its arguments.
_DECISIONS = [result_fingerprint(True)[0], result_fingerprint(False)[0]]
# Who is asking: a cached answer for one caller is not an answer for another.  Any key naming a
# tenant, a user, a session or a conversation, and any credential header (authorization, an API
# key, a cookie), is part of the cache key (issue 25); a user agent or usage counts are not.
_IDENTITY_KEY = (
    r"(?i)(tenant|user|session|conversation\.id|authorization|api[-_.]?key|cookie|x-org|org[-_.]id)"
)
_NOT_IDENTITY_KEY = r"(?i)(user[-_.]?agent|usage|user_cpu|\.user\.message|tracelens\.)"
_REQUEST_HEADER = "http.request.header."
# Request headers that carry transport, not scope: never part of a cache key.
_NEUTRAL_HEADERS = (
    r"(?i)\.(accept(-\w+)?|user-agent|content-(length|type|encoding)|traceparent|tracestate"
    r"|baggage|host|connection|keep-alive|x-request-id|x-correlation-id|x-b3-\w+|b3"
    r"|x-amzn-trace-id|x-forwarded-\w+|via|te|upgrade|pragma|cache-control|if-none-match"
    r"|if-modified-since|referer|origin)$"
)
_READ_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")
_READ_SQL = ("SELECT", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "WITH", "VALUES", "SEARCH")

_SQL_KEYS = (A.DB_QUERY_TEXT, A.DB_STATEMENT, SQL_QUERY)
_URL_KEYS = (A.URL_FULL, A.HTTP_URL)
_METHOD_KEYS = (A.HTTP_REQUEST_METHOD, A.HTTP_METHOD)
_DB_OP_KEYS = (DB_OPERATION_NAME, DB_OPERATION)
_READ_KEYS = (
    *_SQL_KEYS,
    *_URL_KEYS,
    *_METHOD_KEYS,
    *_DB_OP_KEYS,
    A.GRAPHQL_OPERATION_TYPE,
    A.GRAPHQL_DOCUMENT,
    A.DB_COLLECTION_NAME,
    A.GEN_AI_TOOL_CALL_ARGUMENTS,
    A.GEN_AI_TOOL_NAME,
    A.GEN_AI_OPERATION_NAME,
    A.GEN_AI_REQUEST_MODEL,
    A.OPENINFERENCE_SPAN_KIND,
    *_RESULT_KEYS,
)

# Where a call's argument key came from (``Features.key_source`` codes).
KEY_SOURCES = ("args_hash", A.GEN_AI_TOOL_CALL_ARGUMENTS, "query text", "URL", "attributes")
# The multipliers that combine 64-bit ids (operation, key, run, ...) into one, with wrapping
# arithmetic: collisions as unlikely as the ids' own.  One pair for every findings module.
MIX1 = np.uint64(0x9E3779B97F4A7C15)
MIX2 = np.uint64(0xC2B2AE3D27D4EB4F)


@dataclass
class Features:
    """Per span (``TraceAnalysis.spans`` row order); ``key``/``result`` valid where ``has_*``."""

    op: np.ndarray  # uint64 id of (service, name)
    key: np.ndarray  # uint64 hash of the arguments
    has_key: np.ndarray
    key_source: np.ndarray  # index into KEY_SOURCES, -1 unknown
    result: np.ndarray
    has_result: np.ndarray
    instrumented: np.ndarray  # carries tracelens fingerprints
    model: np.ndarray  # a model call
    cpu: np.ndarray  # CPU-bound
    error: np.ndarray
    write: np.ndarray  # index into write_reasons, -1 when the call reads only
    write_reasons: list[str]
    read_only: np.ndarray  # known to only read (HTTP GET, SELECT, a reading verb)
    paged: np.ndarray  # pages through a listing (cursor, page token, offset)
    identity: np.ndarray  # uint64 hash of the caller's identity, 0 when none was recorded
    recorded_args: pl.Series  # recorded argument text (tool arguments, query text, URL)
    recorded_result: pl.Series  # recorded result text (tool call result, output messages)
    recorded_forms_args: pl.Series  # recorded_args with every form of its tokens, lower case
    recorded_forms_result: pl.Series  # recorded_result likewise (``recorded_forms``)
    recorded_derived: np.ndarray  # recorded_args hold a digest-shaped token
    covered: np.ndarray  # every argument fingerprinted (tracelens spans; no opaque, no cut-off)
    text_result: np.ndarray  # the result is free text (or not recorded): may flow transformed
    decision: np.ndarray  # the result is a boolean: what follows may run only because of it
    volatile: np.ndarray  # the answer changes on every call by nature (clock, random, nonce)
    resource: np.ndarray  # uint64 id of what it reads or writes (table, URL prefix), 0 unknown
    contended: np.ndarray  # uint64 id of a lock / semaphore / pool it waits on, 0 none
    derived: np.ndarray  # takes a value only computation makes (a hash, a signature)
    may_write: np.ndarray  # a leaf tool or client call of unknown effect (``_may_write``)
    has_arg_fps: np.ndarray  # per-argument fingerprints written (an empty list counts)


class _Attrs:
    """The attributes of every span as a long table, with per-key lookups over row subsets."""

    def __init__(self, spans: pl.DataFrame) -> None:
        self.n = spans.height
        self.long = (
            spans.select("_i", pl.col("attributes").map.entries().alias("_e"))
            .explode("_e")
            .unnest("_e")
            .drop_nulls("key")
        )
        self.picked = self.long.filter(pl.col("key").is_in(list(_READ_KEYS)))
        self._first: dict[tuple[str, ...], pl.DataFrame] = {}
        self._urls: pl.Series | None = None

    def first(self, keys: tuple[str, ...]) -> pl.DataFrame:
        """(_i, value) of the first of ``keys`` each span has (in the order given); several
        rules read the same keys, so each lookup is made once."""
        got = self._first.get(keys)
        if got is None:
            got = self._first[keys] = self._lookup(keys)
        return got

    def urls(self) -> pl.Series:
        """``url_canonical`` of ``first(_URL_KEYS)["value"]``, made once for the rules that
        read URLs."""
        if self._urls is None:
            self._urls = url_canonical(self.first(_URL_KEYS)["value"])
        return self._urls

    def _lookup(self, keys: tuple[str, ...]) -> pl.DataFrame:
        sub = self.picked.filter(pl.col("key").is_in(list(keys)))
        if sub.height == 0:
            return pl.DataFrame(schema={"_i": pl.Int64, "value": pl.String})
        if len(keys) > 1:
            rank = {k: r for r, k in enumerate(keys)}
            sub = sub.with_columns(
                pl.col("key").replace_strict(rank, return_dtype=pl.Int32).alias("_r")
            ).sort("_i", "_r")
        return sub.unique("_i", keep="first", maintain_order=True).select(
            pl.col("_i").cast(pl.Int64), "value"
        )

    def joined(self, keep: list[str], rows: np.ndarray) -> pl.DataFrame:
        """(_i, value): sorted ``key=value`` entries with keys in ``keep``, spans in ``rows``."""
        if not keep or not rows.any():
            return pl.DataFrame(schema={"_i": pl.Int64, "value": pl.String})
        wanted = pl.Series("w", rows[self.long["_i"].to_numpy()])
        return (
            self.long.filter(wanted & pl.col("key").is_in(keep))
            .sort("_i", "key")
            .group_by("_i", maintain_order=True)
            .agg((pl.col("key") + "=" + pl.col("value")).str.join("\x1f").alias("value"))
            .select(pl.col("_i").cast(pl.Int64), "value")
        )


def _by_value(values: pl.Series, fn: object) -> pl.Series:
    """Apply a Python function once per distinct value (values repeat a lot)."""
    uniq = values.unique().drop_nulls()
    mapping = {v: fn(v) for v in uniq.to_list()}  # type: ignore[operator]
    return values.replace_strict(mapping, default=None)


def _hash(texts: pl.Series) -> np.ndarray:
    return texts.hash(seed=7).to_numpy().astype(np.uint64)


def _own_keys(attrs: _Attrs, spans: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key, has key, source) from the first source that has the call's arguments."""
    n = attrs.n
    key = np.zeros(n, dtype=np.uint64)
    has = np.zeros(n, dtype=bool)
    source = np.full(n, -1, dtype=np.int64)
    claimed = np.zeros(n, dtype=bool)

    def put(idx: np.ndarray, texts: pl.Series | None, code: int) -> None:
        free = ~claimed[idx]
        idx = idx[free]
        claimed[idx] = True
        if texts is None:
            return  # claimed but unknown (parameterised SQL)
        known = texts.filter(pl.Series(free)).is_not_null().to_numpy()
        vals = texts.filter(pl.Series(free))
        key[idx[known]] = _hash(vals.filter(pl.Series(known)))
        has[idx[known]] = True
        source[idx[known]] = code

    args = spans.select("_i", "args_hash").filter(pl.col("args_hash").is_not_null())
    put(args["_i"].to_numpy(), "a:" + args["args_hash"], 0)
    tool = attrs.first((A.GEN_AI_TOOL_CALL_ARGUMENTS,))
    put(tool["_i"].to_numpy(), "t:" + tool["value"], 1)
    sql = attrs.first(_SQL_KEYS)
    if sql.height:
        rows = np.zeros(n, dtype=bool)
        rows[sql["_i"].to_numpy()] = True
        params = attrs.joined(
            [
                k
                for k in attrs.long["key"].unique().to_list()
                if k.startswith(DB_QUERY_PARAMETER_PREFIX)
            ],
            rows,
        )
        sql = sql.join(params.rename({"value": "_p"}), on="_i", how="left", maintain_order="left")
        bound = _by_value(sql["value"], lambda t: not _PARAMETERISED_RE.search(t))
        text = pl.when(bound.fill_null(False) | sql["_p"].is_not_null()).then(
            "q:" + pl.col("value") + "|" + pl.col("_p").fill_null("")
        )
        put(sql["_i"].to_numpy(), sql.select(text.alias("t"))["t"], 2)
    url = attrs.first(_URL_KEYS)
    method = attrs.first(_METHOD_KEYS)
    # A URL holds the whole request only for reads; a POST's arguments are in its body.
    body = method.filter(~pl.col("value").str.to_uppercase().is_in(list(_READ_METHODS)))
    read = url.join(body, on="_i", how="anti")
    # A recorded request header that is not known to be transport-only (a workspace, a
    # tenant, a locale, a feature switch) may scope the answer: it is part of the key.
    headers = [
        k
        for k in attrs.long["key"].unique().to_list()
        if k.startswith(_REQUEST_HEADER) and not re.search(_NEUTRAL_HEADERS, k)
    ]
    if headers and read.height:
        rows = np.zeros(n, dtype=bool)
        rows[read["_i"].to_numpy()] = True
        scoped = attrs.joined(headers, rows).rename({"value": "_h"})
        read = read.join(scoped, on="_i", how="left", maintain_order="left").select(
            "_i", (pl.col("value") + "|" + pl.col("_h").fill_null("")).alias("value")
        )
    put(read["_i"].to_numpy(), "u:" + read["value"], 3)
    put(url.join(body, on="_i", how="semi")["_i"].to_numpy(), None, 3)
    noise = re.compile(_NOISE_KEYS)
    arg_keys = [k for k in attrs.long["key"].unique().to_list() if not noise.search(k)]
    # Only a caller's span records what it asked for; a server or message span's attributes
    # describe the request's route and transport, not its body.
    caller = spans["span_kind"].is_in(["client", "internal", "unspecified"]).to_numpy()
    rest = attrs.joined(arg_keys, ~claimed & caller)
    put(rest["_i"].to_numpy(), "r:" + rest["value"], 4)
    return key, has, source


_PARAMETERISED_RE = re.compile(_PARAMETERISED)
_WORDS_RE = re.compile(rf"(^|[^a-z])({_WRITE_VERBS})([^a-z]|$)")
_READ_WORDS_RE = re.compile(rf"(^|[^a-z])({_READ_VERBS})([^a-z]|$)")
_VOLATILE_RE = re.compile(_VOLATILE_SQL)
_EFFECT_SQL_RE = re.compile(_EFFECT_SQL)
_VOLATILE_WORDS_RE = re.compile(rf"(^|[^a-z])({_VOLATILE_WORDS})([^a-z]|$)")

_CAMEL_RE = re.compile(r"([a-z0-9])([A-Z])")
_SQL_VERB_RE = re.compile(r"^\(?\s*([A-Za-z]+)")


def _name_reason(name: str) -> str | None:
    m = _WORDS_RE.search(_CAMEL_RE.sub(r"\1 \2", name).lower())
    return f"its name says '{m.group(2)}'" if m else None


def _tool_reason(tool: str) -> str | None:
    m = _WORDS_RE.search(_CAMEL_RE.sub(r"\1 \2", tool).lower())
    return f"tool '{tool}' runs commands or changes state ('{m.group(2)}')" if m else None


def _is_read_name(name: str) -> bool:
    words = _CAMEL_RE.sub(r"\1 \2", name).lower()
    m = _READ_WORDS_RE.search(words)
    return m is not None and _WORDS_RE.search(words) is None


def _method_reason(method: str) -> str | None:
    m = method.upper()
    return None if m in _READ_METHODS else f"HTTP {m} changes state"


def _sql_reason(text: str) -> str | None:
    m = _SQL_VERB_RE.match(text.strip())
    verb = m.group(1).upper() if m else ""
    e = _EFFECT_SQL_RE.search(text)
    if e:
        return f"SQL {e.group(1).lower()}() has a side effect"
    return None if not verb or verb in _READ_SQL else f"SQL {verb} changes state"


def _graphql_reason(op_type: str) -> str | None:
    t = op_type.strip().split(None, 1)[0].lower() if op_type.strip() else ""
    return f"GraphQL {t} changes state" if t in _GRAPHQL_WRITES else None


def _url_path(url: str) -> str:
    """The path of a URL (or of a bare path), without query or fragment."""
    rest = url.split("://", 1)[1] if "://" in url else url
    path = rest[rest.find("/") :] if "/" in rest else ""
    return path.split("?", 1)[0].split("#", 1)[0]


def url_canonical(values: pl.Series, *, bare_whole: bool = False) -> pl.Series:
    """Per URL (or bare path), vectorised: ``x://HOST/PATH``, or ``/PATH`` without a scheme,
    the query and fragment cut off.  The URL rules read only the host and the path
    (``_url_path``, ``_url_reason``, ``resource_of_url``), so each gives the same answer for a
    URL and for its canonical form, and the Python rules run once per distinct host and path
    instead of once per distinct URL (queries make nearly every URL distinct).  Literal splits
    only, as ``_url_path`` makes them.  ``bare_whole``: a value without ``://`` is kept whole
    (the volatile words read all of a text that is no URL)."""
    v = pl.col("v")
    scheme = v.str.contains("://", literal=True)
    rest = pl.when(scheme).then(v.str.splitn("://", 2).struct.field("field_1")).otherwise(v)
    parts = rest.str.splitn("/", 2)
    after = parts.struct.field("field_1")
    path = (
        pl.when(after.is_not_null())
        .then("/" + after.str.splitn("?", 2).struct.field("field_0"))
        .otherwise(pl.lit(""))
        .str.splitn("#", 2)
        .struct.field("field_0")
    )
    bare = v if bare_whole else path
    canon = pl.when(scheme).then("x://" + parts.struct.field("field_0") + path).otherwise(bare)
    canon = pl.when(v.is_not_null()).then(canon)
    return pl.DataFrame({"v": values}).select(canon.alias(values.name)).to_series()


def _literals(alternation: str) -> list[str]:
    """The literal head of each alternative of a regex alternation of words (``uuid`` of
    ``uuid_generate_v\\d``): a text the regex matches (case-insensitively) holds one of them."""
    heads = [re.match(r"[a-z_]*", alt).group(0) for alt in alternation.split("|")]  # type: ignore[union-attr]
    assert all(heads), alternation
    return heads


_VOLATILE_SQL_HEADS = "|".join(_literals(_VOLATILE_SQL_NAMES))
_VOLATILE_WORD_HEADS = "|".join(_literals(_VOLATILE_WORDS))


def _may_hold(values: pl.Series, heads: str) -> np.ndarray:
    """Values that may match a regex of the words ``heads`` stands for: an ASCII text whose
    lower case holds one of them, and every non-ASCII text (case folding beyond ASCII is left to
    Python's ``re``).  A superset of the matches, computed without Python per value."""
    maybe = values.str.to_lowercase().str.contains(heads) | values.str.contains(r"[^\x00-\x7F]")
    return maybe.fill_null(False).to_numpy()


def _url_reason(url: str) -> str | None:
    """A word of the URL path that says it changes state (``/queues/render/pop``)."""
    words = _url_path(url).replace("/", " ").replace("-", " ").replace("_", " ").lower()
    m = _WORDS_RE.search(words)
    return f"its URL path says '{m.group(2)}'" if m else None


def _volatile_call(text: str) -> bool:
    return _VOLATILE_RE.search(text) is not None


def _volatile_words(text: str) -> bool:
    words = _CAMEL_RE.sub(r"\1 \2", _url_path(text) if "://" in text else text).lower()
    return _VOLATILE_WORDS_RE.search(words.replace("/", " ").replace("-", " ")) is not None


def volatile(values: pl.Series, canonical: pl.Series | None = None) -> np.ndarray:
    """Whether each value says the answer changes on every call (the clock, a random pick, a
    nonce, a live price: ``_volatile_words``) or is SQL calling a volatile function
    (``_volatile_call``), as a bool array (null: False), each regex run in
    Python only on the distinct values that may match it (``_may_hold``), the words on the
    canonical URL (``url_canonical``: they read its path alone).  ``canonical``: the values'
    ``url_canonical`` where the caller has it (mostly distinct values, URLs: not deduplicated)."""
    if canonical is None:
        uniq = values.unique().drop_nulls()
        hit = _volatile_of(uniq, url_canonical(uniq, bare_whole=True))
        if not hit.any():
            return np.zeros(len(values), dtype=bool)
        return values.is_in(uniq.filter(pl.Series(hit)).implode()).fill_null(False).to_numpy()
    scheme = values.str.contains("://", literal=True).fill_null(False)
    subject = pl.select(pl.when(scheme).then(canonical).otherwise(values)).to_series()
    return _volatile_of(values, subject)


def _volatile_of(values: pl.Series, subject: pl.Series) -> np.ndarray:
    """``volatile`` of ``values`` given ``subject``, their ``url_canonical`` with
    ``bare_whole`` (null: False)."""
    out = np.zeros(len(values), dtype=bool)
    maybe = _may_hold(values, _VOLATILE_SQL_HEADS)
    if maybe.any():
        out[maybe] = _which(values.filter(pl.Series(maybe)), _volatile_call)
    maybe = _may_hold(subject, _VOLATILE_WORD_HEADS) & ~out
    if maybe.any():
        out[maybe] = _which(subject.filter(pl.Series(maybe)), _volatile_words)
    return out


def _db_op_reason(op: str) -> str | None:
    o = op.lower()
    return f"database operation '{o}' changes state" if re.fullmatch(_WRITE_VERBS, o) else None


def _write_reasons(
    attrs: _Attrs, names: pl.Series, spans: pl.DataFrame
) -> tuple[np.ndarray, list[str]]:
    """Why each call changes state (an index into the returned list), or -1.

    The first that applies wins: the HTTP method, the SQL verb, the database operation, then
    the verbs in the span name.
    """
    n = attrs.n
    reason = np.full(n, -1, dtype=np.int64)
    texts: list[str] = []
    index: dict[str, int] = {}

    def put(idx: np.ndarray, found: pl.Series) -> None:
        codes = {}
        for v in found.unique().to_list():
            codes[v] = index.setdefault(v, len(texts))
            if codes[v] == len(texts):
                texts.append(v)
        code = found.replace_strict(codes, return_dtype=pl.Int64).to_numpy()
        free = reason[idx] < 0
        reason[idx[free]] = code[free]

    for keys, fn in (
        (_METHOD_KEYS, _method_reason),
        (_SQL_KEYS, _sql_reason),
        (_DB_OP_KEYS, _db_op_reason),
        ((A.GRAPHQL_OPERATION_TYPE, A.GRAPHQL_DOCUMENT), _graphql_reason),
        (_URL_KEYS, _url_reason),
    ):
        got = attrs.first(keys)
        judged = _by_value(attrs.urls() if keys == _URL_KEYS else got["value"], fn)
        hit = judged.is_not_null().to_numpy()
        put(got["_i"].to_numpy()[hit], judged.filter(pl.Series(hit)))
    tools = attrs.first((A.GEN_AI_TOOL_NAME,))
    judged = _by_value(tools["value"], _tool_reason)
    hit = judged.is_not_null().to_numpy()
    put(tools["_i"].to_numpy()[hit], judged.filter(pl.Series(hit)))
    by_name = _by_value(names, _name_reason)
    hit = by_name.is_not_null().to_numpy()
    put(np.flatnonzero(hit), by_name.filter(pl.Series(hit)))
    # A call that returned nothing did something else (a context switched, an archive unpacked
    # into the working directory), unless its name says it only reads.
    nothing = np.flatnonzero(_returned_nothing(attrs, spans) & ~_which(names, _is_read_name))
    put(nothing, pl.Series(["it returns nothing and is not known to only read"] * len(nothing)))
    return reason, texts


_NONE_RESULT = result_fingerprint(None)[0]
_EMPTY_RESULTS = ("", "null", "None", '""', "{}")


def _returned_nothing(attrs: _Attrs, spans: pl.DataFrame) -> np.ndarray:
    """Calls whose recorded result is nothing: ``None`` fingerprinted by tracelens, or an empty
    recorded tool result.  (A result never recorded says nothing.)"""
    out = (spans["result_hash"] == _NONE_RESULT).fill_null(False).to_numpy().copy()
    tools = attrs.first((A.GEN_AI_TOOL_CALL_RESULT,))
    empty = tools["value"].str.strip_chars().is_in(list(_EMPTY_RESULTS)).fill_null(False)
    out[tools["_i"].to_numpy()[empty.to_numpy()]] = True
    return out


def _read_only(attrs: _Attrs, names: pl.Series, write: np.ndarray) -> np.ndarray:
    """Calls known to only read: an HTTP read method, a read SQL verb, or a name whose verb
    says so (get, fetch, search, ...) and no writing verb.  Anything else may change what it
    touches, so a later hop that takes the same resource waits for it."""
    n = attrs.n
    out = np.zeros(n, dtype=bool)
    method = attrs.first(_METHOD_KEYS)
    m = method["value"].str.to_uppercase().is_in(list(_READ_METHODS)).to_numpy()
    out[method["_i"].to_numpy()[m]] = True
    sql = attrs.first(_SQL_KEYS)
    out[sql["_i"].to_numpy()[_which(sql["value"], _is_read_sql)]] = True
    out |= _which(names, _is_read_name)
    return out & (write < 0)


def _is_read_sql(text: str) -> bool:
    m = _SQL_VERB_RE.match(text.strip())
    return m is not None and m.group(1).upper() in _READ_SQL


def _which(values: pl.Series, fn: Callable[[str], bool]) -> np.ndarray:
    """``fn`` of every value as a bool array, computed once per distinct value."""
    uniq = values.unique().drop_nulls()
    yes = [v for v in uniq.to_list() if fn(v)]
    return values.is_in(yes).fill_null(False).to_numpy() if yes else np.zeros(len(values), bool)


def _paged(attrs: _Attrs) -> np.ndarray:
    """Calls that page through a listing: a cursor, page token, offset, ... among the arguments
    (URL query, tool arguments, attribute names), or SQL with OFFSET / keyset conditions."""
    out = np.zeros(attrs.n, dtype=bool)
    for keys, rx in (
        (_URL_KEYS, _PAGED),
        ((A.GEN_AI_TOOL_CALL_ARGUMENTS,), _PAGED),
        (_SQL_KEYS, _SQL_PAGED),
    ):
        got = attrs.first(keys)
        uniq = got["value"].unique().drop_nulls()
        yes = uniq.filter(uniq.str.contains(rx))
        hit = got["value"].is_in(yes.implode()).fill_null(False).to_numpy()
        out[got["_i"].to_numpy()[hit]] = True
    names = attrs.long["key"].unique()
    paging = names.filter(names.str.contains(_PAGED_KEY)).to_list()
    if paging:
        keyed = attrs.long.filter(pl.col("key").is_in(paging))
        out[keyed["_i"].cast(pl.Int64).to_numpy()] = True
    return out


_REDACTED = r"(?i)^\s*$|\*{2,}|redact|x{4,}|<hidden>|\[filtered\]|^(bearer|basic)\s*$"


def _text_of(attrs: _Attrs, keys: tuple[str, ...]) -> pl.Series:
    """Per span: the first of ``keys`` it recorded, else null."""
    out = pl.repeat(None, attrs.n, dtype=pl.String, eager=True)
    if not keys:
        return out
    got = attrs.first(keys)
    return out.scatter(got["_i"].to_numpy(), got["value"])


def _identity(attrs: _Attrs, spans: pl.DataFrame) -> np.ndarray:
    """Per span: a hash of who asked (its trace's caller identity attributes), 0 if unknown."""
    keys = attrs.long["key"].unique()
    who_keys = keys.filter(
        keys.str.contains(_IDENTITY_KEY) & ~keys.str.contains(_NOT_IDENTITY_KEY)
    ).to_list()
    ids = attrs.long.filter(pl.col("key").is_in(who_keys))
    out = np.zeros(attrs.n, dtype=np.uint64)
    if ids.height == 0:
        return out
    trace = spans["_trace"].to_numpy()
    tnum = trace[ids["_i"].cast(pl.Int64).to_numpy()]
    per = (
        ids.with_columns(pl.Series("_t", tnum))
        .with_columns(
            # The same token is the same caller.  A redacted one ("Bearer ***", "[REDACTED]")
            # says only that *some* caller authenticated: calls in different traces cannot be
            # told apart, so each trace counts as its own caller.
            pl.when(pl.col("value").str.contains(_REDACTED))
            .then(pl.col("key") + "=?" + pl.col("_t").cast(pl.String))
            .otherwise(pl.col("key") + "=" + pl.col("value"))
            .alias("kv")
        )
        .unique(["_t", "kv"])
        .sort("_t", "kv")
        .group_by("_t", maintain_order=True)
        .agg(pl.col("kv").str.join("\x1f"))
    )
    who = np.zeros(int(trace.max()) + 1 if len(trace) else 0, dtype=np.uint64)
    who[per["_t"].to_numpy()] = _hash(per["kv"])
    return who[trace]


def features(spans: pl.DataFrame) -> Features:
    """The facts of every span of ``TraceAnalysis.spans``."""
    attrs = _Attrs(spans)
    own, has_own, source = _own_keys(attrs, spans)
    res_rows = spans.select("_i", "result_hash").filter(pl.col("result_hash").is_not_null())
    n = spans.height
    result = np.zeros(n, dtype=np.uint64)
    has_result = np.zeros(n, dtype=bool)
    ri = res_rows["_i"].to_numpy()
    result[ri] = _hash(res_rows["result_hash"])
    has_result[ri] = True
    # Without tracelens fingerprints, a tool call's or model call's recorded output stands in.
    recorded = attrs.first(_RESULT_KEYS)
    fresh = ~has_result[recorded["_i"].to_numpy()]
    rr = recorded["_i"].to_numpy()[fresh]
    result[rr] = _hash(("o:" + recorded["value"]).filter(pl.Series(fresh)))
    has_result[rr] = True
    instr = (
        spans.select(
            pl.col("args_hash").is_not_null()
            | pl.col("arg_fps").is_not_null()
            | pl.col("result_fps").is_not_null()
        )
        .to_series()
        .to_numpy()
    )
    parent = spans["_parent"].to_numpy()
    p = np.maximum(parent, 0)
    # A child without fingerprints under an instrumented parent: the parent's arguments are
    # part of what it was asked, the parent's result stands in for its own.
    inherit = (parent >= 0) & ~instr & instr[p]
    mixed = has_own & inherit
    key = own.copy()
    key[mixed] = own[mixed] * MIX1 + np.where(has_own[p[mixed]], own[p[mixed]], np.uint64(1))
    result = np.where(inherit, result[p], result)
    has_result = np.where(inherit, has_result[p], has_result)
    write, reasons = _write_reasons(attrs, spans["name"], spans)
    read_only = _read_only(attrs, spans["name"], write)
    # Recorded texts matter only where some result was recorded: else two nulls, cheaply.
    recorded_args = _text_of(
        attrs, (A.GEN_AI_TOOL_CALL_ARGUMENTS, *_SQL_KEYS, *_URL_KEYS) if recorded.height else ()
    )
    recorded_result = _text_of(attrs, _RESULT_KEYS if recorded.height else ())
    marks = spans.select(
        # Complete only where the per-argument fingerprints were written (an empty list: every
        # argument too common to link anything); ``args_hash`` alone, as older instrumentation
        # or another producer writes it, says nothing about which values were passed.
        (
            pl.col("args_hash").is_not_null()
            & pl.col("arg_fps").is_not_null()
            & ~pl.col("arg_fps").list.contains(OPAQUE_FP).fill_null(False)
            & ~pl.col("arg_fps").list.contains(DERIVED_FP).fill_null(False)
            & (pl.col("arg_fps").list.len().fill_null(0) < MAX_FPS)
        ).alias("covered"),
        pl.col("arg_fps").list.contains(DERIVED_FP).fill_null(False).alias("derived"),
        (pl.col("result_hash").is_null() | pl.col("result_fps").list.contains(TEXT_FP))
        .fill_null(True)
        .alias("text"),
        pl.col("result_hash").is_in(_DECISIONS).fill_null(False).alias("decision"),
    )
    kinds = spans.select(
        ((pl.col("kind_resolved") == A.CPU) | (pl.col("mix_cpu") > 0.5)).alias("cpu"),
        (pl.col("status_code") == "error").alias("error"),
        pl.struct("service", "name").hash(seed=3).alias("op"),
    )
    model = spans["model_call"].fill_null(False).to_numpy()
    cpu = kinds["cpu"].to_numpy()
    return Features(
        op=kinds["op"].to_numpy().astype(np.uint64),
        key=key,
        has_key=has_own,
        key_source=source,
        result=result,
        has_result=has_result,
        instrumented=instr,
        model=model,
        cpu=cpu,
        error=kinds["error"].to_numpy(),
        write=write,
        write_reasons=reasons,
        read_only=read_only,
        paged=_paged(attrs),
        identity=_identity(attrs, spans),
        recorded_args=recorded_args,
        recorded_result=recorded_result,
        recorded_forms_args=_by_value(recorded_args, recorded_forms),
        recorded_forms_result=_by_value(recorded_result, _result_forms),
        recorded_derived=_which(recorded_args, has_derived),
        covered=marks["covered"].to_numpy() & instr,
        text_result=marks["text"].to_numpy(),
        decision=marks["decision"].to_numpy(),
        volatile=_volatile(attrs, spans["name"]),
        resource=_resource(attrs, spans),
        contended=_contended(spans),
        derived=marks["derived"].to_numpy(),
        has_arg_fps=spans["arg_fps"].is_not_null().to_numpy(),
        may_write=_may_write(attrs, spans, write, read_only | model | cpu),
    )


def _result_forms(text: str) -> str:
    """A recorded result in the forms a later hop may send it in (encodings too)."""
    return recorded_forms(text, encode=True)


def _may_write(
    attrs: _Attrs, spans: pl.DataFrame, write: np.ndarray, no_effect: np.ndarray
) -> np.ndarray:
    """Calls that may have changed state though nothing names an effect: a tool call or an
    outgoing (client) call with no effect named (``write``) and none ruled out (``no_effect``:
    known to only read, a model call, CPU work), and
    calls nothing traced itself (an enclosing span is not a call between two others).  A
    repeat after one of these in its trace may read what it changed: no cache finding rests on
    the hope that it did not (issue 25, "an effect no verb list names")."""
    n = attrs.n
    tool = (spans["span_kind"] == "client").fill_null(False).to_numpy().copy()
    tool[attrs.first((A.GEN_AI_TOOL_NAME,))["_i"].to_numpy()] = True
    oi = attrs.first((A.OPENINFERENCE_SPAN_KIND,))
    tool[oi["_i"].to_numpy()[(oi["value"].str.to_uppercase() == "TOOL").to_numpy()]] = True
    parent = spans["_parent"].to_numpy()
    leaf = np.ones(n, dtype=bool)
    leaf[parent[parent >= 0]] = False
    return tool & leaf & (write < 0) & ~no_effect


def _volatile(attrs: _Attrs, names: pl.Series) -> np.ndarray:
    """Calls whose answer changes on every call by nature: by name, tool name, URL path or a
    volatile SQL function (``volatile``)."""
    out = volatile(names)
    for keys in ((A.GEN_AI_TOOL_NAME,), _URL_KEYS, _SQL_KEYS):
        got = attrs.first(keys)
        urls = attrs.urls() if keys == _URL_KEYS else None
        out[got["_i"].to_numpy()[volatile(got["value"], urls)]] = True
    return out


_TABLE_RE = re.compile(r"(?i)\b(?:from|into|update|join|table)\s+[\"`\[]?([A-Za-z_][\w.]*)")
_ID_SEGMENT_RE = re.compile(r"\d|^\{.*\}$|^:")
_VERSION_SEGMENT_RE = re.compile(r"(?i)^(v\d+(\.\d+)?|api|rest)$")


def resource_of_sql(text: str) -> str | None:
    """The first table a statement names (``FROM`` / ``INTO`` / ``UPDATE`` / ``JOIN``)."""
    m = _TABLE_RE.search(text)
    return "t:" + m.group(1).lower() if m else None


def resource_of_url(url: str) -> str | None:
    """Host and the path up to its first id-like segment (``/v1/carts/c-17/items`` ->
    ``carts/c-17``), else its first segment past a version (``/v1/cart/items`` -> ``cart``): a
    write under a prefix changes what a read of that prefix returns."""
    rest = url.split("://", 1)[1] if "://" in url else url
    host = rest.split("/", 1)[0] if "://" in url else ""
    segs = [g for g in _url_path(url).split("/") if g and not _VERSION_SEGMENT_RE.match(g)]
    if not segs:
        return None
    keep = segs[:1]
    for g in segs[1:]:
        if _ID_SEGMENT_RE.search(g):
            keep.append(g)
            break
        if _ID_SEGMENT_RE.search(keep[-1]):
            break
    return f"u:{host}/" + "/".join(keep[:2]).lower()


def _resource(attrs: _Attrs, spans: pl.DataFrame) -> np.ndarray:
    """Per span: an id of the resource it reads or writes (0 when unknown): a collection or the
    first table of its SQL, a URL prefix, or a GraphQL service's one schema."""
    out = np.zeros(attrs.n, dtype=np.uint64)
    claimed = np.zeros(attrs.n, dtype=bool)
    for keys, fn in (
        ((A.DB_COLLECTION_NAME,), lambda v: "t:" + v.lower()),
        (_SQL_KEYS, resource_of_sql),
        (_URL_KEYS, resource_of_url),
    ):
        got = attrs.first(keys)
        named = _by_value(attrs.urls() if keys == _URL_KEYS else got["value"], fn)
        ok = named.is_not_null().to_numpy() & ~claimed[got["_i"].to_numpy()]
        rows = got["_i"].to_numpy()[ok]
        out[rows] = _hash(named.filter(pl.Series(ok)))
        claimed[rows] = True
    gql = attrs.first((A.GRAPHQL_OPERATION_TYPE, A.GRAPHQL_DOCUMENT))
    rows = gql["_i"].to_numpy()
    rows = rows[~claimed[rows]]
    out[rows] = _hash("g:" + spans["service"].gather(rows))
    return out


_CONTENTION_RE = re.compile(_CONTENTION_WORDS)


def is_lock(names: pl.Series) -> np.ndarray:
    """Spans that wait on a lock, semaphore, slot, rate limit or pool (by name)."""
    return _which(names, lambda v: _CONTENTION_RE.search(_CAMEL_RE.sub(r"\1_\2", v)) is not None)


def _contended(spans: pl.DataFrame) -> np.ndarray:
    """Per span: the id of a lock, semaphore, rate limit or pool one of its direct children
    waits on (its name says so: ``acquire_domain_slot``, ``pool.wait``), else 0.  Spans that
    wait on the same one (same service and name) share it."""
    names = spans["name"]
    lock = is_lock(names)
    out = np.zeros(spans.height, dtype=np.uint64)
    parent = spans["_parent"].to_numpy()
    rows = np.flatnonzero(lock & (parent >= 0))
    if len(rows):
        ids = _hash((spans["service"] + "\x00" + names).gather(rows)) | np.uint64(1)
        out[parent[rows]] = ids
    return out
