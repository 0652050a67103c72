/* Jaeger JSON straight from the bytes of one document (an API response, {"data": [trace, ...]})
 * into the builder, included by _json_native.c after _json_direct.h (its cursor) and
 * _json_jaeger.h (its consumed-tag rules).
 *
 * Why: parsing a Jaeger download into Python objects and walking them cost 1.4x the parse on top
 * of the parse.  This reads what jaeger_span reads from parsed spans, by the same rules, for the
 * common shape: strings without escapes; tags of type string, bool, int64 (an integer) and
 * float64 (a number with a fraction or an exponent); no logs; references none (then
 * parentSpanID) or one CHILD_OF / FOLLOWS_FROM; every span naming a process of its trace.
 * Anything else (an escape, a key twice in one object, logs, an inline process, any other tag,
 * invalid JSON) is BAIL: the caller rolls the builder back and the document goes the parsed way,
 * which alone words errors and warnings.  A trace's processes are handed to Python as their
 * bytes (jaeger._direct_processes).  The shape is fixed (document > trace > span > tag or
 * reference); values skipped unread are walked by d_skip, never by recursion. */

#define KEY_IS(lit) (kn == sizeof(lit) - 1 && !memcmp(k, lit, kn))

typedef struct {
    const char *pid;
    size_t n;
    PyObject *service, *resource; /* borrowed from the answer self->keep holds */
} JProcess;

#define J_MAX_PROCESSES 64 /* more in one trace: the parsed way */

typedef struct {
    PyObject *processes_cb, *repeats;
    const char *trace_id; /* the trace's own, for spans without one (NULL: none given) */
    size_t tid_n;
    JProcess procs[J_MAX_PROCESSES];
    int nprocs;
    Py_ssize_t most; /* the longest service + resource: what a span repeats at most */
    unsigned seen;
    Cur spans; /* where the trace's spans start */
} JDoc;

/* A tag {key, type, value} into `a`, as jaeger_tag reads a parsed one. */
typedef struct {
    Builder *self;
    Attr *a;
    unsigned seen;
    const char *type;
    size_t tn;
    Cur value; /* where the value starts */
} JDTag;

static int jd_tag_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    JDTag *t = ctx;
    const char *s;
    size_t n;
    int rc;
    if (KEY_IS("key")) {
        if ((rc = d_once(&t->seen, 0)) || (rc = d_str(c, &s, &n)))
            return rc;
        attr_reset(self, t->a, s, n);
        return OK;
    }
    if (KEY_IS("type")) {
        /* null or another value: the parsed way */
        return d_once_str(c, &t->seen, 1, &t->type, &t->tn);
    }
    if (KEY_IS("value")) {
        if ((rc = d_once(&t->seen, 2)))
            return rc;
        d_ws(c);
        t->value = *c;
        return d_skip(c);
    }
    return d_skip(c);
}

#define TYPE_IS(lit) (t.tn == sizeof(lit) - 1 && !memcmp(t.type, lit, t.tn))

static int jd_tag(Builder *self, Cur *c, Attr *a)
{
    JDTag t = {self, a, 0, NULL, 0, {NULL, NULL}};
    int rc;
    if ((rc = d_object(self, c, jd_tag_member, &t)))
        return rc;
    if (!(t.seen & 1) || !(t.seen & 4))
        return BAIL; /* no key or no value */
    Cur v = t.value;
    if (!(t.seen & 2) || TYPE_IS("string")) {
        if ((rc = d_str(&v, &a->val, &a->vlen)))
            return rc;
        a->cls = C_STRING;
        a->is_json = 0;
        a->obj = NULL;
        return OK;
    }
    if (TYPE_IS("bool")) {
        int ch = d_peek(&v);
        if (ch == 't' && !d_word(&v, "true", 4))
            set_bool(a, 1);
        else if (ch == 'f' && !d_word(&v, "false", 5))
            set_bool(a, 0);
        else
            return BAIL;
        return OK;
    }
    if (TYPE_IS("int64")) {
        int64_t x; /* a string is int_value's too, but as_int words what it makes of it */
        if (d_peek(&v) == '"' || (rc = d_int(&v, &x)))
            return BAIL;
        set_int(a, x);
        return OK;
    }
    if (TYPE_IS("float64")) { /* an integer is an int to the parser: the parsed way */
        double d;
        return (rc = d_double(&v, 0, &d)) ? rc : set_double(a, d, NULL);
    }
    return BAIL;
}

#undef TYPE_IS

/* The reference list: none, or one CHILD_OF / FOLLOWS_FROM with a string spanID (as
 * jaeger_parent takes it; its traceID must be a string, else the span's own must be). */
typedef struct {
    unsigned seen;
    const char *type, *sid;
    size_t tn, sn;
    int has_tid;
} JDRef;

static int jd_ref_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    JDRef *r = ctx;
    const char *s;
    size_t n;
    int rc;
    (void)self;
    if (KEY_IS("refType")) {
        return d_once_str(c, &r->seen, 0, &r->type, &r->tn);
    }
    if (KEY_IS("traceID")) {
        if ((rc = d_once(&r->seen, 1)))
            return rc;
        r->has_tid = 1;
        return d_str(c, &s, &n);
    }
    if (KEY_IS("spanID")) {
        return d_once_str(c, &r->seen, 2, &r->sid, &r->sn);
    }
    return d_skip(c);
}

enum { JD_TID, JD_SID, JD_NAME, JD_REFS, JD_START, JD_DURATION, JD_TAGS, JD_LOGS, JD_PID,
       JD_PARENT };

typedef struct {
    unsigned seen;
    const char *tid, *sid, *name, *pid, *parent;
    size_t tid_n, sid_n, name_n, pid_n, parent_n;
    int parent_null;
    int nrefs;
    JDRef ref;
    int64_t start, duration;
    size_t k; /* tags read into self->attrs */
} JDSpan;

/* startTime / duration: an integer, or an integer string (int_value), in microseconds. */
static int jd_micros(Cur *c, int64_t *ns)
{
    int64_t us;
    int rc = d_int(c, &us);
    return rc ? rc : __builtin_mul_overflow(us, (int64_t)1000, ns) ? BAIL : OK;
}

static int jd_span_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    JDSpan *sp = ctx;
    int rc;
    if (KEY_IS("traceID")) {
        return d_once_str(c, &sp->seen, JD_TID, &sp->tid, &sp->tid_n);
    }
    if (KEY_IS("spanID")) {
        return d_once_str(c, &sp->seen, JD_SID, &sp->sid, &sp->sid_n);
    }
    if (KEY_IS("operationName")) {
        return d_once_str(c, &sp->seen, JD_NAME, &sp->name, &sp->name_n);
    }
    if (KEY_IS("processID")) {
        return d_once_str(c, &sp->seen, JD_PID, &sp->pid, &sp->pid_n);
    }
    if (KEY_IS("parentSpanID")) {
        if ((rc = d_once(&sp->seen, JD_PARENT)))
            return rc;
        if (d_peek(c) == 'n') {
            sp->parent_null = 1;
            return d_word(c, "null", 4);
        }
        return d_str(c, &sp->parent, &sp->parent_n);
    }
    if (KEY_IS("startTime") || KEY_IS("duration")) {
        int f = KEY_IS("startTime") ? JD_START : JD_DURATION;
        if ((rc = d_once(&sp->seen, f)))
            return rc;
        return jd_micros(c, f == JD_START ? &sp->start : &sp->duration);
    }
    if (KEY_IS("logs") || KEY_IS("references")) {
        int refs = KEY_IS("references");
        int items;
        if ((rc = d_once(&sp->seen, refs ? JD_REFS : JD_LOGS)) ||
            (rc = d_list_open(c, &items)) || !items)
            return rc;
        if (!refs) /* logs: the parsed way */
            return BAIL;
        if ((rc = d_object(self, c, jd_ref_member, &sp->ref)))
            return rc;
        sp->nrefs = 1;
        return d_byte(c, ']'); /* a second reference: the parsed way */
    }
    if (KEY_IS("tags")) {
        int items;
        if ((rc = d_once(&sp->seen, JD_TAGS)) || (rc = d_list_open(c, &items)) || !items)
            return rc;
        for (;;) {
            if (sp->k + 1 > self->attrs.cap / sizeof(Attr)) {
                self->attrs.len = sp->k * sizeof(Attr);
                if (buf_grow(&self->attrs, (sp->k + 8) * sizeof(Attr)))
                    return FAIL;
            }
            Attr *a = (Attr *)self->attrs.p + sp->k;
            memset(a, 0, sizeof *a);
            if ((rc = jd_tag(self, c, a)))
                return rc;
            sp->k++;
            int end;
            if ((rc = d_list_next(c, &end)))
                return rc;
            if (end)
                return OK;
        }
    }
    if (KEY_IS("process"))
        return BAIL; /* its own process: the parsed way */
    return d_skip(c);
}

/* The parent column, as jaeger_parent writes it for the shapes read here. */
static int jd_parent(Builder *self, const JDSpan *sp)
{
    StrCol *col = &self->s[S_PID];
    if (sp->nrefs == 0) {
        if (!(sp->seen & (1u << JD_PARENT)) || sp->parent_null || sp->parent_n == 0)
            return sc_null(col);
        return put_id_text(col, sp->parent, sp->parent_n, 16, 0);
    }
    const JDRef *r = &sp->ref;
    int type_ok = !(r->seen & 1) || ascii_ieq(r->type, r->tn, "CHILD_OF", 8) ||
                  ascii_ieq(r->type, r->tn, "FOLLOWS_FROM", 12);
    if (!type_ok || !(r->has_tid || (sp->seen & (1u << JD_TID))) || !(r->seen & 4))
        return BAIL; /* jaeger_parent hands these to Python */
    if (r->sn == 0)
        return sc_null(col);
    return put_id_text(col, r->sid, r->sn, 16, 0);
}

static int jd_span(Builder *self, Cur *c, JDoc *doc)
{
    JDSpan sp;
    memset(&sp, 0, sizeof sp);
    int rc;
    if ((rc = d_object(self, c, jd_span_member, &sp)))
        return rc;
    if (!(sp.seen & (1u << JD_PID)) || !(sp.seen & (1u << JD_SID)) ||
        !(sp.seen & (1u << JD_START)))
        return BAIL;
    const JProcess *proc = NULL;
    for (int i = 0; i < doc->nprocs && proc == NULL; i++)
        if (doc->procs[i].n == sp.pid_n && !memcmp(doc->procs[i].pid, sp.pid, sp.pid_n))
            proc = &doc->procs[i];
    if (proc == NULL)
        return BAIL; /* a process the trace lacks: a warning, the parsed way */
    int64_t end;
    if (__builtin_add_overflow(sp.start, sp.duration, &end))
        return BAIL;
    const char *tid = sp.seen & (1u << JD_TID) ? sp.tid : doc->trace_id;
    size_t tid_n = sp.seen & (1u << JD_TID) ? sp.tid_n : doc->tid_n;
    if (tid == NULL)
        return BAIL;
    if ((rc = put_id_text(&self->s[S_TID], tid, tid_n, 32, 1)) ||
        (rc = put_id_text(&self->s[S_SID], sp.sid, sp.sid_n, 16, 0)) ||
        (rc = sc_add(&self->s[S_NAME], sp.name ? sp.name : "", sp.name_n)))
        return rc;
    if ((rc = jd_parent(self, &sp)) || (rc = sc_null(&self->s[S_EVENTS])) ||
        (rc = sc_null(&self->s[S_LINKS])))
        return rc;
    Attr *at = (Attr *)self->attrs.p;
    int dups;
    if (sp.k > 1 && (rc = dedupe(&self->sortkeys, at, sp.k, &dups)))
        return rc;
    if ((rc = jaeger_consumed(self, at, sp.k)) || (rc = emit_attrs(self, at, sp.k)))
        return rc;
    if ((rc = put_str(&self->s[S_SERVICE], proc->service)) ||
        (rc = put_opt_text(&self->s[S_RESOURCE], proc->resource)))
        return rc;
    return end_row(self, sp.start, end);
}

/* The trace's processes: cb(bytes) -> (dict pid -> (service, resource JSON), most) or None. */
static int jd_processes(Builder *self, Cur *c, JDoc *doc)
{
    PyObject *procs, *most;
    int rc = d_callback(self, c, doc->processes_cb, &procs, &most);
    if (rc)
        return rc;
    if (!PyDict_CheckExact(procs) || !PyLong_CheckExact(most)) {
        PyErr_SetString(PyExc_TypeError, "add_jaeger_bytes: processes: expected (dict, int)");
        return FAIL;
    }
    if (PyDict_GET_SIZE(procs) > J_MAX_PROCESSES)
        return BAIL;
    doc->most = PyLong_AsSsize_t(most);
    if (doc->most == -1 && PyErr_Occurred())
        return FAIL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    doc->nprocs = 0;
    while (PyDict_Next(procs, &pos, &key, &value)) {
        JProcess *p = &doc->procs[doc->nprocs++];
        if (!PyUnicode_CheckExact(key) || (p->pid = utf8(key, &p->n)) == NULL ||
            !PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) != 2) {
            PyErr_Clear();
            return BAIL;
        }
        p->service = PyTuple_GET_ITEM(value, 0);
        p->resource = PyTuple_GET_ITEM(value, 1);
    }
    return OK;
}

static int jd_trace_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    JDoc *doc = ctx;
    int rc;
    if (KEY_IS("traceID")) {
        if ((rc = d_once(&doc->seen, 1)))
            return rc;
        if (d_peek(c) != '"')
            return d_skip(c); /* spans without their own traceID then go the parsed way */
        return d_str(c, &doc->trace_id, &doc->tid_n);
    }
    if (KEY_IS("processes")) {
        if ((rc = d_once(&doc->seen, 2)))
            return rc;
        return jd_processes(self, c, doc);
    }
    if (KEY_IS("spans")) {
        if ((rc = d_once(&doc->seen, 3)))
            return rc;
        d_ws(c);
        doc->spans = *c; /* read once the processes are known */
        return d_skip(c);
    }
    return d_skip(c);
}

static int jd_trace(Builder *self, Cur *c, JDoc *doc)
{
    int rc;
    doc->seen &= 1u << 0; /* keeps the document's own bit */
    doc->trace_id = NULL;
    doc->tid_n = 0;
    doc->nprocs = 0;
    doc->most = 0;
    if ((rc = d_object(self, c, jd_trace_member, doc)))
        return rc;
    if (!(doc->seen & (1u << 3)))
        return BAIL; /* no spans: the parsed way words it */
    Cur sc = doc->spans;
    if ((rc = d_byte(&sc, '[')))
        return rc;
    Py_ssize_t n = 0;
    if (d_peek(&sc) == ']')
        sc.p++;
    else
        for (;;) {
            if ((rc = jd_span(self, &sc, doc)))
                return rc;
            n++;
            int end;
            if ((rc = d_list_next(&sc, &end)))
                return rc;
            if (end)
                break;
        }
    if ((rc = release_kept(self)))
        return rc;
    PyObject *r = PyLong_FromSsize_t(doc->most * n);
    if (r == NULL)
        return FAIL;
    rc = PyList_Append(doc->repeats, r);
    Py_DECREF(r);
    return rc < 0 ? FAIL : OK;
}

static int jd_document_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    JDoc *doc = ctx;
    int rc;
    if (!KEY_IS("data")) /* the API response's other members; any other key: the parsed way */
        return KEY_IS("total") || KEY_IS("limit") || KEY_IS("offset") || KEY_IS("errors")
                   ? d_skip(c)
                   : BAIL;
    if ((rc = d_once(&doc->seen, 0)) || (rc = d_byte(c, '[')))
        return rc;
    if (d_peek(c) == ']')
        return BAIL;
    for (;;) {
        if ((rc = jd_trace(self, c, doc)))
            return rc;
        int end;
        if ((rc = d_list_next(c, &end)))
            return rc;
        if (end)
            return OK;
    }
}

PyDoc_STRVAR(add_jaeger_bytes_doc,
"add_jaeger_bytes(data, processes, tag_names) -> list[int] | None\n"
"--\n\n"
"Append the spans of one Jaeger API response ({\"data\": [trace, ...]}) given as bytes, read\n"
"straight from them (see _json_jaeger_direct.h); processes(bytes) -> (processID -> (service,\n"
"resource JSON), the longest of them) decodes a trace's processes (None: the parsed way);\n"
"tag_names as add_jaeger.  Answers what each trace's processes repeat (the longest times its\n"
"spans), for SpanBatch.may_repeat; None when the document needs the parsed way, "
ADD_DOC_BAIL);

static PyObject *Builder_add_jaeger_bytes(Builder *self, PyObject *const *args, Py_ssize_t nargs)
{
    int valid = nargs == 3 && PyBytes_Check(args[0]);
    if (ready(self))
        return NULL;
    if (!valid) {
        PyErr_SetString(PyExc_TypeError, "add_jaeger_bytes() takes (bytes, callable, tuple)");
        return NULL;
    }
    if (take_words(self, args[2], N_CONSUMED))
        return NULL;
    Cur c = {PyBytes_AS_STRING(args[0]), PyBytes_AS_STRING(args[0]) + PyBytes_GET_SIZE(args[0])};
    JDoc *doc = PyMem_Calloc(1, sizeof *doc);
    if (doc == NULL)
        return PyErr_NoMemory();
    doc->processes_cb = args[1];
    doc->repeats = PyList_New(0);
    PyObject *out = NULL;
    if (doc->repeats != NULL) {
        int rc = d_object(self, &c, jd_document_member, doc);
        if (rc == OK && (!(doc->seen & 1u) || d_peek(&c) != -1))
            rc = BAIL;
        int released = release_kept(self);
        if (rc == FAIL || released)
            out = NULL;
        else if (rc == BAIL)
            out = Py_NewRef(Py_None);
        else
            out = Py_NewRef(doc->repeats);
        Py_DECREF(doc->repeats);
    }
    PyMem_Free(doc);
    return out;
}

#undef KEY_IS
