/* Zipkin v2 JSON for the compiled builder (_json_builder.h), included by _json_native.c.
 *
 * add_zipkin takes one whole Zipkin array, as zipkin.decode does, in three passes: the ids of every
 * span (normalised, grouped by (trace id, span id) in a hash table), the shared ids split as
 * zipkin._split_shared splits them (the new ids come from the server_id callback, which is
 * zipkin.server_span_id), then the rows, as zipkin._append writes them.  Taken here: tags of any
 * JSON value (values other than str, int, float and bool through slow_value), the status from the
 * error tag, the endpoint attributes; annotations go through the extras callback (zipkin._events)
 * and the resource through the resource callback (cached for the last service).  Anything else
 * unusual is left to Python (BAIL).
 */

#include <strings.h> /* strncasecmp */

/* The attribute names zipkin.py passes, in its order. */
enum { W_ERROR, W_PEER_SERVICE, W_SERVER_ADDRESS, W_SERVER_PORT, W_CLIENT_ADDRESS, W_CLIENT_PORT,
       W_LOCAL_ADDRESS, W_LOCAL_PORT, W_OTEL_STATUS_CODE, W_OTEL_STATUS_DESCRIPTION,
       N_ZIPKIN_WORDS };

#define N_ZF (Z_SHARED - Z_TRACE_ID + 1)
#define ZF(f, key) (f)[(key) - Z_TRACE_ID]

/* One span's ids (offsets into self->arena) and its place among the spans sharing them. */
typedef struct {
    size_t tid, tlen, sid, slen, pid, plen; /* as read (pid: when has_parent) */
    size_t out, olen;                       /* the span id written: sid, or a server half's own */
    size_t ren, rlen;                       /* on a group's first span: its children's parent */
    Py_ssize_t next, last;                  /* the next span of its group; (first) its last */
    const Text *kind;
    uint8_t has_parent, server, split, first, renamed;
} ZSpan;

/* 8 bytes at a time (a multiply-rotate mix): ids are 16-32 characters, hashed once per span. */
static uint64_t hash_bytes(uint64_t h, const char *p, size_t n)
{
    uint64_t w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, p, n);
    h = (h ^ w ^ ((uint64_t)n << 56)) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 32);
}

static uint64_t hash_ids(const char *t, size_t tn, const char *s, size_t sn)
{
    return hash_bytes(hash_bytes(0x243F6A8885A308D3ULL, t, tn), s, sn);
}

/* One array's spans as the three passes share them. */
typedef struct {
    Builder *self;
    ZSpan *zs;
    PyObject **fields; /* N_ZF per span, borrowed (the document holds them) */
    Py_ssize_t *slot;
    size_t mask;
    PyObject *unknown;  /* the service of a span without one */
    Py_ssize_t *counts; /* spans without a duration, without a timestamp, repeating an id */
    int dups;           /* whether two spans share (trace id, span id) */
    int renamed;        /* whether a shared id was split (children's parents to look up) */
} ZIds;

/* The slot of (trace id, span id) in the table: the first span of its group, or an empty slot. */
static Py_ssize_t *zid_slot(const ZIds *z, const char *t, size_t tn, const char *s, size_t sn)
{
    const char *arena = z->self->arena.p;
    size_t i = (size_t)hash_ids(t, tn, s, sn) & z->mask;
    for (;; i = (i + 1) & z->mask) {
        Py_ssize_t at = z->slot[i];
        if (at < 0)
            return &z->slot[i];
        const ZSpan *g = &z->zs[at];
        if (g->tlen == tn && g->slen == sn && !memcmp(arena + g->tid, t, tn) &&
            !memcmp(arena + g->sid, s, sn))
            return &z->slot[i];
    }
}

/* An id written to the arena: (offset, length); BAIL when it is not a str. */
static int arena_id(Builder *self, PyObject *v, size_t hexlen, int pad, size_t *off, size_t *len)
{
    *off = self->arena.len;
    int rc = put_id_of(&self->arena, v, hexlen, pad);
    *len = self->arena.len - *off;
    return rc;
}

/* Pass one: a span's ids and kind, as zipkin._Span reads them, and its group. */
static int zipkin_ids(Builder *self, PyObject *raw, Py_ssize_t i, void *ctx)
{
    ZIds *z = ctx;
    ZSpan *s = &z->zs[i];
    int rc;
    if (!PyDict_CheckExact(raw))
        return BAIL;
    PyObject **f = z->fields + (size_t)i * N_ZF;
    dict_fields(raw, Z_TRACE_ID, N_ZF, f);
    if ((rc = arena_id(self, ZF(f, Z_TRACE_ID), 32, 1, &s->tid, &s->tlen)) ||
        (rc = arena_id(self, ZF(f, Z_ID), 16, 0, &s->sid, &s->slen)))
        return rc;
    PyObject *parent = ZF(f, Z_PARENT), *kind = ZF(f, Z_KIND);
    s->has_parent = parent != NULL && parent != Py_None &&
                    !(PyUnicode_CheckExact(parent) && PyUnicode_GET_LENGTH(parent) == 0);
    if (s->has_parent && (rc = arena_id(self, parent, 16, 0, &s->pid, &s->plen)))
        return rc;
    s->kind = &KIND_INTERNAL;
    if (kind != NULL && kind != Py_None) {
        s->kind = &KIND_UNSPECIFIED;
        size_t n;
        const char *k = PyUnicode_CheckExact(kind) ? utf8(kind, &n) : NULL;
        if (PyUnicode_CheckExact(kind) && (k == NULL || !is_ascii(k, n)))
            return BAIL; /* str.upper() beyond ASCII: Python */
        const Text *known = k ? names_get(&self->kind_tab, k, n) : NULL;
        if (known != NULL)
            s->kind = known;
    }
    s->out = s->sid;
    s->olen = s->slen;
    s->server = ZF(f, Z_SHARED) == Py_True ||
                (s->kind->n == 6 && !memcmp(s->kind->p, "server", 6));
    s->split = s->renamed = s->first = 0;
    s->next = -1;
    const char *arena = self->arena.p;
    Py_ssize_t *slot = zid_slot(z, arena + s->tid, s->tlen, arena + s->sid, s->slen);
    if (*slot < 0) {
        *slot = i;
        s->first = 1;
        s->last = i;
    }
    else {
        ZSpan *g = &z->zs[*slot];
        z->zs[g->last].next = i;
        g->last = i;
        z->dups = 1;
    }
    return OK;
}

/* Pass two: zipkin._split_shared over the groups of more than one span; *duplicates counts the
 * spans the store will drop. */
static int zipkin_split(ZIds *z, Py_ssize_t n, Py_ssize_t *duplicates)
{
    Builder *self = z->self;
    for (Py_ssize_t i = 0; i < n; i++) {
        ZSpan *g = &z->zs[i];
        if (!g->first || g->next < 0)
            continue;
        Py_ssize_t size = 0, clients = 0;
        for (Py_ssize_t m = i; m >= 0; m = z->zs[m].next) {
            size++;
            clients += !z->zs[m].server;
        }
        if (clients == 0 || clients == size) {
            *duplicates += size - 1;
            continue;
        }
        if (self->server_id == NULL) {
            PyErr_SetString(PyExc_TypeError, "add_zipkin: the builder has no server_id callback");
            return FAIL;
        }
        PyObject *shared = PyUnicode_DecodeUTF8(self->arena.p + g->sid, (Py_ssize_t)g->slen, NULL);
        if (shared == NULL)
            return FAIL;
        Py_ssize_t nth = 0;
        int rc = OK;
        for (Py_ssize_t m = i; m >= 0 && rc == OK; m = z->zs[m].next) {
            ZSpan *s = &z->zs[m];
            if (!s->server)
                continue;
            PyObject *id = PyObject_CallFunction(self->server_id, "On", shared, nth++);
            size_t len;
            const char *t = id != NULL && PyUnicode_CheckExact(id) ? utf8(id, &len) : NULL;
            if (t == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "server_id: expected str");
                rc = FAIL;
            }
            else {
                s->out = self->arena.len;
                s->olen = len;
                rc = buf_put(&self->arena, t, len);
                s->pid = g->sid;
                s->plen = g->slen;
                s->has_parent = s->split = 1;
                if (nth == 1) {
                    g->ren = s->out;
                    g->rlen = s->olen;
                    g->renamed = 1;
                    z->renamed = 1;
                }
            }
            Py_XDECREF(id);
        }
        Py_DECREF(shared);
        if (rc)
            return rc;
        *duplicates += clients - 1;
    }
    return OK;
}

/* ---- pass three: the rows ------------------------------------------------------------------- */

/* An attribute named words[name] holding the str or int `v` (a port: an int stays an int). */
static int z_attr(Builder *self, Attr *a, int name, PyObject *v)
{
    attr_reset(self, a, self->words[name].p, self->words[name].n);
    if (PyUnicode_CheckExact(v))
        return set_str(a, v);
    return PyLong_CheckExact(v) ? set_long(a, v) : BAIL; /* str() of something else: Python */
}

/* A true value (``if value:``), 0 for a false one or none, FAIL on error. */
static inline int truthy(PyObject *v)
{
    return v == NULL ? 0 : PyObject_IsTrue(v);
}

/* zipkin._address: an endpoint's address and port as the attributes `address` and `port`. */
static int z_address(Builder *self, PyObject *const *e, int address, int port, Attr *at, size_t *k)
{
    PyObject *addr = e[E_IPV4 - E_SERVICE];
    int rc, t = truthy(addr);
    if (t == 0) {
        addr = e[E_IPV6 - E_SERVICE];
        t = truthy(addr);
    }
    if (t < 0)
        return FAIL;
    if (t) {
        if (!PyUnicode_CheckExact(addr))
            return BAIL;
        if ((rc = z_attr(self, &at[(*k)++], address, addr)))
            return rc;
    }
    PyObject *p = e[E_PORT - E_SERVICE];
    if ((t = truthy(p)) < 0)
        return FAIL;
    if (t && (rc = z_attr(self, &at[(*k)++], port, p)))
        return rc;
    return OK;
}

/* The span's service (its local endpoint's, else `unknown`) and its resource JSON. */
static int z_service(Builder *self, PyObject *service, PyObject *unknown)
{
    int rc;
    if (service == NULL || !PyUnicode_CheckExact(service) || PyUnicode_GET_LENGTH(service) == 0)
        service = unknown;
    size_t n;
    const char *s = utf8(service, &n);
    if (s == NULL)
        return BAIL;
    if ((rc = sc_add(&self->s[S_SERVICE], s, n)))
        return rc;
    Buf *last = &self->last_service;
    if (self->last_resource == NULL || last->len != n || memcmp(last->p, s, n)) {
        if (self->resource == NULL) {
            PyErr_SetString(PyExc_TypeError, "add_zipkin: the builder has no resource callback");
            return FAIL;
        }
        Py_CLEAR(self->last_resource);
        PyObject *res = PyObject_CallOneArg(self->resource, service);
        if (res == NULL)
            return FAIL;
        if (!PyUnicode_CheckExact(res)) {
            Py_DECREF(res);
            PyErr_SetString(PyExc_TypeError, "resource: expected str");
            return FAIL;
        }
        self->last_resource = res;
        last->len = 0;
        if (buf_put(last, s, n))
            return FAIL;
    }
    return put_str(&self->s[S_RESOURCE], self->last_resource);
}

/* The span's attributes and status, as zipkin._append and _endpoints make them. */
/* The status an otel.status_code value names (OK, ERROR, UNSET in any case, with or without
 * STATUS_CODE_), NULL for anything else: zipkin.span_status's _OTEL_CODES. */
static const Text *otel_status(PyObject *value)
{
    static const Text STATUS_OK = {"ok", 2};
    size_t n;
    const char *s = PyUnicode_CheckExact(value) ? utf8(value, &n) : NULL;
    if (s == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (n >= 12 && !strncasecmp(s, "STATUS_CODE_", 12))
        s += 12, n -= 12;
    if (n == 2 && !strncasecmp(s, "OK", 2))
        return &STATUS_OK;
    if (n == 5 && !strncasecmp(s, "ERROR", 5))
        return &STATUS_ERROR;
    if (n == 5 && !strncasecmp(s, "UNSET", 5))
        return &STATUS_UNSET;
    return NULL;
}

static int z_attributes(Builder *self, PyObject *const *f, const ZSpan *zs, PyObject *local)
{
    PyObject *tags, *remote, *key, *value;
    int rc;
    if ((rc = opt_dict(ZF(f, Z_TAGS), &tags)) || (rc = opt_dict(ZF(f, Z_REMOTE), &remote)))
        return rc;
    size_t k = 0;
    Attr *at = attrs_room(self, (size_t)(tags ? PyDict_GET_SIZE(tags) : 0) + 5);
    if (at == NULL)
        return FAIL;
    const Text *status = &STATUS_UNSET;
    const char *msg = NULL;
    size_t mlen = 0;
    Py_ssize_t pos = 0;
    const Text *error = &self->words[W_ERROR];
    const Text *code = &self->words[W_OTEL_STATUS_CODE];
    const Text *description = &self->words[W_OTEL_STATUS_DESCRIPTION];
    /* zipkin.span_status: otel.status_code, when it is one of the codes, decides. */
    const Text *otel = NULL;
    const char *dmsg = NULL;
    size_t dlen = 0;
    /* the key as the str zipkin.py passed (its hash kept): no str made per span */
    PyObject *coded = NULL;
    if (tags != NULL &&
        (coded = PyDict_GetItemWithError(
             tags, PyTuple_GET_ITEM(self->words_from, W_OTEL_STATUS_CODE))) == NULL &&
        PyErr_Occurred())
        return FAIL;
    if (coded != NULL && (otel = otel_status(coded)) == NULL)
        return BAIL; /* not a code: Python keeps it as an attribute */
    while (tags != NULL && PyDict_Next(tags, &pos, &key, &value)) {
        size_t kn;
        const char *ks = PyUnicode_CheckExact(key) ? utf8(key, &kn) : NULL;
        if (ks == NULL)
            return BAIL;
        if (otel != NULL && kn == code->n && !memcmp(ks, code->p, kn))
            continue;
        if (otel != NULL && kn == description->n && !memcmp(ks, description->p, kn)) {
            if (value != Py_None && !PyUnicode_CheckExact(value))
                return BAIL;
            if (value != Py_None && (dmsg = utf8(value, &dlen)) == NULL)
                return BAIL;
            continue;
        }
        if (kn == error->n && !memcmp(ks, error->p, kn) && (otel == NULL || otel == &STATUS_ERROR)) {
            status = &STATUS_ERROR;
            if (value != Py_None && !PyUnicode_CheckExact(value))
                return BAIL; /* str() of another value: Python */
            if (value != Py_None && (msg = utf8(value, &mlen)) == NULL)
                return BAIL;
            continue;
        }
        attr_reset(self, &at[k], ks, kn);
        if ((rc = plain_value(self, value, &at[k++])))
            return rc;
    }
    size_t tagged = k;
    PyObject *e[E_PORT - E_SERVICE + 1];
    if (local != NULL) {
        dict_fields(local, E_SERVICE, E_PORT - E_SERVICE + 1, e);
        if ((rc = z_address(self, e, W_LOCAL_ADDRESS, W_LOCAL_PORT, at, &k)))
            return rc;
    }
    if (remote != NULL) {
        dict_fields(remote, E_SERVICE, E_PORT - E_SERVICE + 1, e);
        PyObject *peer = e[0];
        if (peer != NULL && PyUnicode_CheckExact(peer) && PyUnicode_GET_LENGTH(peer) &&
            (rc = z_attr(self, &at[k++], W_PEER_SERVICE, peer)))
            return rc;
        int server = zs->kind->n == 6 && !memcmp(zs->kind->p, "server", 6);
        if ((rc = z_address(self, e, server ? W_CLIENT_ADDRESS : W_SERVER_ADDRESS,
                            server ? W_CLIENT_PORT : W_SERVER_PORT, at, &k)))
            return rc;
    }
    if (otel != NULL) {
        status = otel;
        if (otel != &STATUS_ERROR)
            msg = NULL, mlen = 0;
        else if (msg == NULL || mlen == 0)
            msg = dmsg, mlen = dlen; /* no error text: otel.status_description */
    }
    int dups;
    if (k > tagged && k > 1 && (rc = dedupe(&self->sortkeys, at, k, &dups)))
        return rc;
    if ((rc = sc_add(&self->s[S_STATUS], status->p, status->n)) ||
        (rc = sc_opt(&self->s[S_MSG], msg, mlen)))
        return rc;
    return emit_attrs(self, at, k);
}

/* Pass three: one span's row, as zipkin._append writes it (none when it has no timestamp). */
static int zipkin_row(Builder *self, PyObject *raw, Py_ssize_t i, void *ctx)
{
    ZIds *z = ctx;
    const ZSpan *zs = &z->zs[i];
    PyObject *const *f = z->fields + (size_t)i * N_ZF, *local;
    int rc;
    PyObject *ts = ZF(f, Z_TIMESTAMP), *dur = ZF(f, Z_DURATION);
    if (ts == NULL || ts == Py_None) {
        z->counts[1]++;
        return OK;
    }
    int no_duration = dur == NULL || dur == Py_None;
    z->counts[0] += no_duration;
    int64_t start, duration = 0, end;
    if ((rc = micros_value(ts, &start)) || (!no_duration && (rc = micros_value(dur, &duration))))
        return rc;
    if (__builtin_add_overflow(start, duration, &end))
        return BAIL;
    const char *arena = self->arena.p;
    const char *parent = arena + zs->pid;
    size_t plen = zs->plen;
    if (z->renamed && zs->has_parent && !zs->split) {
        Py_ssize_t g = *zid_slot(z, arena + zs->tid, zs->tlen, parent, plen);
        if (g >= 0 && z->zs[g].renamed) {
            parent = arena + z->zs[g].ren;
            plen = z->zs[g].rlen;
        }
    }
    if ((rc = sc_add(&self->s[S_TID], arena + zs->tid, zs->tlen)) ||
        (rc = sc_add(&self->s[S_SID], arena + zs->out, zs->olen)) ||
        (rc = sc_opt(&self->s[S_PID], zs->has_parent ? parent : NULL, plen)) || /* "": null */
        (rc = ZF(f, Z_NAME) == NULL ? sc_add(&self->s[S_NAME], "", 0)
                                    : put_str(&self->s[S_NAME], ZF(f, Z_NAME))) ||
        (rc = sc_add(&self->s[S_KIND], zs->kind->p, zs->kind->n)))
        return rc;
    if ((rc = opt_dict(ZF(f, Z_LOCAL), &local)))
        return rc;
    PyObject *service = NULL;
    if (local != NULL) {
        int err = 0;
        if ((service = get(local, E_SERVICE, &err)) == NULL && err)
            return FAIL;
    }
    if ((rc = z_attributes(self, f, zs, local)) || (rc = z_service(self, service, z->unknown)))
        return rc;
    if (truthy(ZF(f, Z_ANNOTATIONS))) {
        PyObject *events;
        if ((rc = call_back(self, self->extras, raw, NULL, NULL, &events)) ||
            (rc = put_answer(&self->s[S_EVENTS], events, "extras")))
            return rc;
    }
    else if ((rc = sc_null(&self->s[S_EVENTS])))
        return rc;
    if ((rc = sc_null(&self->s[S_LINKS])) || (rc = sc_null(&self->s[S_SCOPE_NAME])) ||
        (rc = sc_null(&self->s[S_SCOPE_VERSION])))
        return rc;
    return end_row(self, start, end);
}

/* The three passes over one Zipkin array; *counts: spans without a duration, without a
 * timestamp, and repeating an id. */
static int zipkin_spans(Builder *self, PyObject *spans, PyObject *unknown, Py_ssize_t *counts)
{
    Py_ssize_t n = PyList_GET_SIZE(spans);
    size_t size = 16;
    while (size < 2 * (size_t)n)
        size *= 2;
    size_t per_span = sizeof(ZSpan) + N_ZF * sizeof(PyObject *);
    self->scratch.len = self->table.len = self->arena.len = 0;
    if (buf_grow(&self->scratch, (size_t)(n ? n : 1) * per_span) ||
        buf_grow(&self->table, size * sizeof(Py_ssize_t)))
        return FAIL;
    ZSpan *zs = (ZSpan *)self->scratch.p;
    ZIds z = {self, zs, (PyObject **)(zs + (n ? n : 1)), (Py_ssize_t *)self->table.p, size - 1,
              unknown, counts, 0, 0};
    memset(z.slot, 0xff, size * sizeof(Py_ssize_t)); /* all -1: empty */
    int rc;
    if ((rc = each_span(self, spans, zipkin_ids, &z)) ||
        (z.dups && (rc = zipkin_split(&z, n, &counts[2]))))
        return rc;
    return each_span(self, spans, zipkin_row, &z);
}

#undef ZF
#undef N_ZF

PyDoc_STRVAR(add_zipkin_doc,
"add_zipkin(spans, unknown_service, names) -> (no_duration, no_timestamp, duplicates) | None\n"
"--\n\n"
"Append the spans of one Zipkin v2 array, shared ids split; names: the error tag and the\n"
"attributes the endpoints become (peer.service, server address and port, client address and\n"
"port, local address and port), then OpenTelemetry's status tags (see zipkin.span_status).\n"
"The counts are those zipkin.decode warns of.  None when a span\n"
ADD_DOC_BAIL);

static PyObject *Builder_add_zipkin(Builder *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t counts[3] = {0, 0, 0};
    int rc = add_begin(self, args, nargs, nargs == 3 && PyUnicode_CheckExact(args[1]),
                       "add_zipkin() takes (list, str, tuple)", N_ZIPKIN_WORDS);
    if (rc == OK)
        rc = zipkin_spans(self, args[0], args[1], counts);
    if (rc == FAIL)
        return NULL;
    if (rc == BAIL)
        Py_RETURN_NONE;
    return Py_BuildValue("(nnn)", counts[0], counts[1], counts[2]);
}
