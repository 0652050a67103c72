/* Compiled fast path of the OTLP protobuf trace decoder (tracelens.ingest.otlp_proto).
 *
 * Why: turning a request into Arrow columns through Python objects costs microseconds per span,
 * more than everything else the collector does.  This walks the wire format of an
 * ExportTraceServiceRequest (same bytes as TracesData) once and fills column buffers; Python wraps
 * them into Arrow arrays without a Python object per span.
 *
 * The contract that keeps it exact: it only *accepts* requests in a shape it fully understands,
 * and returns None for anything else (malformed bytes included), so the generated-class decoder
 * (_classes.py: the protobuf library) decides every unusual request, errors included.  What it
 * accepts is listed against the OTLP spec in docs/otlp-proto.md, and tests/test_otlp_native.py
 * checks on generated requests that it gives the table the generated-class decoder gives.  Inside
 * an accepted request, what the Python code decodes anyway (resources, scopes, events, links,
 * unusual statuses and attribute values) is handed to it: resources/scopes/events/links as bytes
 * in the result, attributes and statuses through the callbacks, which use the generated classes.
 * Where the protobuf library is strict (varint and length limits, UTF-8 of string fields, message
 * fields that appear twice and merge) this code accepts no more than it does.  Only `bytes`
 * payloads are taken (immutable while the callbacks run); other buffers go to the Python decoder.
 *
 * Nesting is fixed (request > resource spans > scope spans > span > key/value > value), so there
 * is no recursion; every read is checked against the end of the enclosing message.
 */

#include "_native_common.h"

#define WT_VARINT 0
#define WT_I64 1
#define WT_LEN 2
#define WT_I32 5

/* Problem bits: _parts.py's NO_TRACE_ID .. BAD_STATUS. */
enum {
    PB_TRACE_ID = 1, PB_SPAN_ID = 2, PB_KIND = 4, PB_START = 8, PB_END = 16, PB_STATUS = 32,
    PB_BAD_LINK = 64
};
/* check_spans bits, in its order. */
enum { CB_TRACE_ID = 1, CB_SPAN_ID = 2, CB_PARENT = 4, CB_ZERO_TIME = 8, CB_ORDER = 16 };

typedef struct {
    const uint8_t *p;
    size_t n;
} Slice;

/* ---- growable buffers (more in _native_common.h) -------------------------------------------- */

static int buf_zeros(Buf *b, size_t n)
{
    if (n == 0)
        return OK;
    if (buf_grow(b, n))
        return FAIL;
    memset(b->p + b->len, 0, n);
    b->len += n;
    return OK;
}

/* An Arrow string column being built: int32 offsets, data, and (when nullable) a validity bitmap
 * sized for `rows_max` rows up front. */
typedef struct {
    Buf off, data, valid;
    size_t rows;
    int nullable;
} StrCol;

static int sc_init(StrCol *c, size_t rows_max, int nullable)
{
    int32_t zero = 0;
    c->nullable = nullable;
    if (buf_put(&c->off, &zero, sizeof zero))
        return FAIL;
    if (nullable && buf_zeros(&c->valid, (rows_max + 7) / 8))
        return FAIL;
    return OK;
}

/* Ends a row: its value is what was written to data since the previous row. */
static int sc_end(StrCol *c, int valid)
{
    if (c->data.len > INT32_MAX)
        return BAIL; /* past int32 offsets: the Python decoder copes */
    int32_t end = (int32_t)c->data.len;
    if (buf_put(&c->off, &end, sizeof end))
        return FAIL;
    if (valid && c->nullable)
        c->valid.p[c->rows / 8] |= (char)(1u << (c->rows % 8));
    c->rows++;
    return OK;
}

static int sc_add_slow(StrCol *c, const void *s, size_t n)
{
    if (buf_put(&c->data, s, n))
        return FAIL;
    return sc_end(c, 1);
}

/* A row with a value: the hot path of every string column, without a call where there is room. */
static inline int sc_add(StrCol *c, const void *s, size_t n)
{
    Buf *d = &c->data, *o = &c->off;
    if (d->cap - d->len < n || o->cap - o->len < sizeof(int32_t) || d->len + n > INT32_MAX)
        return sc_add_slow(c, s, n);
    if (n)
        memcpy(d->p + d->len, s, n);
    d->len += n;
    int32_t end = (int32_t)d->len;
    memcpy(o->p + o->len, &end, sizeof end);
    o->len += sizeof end;
    if (c->nullable)
        c->valid.p[c->rows / 8] |= (char)(1u << (c->rows % 8));
    c->rows++;
    return OK;
}

static char hex_pairs[512]; /* byte -> its two lower-case hex digits; filled at import */

static int sc_add_hex(StrCol *c, Slice b)
{
    if (b.n == 0)
        return sc_end(c, 1);
    if (buf_grow(&c->data, 2 * b.n))
        return FAIL;
    char *out = c->data.p + c->data.len;
    for (size_t i = 0; i < b.n; i++)
        memcpy(out + 2 * i, hex_pairs + 2 * b.p[i], 2);
    c->data.len += 2 * b.n;
    return sc_end(c, 1);
}

static void sc_free(StrCol *c)
{
    buf_free(&c->off);
    buf_free(&c->data);
    buf_free(&c->valid);
}

/* (offsets, data, validity or None) */
static PyObject *sc_tuple(const StrCol *c)
{
    PyObject *off = buf_bytes(&c->off);
    PyObject *data = buf_bytes(&c->data);
    PyObject *valid = c->nullable ? buf_bytes(&c->valid) : Py_NewRef(Py_None);
    PyObject *t = NULL;
    if (off && data && valid)
        t = PyTuple_Pack(3, off, data, valid);
    Py_XDECREF(off);
    Py_XDECREF(data);
    Py_XDECREF(valid);
    return t;
}

/* ---- wire format ---------------------------------------------------------------------------- */

/* A varint of at most `max` bytes ending before `end`, modulo 2^64 (as upb reads it).  0 when it does not end in time. */
static inline int get_varint(const uint8_t **pp, const uint8_t *end, int max, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    if (p < end && *p < 0x80) { /* the common one-byte case */
        *out = *p;
        *pp = p + 1;
        return 1;
    }
    for (int i = 0; i < max && p + i < end; i++) {
        uint8_t b = p[i];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p + i + 1;
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* The next field's tag of a message that ends at `end`, as upb reads a tag, restricted further:
 * minimal encoding, wire type 0/1/2/5 (groups and anything odd are left to upb).  Every message
 * loop is `while ((more = next_tag(...)) > 0)`: 1 when a tag was read, 0 at the message's end,
 * -1 when what follows is not such a tag. */
static inline int next_tag(const uint8_t **pp, const uint8_t *end, uint32_t *field, int *wt)
{
    const uint8_t *p = *pp;
    uint64_t v;
    if (p >= end)
        return 0;
    if (!get_varint(&p, end, 5, &v))
        return -1;
    if (p - *pp > 1 && p[-1] == 0)
        return -1;
    if (v > UINT32_MAX || (v >> 3) == 0)
        return -1;
    *wt = (int)(v & 7);
    if (*wt != WT_VARINT && *wt != WT_I64 && *wt != WT_LEN && *wt != WT_I32)
        return -1;
    *field = (uint32_t)(v >> 3);
    *pp = p;
    return 1;
}

/* A length-delimited field's contents: upb takes at most 5 bytes for the length, and the contents
 * must lie within the enclosing message. */
static inline int get_len(const uint8_t **pp, const uint8_t *end, Slice *out)
{
    const uint8_t *p = *pp;
    uint64_t n;
    if (!get_varint(&p, end, 5, &n) || n > (uint64_t)(end - p))
        return 0;
    out->p = p;
    out->n = (size_t)n;
    *pp = p + n;
    return 1;
}

static inline int get_fixed64(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    if (end - p < 8)
        return 0;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    *out = v;
    *pp = p + 8;
    return 1;
}

static inline int skip_field(const uint8_t **pp, const uint8_t *end, int wt)
{
    uint64_t v;
    Slice s;
    switch (wt) {
    case WT_VARINT:
        return get_varint(pp, end, 10, &v);
    case WT_I64:
        if (end - *pp < 8)
            return 0;
        *pp += 8;
        return 1;
    case WT_I32:
        if (end - *pp < 4)
            return 0;
        *pp += 4;
        return 1;
    case WT_LEN:
        return get_len(pp, end, &s);
    }
    return 0;
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), like upb and Arrow. */
static int utf8_ok(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c < 0xC2 || c > 0xF4)
            return 0; /* a continuation byte, an overlong 2-byte lead or past U+10FFFF */
        /* continuation bytes, and the range of the first (no overlong forms or surrogates) */
        size_t need = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        uint8_t hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (n - i - 1 < need || s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        i += need + 1;
    }
    return 1;
}

/* ---- JSON text of values -------------------------------------------------------------------- */

/* What schema.json_value writes for the values of array attributes, events and links (json.dumps
 * with separators (",", ":") and ensure_ascii=False, of the values _anyvalue.any_value gives),
 * for the shapes common in real traces: a string, bool, int or double, an empty value (null), an
 * array of those; an event or link whose attributes are such values under distinct keys.  Any
 * other shape answers J_NO and the Python decoder writes it, from the library's decoding, so
 * everything unusual (kvlists, bytes, nested arrays, repeated or misplaced fields, malformed
 * bytes, invalid UTF-8) keeps the library's answer.  Written into a Buf; on J_NO the caller
 * truncates it.  No recursion: an array's elements are scalars. */
#define J_NO 2
#define OBJECT_KEYS_MAX 16 /* event/link attributes checked for repeated keys pairwise */

/* A JSON string of UTF-8 text (already checked): json.dumps's escapes, non-ASCII as it is. */
static int json_string(Buf *o, const uint8_t *s, size_t n)
{
    size_t extra = 2;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] == '"' || s[i] == '\\')
            extra += 5; /* an escape takes six bytes at most */
    if (buf_grow(o, n + extra))
        return FAIL;
    char *w = o->p + o->len;
    *w++ = '"';
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            *w++ = (char)ch;
            continue;
        }
        *w++ = '\\';
        switch (ch) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\b': *w++ = 'b'; break;
        case '\f': *w++ = 'f'; break;
        case '\n': *w++ = 'n'; break;
        case '\r': *w++ = 'r'; break;
        case '\t': *w++ = 't'; break;
        default:
            memcpy(w, "u00", 3);
            memcpy(w + 3, hex_pairs + 2 * ch, 2);
            w += 5;
        }
    }
    *w++ = '"';
    o->len = (size_t)(w - o->p);
    return OK;
}

static int json_u64(Buf *o, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (buf_grow(o, n))
        return FAIL;
    while (n)
        o->p[o->len++] = tmp[--n];
    return OK;
}

static int json_array(Buf *o, Slice m);

/* One AnyValue message: a scalar, an empty value, or (array_ok) an array of those. */
static int json_any(Buf *o, Slice v, int array_ok)
{
    const uint8_t *p = v.p, *end = v.p + v.n;
    uint32_t f;
    int wt, rc;
    Slice s;
    uint64_t x;
    if (v.n == 0)
        return buf_put(o, "null", 4);
    if (next_tag(&p, end, &f, &wt) <= 0)
        return J_NO;
    if (f == 1 && wt == WT_LEN) {
        if (!get_len(&p, end, &s) || !utf8_ok(s.p, s.n))
            return J_NO;
        rc = json_string(o, s.p, s.n);
    }
    else if ((f == 2 || f == 3) && wt == WT_VARINT) {
        if (!get_varint(&p, end, 10, &x))
            return J_NO;
        if (f == 2)
            rc = x ? buf_put(o, "true", 4) : buf_put(o, "false", 5);
        else {
            char num[24];
            rc = buf_put(o, num, fmt_i64(num, (int64_t)x));
        }
    }
    else if (f == 4 && wt == WT_I64) {
        double d;
        char num[32];
        size_t n;
        if (!get_fixed64(&p, end, &x))
            return J_NO;
        memcpy(&d, &x, sizeof d);
        rc = fmt_double_text(num, &n, d);
        if (rc == OK)
            rc = buf_put(o, num, n);
        else if (rc == BAIL)
            rc = J_NO;
    }
    else if (f == 5 && wt == WT_LEN && array_ok) {
        if (!get_len(&p, end, &s))
            return J_NO;
        rc = json_array(o, s);
    }
    else
        return J_NO;
    if (rc)
        return rc;
    return p == end ? OK : J_NO; /* one field, once */
}

/* An ArrayValue: its values (field 1), each a scalar or empty. */
static int json_array(Buf *o, Slice m)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    uint32_t f;
    int wt, more, rc, first = 1;
    Slice v;
    if (buf_put(o, "[", 1))
        return FAIL;
    while ((more = next_tag(&p, end, &f, &wt)) > 0) {
        if (f != 1 || wt != WT_LEN || !get_len(&p, end, &v))
            return J_NO;
        if (!first && buf_put(o, ",", 1))
            return FAIL;
        if ((rc = json_any(o, v, 0)))
            return rc;
        first = 0;
    }
    if (more < 0)
        return J_NO;
    return buf_put(o, "]", 1);
}

/* A KeyValue: key (1) then value (2), each at most once, nothing else. */
static int key_value(Slice kv, Slice *key, Slice *value)
{
    const uint8_t *p = kv.p, *end = kv.p + kv.n;
    uint32_t f;
    int wt, more;
    key->n = value->n = 0;
    key->p = value->p = kv.p;
    int seen = 0;
    while ((more = next_tag(&p, end, &f, &wt)) > 0) {
        if ((f != 1 && f != 2) || wt != WT_LEN || (seen & (int)f))
            return J_NO;
        seen |= (int)f;
        if (!get_len(&p, end, f == 1 ? key : value))
            return J_NO;
    }
    if (more < 0 || !utf8_ok(key->p, key->n))
        return J_NO;
    return OK;
}

/* Attributes (encoded KeyValues) as the JSON object _anyvalue.key_values gives; a repeated key
 * (a dict keeps its first place and last value) is left to Python. */
static int json_object(Buf *o, const Slice *kvs, size_t k)
{
    Slice keys[OBJECT_KEYS_MAX], value;
    int rc;
    if (k > OBJECT_KEYS_MAX)
        return J_NO;
    if (buf_put(o, "{", 1))
        return FAIL;
    for (size_t i = 0; i < k; i++) {
        if ((rc = key_value(kvs[i], &keys[i], &value)))
            return rc;
        for (size_t j = 0; j < i; j++)
            if (keys[j].n == keys[i].n && !memcmp(keys[j].p, keys[i].p, keys[i].n))
                return J_NO;
        if ((i && buf_put(o, ",", 1)) || json_string(o, keys[i].p, keys[i].n) ||
            buf_put(o, ":", 1))
            return FAIL;
        if ((rc = json_any(o, value, 1)))
            return rc;
    }
    return buf_put(o, "}", 1);
}

/* Where an event's or a link's attributes are collected (Slice of each KeyValue). */
static int collect_kv(Buf *kvs, const uint8_t **pp, const uint8_t *end)
{
    Slice v;
    if (!get_len(pp, end, &v))
        return J_NO;
    return buf_put(kvs, &v, sizeof v);
}

/* A Span.Event as _parts.event_dict gives it: {"time_ns", "name", "attributes"}. */
static int json_event(Buf *o, Buf *kvs, Slice m)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    uint32_t f;
    int wt, more, rc, seen = 0;
    uint64_t time = 0, dropped;
    Slice name = {m.p, 0};
    kvs->len = 0;
    while ((more = next_tag(&p, end, &f, &wt)) > 0) {
        if (f == 1 && wt == WT_I64 && !(seen & 1)) {
            seen |= 1;
            if (!get_fixed64(&p, end, &time))
                return J_NO;
        }
        else if (f == 2 && wt == WT_LEN && !(seen & 2)) {
            seen |= 2;
            if (!get_len(&p, end, &name) || !utf8_ok(name.p, name.n))
                return J_NO;
        }
        else if (f == 3 && wt == WT_LEN) {
            if ((rc = collect_kv(kvs, &p, end)))
                return rc;
        }
        else if (f == 4 && wt == WT_VARINT && !(seen & 4)) {
            seen |= 4;
            if (!get_varint(&p, end, 10, &dropped))
                return J_NO;
        }
        else
            return J_NO; /* a field repeated, of another wire type, or unknown: the library's */
    }
    if (more < 0)
        return J_NO;
    if (buf_put(o, "{\"time_ns\":", 11) || json_u64(o, time) || buf_put(o, ",\"name\":", 8) ||
        json_string(o, name.p, name.n) || buf_put(o, ",\"attributes\":", 14))
        return FAIL;
    if ((rc = json_object(o, (const Slice *)kvs->p, kvs->len / sizeof(Slice))))
        return rc;
    return buf_put(o, "}", 1);
}

/* A Span.Link as _parts.link_dict gives it: {"trace_id", "span_id", "attributes"} (ids as hex);
 * *bad when an id is empty (_parts.bad_links). */
static int json_link(Buf *o, Buf *kvs, Slice m, int *bad)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    uint32_t f;
    int wt, more, rc, seen = 0;
    uint64_t skipped;
    Slice ids[2] = {{m.p, 0}, {m.p, 0}}, state;
    kvs->len = 0;
    while ((more = next_tag(&p, end, &f, &wt)) > 0) {
        if ((f == 1 || f == 2) && wt == WT_LEN && !(seen & (int)f)) {
            seen |= (int)f;
            if (!get_len(&p, end, &ids[f - 1]))
                return J_NO;
        }
        else if (f == 3 && wt == WT_LEN && !(seen & 4)) {
            seen |= 4;
            if (!get_len(&p, end, &state) || !utf8_ok(state.p, state.n))
                return J_NO;
        }
        else if (f == 4 && wt == WT_LEN) {
            if ((rc = collect_kv(kvs, &p, end)))
                return rc;
        }
        else if (f == 5 && wt == WT_VARINT && !(seen & 8)) {
            seen |= 8;
            if (!get_varint(&p, end, 10, &skipped))
                return J_NO;
        }
        else if (f == 6 && wt == WT_I32 && !(seen & 16)) {
            seen |= 16;
            if (end - p < 4)
                return J_NO;
            p += 4;
        }
        else
            return J_NO;
    }
    if (more < 0)
        return J_NO;
    const char *label[2] = {"{\"trace_id\":\"", "\",\"span_id\":\""};
    for (int i = 0; i < 2; i++) {
        if (buf_put(o, label[i], strlen(label[i])) || buf_grow(o, 2 * ids[i].n))
            return FAIL;
        for (size_t k = 0; k < ids[i].n; k++, o->len += 2)
            memcpy(o->p + o->len, hex_pairs + 2 * ids[i].p[k], 2);
    }
    *bad |= ids[0].n == 0 || ids[1].n == 0;
    if (buf_put(o, "\",\"attributes\":", 15))
        return FAIL;
    if ((rc = json_object(o, (const Slice *)kvs->p, kvs->len / sizeof(Slice))))
        return rc;
    return buf_put(o, "}", 1);
}

/* A span's events or links (encoded messages) as one JSON list. */
static int json_list(Buf *o, Buf *kvs, const Buf *items, int links, int *bad)
{
    size_t k = items->len / sizeof(Slice);
    const Slice *m = (const Slice *)items->p;
    int rc;
    if (buf_put(o, "[", 1))
        return FAIL;
    for (size_t i = 0; i < k; i++) {
        if (i && buf_put(o, ",", 1))
            return FAIL;
        if ((rc = links ? json_link(o, kvs, m[i], bad) : json_event(o, kvs, m[i])))
            return rc;
    }
    return buf_put(o, "]", 1);
}

/* ---- decoding state ------------------------------------------------------------------------- */

typedef struct {
    Slice body;
    size_t group;
} SpanRef;

typedef struct {
    size_t r, s, count;
    Slice scope;
} Group;

/* A key of the previous span.  Spans of one request mostly carry the same keys in the same order,
 * so a key equal to the one at the same place there needs no UTF-8 check or promoted lookup, and
 * a key list equal to a duplicate-free one needs no dedupe. */
typedef struct {
    const char *key; /* in the payload or a str kept alive in `keep` */
    size_t klen;
    int8_t promoted;
} PrevKey;

typedef struct {
    const uint8_t *data;
    size_t size;
    PyObject *slow_kv, *slow_status;
    Text pkeys[N_PROMOTED], kinds[N_KINDS], codes[N_CODES]; /* UTF-8 of the str passed in */
    PyObject *keep, *resources, *groups, *extras, *promoted;
    Buf spans, grps;               /* SpanRef, Group */
    Buf kvs, events, links, attrs; /* per span: Slice, Slice, Slice, Attr */
    Buf ekvs;  /* an event's or link's attributes: Slice */
    Buf jtext; /* a span's array attributes as JSON (Attr.ival: where each starts) */
    Buf sortkeys;                  /* SortKey */
    Buf prev;                      /* PrevKey: the previous span's keys */
    size_t nprev;
    int prev_dups; /* whether the previous span repeated a key */
    size_t n;
    size_t empty; /* ResourceSpans and ScopeSpans entries without a span so far */
    /* columns */
    StrCol tid, sid, pid, name, kind, status, msg, pstr[N_PROMOTED], keys, values, jkeys;
    StrCol evs, lns; /* events, links as JSON; null where there are none or Python writes them */
    Buf start, end, cpu, cpu_valid, map_off, json_off, json_valid, problems, checks;
} Ctx;

static void ctx_free(Ctx *c)
{
    Py_CLEAR(c->keep);
    Py_CLEAR(c->resources);
    Py_CLEAR(c->groups);
    Py_CLEAR(c->extras);
    Py_CLEAR(c->promoted);
    Buf *bufs[] = {&c->spans, &c->grps, &c->kvs, &c->events, &c->links, &c->attrs, &c->sortkeys,
                   &c->prev, &c->ekvs, &c->jtext,
                   &c->start, &c->end, &c->cpu, &c->cpu_valid, &c->map_off,
                   &c->json_off, &c->json_valid, &c->problems, &c->checks};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        buf_free(bufs[i]);
    StrCol *cols[] = {&c->tid,  &c->sid,  &c->pid,    &c->name,  &c->kind,
                      &c->status, &c->msg, &c->keys, &c->values, &c->jkeys, &c->evs, &c->lns};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        sc_free(cols[i]);
    for (int p = 0; p < N_PROMOTED; p++)
        sc_free(&c->pstr[p]);
}

/* ---- pass 1: the request's structure down to each span's bytes ------------------------------ */

/* Entries without spans cost work (a resource each) but carry nothing: 60 MiB of empty
 * ResourceSpans took 96 s to decode.  Entries with spans are bounded by the spans. */
#define MAX_EMPTY_ENTRIES 10000

static int count_empty(Ctx *c)
{
    if (++c->empty <= MAX_EMPTY_ENTRIES)
        return OK;
    PyErr_Format(PyExc_ValueError,
                 "more than %d ResourceSpans or ScopeSpans entries without spans",
                 MAX_EMPTY_ENTRIES);
    return FAIL;
}

/* Where a message keeps a repeated message field: the request (1 resource_spans), and the
 * ResourceSpans and ScopeSpans entries (1 the resource or scope, 2 scope_spans or spans,
 * 3 schema_url).  0: the message has no such field (field numbers start at 1). */
typedef struct {
    uint32_t each, head, url;
} Layout;

static const Layout REQUEST = {1, 0, 0}, ENTRY = {2, 1, 3};

typedef int (*EachMessage)(Ctx *c, Slice v, void *arg);

/* The message m laid out as `lay` says: *head is its head message and each repeated one, in
 * order, goes to each(c, v, arg).  A second head is BAIL (a message field twice merges: left to
 * the library), as is anything malformed. */
static int walk_message(Ctx *c, Slice m, const Layout *lay, Slice *head, EachMessage each,
                        void *arg)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    uint32_t f;
    int wt, more, rc, seen_head = 0;
    Slice v;
    while ((more = next_tag(&p, end, &f, &wt)) > 0) {
        if (f == lay->url && wt == WT_LEN) { /* schema_url: a string, so UTF-8 */
            if (!get_len(&p, end, &v) || !utf8_ok(v.p, v.n))
                return BAIL;
        }
        else if (f == lay->each || f == lay->head) {
            if (wt != WT_LEN || !get_len(&p, end, &v))
                return BAIL;
            if (f == lay->each) {
                if ((rc = each(c, v, arg)))
                    return rc;
            }
            else if (seen_head++)
                return BAIL;
            else
                *head = v;
        }
        else if (!skip_field(&p, end, wt))
            return BAIL;
    }
    return more < 0 ? BAIL : OK;
}

/* A span of the group at index *arg: kept as bytes for pass 2. */
static int add_span(Ctx *c, Slice v, void *arg)
{
    SpanRef ref = {v, *(size_t *)arg};
    return buf_put(&c->spans, &ref, sizeof ref);
}

static int walk_scope_spans(Ctx *c, Slice m, size_t r, size_t s)
{
    Group g = {r, s, 0, {NULL, 0}};
    size_t gi = c->grps.len / sizeof(Group), spans_before = c->spans.len;
    int rc = walk_message(c, m, &ENTRY, &g.scope, add_span, &gi);
    if (rc)
        return rc;
    g.count = (c->spans.len - spans_before) / sizeof(SpanRef);
    if (g.count == 0 && count_empty(c))
        return FAIL;
    return buf_put(&c->grps, &g, sizeof g);
}

/* Where a ResourceSpans entry's ScopeSpans go: resource r, the next scope index s. */
typedef struct {
    size_t r, s;
} ScopeAt;

static int add_scope_spans(Ctx *c, Slice v, void *arg)
{
    ScopeAt *at = arg;
    return walk_scope_spans(c, v, at->r, at->s++);
}

static int walk_resource_spans(Ctx *c, Slice m, size_t r)
{
    Slice resource = {NULL, 0};
    ScopeAt at = {r, 0};
    size_t spans_before = c->spans.len;
    int rc = walk_message(c, m, &ENTRY, &resource, add_scope_spans, &at);
    if (rc)
        return rc;
    if (c->spans.len == spans_before && count_empty(c))
        return FAIL;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)resource.p, (Py_ssize_t)resource.n);
    if (raw == NULL)
        return FAIL;
    rc = PyList_Append(c->resources, raw);
    Py_DECREF(raw);
    return rc < 0 ? FAIL : OK;
}

static int add_resource_spans(Ctx *c, Slice v, void *arg)
{
    size_t *r = arg;
    return walk_resource_spans(c, v, (*r)++);
}

static int walk_request(Ctx *c)
{
    Slice request = {c->data, c->size}, none = {NULL, 0}; /* a request has no head */
    size_t r = 0;
    return walk_message(c, request, &REQUEST, &none, add_resource_spans, &r);
}

/* ---- attributes ----------------------------------------------------------------------------- */

/* Whether `key` is the previous span's key at this place (then its role is known too). */
static inline int known_key(Attr *a, const PrevKey *hint)
{
    if (hint == NULL || hint->klen != a->klen ||
        (a->klen && memcmp(hint->key, a->key, a->klen) != 0))
        return 0;
    a->promoted = hint->promoted;
    a->known = 1;
    return 1;
}

/* A callback on a copy of `s`: its result, borrowed (`keep` holds it); NULL on error. */
static PyObject *call_on_bytes(Ctx *c, PyObject *fn, Slice s)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)s.p, (Py_ssize_t)s.n);
    if (raw == NULL)
        return NULL;
    PyObject *res = keep_call(fn, raw, c->keep);
    Py_DECREF(raw);
    return res;
}

/* An attribute of any other shape: decoded by the generated KeyValue class (a callback). */
static int slow_attr(Ctx *c, Slice kv, Attr *a, const PrevKey *hint)
{
    PyObject *res = call_on_bytes(c, c->slow_kv, kv);
    if (res == NULL || check_answer(res, "ss??", "slow attribute: expected (str, str, bool, value)"))
        return FAIL;
    Py_ssize_t kn, vn;
    a->key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(res, 0), &kn);
    if (a->key == NULL)
        return FAIL;
    a->val = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(res, 1), &vn);
    if (a->val == NULL)
        return FAIL;
    a->klen = (size_t)kn;
    a->vlen = (size_t)vn;
    if (set_slow(a, PyTuple_GET_ITEM(res, 2), PyTuple_GET_ITEM(res, 3)))
        return FAIL;
    if (!known_key(a, hint))
        a->promoted = promoted_role(c->pkeys, a->key, a->klen);
    return OK;
}

/* An array value (AnyValue field 5) written as JSON here when json_any can (a->ival: where it
 * starts in jtext; attributes() points a->val there once the span's attributes are read); a
 * promoted key or another shape goes to slow_attr. */
static int array_attr(Ctx *c, Slice kv, Attr *a, const PrevKey *hint, Slice key, Slice value)
{
    a->key = (const char *)key.p;
    a->klen = key.n;
    if (!known_key(a, hint)) {
        if (!utf8_ok(key.p, key.n))
            return BAIL;
        a->promoted = promoted_role(c->pkeys, a->key, a->klen);
    }
    if (a->promoted < 0) {
        size_t at = c->jtext.len;
        int rc = json_any(&c->jtext, value, 1);
        if (rc == OK) {
            a->cls = C_JSON;
            a->is_json = 1;
            a->val = NULL;
            a->ival = (int64_t)at;
            a->vlen = c->jtext.len - at;
            return OK;
        }
        if (rc != J_NO)
            return rc;
        c->jtext.len = at;
    }
    a->known = 0;
    a->promoted = -1;
    return slow_attr(c, kv, a, hint);
}

/* One encoded KeyValue.  The fast shapes: key first, then a value holding one string, bool, int or
 * double field, each field once; anything else goes to slow_attr. */
static int parse_attr(Ctx *c, Slice kv, Attr *a, const PrevKey *hint)
{
    const uint8_t *s = kv.p, *e = kv.p + kv.n, *p, *key;
    uint64_t klen, vlen, inner;
    a->dropped = a->known = 0;
    a->promoted = -1;
    a->obj = NULL;
    a->nlen = 0;
    if (kv.n < 4 || s[0] != 0x0a)
        return slow_attr(c, kv, a, hint);
    p = s + 1;
    if (!get_varint(&p, e, 5, &klen) || klen >= (uint64_t)(e - p))
        return slow_attr(c, kv, a, hint);
    key = p;
    p += klen;
    if (*p++ != 0x12)
        return slow_attr(c, kv, a, hint);
    if (!get_varint(&p, e, 5, &vlen) || vlen == 0 || vlen != (uint64_t)(e - p))
        return slow_attr(c, kv, a, hint);
    Slice value = {p, (size_t)vlen};
    uint8_t tag = *p++;
    if (tag == 0x0a) {
        if (!get_varint(&p, e, 5, &inner) || inner != (uint64_t)(e - p))
            return slow_attr(c, kv, a, hint);
        if (!utf8_ok(p, (size_t)inner))
            return BAIL; /* the library refuses the request */
        a->cls = C_STRING;
        a->is_json = 0;
        a->val = (const char *)p;
        a->vlen = (size_t)inner;
    }
    else if (tag == 0x18 || tag == 0x10) {
        if (!get_varint(&p, e, 10, &inner) || p != e)
            return slow_attr(c, kv, a, hint);
        a->is_json = 1;
        if (tag == 0x18) {
            a->cls = C_INT;
            a->ival = (int64_t)inner;
            a->nlen = fmt_i64(a->num, a->ival);
        }
        else
            set_bool(a, inner != 0);
    }
    else if (tag == 0x21) {
        uint64_t bits;
        if (e - p != 8 || !get_fixed64(&p, e, &bits))
            return slow_attr(c, kv, a, hint);
        a->cls = C_DOUBLE;
        a->is_json = 1;
        memcpy(&a->dval, &bits, sizeof bits);
        int rc = fmt_double(a, a->dval);
        if (rc)
            return rc;
    }
    else if (tag == 0x2a) {
        return array_attr(c, kv, a, hint, (Slice){key, (size_t)klen}, value);
    }
    else {
        return slow_attr(c, kv, a, hint);
    }
    a->key = (const char *)key;
    a->klen = (size_t)klen;
    if (known_key(a, hint))
        return OK;
    if (!utf8_ok(key, (size_t)klen))
        return BAIL;
    a->promoted = promoted_role(c->pkeys, a->key, a->klen);
    return OK;
}

static inline void set_bit(Buf *b, size_t row)
{
    b->p[row / 8] |= (char)(1u << (row % 8));
}

/* A promoted attribute's column value when it needs no conversion; otherwise Python converts it
 * (as_str / as_int / as_str_list of the typed value, as _promoted_column does). */
static int promote(Ctx *c, const Attr *a, size_t row)
{
    int p = a->promoted;
    if (promoted_as_text(a)) {
        Text t = attr_text(a);
        if (buf_put(&c->pstr[p].data, t.p, t.n))
            return FAIL;
        set_bit(&c->pstr[p].valid, row); /* sc_end in attributes() closes the row */
        return OK;
    }
    if (p == P_CPU_NS && a->cls == C_INT) {
        ((int64_t *)c->cpu.p)[row] = a->ival;
        set_bit(&c->cpu_valid, row);
        return OK;
    }
    return promote_later(c->promoted, a, row);
}

/* This span's keys (their order survives dedupe) become the next span's hints. */
static int remember_keys(Ctx *c, const Attr *at, size_t k, int dups)
{
    c->prev.len = 0;
    if (buf_grow(&c->prev, k * sizeof(PrevKey)))
        return FAIL;
    PrevKey *prev = (PrevKey *)c->prev.p;
    for (size_t i = 0; i < k; i++) {
        prev[i].key = at[i].key;
        prev[i].klen = at[i].klen;
        prev[i].promoted = at[i].promoted;
    }
    c->nprev = k;
    c->prev_dups = dups;
    return OK;
}

static int attributes(Ctx *c, size_t row)
{
    size_t k = c->kvs.len / sizeof(Slice);
    const Slice *kvs = (const Slice *)c->kvs.p;
    int rc;
    c->attrs.len = 0;
    if (buf_grow(&c->attrs, k * sizeof(Attr)))
        return FAIL;
    Attr *at = (Attr *)c->attrs.p;
    const PrevKey *prev = (const PrevKey *)c->prev.p;
    int same = k == c->nprev, dups = 0;
    c->jtext.len = 0;
    for (size_t i = 0; i < k; i++) {
        if ((rc = parse_attr(c, kvs[i], &at[i], i < c->nprev ? &prev[i] : NULL)))
            return rc;
        same &= at[i].known;
    }
    for (size_t i = 0; i < k; i++)
        if (at[i].cls == C_JSON)
            at[i].val = c->jtext.p + at[i].ival;
    if (same)
        dups = c->prev_dups; /* the same keys in the same order */
    if (k > 1 && (!same || dups) && (rc = dedupe(&c->sortkeys, at, k, &dups)))
        return rc;
    if ((rc = remember_keys(c, at, k, dups)))
        return rc;
    for (size_t i = 0; i < k; i++) {
        Attr *a = &at[i];
        if (a->dropped)
            continue;
        if (a->promoted >= 0) {
            if ((rc = promote(c, a, row)))
                return rc;
            continue;
        }
        Text t = attr_text(a);
        if ((rc = sc_add(&c->keys, a->key, a->klen)) || (rc = sc_add(&c->values, t.p, t.n)))
            return rc;
        if (a->is_json && (rc = sc_add(&c->jkeys, a->key, a->klen)))
            return rc;
    }
    if (c->keys.rows > INT32_MAX || c->jkeys.rows > INT32_MAX)
        return BAIL;
    ((int32_t *)c->map_off.p)[row + 1] = (int32_t)c->keys.rows;
    ((int32_t *)c->json_off.p)[row + 1] = (int32_t)c->jkeys.rows;
    if (c->jkeys.rows != (size_t)((int32_t *)c->json_off.p)[row])
        set_bit(&c->json_valid, row);
    /* Close this row of the promoted string columns (promote() set the bit of a value). */
    if ((rc = sc_end(&c->pstr[P_KIND], 0)) || (rc = sc_end(&c->pstr[P_ARGS_HASH], 0)) ||
        (rc = sc_end(&c->pstr[P_RESULT_HASH], 0)))
        return rc;
    return OK;
}

/* ---- status, events, links ------------------------------------------------------------------ */

/* Status.code and Status.message; unusual encodings go to the generated Status class. */
static int status(Ctx *c, Slice st, int64_t *code, const char **msg, size_t *mlen)
{
    const uint8_t *p = st.p, *end = st.p + st.n;
    uint64_t v = 0;
    Slice m = {NULL, 0};
    uint32_t f;
    int wt, more, plain = 1;
    while (plain && (more = next_tag(&p, end, &f, &wt)) != 0) {
        if (more < 0)
            plain = 0;
        else if (f == 2 && wt == WT_LEN)
            plain = get_len(&p, end, &m) && utf8_ok(m.p, m.n);
        else if (f == 3 && wt == WT_VARINT)
            plain = get_varint(&p, end, 10, &v);
        else
            plain = 0;
    }
    if (plain) {
        uint32_t u = (uint32_t)v; /* an enum is an int32 */
        *code = u >= 0x80000000u ? -1 : (int64_t)u;
        *msg = (const char *)m.p;
        *mlen = m.n;
        return OK;
    }
    PyObject *res = call_on_bytes(c, c->slow_status, st);
    if (res == NULL || check_answer(res, "i?", "slow status: expected (int, str | None)"))
        return FAIL;
    int rc = long_value(PyTuple_GET_ITEM(res, 0), code);
    if (rc == FAIL)
        return FAIL;
    if (rc == BAIL)
        *code = -1; /* beyond int64: no status code */
    PyObject *text = PyTuple_GET_ITEM(res, 1);
    *msg = NULL;
    *mlen = 0;
    if (text != Py_None) {
        Py_ssize_t n;
        if (!PyUnicode_Check(text) || (*msg = PyUnicode_AsUTF8AndSize(text, &n)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "slow status: message is not a str");
            return FAIL;
        }
        *mlen = (size_t)n;
    }
    return OK;
}

static PyObject *slices_list(const Buf *b)
{
    size_t k = b->len / sizeof(Slice);
    const Slice *s = (const Slice *)b->p;
    PyObject *list = PyList_New((Py_ssize_t)k);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < k; i++) {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)s[i].p, (Py_ssize_t)s[i].n);
        if (raw == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, raw);
    }
    return list;
}

static int extras(Ctx *c, size_t row)
{
    PyObject *ev = slices_list(&c->events);
    PyObject *ln = ev ? slices_list(&c->links) : NULL;
    PyObject *item = ln ? Py_BuildValue("(nNN)", (Py_ssize_t)row, ev, ln) : NULL;
    if (item == NULL) {
        if (ln == NULL)
            Py_XDECREF(ev);
        return FAIL;
    }
    int rc = PyList_Append(c->extras, item);
    Py_DECREF(item);
    return rc < 0 ? FAIL : OK;
}

/* A span's events and links as JSON, or (a shape json_list leaves aside) both left to Python:
 * their bytes go to `extras` and both rows are null here. */
static int events_links(Ctx *c, size_t row)
{
    int bad = 0, rc = OK;
    size_t ev0 = c->evs.data.len, ln0 = c->lns.data.len;
    if (c->events.len)
        rc = json_list(&c->evs.data, &c->ekvs, &c->events, 0, &bad);
    if (rc == OK && c->links.len)
        rc = json_list(&c->lns.data, &c->ekvs, &c->links, 1, &bad);
    if (rc == J_NO) {
        c->evs.data.len = ev0;
        c->lns.data.len = ln0;
        if ((rc = extras(c, row)) || (rc = sc_end(&c->evs, 0)) || (rc = sc_end(&c->lns, 0)))
            return rc;
        return OK;
    }
    if (rc)
        return rc;
    if (bad)
        c->problems.p[row] |= (char)PB_BAD_LINK;
    if ((rc = sc_end(&c->evs, c->events.len != 0)) || (rc = sc_end(&c->lns, c->links.len != 0)))
        return rc;
    return OK;
}

/* ---- pass 2: one span ----------------------------------------------------------------------- */

static int all_zero(Slice b)
{
    for (size_t i = 0; i < b.n; i++)
        if (b.p[i])
            return 0;
    return 1;
}

static int span(Ctx *c, Slice m, size_t row)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    Slice tid = {NULL, 0}, sid = {NULL, 0}, pid = {NULL, 0}, name = {NULL, 0}, st = {NULL, 0};
    uint64_t kind = 0, start = 0, stop = 0;
    uint32_t f;
    int wt, more, rc, seen_status = 0;
    c->kvs.len = c->events.len = c->links.len = 0;
    while ((more = next_tag(&p, end, &f, &wt)) > 0) {
        Slice v;
        switch (f) {
        case 1: case 2: case 4: case 5: case 9: case 11: case 13: case 15:
            if (wt != WT_LEN || !get_len(&p, end, &v))
                return BAIL;
            if (f == 1)
                tid = v;
            else if (f == 2)
                sid = v;
            else if (f == 4)
                pid = v;
            else if (f == 5) {
                if (!utf8_ok(v.p, v.n))
                    return BAIL; /* upb refuses it */
                name = v;
            }
            else if (f == 15) {
                if (seen_status++)
                    return BAIL; /* merged by the library */
                st = v;
            }
            else if (buf_put(f == 9 ? &c->kvs : f == 11 ? &c->events : &c->links, &v, sizeof v))
                return FAIL;
            break;
        case 3: /* trace_state: a string, so UTF-8; skipped */
            if (wt != WT_LEN ? !skip_field(&p, end, wt)
                             : !get_len(&p, end, &v) || !utf8_ok(v.p, v.n))
                return BAIL;
            break;
        case 6:
            if (wt != WT_VARINT || !get_varint(&p, end, 10, &kind))
                return BAIL;
            break;
        case 7: case 8:
            if (wt != WT_I64 || !get_fixed64(&p, end, f == 7 ? &start : &stop))
                return BAIL;
            break;
        default:
            if (!skip_field(&p, end, wt))
                return BAIL;
        }
    }
    if (more < 0)
        return BAIL;
    uint8_t problems = 0, checks = 0;
    if (!tid.n)
        problems |= PB_TRACE_ID;
    if (!sid.n)
        problems |= PB_SPAN_ID;
    uint8_t kind_code = (uint8_t)((uint32_t)kind < 6 ? (uint32_t)kind : 0);
    if ((uint32_t)kind >= 6)
        problems |= PB_KIND;
    if (start > (uint64_t)INT64_MAX) {
        problems |= PB_START;
        start = INT64_MAX;
    }
    if (stop > (uint64_t)INT64_MAX) {
        problems |= PB_END;
        stop = INT64_MAX;
    }
    int64_t code = 0;
    const char *msg = NULL;
    size_t mlen = 0;
    if (st.n && (rc = status(c, st, &code, &msg, &mlen)))
        return rc;
    if (code < 0 || code >= 3) {
        problems |= PB_STATUS;
        code = 0;
    }
    if (tid.n != 16 || all_zero(tid))
        checks |= CB_TRACE_ID;
    if (sid.n != 8 || all_zero(sid))
        checks |= CB_SPAN_ID;
    if (pid.n != 0 && pid.n != 8)
        checks |= CB_PARENT;
    if (start == 0 || stop == 0)
        checks |= CB_ZERO_TIME;
    if (stop < start)
        checks |= CB_ORDER;

    if ((rc = sc_add_hex(&c->tid, tid)) || (rc = sc_add_hex(&c->sid, sid)))
        return rc;
    if (pid.n ? (rc = sc_add_hex(&c->pid, pid)) : (rc = sc_end(&c->pid, 0)))
        return rc;
    if ((rc = sc_add(&c->name, name.p, name.n)))
        return rc;
    if (mlen ? (rc = sc_add(&c->msg, msg, mlen)) : (rc = sc_end(&c->msg, 0)))
        return rc;
    if ((rc = sc_add(&c->kind, c->kinds[kind_code].p, c->kinds[kind_code].n)) ||
        (rc = sc_add(&c->status, c->codes[code].p, c->codes[code].n)))
        return rc;
    ((int64_t *)c->start.p)[row] = (int64_t)start;
    ((int64_t *)c->end.p)[row] = (int64_t)stop;
    c->problems.p[row] = (char)problems;
    c->checks.p[row] = (char)checks;
    if ((rc = attributes(c, row)))
        return rc;
    return events_links(c, row);
}

/* ---- the result ----------------------------------------------------------------------------- */

static int setup_columns(Ctx *c)
{
    size_t n = c->n;
    StrCol *plain[] = {&c->tid,  &c->sid,    &c->name,  &c->kind,
                       &c->status, &c->keys, &c->values, &c->jkeys};
    StrCol *nullable[] = {&c->pid, &c->msg, &c->pstr[P_KIND], &c->pstr[P_ARGS_HASH],
                          &c->pstr[P_RESULT_HASH], &c->evs, &c->lns};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (sc_init(plain[i], n, 0))
            return FAIL;
    for (size_t i = 0; i < sizeof nullable / sizeof nullable[0]; i++)
        if (sc_init(nullable[i], n, 1))
            return FAIL;
    if (buf_zeros(&c->problems, n) || buf_zeros(&c->checks, n) || buf_zeros(&c->start, 8 * n) || buf_zeros(&c->end, 8 * n) || buf_zeros(&c->cpu, 8 * n) ||
        buf_zeros(&c->cpu_valid, (n + 7) / 8) || buf_zeros(&c->json_valid, (n + 7) / 8) ||
        buf_zeros(&c->map_off, 4 * (n + 1)) || buf_zeros(&c->json_off, 4 * (n + 1)))
        return FAIL;
    return OK;
}

/* The columns by the names Python reads them under. */
static PyObject *result(Ctx *c)
{
    const struct {
        const char *name;
        const StrCol *col; /* a string column, or else */
        const Buf *buf;    /* a fixed-width one */
    } out[] = {
        {"trace_id", &c->tid, NULL},
        {"span_id", &c->sid, NULL},
        {"parent_span_id", &c->pid, NULL},
        {"name", &c->name, NULL},
        {"status_message", &c->msg, NULL},
        {"kind", &c->pstr[P_KIND], NULL},
        {"args_hash", &c->pstr[P_ARGS_HASH], NULL},
        {"result_hash", &c->pstr[P_RESULT_HASH], NULL},
        {"keys", &c->keys, NULL},
        {"values", &c->values, NULL},
        {"json_keys", &c->jkeys, NULL},
        {"events", &c->evs, NULL},
        {"links", &c->lns, NULL},
        {"span_kind", &c->kind, NULL},
        {"status_code", &c->status, NULL},
        {"start_ns", NULL, &c->start},
        {"end_ns", NULL, &c->end},
        {"cpu_ns", NULL, &c->cpu},
        {"cpu_ns.valid", NULL, &c->cpu_valid},
        {"map_offsets", NULL, &c->map_off},
        {"json_offsets", NULL, &c->json_off},
        {"json_valid", NULL, &c->json_valid},
        {"problems", NULL, &c->problems},
        {"checks", NULL, &c->checks},
    };
    PyObject *cols = PyDict_New();
    if (cols == NULL)
        return NULL;
    int rc = OK;
    for (size_t i = 0; i < sizeof out / sizeof out[0] && rc == OK; i++)
        rc = put_item(cols, out[i].name,
                      out[i].col ? sc_tuple(out[i].col) : buf_bytes(out[i].buf));
    if (rc) {
        Py_DECREF(cols);
        return NULL;
    }
    return Py_BuildValue("(nOONOO)", (Py_ssize_t)c->n, c->resources, c->groups, cols, c->extras,
                         c->promoted);
}

static int groups_list(Ctx *c)
{
    size_t k = c->grps.len / sizeof(Group);
    const Group *g = (const Group *)c->grps.p;
    for (size_t i = 0; i < k; i++) {
        PyObject *item = Py_BuildValue("(nny#n)", (Py_ssize_t)g[i].r, (Py_ssize_t)g[i].s,
                                       g[i].scope.n ? (const char *)g[i].scope.p : "",
                                       (Py_ssize_t)g[i].scope.n, (Py_ssize_t)g[i].count);
        if (item == NULL)
            return FAIL;
        int rc = PyList_Append(c->groups, item);
        Py_DECREF(item);
        if (rc < 0)
            return FAIL;
    }
    return OK;
}

static int run(Ctx *c, PyObject **out)
{
    int rc;
    if ((rc = walk_request(c)))
        return rc;
    c->n = c->spans.len / sizeof(SpanRef);
    if ((rc = setup_columns(c)) || (rc = groups_list(c)))
        return rc;
    const SpanRef *refs = (const SpanRef *)c->spans.p;
    for (size_t i = 0; i < c->n; i++)
        if ((rc = span(c, refs[i].body, i)))
            return rc;
    *out = result(c);
    return *out ? OK : FAIL;
}

PyDoc_STRVAR(decode_doc,
"decode(data, promoted_keys, span_kinds, status_codes, slow_attribute, slow_status)\n--\n\n"
"Columns of an encoded ExportTraceServiceRequest, or None when the Python decoder must decide.");

static PyObject *decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "decode() takes 6 arguments");
        return NULL;
    }
    if (!PyCallable_Check(args[4]) || !PyCallable_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "decode(): the callbacks must be callable");
        return NULL;
    }
    /* Only bytes: immutable, so nothing (a callback, another thread) can change what was
     * validated before it is copied out.  Other buffers take the Python decoder. */
    if (!PyBytes_Check(args[0]))
        Py_RETURN_NONE;
    Ctx c;
    memset(&c, 0, sizeof c);
    PyObject *out = NULL;
    int rc = FAIL;
    c.data = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    c.size = (size_t)PyBytes_GET_SIZE(args[0]);
    c.slow_kv = args[4];
    c.slow_status = args[5];
    if (text_tuple(args[1], c.pkeys, N_PROMOTED, "promoted_keys") == OK &&
        text_tuple(args[2], c.kinds, N_KINDS, "span_kinds") == OK &&
        text_tuple(args[3], c.codes, N_CODES, "status_codes") == OK && (c.keep = PyList_New(0)) &&
        (c.resources = PyList_New(0)) && (c.groups = PyList_New(0)) &&
        (c.extras = PyList_New(0)) && (c.promoted = PyList_New(0))) {
        rc = c.size >= (size_t)INT32_MAX ? BAIL : run(&c, &out);
    }
    ctx_free(&c);
    if (rc == FAIL) {
        Py_XDECREF(out);
        return NULL;
    }
    if (rc == BAIL) {
        Py_XDECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL, decode_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "Compiled fast path of tracelens.ingest.otlp_proto (see _native.c).", 0, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 256; i++) {
        hex_pairs[2 * i] = digits[i >> 4];
        hex_pairs[2 * i + 1] = digits[i & 15];
    }
    return PyModule_Create(&module);
}
