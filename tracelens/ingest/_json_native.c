/* Compiled fast path of the OTLP JSON importer (tracelens.ingest.otlp_json).
 *
 * Why: orjson parses a JSON Lines record into dicts and lists in C; walking those objects span by
 * span in Python and appending each field to Python lists cost 3-4x the parse itself.  This walks
 * the spans of one ScopeSpans entry, already parsed by orjson, and appends them to column buffers
 * that Python wraps into Arrow arrays without a Python object per span or attribute.
 *
 * The contract that keeps it exact (the one of otlp_proto/_native.c): it only *accepts* spans in a
 * shape it fully understands and answers False for anything else, after which the caller rolls the
 * builder back to the start of the document and the Python decoder decodes that document, errors
 * included.  What the Python path decodes anyway (attribute values other than strings, ints,
 * doubles and bools; events and links) is handed to it through callbacks, which are the very
 * functions the Python path uses.  Resources and scopes are decoded by Python before the call.
 *
 * Nesting is fixed (spans > span > attribute > value), so there is no recursion.
 */

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

typedef struct {
    PyObject_HEAD
    PyObject *slow_value;   /* value -> (text, is_json, typed), or None when Python must decide */
    PyObject *extras;       /* span -> (events JSON | None, links JSON | None), or None */
    PyObject *kind_names;   /* span kind spelled as a name -> its SPAN_KINDS value */
    PyObject *status_names; /* status code spelled as a name -> its STATUS_CODES value */
    PyObject *names;        /* the tuples the Text slices below point into */
    PyObject *promoted;     /* [(role, row, typed value)]: promoted values Python converts */
    PyObject *keep;         /* what slow_value returned for the span being added */
    Text pkeys[N_PROMOTED], kinds[N_KINDS], codes[N_CODES];
    StrCol s[N_STR];
    Buf b[N_BUF];
    Buf attrs, sortkeys;
    size_t rows;
    /* the mark rollback() returns to */
    StrMark ms[N_STR];
    size_t mb[N_BUF];
    size_t mrows;
    Py_ssize_t mpromoted;
} Builder;

/* Keys of the OTLP/JSON objects, interned at import. */
enum {
    K_TRACE_ID, K_SPAN_ID, K_PARENT, K_NAME, K_KIND, K_START, K_END, K_STATUS, K_ATTRIBUTES,
    K_EVENTS, K_LINKS, K_CODE, K_MESSAGE, K_KEY, K_VALUE, K_STRING, K_INT, K_DOUBLE, K_BOOL, N_KEYS
};
static const char *const key_texts[N_KEYS] = {
    "traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano",
    "status", "attributes", "events", "links", "code", "message", "key", "value", "stringValue",
    "intValue", "doubleValue", "boolValue",
};
static PyObject *keys[N_KEYS];
static Py_ssize_t key_lens[N_KEYS];
/* Per key, the str objects last seen spelling it (orjson hands out the same key objects again and
 * again).  References are held, so an address here is never reused by another string. */
#define SEEN 4
static PyObject *seen[N_KEYS][SEEN];

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

/* d[key] borrowed, NULL when absent; *err set when the lookup itself failed. */
static inline PyObject *get(PyObject *d, int key, int *err)
{
    PyObject *v = PyDict_GetItemWithError(d, keys[key]);
    if (v == NULL && PyErr_Occurred())
        *err = 1;
    return v;
}

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
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred())
            return FAIL;
        if (overflow)
            return BAIL;
        *out = x;
        return OK;
    }
    return BAIL;
}

/* An id as trace_id()/span_id() leave it: 32/16 hex lower-cased, anything else but the empty
 * string and a possible base64 id (Python decides those) kept as it is. */
static int put_id(StrCol *c, PyObject *v, size_t hexlen, size_t b64len)
{
    if (v == NULL || !PyUnicode_CheckExact(v))
        return BAIL;
    size_t n;
    const char *s = utf8(v, &n);
    if (s == NULL || n == 0 || n == b64len)
        return BAIL;
    if (n == hexlen) {
        int hex = 1, upper = 0;
        for (size_t i = 0; i < n; i++) {
            char ch = s[i];
            if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))
                continue;
            if (ch >= 'A' && ch <= 'F') {
                upper = 1;
                continue;
            }
            hex = 0;
            break;
        }
        if (hex && upper) {
            if (buf_grow(&c->data, n))
                return FAIL;
            char *out = c->data.p + c->data.len;
            for (size_t i = 0; i < n; i++)
                out[i] = (s[i] >= 'A' && s[i] <= 'F') ? (char)(s[i] + 32) : s[i];
            c->data.len += n;
            return sc_end(c, 1);
        }
    }
    return sc_add(c, s, n);
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
    if (s == NULL)
        return BAIL;
    return n ? sc_add(c, s, n) : sc_null(c);
}

/* A name (span kind, status code) looked up in `names`, else the enum number in `table`. */
static int put_enum(StrCol *c, PyObject *v, PyObject *names, const Text *table, long count)
{
    if (v == NULL)
        return sc_add(c, table[0].p, table[0].n);
    if (PyLong_CheckExact(v)) {
        int overflow;
        long x = PyLong_AsLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred())
            return FAIL;
        if (overflow || x < 0 || x >= count)
            return BAIL;
        return sc_add(c, table[x].p, table[x].n);
    }
    if (!PyUnicode_CheckExact(v))
        return BAIL;
    PyObject *found = PyDict_GetItemWithError(names, v);
    if (found == NULL)
        return PyErr_Occurred() ? FAIL : BAIL;
    size_t n;
    const char *s = PyUnicode_CheckExact(found) ? utf8(found, &n) : NULL;
    return s == NULL ? BAIL : sc_add(c, s, n);
}

/* A value the fast shapes do not cover: slow_value (attributes()'s own any_value) decides. */
static int slow_attr(Builder *self, PyObject *value, Attr *a)
{
    PyObject *res = keep_call(self->slow_value, value ? value : Py_None, self->keep);
    if (res == NULL)
        return FAIL;
    if (res == Py_None)
        return BAIL;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 3 ||
        !PyUnicode_CheckExact(PyTuple_GET_ITEM(res, 0))) {
        PyErr_SetString(PyExc_TypeError, "slow_value: expected (str, bool, value)");
        return FAIL;
    }
    a->val = utf8(PyTuple_GET_ITEM(res, 0), &a->vlen);
    if (a->val == NULL)
        return BAIL;
    int is_json = PyObject_IsTrue(PyTuple_GET_ITEM(res, 1));
    if (is_json < 0)
        return FAIL;
    a->is_json = (uint8_t)is_json;
    a->obj = PyTuple_GET_ITEM(res, 2);
    a->cls = C_SLOW;
    return OK;
}

/* One {key, value} of a span's attributes, as attributes() + any_value() read it. */
static int parse_attr(Builder *self, PyObject *kv, Attr *a)
{
    int rc;
    a->dropped = a->known = 0;
    a->nlen = 0;
    a->obj = NULL;
    if (!PyDict_CheckExact(kv))
        return BAIL;
    PyObject *key = NULL, *value = NULL, *k, *x;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kv, &pos, &k, &x)) {
        int id = key_id(k, K_KEY, K_VALUE);
        if (id == K_KEY)
            key = x;
        else if (id == K_VALUE)
            value = x;
    }
    if (key == NULL || !PyUnicode_CheckExact(key))
        return BAIL;
    a->key = utf8(key, &a->klen);
    if (a->key == NULL)
        return BAIL;
    a->promoted = promoted_role(self->pkeys, a->key, a->klen);
    if (value == NULL || value == Py_None)
        return slow_attr(self, value, a);
    if (!PyDict_CheckExact(value))
        return BAIL;
    /* stringValue, intValue, doubleValue, boolValue: any_value looks in this order */
    PyObject *f[4] = {NULL, NULL, NULL, NULL}, *v;
    if (PyDict_GET_SIZE(value) == 1) { /* the usual AnyValue: one field */
        PyObject *only;
        pos = 0;
        PyDict_Next(value, &pos, &only, &v);
        int which = key_id(only, K_STRING, K_BOOL);
        if (which < 0)
            return slow_attr(self, value, a);
        f[which - K_STRING] = v;
    }
    else {
        int err = 0;
        for (int i = 0; i < 4; i++)
            if ((f[i] = get(value, K_STRING + i, &err)) == NULL && err)
                return FAIL;
    }
    if ((v = f[0]) != NULL) {
        if (!PyUnicode_CheckExact(v))
            return BAIL;
        a->val = utf8(v, &a->vlen);
        if (a->val == NULL)
            return BAIL;
        a->cls = C_STRING;
        a->is_json = 0;
        a->obj = v;
        return OK;
    }
    if ((v = f[1]) != NULL) {
        if ((rc = int_value(v, &a->ival)))
            return rc;
        a->cls = C_INT;
        a->is_json = 1;
        a->nlen = fmt_i64(a->num, a->ival);
        return OK;
    }
    if ((v = f[2]) != NULL) {
        double d;
        if (PyFloat_CheckExact(v))
            d = PyFloat_AS_DOUBLE(v);
        else if (PyLong_CheckExact(v)) {
            d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return BAIL;
            }
        }
        else
            return BAIL;
        a->cls = C_DOUBLE;
        a->is_json = 1;
        a->obj = PyFloat_CheckExact(v) ? v : NULL;
        a->dval = d;
        return fmt_double(a, d);
    }
    if ((v = f[3]) != NULL) {
        if (v != Py_True && v != Py_False)
            return BAIL;
        set_bool(a, v == Py_True);
        return OK;
    }
    return slow_attr(self, value, a);
}

/* A promoted attribute's column value when it needs no conversion (a str or an int: as_str and
 * as_int give what is written here); otherwise Python converts the typed value. */
static int promote(Builder *self, const Attr *a, int *has_text, int64_t *cpu, int *has_cpu)
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
    if (p == P_CPU_NS && a->cls == C_INT) {
        *cpu = a->ival;
        *has_cpu = 1;
        return OK;
    }
    return promote_later(self->promoted, a, self->rows);
}

static int attributes(Builder *self, PyObject *items)
{
    int rc, has_text[3] = {0, 0, 0}, has_cpu = 0;
    int64_t cpu = 0;
    int32_t nmap = 0, njson = 0;
    Py_ssize_t k = 0;
    if (items != NULL && items != Py_None) {
        if (!PyList_CheckExact(items)) {
            int truth = PyObject_IsTrue(items);
            if (truth)
                return truth < 0 ? FAIL : BAIL;
        }
        else
            k = PyList_GET_SIZE(items);
    }
    if (k) {
        self->attrs.len = 0;
        if (buf_grow(&self->attrs, (size_t)k * sizeof(Attr)))
            return FAIL;
        Attr *at = (Attr *)self->attrs.p;
        for (Py_ssize_t i = 0; i < k; i++)
            if ((rc = parse_attr(self, PyList_GET_ITEM(items, i), &at[i])))
                return rc;
        int dups;
        if (k > 1 && (rc = dedupe(&self->sortkeys, at, (size_t)k, &dups)))
            return rc;
        for (Py_ssize_t i = 0; i < k; i++) {
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

/* Events and links: a callback into the Python decoder when there are any. */
static int extras(Builder *self, PyObject *span, PyObject *events, PyObject *links)
{
    int none_ev = events == NULL || events == Py_None ||
                  (PyList_CheckExact(events) && PyList_GET_SIZE(events) == 0);
    int none_ln = links == NULL || links == Py_None ||
                  (PyList_CheckExact(links) && PyList_GET_SIZE(links) == 0);
    int rc;
    if (none_ev && none_ln) {
        if ((rc = sc_null(&self->s[S_EVENTS])) || (rc = sc_null(&self->s[S_LINKS])))
            return rc;
        return OK;
    }
    PyObject *res = PyObject_CallOneArg(self->extras, span);
    if (res == NULL)
        return FAIL;
    if (res == Py_None) {
        Py_DECREF(res);
        return BAIL;
    }
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_TypeError, "extras: expected (str | None, str | None)");
        return FAIL;
    }
    rc = put_opt_text(&self->s[S_EVENTS], PyTuple_GET_ITEM(res, 0));
    if (!rc)
        rc = put_opt_text(&self->s[S_LINKS], PyTuple_GET_ITEM(res, 1));
    Py_DECREF(res);
    return rc;
}

typedef struct {
    PyObject *service, *resource, *scope_name, *scope_version;
} Shared;

/* One span, as otlp_json._span reads it. */
static int span(Builder *self, PyObject *sp, const Shared *sh)
{
    int err = 0, rc;
    if (!PyDict_CheckExact(sp))
        return BAIL;
    PyObject *v[K_LINKS + 1] = {NULL}, *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(sp, &pos, &key, &value)) {
        int k = key_id(key, K_TRACE_ID, K_LINKS);
        if (k >= 0)
            v[k] = value;
    }
    int64_t start, end;
    if ((rc = int_value(v[K_START], &start)) || (rc = int_value(v[K_END], &end)))
        return rc;
    if ((rc = put_id(&self->s[S_TID], v[K_TRACE_ID], 32, 24)) ||
        (rc = put_id(&self->s[S_SID], v[K_SPAN_ID], 16, 12)))
        return rc;
    PyObject *parent = v[K_PARENT];
    if (parent == NULL || parent == Py_None ||
        (PyUnicode_CheckExact(parent) && PyUnicode_GET_LENGTH(parent) == 0))
        rc = sc_null(&self->s[S_PID]);
    else if (PyUnicode_CheckExact(parent))
        rc = put_id(&self->s[S_PID], parent, 16, 12);
    else {
        int truth = PyObject_IsTrue(parent);
        rc = truth < 0 ? FAIL : truth ? BAIL : sc_null(&self->s[S_PID]);
    }
    if (rc)
        return rc;
    PyObject *name = v[K_NAME];
    if (name == NULL)
        rc = sc_add(&self->s[S_NAME], "", 0);
    else if (PyUnicode_CheckExact(name)) {
        size_t n;
        const char *s = utf8(name, &n);
        rc = s == NULL ? BAIL : sc_add(&self->s[S_NAME], s, n);
    }
    else
        rc = BAIL;
    if (rc)
        return rc;
    if ((rc = put_enum(&self->s[S_KIND], v[K_KIND], self->kind_names, self->kinds, N_KINDS)))
        return rc;
    PyObject *status = v[K_STATUS], *code = NULL, *message = NULL;
    if (status != NULL && PyDict_CheckExact(status)) {
        if ((code = get(status, K_CODE, &err)) == NULL && err)
            return FAIL;
        if ((message = get(status, K_MESSAGE, &err)) == NULL && err)
            return FAIL;
        if (message != NULL && message != Py_None && !PyUnicode_CheckExact(message))
            return BAIL;
    }
    else if (status != NULL) {
        int truth = PyObject_IsTrue(status);
        if (truth)
            return truth < 0 ? FAIL : BAIL;
    }
    if ((rc = put_enum(&self->s[S_STATUS], code, self->status_names, self->codes, N_CODES)) ||
        (rc = put_opt_text(&self->s[S_MSG], message)))
        return rc;
    if ((rc = attributes(self, v[K_ATTRIBUTES])))
        return rc;
    if ((rc = extras(self, sp, v[K_EVENTS], v[K_LINKS])))
        return rc;
    size_t n;
    const char *s = utf8(sh->service, &n);
    if (s == NULL)
        return BAIL;
    if ((rc = sc_add(&self->s[S_SERVICE], s, n)) ||
        (rc = put_opt_text(&self->s[S_RESOURCE], sh->resource)) ||
        (rc = put_opt_text(&self->s[S_SCOPE_NAME], sh->scope_name)) ||
        (rc = put_opt_text(&self->s[S_SCOPE_VERSION], sh->scope_version)))
        return rc;
    if (buf_put(&self->b[B_START], &start, sizeof start) ||
        buf_put(&self->b[B_END], &end, sizeof end))
        return FAIL;
    self->rows++;
    return OK;
}

/* ---- the Python type ------------------------------------------------------------------------ */

static int Builder_init(Builder *self, PyObject *args, PyObject *kwds)
{
    PyObject *pkeys, *kinds, *codes, *kind_names, *status_names, *slow_value, *extras_cb;
    (void)kwds;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OO", &PyTuple_Type, &pkeys, &PyTuple_Type, &kinds,
                          &PyTuple_Type, &codes, &PyDict_Type, &kind_names, &PyDict_Type,
                          &status_names, &slow_value, &extras_cb))
        return -1;
    if (!PyCallable_Check(slow_value) || !PyCallable_Check(extras_cb)) {
        PyErr_SetString(PyExc_TypeError, "Builder(): the callbacks must be callable");
        return -1;
    }
    if (text_tuple(pkeys, self->pkeys, N_PROMOTED, "promoted_keys") ||
        text_tuple(kinds, self->kinds, N_KINDS, "span_kinds") ||
        text_tuple(codes, self->codes, N_CODES, "status_codes"))
        return -1;
    Py_XSETREF(self->names, PyTuple_Pack(3, pkeys, kinds, codes));
    Py_XSETREF(self->kind_names, Py_NewRef(kind_names));
    Py_XSETREF(self->status_names, Py_NewRef(status_names));
    Py_XSETREF(self->slow_value, Py_NewRef(slow_value));
    Py_XSETREF(self->extras, Py_NewRef(extras_cb));
    Py_XSETREF(self->promoted, PyList_New(0));
    Py_XSETREF(self->keep, PyList_New(0));
    if (self->names == NULL || self->promoted == NULL || self->keep == NULL)
        return -1;
    return 0;
}

/* The objects a Builder holds, for the garbage collector. */
#define BUILDER_OBJECTS(X)                                                                         \
    X(slow_value) X(extras) X(kind_names) X(status_names) X(names) X(promoted) X(keep)

static int Builder_traverse(Builder *self, visitproc visit, void *arg)
{
#define VISIT(field) Py_VISIT(self->field);
    BUILDER_OBJECTS(VISIT)
#undef VISIT
    return 0;
}

static int Builder_clear(Builder *self)
{
#define CLEAR(field) Py_CLEAR(self->field);
    BUILDER_OBJECTS(CLEAR)
#undef CLEAR
    return 0;
}

static void Builder_dealloc(Builder *self)
{
    PyObject_GC_UnTrack(self);
    Builder_clear(self);
    for (int i = 0; i < N_STR; i++)
        sc_free(&self->s[i]);
    for (int i = 0; i < N_BUF; i++)
        buf_free(&self->b[i]);
    buf_free(&self->attrs);
    buf_free(&self->sortkeys);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(Builder *self)
{
    if (self->promoted == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Builder not initialised");
        return FAIL;
    }
    return OK;
}

PyDoc_STRVAR(add_doc,
"add(spans, service, resource, scope_name, scope_version) -> bool\n--\n\n"
"Append the spans of one ScopeSpans entry (a list of parsed span objects).  False when one of\n"
"them needs the Python decoder: the builder is then in an unusable state until rollback().");

static PyObject *Builder_add(Builder *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (ready(self))
        return NULL;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "add() takes 5 arguments");
        return NULL;
    }
    PyObject *spans = args[0];
    Shared sh = {args[1], args[2], args[3], args[4]};
    if (!PyList_CheckExact(spans) || !PyUnicode_CheckExact(sh.service))
        Py_RETURN_FALSE;
    PyObject *const *opt = args + 2;
    for (int i = 0; i < 3; i++)
        if (opt[i] != Py_None && !PyUnicode_CheckExact(opt[i]))
            Py_RETURN_FALSE;
    int rc = OK;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(spans) && rc == OK; i++) {
        rc = span(self, PyList_GET_ITEM(spans, i), &sh);
        Py_ssize_t held = PyList_GET_SIZE(self->keep);
        if (held && PyList_SetSlice(self->keep, 0, held, NULL) < 0)
            rc = FAIL;
    }
    if (rc == FAIL)
        return NULL;
    return PyBool_FromLong(rc == OK);
}

static void do_mark(Builder *self)
{
    for (int i = 0; i < N_STR; i++)
        sc_mark(&self->s[i], &self->ms[i]);
    for (int i = 0; i < N_BUF; i++)
        self->mb[i] = self->b[i].len;
    self->mrows = self->rows;
    self->mpromoted = PyList_GET_SIZE(self->promoted);
}

static PyObject *Builder_mark(Builder *self, PyObject *unused)
{
    (void)unused;
    if (ready(self))
        return NULL;
    do_mark(self);
    Py_RETURN_NONE;
}

static PyObject *Builder_rollback(Builder *self, PyObject *unused)
{
    (void)unused;
    if (ready(self))
        return NULL;
    for (int i = 0; i < N_STR; i++)
        sc_rollback(&self->s[i], &self->ms[i]);
    for (int i = 0; i < N_BUF; i++)
        self->b[i].len = self->mb[i];
    self->rows = self->mrows;
    if (PyList_SetSlice(self->promoted, self->mpromoted, PyList_GET_SIZE(self->promoted), NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(take_doc,
"take() -> (rows, columns, promoted)\n--\n\n"
"The columns built so far as bytes, and the promoted values Python converts; the builder starts\n"
"empty again.");

static PyObject *Builder_take(Builder *self, PyObject *unused)
{
    (void)unused;
    if (ready(self))
        return NULL;
    PyObject *cols = PyDict_New();
    if (cols == NULL)
        return NULL;
    for (int i = 0; i < N_STR; i++)
        if (put_item(cols, str_names[i], sc_tuple(&self->s[i]))) {
            Py_DECREF(cols);
            return NULL;
        }
    for (int i = 0; i < N_BUF; i++)
        if (put_item(cols, buf_names[i], buf_bytes(&self->b[i]))) {
            Py_DECREF(cols);
            return NULL;
        }
    PyObject *out = Py_BuildValue("(nNO)", (Py_ssize_t)self->rows, cols, self->promoted);
    if (out == NULL)
        return NULL;
    PyObject *fresh = PyList_New(0);
    if (fresh == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    Py_SETREF(self->promoted, fresh);
    for (int i = 0; i < N_STR; i++) {
        StrMark zero = {0, 0, 0};
        sc_rollback(&self->s[i], &zero);
    }
    for (int i = 0; i < N_BUF; i++)
        self->b[i].len = 0;
    self->rows = 0;
    do_mark(self);
    return out;
}

static Py_ssize_t Builder_len(Builder *self)
{
    return (Py_ssize_t)self->rows;
}

static PyMethodDef Builder_methods[] = {
    {"add", (PyCFunction)(void (*)(void))Builder_add, METH_FASTCALL, add_doc},
    {"mark", (PyCFunction)Builder_mark, METH_NOARGS, "Remember the current state."},
    {"rollback", (PyCFunction)Builder_rollback, METH_NOARGS, "Return to the last mark()."},
    {"take", (PyCFunction)Builder_take, METH_NOARGS, take_doc},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Builder_as_sequence = {
    .sq_length = (lenfunc)Builder_len,
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracelens.ingest._json_native.Builder",
    .tp_doc = PyDoc_STR("Builder(promoted_keys, span_kinds, status_codes, kind_names, "
                        "status_names, slow_value, extras): span columns from parsed OTLP/JSON."),
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Builder_init,
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_traverse = (traverseproc)Builder_traverse,
    .tp_clear = (inquiry)Builder_clear,
    .tp_methods = Builder_methods,
    .tp_as_sequence = &Builder_as_sequence,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_json_native",
    "Compiled fast path of tracelens.ingest.otlp_json (see _json_native.c).", 0, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__json_native(void)
{
    for (int k = 0; k < N_KEYS; k++) {
        if (keys[k] == NULL && (keys[k] = PyUnicode_InternFromString(key_texts[k])) == NULL)
            return NULL;
        key_lens[k] = (Py_ssize_t)strlen(key_texts[k]);
    }
    if (PyType_Ready(&BuilderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Builder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
