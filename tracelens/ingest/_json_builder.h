/* The span column builder behind the compiled JSON importers (ingest/_json_native.c): OTLP/JSON,
 * Jaeger JSON and Zipkin v2 JSON.
 *
 * Why one builder: the three formats end in the same columns by the same rules (ids normalised,
 * attributes deduplicated and written as json_scalar writes them, the promoted attributes in
 * their own columns), so the buffers, the column writers, the attribute rules and the keys of the
 * parsed objects live here once; each format's file (_json_native.c for OTLP, _json_jaeger.h,
 * _json_zipkin.h) only walks its own objects.  Every walk follows the same contract: it accepts
 * only what it fully understands and answers BAIL otherwise, after which the caller rolls the
 * builder back to the start of the document and the format's Python decoder decodes it.
 *
 * Included once, by _json_native.c; everything is static.
 */

#ifndef TRACELENS_INGEST_JSON_BUILDER_H
#define TRACELENS_INGEST_JSON_BUILDER_H

#include "_native_common.h"

/* ---- growable buffers (more in _native_common.h) -------------------------------------------- */

static inline int buf_byte(Buf *b, char v)
{
    if (b->cap == b->len && buf_grow(b, 1))
        return FAIL;
    b->p[b->len++] = v;
    return OK;
}

/* An Arrow string column being built: int32 offsets (the leading 0 is added on output), data,
 * and one validity byte per row (packed into a bitmap by Python). */
typedef struct {
    Buf off, data, valid;
} StrCol;

typedef struct {
    size_t off, data, valid;
} StrMark;

static inline int sc_end(StrCol *c, int valid)
{
    if (c->data.len > INT32_MAX)
        return BAIL; /* past int32 offsets: the Python path copes */
    int32_t end = (int32_t)c->data.len;
    if (buf_put(&c->off, &end, sizeof end) || buf_byte(&c->valid, (char)(valid != 0)))
        return FAIL;
    return OK;
}

static inline int sc_add(StrCol *c, const char *s, size_t n)
{
    if (buf_put(&c->data, s, n))
        return FAIL;
    return sc_end(c, 1);
}

static inline int sc_null(StrCol *c)
{
    return sc_end(c, 0);
}

/* A text or null: NULL and the empty text are null (``value or None``). */
static inline int sc_opt(StrCol *c, const char *s, size_t n)
{
    return s != NULL && n ? sc_add(c, s, n) : sc_null(c);
}

static void sc_free(StrCol *c)
{
    buf_free(&c->off);
    buf_free(&c->data);
    buf_free(&c->valid);
}

static void sc_mark(const StrCol *c, StrMark *m)
{
    m->off = c->off.len;
    m->data = c->data.len;
    m->valid = c->valid.len;
}

static void sc_rollback(StrCol *c, const StrMark *m)
{
    c->off.len = m->off;
    c->data.len = m->data;
    c->valid.len = m->valid;
}

/* (offsets, data, validity bytes) */
static PyObject *sc_tuple(const StrCol *c)
{
    PyObject *off = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(c->off.len + 4));
    if (off == NULL)
        return NULL;
    memset(PyBytes_AS_STRING(off), 0, 4);
    if (c->off.len)
        memcpy(PyBytes_AS_STRING(off) + 4, c->off.p, c->off.len);
    PyObject *data = buf_bytes(&c->data);
    PyObject *valid = buf_bytes(&c->valid);
    PyObject *t = NULL;
    if (data && valid)
        t = PyTuple_Pack(3, off, data, valid);
    Py_DECREF(off);
    Py_XDECREF(data);
    Py_XDECREF(valid);
    return t;
}

/* ---- the builder ---------------------------------------------------------------------------- */

enum {
    S_TID, S_SID, S_PID, S_NAME, S_SERVICE, S_KIND, S_STATUS, S_MSG, S_RESOURCE, S_SCOPE_NAME,
    S_SCOPE_VERSION, S_EVENTS, S_LINKS, S_PKIND, S_PARGS, S_PRESULT, S_KEYS, S_VALUES, S_JKEYS,
    N_STR
};
static const char *const str_names[N_STR] = {
    "trace_id", "span_id", "parent_span_id", "name", "service", "span_kind", "status_code",
    "status_message", "resource", "scope_name", "scope_version", "events", "links", "kind",
    "args_hash", "result_hash", "keys", "values", "json_keys",
};

enum { B_START, B_END, B_CPU, B_CPU_VALID, B_MAP_LEN, B_JSON_LEN, N_BUF };
static const char *const buf_names[N_BUF] = {
    "start_ns", "end_ns", "cpu_ns", "cpu_ns.valid", "map_lengths", "json_lengths",
};

/* SPAN_KINDS and STATUS_CODES values the Jaeger and Zipkin decoders write by name. */
static const Text KIND_INTERNAL = {"internal", 8}, KIND_UNSPECIFIED = {"unspecified", 11};
static const Text STATUS_UNSET = {"unset", 5}, STATUS_ERROR = {"error", 5};

/* A str -> str dict the builder was given, as UTF-8 pairs (alive while the dict is held). */
#define MAX_NAMES 32
typedef struct {
    Text k[MAX_NAMES], v[MAX_NAMES];
    int n;
} Names;

#define MAX_WORDS 10 /* the attribute names a format's walk is given (see add_begin) */

typedef struct {
    PyObject_HEAD
    /* the format's callbacks into its Python decoder (see each walk for what they answer) */
    PyObject *slow_value; /* an attribute value the fast shapes do not cover */
    PyObject *extras;     /* a span's events/links (OTLP, Jaeger) or annotations (Zipkin) */
    PyObject *resource;   /* Zipkin: service -> resource JSON */
    PyObject *server_id;  /* Zipkin: (shared span id, n) -> the n-th server half's id */
    PyObject *kind_names;   /* span kind spelled as a name -> its SPAN_KINDS value */
    PyObject *status_names; /* status code spelled as a name -> its STATUS_CODES value */
    PyObject *names;        /* the tuples the Text slices below point into */
    PyObject *promoted;     /* [(role, row, typed value)]: promoted values Python converts */
    PyObject *keep;         /* what callbacks returned for the span being added */
    PyObject *last_resource; /* Zipkin: the resource of last_service */
    PyObject *words_from;    /* the tuple `words` was read from */
    Text pkeys[N_PROMOTED], kinds[N_KINDS], codes[N_CODES], words[MAX_WORDS];
    Names kind_tab, status_tab;
    StrCol s[N_STR];
    Buf b[N_BUF];
    Buf attrs, sortkeys, scratch, table, arena, last_service;
    size_t rows;
    /* the mark rollback() returns to */
    StrMark ms[N_STR];
    size_t mb[N_BUF];
    size_t mrows;
    Py_ssize_t mpromoted;
} Builder;

static int ready(Builder *self)
{
    if (self->promoted == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Builder not initialised");
        return FAIL;
    }
    return OK;
}

/* The names a walk takes from its Python decoder (the tags it consumes, the attributes it adds):
 * `words`, a tuple of `nwords` str, read again only when another tuple comes. */
static int take_words(Builder *self, PyObject *words, Py_ssize_t nwords)
{
    if (words == self->words_from)
        return OK;
    if (text_tuple(words, self->words, nwords, "names"))
        return FAIL;
    Py_XSETREF(self->words_from, Py_NewRef(words));
    return OK;
}

/* What every add* method checks first: the builder is ready, its arguments are `valid` (else a
 * TypeError saying `usage`), and, when the walk takes `nwords` names from its Python decoder (the
 * tags it consumes, the attributes it adds), the last argument is a tuple of them (read again only
 * when another tuple comes).  BAIL when the spans (the first argument) are not a list. */
static int add_begin(Builder *self, PyObject *const *args, Py_ssize_t nargs, int valid,
                     const char *usage, Py_ssize_t nwords)
{
    if (ready(self))
        return FAIL;
    if (!valid) {
        PyErr_SetString(PyExc_TypeError, usage);
        return FAIL;
    }
    if (nwords > 0 && take_words(self, args[nargs - 1], nwords))
        return FAIL;
    return PyList_CheckExact(args[0]) ? OK : BAIL;
}

/* The end of every add* method's docstring. */
#define ADD_DOC_BAIL                                                                               \
    "needs the Python decoder: the builder is then in an unusable state until rollback()."

/* Drop what the callbacks returned for the span just added. */
static int release_kept(Builder *self)
{
    Py_ssize_t held = PyList_GET_SIZE(self->keep);
    return held && PyList_SetSlice(self->keep, 0, held, NULL) < 0 ? FAIL : OK;
}

/* One span (the i-th of its list) read by a format's walk; `ctx`: what the walk shares over the
 * list. */
typedef int (*SpanWalk)(Builder *self, PyObject *span, Py_ssize_t i, void *ctx);

/* walk() over a list of spans until one does not answer OK; what the callbacks returned for a span
 * is released after it. */
static int each_span(Builder *self, PyObject *spans, SpanWalk walk, void *ctx)
{
    int rc = OK;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(spans) && rc == OK; i++) {
        rc = walk(self, PyList_GET_ITEM(spans, i), i, ctx);
        if (release_kept(self))
            rc = FAIL;
    }
    return rc;
}

/* An add* method's answer: NULL on an error, else whether every span was taken. */
static PyObject *added(int rc)
{
    return rc == FAIL ? NULL : PyBool_FromLong(rc == OK);
}

/* fn(arg) for the span being added, borrowed in *out (self->keep holds it): BAIL when it answers
 * None (the Python decoder decides), FAIL on an error or when `shape` (see check_answer; NULL:
 * any answer) does not fit. */
static int call_back(Builder *self, PyObject *fn, PyObject *arg, const char *shape,
                     const char *expected, PyObject **out)
{
    PyObject *res = keep_call(fn, arg, self->keep);
    if (res == NULL)
        return FAIL;
    if (res == Py_None)
        return BAIL;
    if (shape != NULL && check_answer(res, shape, expected))
        return FAIL;
    *out = res;
    return OK;
}

/* ---- keys of the parsed objects ------------------------------------------------------------- */

/* Every key a walk looks for, interned at import.  Each object's keys form one contiguous range
 * (a walk asks key_id for that range), so a key two objects share is listed in each. */
#define JSON_KEYS(X)                                                                               \
    /* OTLP span */                                                                                \
    X(K_TRACE_ID, "traceId") X(K_SPAN_ID, "spanId") X(K_PARENT, "parentSpanId") X(K_NAME, "name")  \
    X(K_KIND, "kind") X(K_START, "startTimeUnixNano") X(K_END, "endTimeUnixNano")                  \
    X(K_STATUS, "status") X(K_ATTRIBUTES, "attributes") X(K_EVENTS, "events") X(K_LINKS, "links")  \
    /* OTLP status, KeyValue, AnyValue */                                                          \
    X(K_CODE, "code") X(K_MESSAGE, "message") X(K_KEY, "key") X(K_VALUE, "value")                  \
    X(K_STRING, "stringValue") X(K_INT, "intValue") X(K_DOUBLE, "doubleValue")                     \
    X(K_BOOL, "boolValue")                                                                         \
    /* Jaeger span */                                                                              \
    X(J_TRACE_ID, "traceID") X(J_SPAN_ID, "spanID") X(J_NAME, "operationName")                     \
    X(J_REFERENCES, "references") X(J_START, "startTime") X(J_DURATION, "duration")                \
    X(J_TAGS, "tags") X(J_LOGS, "logs") X(J_PROCESS_ID, "processID") X(J_PROCESS, "process")       \
    X(J_PARENT, "parentSpanID")                                                                    \
    /* Jaeger tag, reference */                                                                    \
    X(J_KEY, "key") X(J_TYPE, "type") X(J_VALUE, "value")                                          \
    X(R_TYPE, "refType") X(R_TRACE_ID, "traceID") X(R_SPAN_ID, "spanID")                           \
    /* Zipkin span */                                                                              \
    X(Z_TRACE_ID, "traceId") X(Z_ID, "id") X(Z_PARENT, "parentId") X(Z_NAME, "name")               \
    X(Z_KIND, "kind") X(Z_TIMESTAMP, "timestamp") X(Z_DURATION, "duration")                        \
    X(Z_LOCAL, "localEndpoint") X(Z_REMOTE, "remoteEndpoint") X(Z_TAGS, "tags")                    \
    X(Z_ANNOTATIONS, "annotations") X(Z_SHARED, "shared")                                          \
    /* Zipkin endpoint */                                                                          \
    X(E_SERVICE, "serviceName") X(E_IPV4, "ipv4") X(E_IPV6, "ipv6") X(E_PORT, "port")

#define KEY_ID(id, text) id,
#define KEY_TEXT(id, text) text,
enum { JSON_KEYS(KEY_ID) N_KEYS };
static const char *const key_texts[N_KEYS] = {JSON_KEYS(KEY_TEXT)};
#undef KEY_ID
#undef KEY_TEXT

static PyObject *keys[N_KEYS];
static Py_ssize_t key_lens[N_KEYS];
/* Per key, the str objects last seen spelling it (orjson hands out the same key objects again and
 * again).  References are held, so an address here is never reused by another string. */
#define SEEN 4
static PyObject *seen[N_KEYS][SEEN];

static int intern_keys(void)
{
    for (int k = 0; k < N_KEYS; k++) {
        if (keys[k] == NULL && (keys[k] = PyUnicode_InternFromString(key_texts[k])) == NULL)
            return FAIL;
        key_lens[k] = (Py_ssize_t)strlen(key_texts[k]);
    }
    return OK;
}

/* Which of keys[first..last] the dict key `k` spells, else -1. */
static inline int key_id(PyObject *k, int first, int last)
{
    for (int i = first; i <= last; i++)
        for (int j = 0; j < SEEN && seen[i][j]; j++)
            if (seen[i][j] == k)
                return i;
    if (!PyUnicode_CheckExact(k) || !PyUnicode_IS_COMPACT_ASCII(k))
        return -1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(k);
    const char *t = (const char *)PyUnicode_DATA(k);
    for (int i = first; i <= last; i++)
        if (key_lens[i] == n && memcmp(key_texts[i], t, (size_t)n) == 0) {
            for (int j = 0; j < SEEN; j++)
                if (seen[i][j] == NULL) {
                    seen[i][j] = Py_NewRef(k);
                    break;
                }
            return i;
        }
    return -1;
}

/* The values of keys[first..first+count) in the dict `d` (NULL where absent), found in one pass
 * over its items. */
static inline void dict_fields(PyObject *d, int first, int count, PyObject **out)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    for (int i = 0; i < count; i++)
        out[i] = NULL;
    while (PyDict_Next(d, &pos, &key, &value)) {
        int k = key_id(key, first, first + count - 1);
        if (k >= 0)
            out[k - first] = value;
    }
}

/* d[key] borrowed, NULL when absent; *err set when the lookup itself failed. */
static inline PyObject *get(PyObject *d, int key, int *err)
{
    PyObject *v = PyDict_GetItemWithError(d, keys[key]);
    if (v == NULL && PyErr_Occurred())
        *err = 1;
    return v;
}

/* ---- values --------------------------------------------------------------------------------- */

/* UTF-8 of an exact str; NULL (nothing set) when it has none (lone surrogates). */
static inline const char *utf8(PyObject *s, size_t *n)
{
    if (PyUnicode_IS_COMPACT_ASCII(s)) { /* the common case: the characters are the UTF-8 */
        *n = (size_t)PyUnicode_GET_LENGTH(s);
        return (const char *)PyUnicode_DATA(s);
    }
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(s, &len);
    if (p == NULL) {
        PyErr_Clear();
        return NULL;
    }
    *n = (size_t)len;
    return p;
}

/* A str as the column value (BAIL for anything else). */
static inline int put_str(StrCol *c, PyObject *v)
{
    size_t n;
    const char *s = v != NULL && PyUnicode_CheckExact(v) ? utf8(v, &n) : NULL;
    return s == NULL ? BAIL : sc_add(c, s, n);
}

/* A str or None column value: None and "" are null (``value or None``). */
static int put_opt_text(StrCol *c, PyObject *v)
{
    if (v == NULL || v == Py_None)
        return sc_null(c);
    if (!PyUnicode_CheckExact(v))
        return BAIL;
    size_t n;
    const char *s = utf8(v, &n);
    return s == NULL ? BAIL : sc_opt(c, s, n);
}

/* as_int of a str: what int() takes, restricted to [-]digits (anything else: Python decides). */
static int parse_i64(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (n && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == n || n - i > 19)
        return BAIL;
    uint64_t v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9)
            return BAIL;
        v = v * 10 + d; /* 19 digits fit in uint64 */
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
        return BAIL;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return OK;
}

/* as_int: an int or an integer string within int64. */
static int int_value(PyObject *v, int64_t *out)
{
    if (v == NULL)
        return BAIL;
    if (PyUnicode_CheckExact(v)) {
        size_t n;
        const char *s = utf8(v, &n);
        return s == NULL ? BAIL : parse_i64(s, n, out);
    }
    return PyLong_CheckExact(v) ? long_value(v, out) : BAIL;
}

/* micros_to_ns of an int or integer string (Jaeger and Zipkin times); fractions: Python. */
static int micros_value(PyObject *v, int64_t *ns)
{
    int64_t us;
    int rc = int_value(v, &us);
    if (rc)
        return rc;
    return __builtin_mul_overflow(us, (int64_t)1000, ns) ? BAIL : OK;
}

static inline int is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* An id as norm_trace_id/norm_span_id (hexlen 32/16) leave it, written to `out`: lower-cased
 * when it is hexlen hex digits, else as it is; with `pad`, 16 hex digits become 32 the way
 * pad_trace_id widens them. */
static int put_norm_id(Buf *out, const char *s, size_t n, size_t hexlen, int pad)
{
    int hex = n == hexlen || (pad && n == 16);
    for (size_t i = 0; hex && i < n; i++)
        hex = is_hex(s[i]);
    if (!hex)
        return buf_put(out, s, n);
    size_t zeros = n == hexlen ? 0 : hexlen - n;
    if (buf_grow(out, zeros + n))
        return FAIL;
    char *o = out->p + out->len;
    memset(o, '0', zeros);
    for (size_t i = 0; i < n; i++)
        o[zeros + i] = (s[i] >= 'A' && s[i] <= 'F') ? (char)(s[i] + 32) : s[i];
    out->len += zeros + n;
    return OK;
}

/* The same of the str `v`; BAIL when it is not a str. */
static int put_id_of(Buf *out, PyObject *v, size_t hexlen, int pad)
{
    size_t n;
    const char *s = v != NULL && PyUnicode_CheckExact(v) ? utf8(v, &n) : NULL;
    return s == NULL ? BAIL : put_norm_id(out, s, n, hexlen, pad);
}

/* The same as a column value. */
static int put_id_col(StrCol *c, PyObject *v, size_t hexlen, int pad)
{
    int rc = put_id_of(&c->data, v, hexlen, pad);
    return rc ? rc : sc_end(c, 1);
}

/* put_norm_id of UTF-8 text as a column value. */
static int put_id_text(StrCol *c, const char *s, size_t n, size_t hexlen, int pad)
{
    int rc = put_norm_id(&c->data, s, n, hexlen, pad);
    return rc ? rc : sc_end(c, 1);
}

/* Whether `s` is `word` up to ASCII case (and ASCII itself); `upper`: the word is upper case. */
static inline int ascii_ieq(const char *s, size_t n, const char *word, size_t wn)
{
    if (n != wn)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch + 32);
        char w = word[i];
        if (w >= 'A' && w <= 'Z')
            w = (char)(w + 32);
        if (ch != w)
            return 0;
    }
    return 1;
}

static inline int is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    return 1;
}

/* `table[s.upper()]` for ASCII `s` (str.upper and str.lower are the ASCII ones there); NULL
 * when absent. */
static const Text *names_get(const Names *table, const char *s, size_t n)
{
    for (int i = 0; i < table->n; i++)
        if (ascii_ieq(s, n, table->k[i].p, table->k[i].n))
            return &table->v[i];
    return NULL;
}

/* OK for an absent or false value (Python's ``value or ...`` takes its default), BAIL for a true
 * one of the wrong type (Python words the error). */
static int only_false(PyObject *v)
{
    int truth = v == NULL || v == Py_None ? 0 : PyObject_IsTrue(v);
    return truth < 0 ? FAIL : truth ? BAIL : OK;
}

/* A list field as list_field reads it: absent, null or any false value is empty; *items is
 * NULL when it holds nothing. */
static int list_items(PyObject *v, PyObject **items, Py_ssize_t *n)
{
    int list = v != NULL && PyList_CheckExact(v);
    *items = list ? v : NULL;
    *n = list ? PyList_GET_SIZE(v) : 0;
    return list ? OK : only_false(v);
}

/* An optional object (``d.get(key) or {}``): NULL when false or empty. */
static int opt_dict(PyObject *v, PyObject **out)
{
    int dict = v != NULL && PyDict_CheckExact(v);
    *out = dict && PyDict_GET_SIZE(v) ? v : NULL;
    return dict ? OK : only_false(v);
}

/* ---- attributes ----------------------------------------------------------------------------- */

static inline void attr_reset(Builder *self, Attr *a, const char *key, size_t klen)
{
    a->key = key;
    a->klen = klen;
    a->dropped = a->known = 0;
    a->nlen = 0;
    a->obj = NULL;
    a->promoted = promoted_role(self->pkeys, key, klen);
}

static inline int set_str(Attr *a, PyObject *v)
{
    a->val = utf8(v, &a->vlen);
    if (a->val == NULL)
        return BAIL;
    a->cls = C_STRING;
    a->is_json = 0;
    a->obj = v;
    return OK;
}

static inline void set_int(Attr *a, int64_t v)
{
    a->cls = C_INT;
    a->is_json = 1;
    a->ival = v;
    a->nlen = fmt_i64(a->num, v);
}

/* An int or an integer string as int_value reads it; BAIL beyond int64 (json_scalar writes any
 * size: Python). */
static inline int set_long(Attr *a, PyObject *v)
{
    int64_t x;
    int rc = int_value(v, &x);
    if (rc == OK)
        set_int(a, x);
    return rc;
}

/* `obj`: the float the input holds, if it holds one. */
static inline int set_double(Attr *a, double d, PyObject *obj)
{
    a->cls = C_DOUBLE;
    a->is_json = 1;
    a->obj = obj;
    a->dval = d;
    return fmt_double(a, d);
}

/* Whether the attribute's typed value is None (only a callback gives one). */
static inline int attr_is_none(const Attr *a)
{
    return a->cls == C_SLOW && a->obj == Py_None;
}

/* Whether its typed value is a str, whose text a->val then is. */
static inline int attr_is_str(const Attr *a)
{
    return a->cls == C_STRING || (a->cls == C_SLOW && !a->is_json && PyUnicode_Check(a->obj));
}

/* A value the fast shapes do not cover: slow_value(arg) decides, answering (text, is_json, typed)
 * or None when Python must decide (a bad value). */
static int slow_attr(Builder *self, PyObject *arg, Attr *a)
{
    PyObject *res;
    int rc = call_back(self, self->slow_value, arg ? arg : Py_None, "s??",
                       "slow_value: expected (str, bool, value)", &res);
    if (rc)
        return rc;
    a->val = utf8(PyTuple_GET_ITEM(res, 0), &a->vlen);
    if (a->val == NULL)
        return BAIL;
    return set_slow(a, PyTuple_GET_ITEM(res, 1), PyTuple_GET_ITEM(res, 2));
}

/* A JSON value as SpanColumns stores a typed attribute value: str as it is, int, float and bool
 * as json_scalar writes them, anything else through slow_value(value). */
static int plain_value(Builder *self, PyObject *v, Attr *a)
{
    if (PyUnicode_CheckExact(v))
        return set_str(a, v);
    if (v == Py_True || v == Py_False) {
        set_bool(a, v == Py_True);
        return OK;
    }
    if (PyLong_CheckExact(v)) {
        int rc = set_long(a, v);
        return rc == BAIL ? slow_attr(self, v, a) : rc;
    }
    if (PyFloat_CheckExact(v))
        return set_double(a, PyFloat_AS_DOUBLE(v), v);
    return slow_attr(self, v, a);
}

/* A promoted attribute's column value when it needs no conversion (a str or an int: as_str and
 * as_int give what is written here; a decimal string is the int as_int makes of it); otherwise
 * Python converts the typed value. */
static int promote(Builder *self, Attr *a, int *has_text, int64_t *cpu, int *has_cpu)
{
    int p = a->promoted;
    if (promoted_as_text(a)) {
        int col = p == P_KIND ? S_PKIND : p == P_ARGS_HASH ? S_PARGS : S_PRESULT;
        Text t = attr_text(a);
        if (buf_put(&self->s[col].data, t.p, t.n))
            return FAIL;
        has_text[col - S_PKIND] = 1;
        return OK;
    }
    if (p == P_CPU_NS && (a->cls == C_INT || (a->cls == C_STRING &&
                                              parse_i64(a->val, a->vlen, &a->ival) == OK))) {
        *cpu = a->ival;
        *has_cpu = 1;
        return OK;
    }
    return promote_later(self->promoted, a, self->rows);
}

/* The row's attribute columns from k parsed attributes (deduplicated by the caller; dropped ones
 * are skipped), promoted ones to their own columns. */
static int emit_attrs(Builder *self, Attr *at, size_t k)
{
    int rc, has_text[3] = {0, 0, 0}, has_cpu = 0;
    int64_t cpu = 0;
    int32_t nmap = 0, njson = 0;
    for (size_t i = 0; i < k; i++) {
        Attr *a = &at[i];
        if (a->dropped)
            continue;
        if (a->promoted >= 0) {
            if ((rc = promote(self, a, has_text, &cpu, &has_cpu)))
                return rc;
            continue;
        }
        Text t = attr_text(a);
        if ((rc = sc_add(&self->s[S_KEYS], a->key, a->klen)) ||
            (rc = sc_add(&self->s[S_VALUES], t.p, t.n)))
            return rc;
        nmap++;
        if (a->is_json) {
            if ((rc = sc_add(&self->s[S_JKEYS], a->key, a->klen)))
                return rc;
            njson++;
        }
    }
    for (int i = 0; i < 3; i++)
        if ((rc = sc_end(&self->s[S_PKIND + i], has_text[i])))
            return rc;
    if (buf_put(&self->b[B_CPU], &cpu, sizeof cpu) || buf_byte(&self->b[B_CPU_VALID], (char)has_cpu) ||
        buf_put(&self->b[B_MAP_LEN], &nmap, sizeof nmap) ||
        buf_put(&self->b[B_JSON_LEN], &njson, sizeof njson))
        return FAIL;
    return OK;
}

/* Room for k attributes in self->attrs. */
static Attr *attrs_room(Builder *self, size_t k)
{
    self->attrs.len = 0;
    if (buf_grow(&self->attrs, (k ? k : 1) * sizeof(Attr)))
        return NULL;
    return (Attr *)self->attrs.p;
}

/* One item of a format's attribute list read into `a`. */
typedef int (*AttrParse)(Builder *self, PyObject *item, Attr *a);

/* A span's attribute list (as list_field reads the field), each item read by `parse`, a repeated
 * key deduplicated: *at and *k. */
static int attr_list(Builder *self, PyObject *field, AttrParse parse, Attr **at, size_t *k)
{
    PyObject *items;
    Py_ssize_t n;
    int rc = list_items(field, &items, &n);
    if (rc)
        return rc;
    Attr *a = attrs_room(self, (size_t)n);
    if (a == NULL)
        return FAIL;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((rc = parse(self, PyList_GET_ITEM(items, i), &a[i])))
            return rc;
    int dups;
    if (n > 1 && (rc = dedupe(&self->sortkeys, a, (size_t)n, &dups)))
        return rc;
    *at = a;
    *k = (size_t)n;
    return OK;
}

/* The row's times; the row is complete. */
static int end_row(Builder *self, int64_t start, int64_t end)
{
    if (buf_put(&self->b[B_START], &start, sizeof start) ||
        buf_put(&self->b[B_END], &end, sizeof end))
        return FAIL;
    self->rows++;
    return OK;
}

/* A callback's str-or-None answer as a column value (`what` names it in the TypeError). */
static int put_answer(StrCol *c, PyObject *v, const char *what)
{
    if (v != Py_None && !PyUnicode_CheckExact(v)) {
        PyErr_Format(PyExc_TypeError, "%s: expected str | None", what);
        return FAIL;
    }
    return put_opt_text(c, v);
}

#endif /* TRACELENS_INGEST_JSON_BUILDER_H */
