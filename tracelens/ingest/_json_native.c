/* Compiled fast paths of the JSON importers: OTLP/JSON (tracelens.ingest.otlp_json, walked here),
 * Jaeger JSON (jaeger.py, walked in _json_jaeger.h) and Zipkin v2 JSON (zipkin.py,
 * _json_zipkin.h), all filling one column builder (_json_builder.h).
 *
 * Why: orjson parses a document into dicts and lists in C; walking those objects span by span in
 * Python and appending each field to Python lists cost 3-8x the parse itself.  This walks the
 * spans already parsed by orjson and appends them to column buffers that Python wraps into Arrow
 * arrays without a Python object per span or attribute.
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

#include "_json_builder.h"

/* ---- OTLP/JSON ------------------------------------------------------------------------------ */

/* An id as trace_id()/span_id() leave it: 32/16 hex lower-cased, anything else but the empty
 * string and a possible base64 id (Python decides those) kept as it is. */
static int put_id(StrCol *c, PyObject *v, size_t hexlen, size_t b64len)
{
    size_t n;
    const char *s = v != NULL && PyUnicode_CheckExact(v) ? utf8(v, &n) : NULL;
    return s == NULL || n == 0 || n == b64len ? BAIL : put_id_col(c, v, hexlen, 0);
}

/* A name (span kind, status code) looked up in `names`, else the enum number in `table`. */
static int put_enum(StrCol *c, PyObject *v, PyObject *names, const Text *table, long count)
{
    if (v == NULL)
        return sc_add(c, table[0].p, table[0].n);
    if (PyLong_CheckExact(v)) {
        int64_t x;
        int rc = long_value(v, &x);
        if (rc)
            return rc;
        return x < 0 || x >= count ? BAIL : sc_add(c, table[x].p, table[x].n);
    }
    if (!PyUnicode_CheckExact(v))
        return BAIL;
    PyObject *found = PyDict_GetItemWithError(names, v);
    if (found == NULL)
        return PyErr_Occurred() ? FAIL : BAIL;
    return put_str(c, found);
}

/* One {key, value} of a span's attributes, as attributes() + any_value() read it. */
static int parse_attr(Builder *self, PyObject *kv, Attr *a)
{
    if (!PyDict_CheckExact(kv))
        return BAIL;
    PyObject *f[2], *v;
    dict_fields(kv, K_KEY, 2, f);
    PyObject *key = f[0], *value = f[1];
    size_t klen;
    const char *k = key != NULL && PyUnicode_CheckExact(key) ? utf8(key, &klen) : NULL;
    if (k == NULL)
        return BAIL;
    attr_reset(self, a, k, klen);
    if (value == NULL || value == Py_None)
        return slow_attr(self, value, a);
    if (!PyDict_CheckExact(value))
        return BAIL;
    /* stringValue, intValue, doubleValue, boolValue: any_value looks in this order */
    PyObject *fv[4] = {NULL, NULL, NULL, NULL};
    if (PyDict_GET_SIZE(value) == 1) { /* the usual AnyValue: one field */
        PyObject *only;
        Py_ssize_t pos = 0;
        PyDict_Next(value, &pos, &only, &v);
        int which = key_id(only, K_STRING, K_BOOL);
        if (which < 0)
            return slow_attr(self, value, a);
        fv[which - K_STRING] = v;
    }
    else {
        int err = 0;
        for (int i = 0; i < 4; i++)
            if ((fv[i] = get(value, K_STRING + i, &err)) == NULL && err)
                return FAIL;
    }
    if ((v = fv[0]) != NULL)
        return PyUnicode_CheckExact(v) ? set_str(a, v) : BAIL;
    if ((v = fv[1]) != NULL)
        return set_long(a, v);
    if ((v = fv[2]) != NULL) {
        if (PyFloat_CheckExact(v))
            return set_double(a, PyFloat_AS_DOUBLE(v), v);
        if (!PyLong_CheckExact(v))
            return BAIL;
        double d = PyLong_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return BAIL;
        }
        return set_double(a, d, NULL);
    }
    if ((v = fv[3]) != NULL) {
        if (v != Py_True && v != Py_False)
            return BAIL;
        set_bool(a, v == Py_True);
        return OK;
    }
    return slow_attr(self, value, a);
}

static int attributes(Builder *self, PyObject *field)
{
    Attr *at;
    size_t k;
    int rc = attr_list(self, field, parse_attr, &at, &k);
    return rc ? rc : emit_attrs(self, at, k);
}

/* Whether an optional list field holds nothing (absent, null or []). */
static inline int no_items(PyObject *v)
{
    return v == NULL || v == Py_None || (PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0);
}

/* Events and links: a callback into the Python decoder when there are any. */
static int extras(Builder *self, PyObject *span, PyObject *events, PyObject *links)
{
    int rc;
    if (no_items(events) && no_items(links)) {
        if ((rc = sc_null(&self->s[S_EVENTS])) || (rc = sc_null(&self->s[S_LINKS])))
            return rc;
        return OK;
    }
    PyObject *res;
    if ((rc = call_back(self, self->extras, span, "??", "extras: expected (str | None, str | None)",
                        &res)))
        return rc;
    if ((rc = put_answer(&self->s[S_EVENTS], PyTuple_GET_ITEM(res, 0), "extras")))
        return rc;
    return put_answer(&self->s[S_LINKS], PyTuple_GET_ITEM(res, 1), "extras");
}

typedef struct {
    PyObject *service, *resource, *scope_name, *scope_version;
} Shared;

/* One span, as otlp_json._span reads it; `ctx`: the Shared values of its ScopeSpans entry. */
/* The columns a span takes from its resource and scope (service, resource, scope name and
 * version): one rule for the parsed and the direct readers. */
static int put_shared(Builder *self, PyObject *service, PyObject *resource, PyObject *scope_name,
                      PyObject *scope_version)
{
    int rc;
    if ((rc = put_str(&self->s[S_SERVICE], service)) ||
        (rc = put_opt_text(&self->s[S_RESOURCE], resource)) ||
        (rc = put_opt_text(&self->s[S_SCOPE_NAME], scope_name)) ||
        (rc = put_opt_text(&self->s[S_SCOPE_VERSION], scope_version)))
        return rc;
    return 0;
}

static int span(Builder *self, PyObject *sp, Py_ssize_t i, void *ctx)
{
    const Shared *sh = ctx;
    int err = 0, rc;
    (void)i;
    if (!PyDict_CheckExact(sp))
        return BAIL;
    PyObject *v[K_LINKS + 1];
    dict_fields(sp, K_TRACE_ID, K_LINKS + 1, v);
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
    if ((rc = v[K_NAME] == NULL ? sc_add(&self->s[S_NAME], "", 0) : put_str(&self->s[S_NAME], v[K_NAME])))
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
    if ((rc = put_shared(self, sh->service, sh->resource, sh->scope_name, sh->scope_version)))
        return rc;
    return end_row(self, start, end);
}

#include "_json_jaeger.h"
#include "_json_zipkin.h"
#include "_json_direct.h"
#include "_json_jaeger_direct.h"

/* ---- the Python type ------------------------------------------------------------------------ */

/* A str -> str dict as Names (its str stay alive while the builder holds the dict). */
static int names_of(PyObject *dict, Names *out, const char *what)
{
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    out->n = 0;
    while (PyDict_Next(dict, &pos, &k, &v)) {
        size_t kn, vn;
        const char *ks = PyUnicode_Check(k) ? utf8(k, &kn) : NULL;
        const char *vs = PyUnicode_Check(v) ? utf8(v, &vn) : NULL;
        if (ks == NULL || vs == NULL || out->n == MAX_NAMES) {
            PyErr_Format(PyExc_TypeError, "%s: expected at most %d str -> str", what, MAX_NAMES);
            return FAIL;
        }
        out->k[out->n] = (Text){ks, kn};
        out->v[out->n++] = (Text){vs, vn};
    }
    return OK;
}

static int Builder_init(Builder *self, PyObject *args, PyObject *kwds)
{
    PyObject *pkeys, *kinds, *codes, *kind_names, *status_names, *slow_value, *extras_cb;
    PyObject *resource = Py_None, *server_id = Py_None;
    (void)kwds;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OO|OO", &PyTuple_Type, &pkeys, &PyTuple_Type, &kinds,
                          &PyTuple_Type, &codes, &PyDict_Type, &kind_names, &PyDict_Type,
                          &status_names, &slow_value, &extras_cb, &resource, &server_id))
        return -1;
    if (!PyCallable_Check(slow_value) || !PyCallable_Check(extras_cb) ||
        (resource != Py_None && !PyCallable_Check(resource)) ||
        (server_id != Py_None && !PyCallable_Check(server_id))) {
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
    if (names_of(kind_names, &self->kind_tab, "kind_names") ||
        names_of(status_names, &self->status_tab, "status_names"))
        return -1;
    Py_XSETREF(self->slow_value, Py_NewRef(slow_value));
    Py_XSETREF(self->extras, Py_NewRef(extras_cb));
    Py_XSETREF(self->resource, resource == Py_None ? NULL : Py_NewRef(resource));
    Py_XSETREF(self->server_id, server_id == Py_None ? NULL : Py_NewRef(server_id));
    Py_XSETREF(self->promoted, PyList_New(0));
    Py_XSETREF(self->keep, PyList_New(0));
    if (self->names == NULL || self->promoted == NULL || self->keep == NULL)
        return -1;
    return 0;
}

/* The objects a Builder holds, for the garbage collector. */
#define BUILDER_OBJECTS(X)                                                                         \
    X(slow_value) X(extras) X(resource) X(server_id) X(kind_names) X(status_names) X(names)      \
    X(promoted) X(keep) X(last_resource) X(words_from)

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
    Buf *scratch[] = {&self->attrs, &self->sortkeys, &self->scratch, &self->table, &self->arena,
                      &self->last_service};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
        buf_free(scratch[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(add_doc,
"add(spans, service, resource, scope_name, scope_version) -> bool\n--\n\n"
"Append the spans of one ScopeSpans entry (a list of parsed span objects).  False when one of\n"
"them " ADD_DOC_BAIL);

static PyObject *Builder_add(Builder *self, PyObject *const *args, Py_ssize_t nargs)
{
    int rc = add_begin(self, args, nargs, nargs == 5, "add() takes 5 arguments", 0);
    if (rc == OK && !PyUnicode_CheckExact(args[1]))
        rc = BAIL;
    for (int i = 2; i < 5 && rc == OK; i++) /* resource, scope name, scope version */
        if (args[i] != Py_None && !PyUnicode_CheckExact(args[i]))
            rc = BAIL;
    if (rc == OK) {
        Shared sh = {args[1], args[2], args[3], args[4]};
        rc = each_span(self, args[0], span, &sh);
    }
    return added(rc);
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
    {"add_jaeger", (PyCFunction)(void (*)(void))Builder_add_jaeger, METH_FASTCALL, add_jaeger_doc},
    {"add_zipkin", (PyCFunction)(void (*)(void))Builder_add_zipkin, METH_FASTCALL, add_zipkin_doc},
    {"add_otlp_bytes", (PyCFunction)(void (*)(void))Builder_add_otlp_bytes, METH_FASTCALL,
     add_otlp_bytes_doc},
    {"add_jaeger_bytes", (PyCFunction)(void (*)(void))Builder_add_jaeger_bytes, METH_FASTCALL,
     add_jaeger_bytes_doc},
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
                        "status_names, slow_value, extras, resource=None, server_id=None): span "
                        "columns from parsed OTLP/JSON, Jaeger or Zipkin JSON."),
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
    "Compiled fast paths of the JSON importers (see _json_native.c).", 0, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__json_native(void)
{
    if (intern_keys())
        return NULL;
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
