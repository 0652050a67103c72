/* Jaeger JSON spans for the compiled builder (_json_builder.h), included by _json_native.c.
 *
 * jaeger.py decodes each trace's processes and calls add_jaeger with the trace's spans; this reads
 * each span the way jaeger._span does.  Taken here: tags of type string, bool, int64 and float64
 * holding their usual JSON value (any other tag goes through the slow_value callback, which is
 * jaeger._tag_value), the tags the decoder consumes (span.kind, otel.status_code, ...) in their
 * usual shapes, and references that are none or one CHILD_OF / FOLLOWS_FROM.  Logs and any other
 * references go through the extras callback (jaeger._references and _events).  A span with its
 * own inline process, or naming a process the trace lacks, is left to Python (BAIL), as is
 * anything unusual in the consumed tags.
 */

/* The tags jaeger._span consumes, in the order jaeger.py passes their names. */
enum { T_KIND, T_CODE, T_MESSAGE, T_ERROR, T_SCOPE_NAME, T_LIB_NAME, T_SCOPE_VERSION,
       T_LIB_VERSION, N_CONSUMED };

/* One {key, type, value} tag as typed_tags reads it. */
static int jaeger_tag(Builder *self, PyObject *tag, Attr *a)
{
    if (!PyDict_CheckExact(tag))
        return BAIL;
    PyObject *f[3];
    dict_fields(tag, J_KEY, 3, f);
    PyObject *key = f[0], *type = f[1], *value = f[2] ? f[2] : Py_None;
    size_t klen, tn = 0;
    const char *k = key != NULL && PyUnicode_CheckExact(key) ? utf8(key, &klen) : NULL;
    if (k == NULL)
        return BAIL;
    attr_reset(self, a, k, klen);
    const char *t = NULL;
    if (type != NULL && type != Py_None) {
        t = PyUnicode_CheckExact(type) ? utf8(type, &tn) : NULL;
        if (t == NULL)
            return BAIL; /* not a tag type: an error Python words */
    }
    if (t == NULL || (tn == 6 && !memcmp(t, "string", 6))) {
        if (PyUnicode_CheckExact(value))
            return set_str(a, value);
    }
    else if (tn == 4 && !memcmp(t, "bool", 4)) {
        if (value == Py_True || value == Py_False) {
            set_bool(a, value == Py_True);
            return OK;
        }
    }
    else if (tn == 5 && !memcmp(t, "int64", 5)) {
        int rc = PyLong_CheckExact(value) ? set_long(a, value) : BAIL;
        if (rc != BAIL)
            return rc;
    }
    else if (tn == 7 && !memcmp(t, "float64", 7) && PyFloat_CheckExact(value))
        return set_double(a, PyFloat_AS_DOUBLE(value), value);
    return slow_attr(self, tag, a);
}

/* The consumed tags (after dedupe): the span kind, status, message and scope columns, as _status,
 * _span_kind and _pop_first make them; the tags are dropped from the attributes. */
static int jaeger_consumed(Builder *self, Attr *at, size_t k)
{
    Attr *found[N_CONSUMED] = {NULL};
    for (size_t i = 0; i < k; i++) {
        if (at[i].dropped)
            continue;
        for (int c = 0; c < N_CONSUMED; c++)
            if (at[i].klen == self->words[c].n && !memcmp(at[i].key, self->words[c].p, at[i].klen)) {
                found[c] = &at[i];
                break;
            }
    }
    const Text *status = NULL, *kind = &KIND_INTERNAL;
    Text scope[2] = {{NULL, 0}, {NULL, 0}};
    const char *msg = NULL;
    size_t mlen = 0;
    for (int c = 0; c < N_CONSUMED; c++)
        if (found[c] != NULL)
            found[c]->dropped = 1; /* popped, whatever happens to the value */
    Attr *a = found[T_CODE];
    if (a != NULL && !attr_is_none(a)) {
        /* a known spelling, else Python keeps the tag (at the end of the attributes) */
        if (!attr_is_str(a) || !is_ascii(a->val, a->vlen) ||
            (status = names_get(&self->status_tab, a->val, a->vlen)) == NULL)
            return BAIL;
    }
    if ((a = found[T_MESSAGE]) != NULL && !attr_is_none(a)) {
        if (!attr_is_str(a))
            return BAIL; /* str() of another value: Python */
        msg = a->val;
        mlen = a->vlen;
    }
    if (status == NULL) {
        status = &STATUS_UNSET;
        a = found[T_ERROR];
        if (a != NULL && ((a->cls == C_BOOL && a->ival) || (a->cls == C_SLOW && a->obj == Py_True) ||
                          (attr_is_str(a) && ascii_ieq(a->val, a->vlen, "true", 4))))
            status = &STATUS_ERROR;
        else if (a != NULL)
            a->dropped = 0; /* not consumed: an attribute like any other */
    }
    else if (found[T_ERROR] != NULL)
        found[T_ERROR]->dropped = 0;
    if ((a = found[T_KIND]) != NULL && !attr_is_none(a)) {
        kind = &KIND_UNSPECIFIED; /* str() of an int, float, bool, bytes ... is no kind */
        if (attr_is_str(a)) {
            if (!is_ascii(a->val, a->vlen))
                return BAIL;
            const Text *known = names_get(&self->kind_tab, a->val, a->vlen);
            if (known != NULL)
                kind = known;
        }
    }
    for (int s = 0; s < 2; s++) /* the scope's tag first, then the library's */
        for (int c = T_SCOPE_NAME + 2 * s; c <= T_LIB_NAME + 2 * s; c++) {
            if ((a = found[c]) == NULL || attr_is_none(a) || scope[s].p != NULL)
                continue;
            if (!attr_is_str(a))
                return BAIL;
            scope[s] = (Text){a->val, a->vlen};
        }
    int rc;
    if ((rc = sc_add(&self->s[S_KIND], kind->p, kind->n)) ||
        (rc = sc_add(&self->s[S_STATUS], status->p, status->n)) ||
        (rc = sc_opt(&self->s[S_MSG], msg, mlen)) ||
        (rc = sc_opt(&self->s[S_SCOPE_NAME], scope[0].p, scope[0].n)) ||
        (rc = sc_opt(&self->s[S_SCOPE_VERSION], scope[1].p, scope[1].n)))
        return rc;
    return OK;
}

/* The parent when the references are the common shape: none (then parentSpanID), or a single
 * CHILD_OF or FOLLOWS_FROM; *other is set (and nothing written) when they are not. */
static int jaeger_parent(Builder *self, PyObject *refs_field, PyObject *parent, PyObject *tid,
                         int *other)
{
    PyObject *refs;
    Py_ssize_t n;
    StrCol *c = &self->s[S_PID];
    int rc = refs_field != NULL && refs_field != Py_None && !PyList_CheckExact(refs_field)
                 ? BAIL
                 : list_items(refs_field, &refs, &n);
    if (rc)
        return rc;
    if (n == 0) {
        if (parent == NULL || parent == Py_None)
            return sc_null(c);
        if (PyUnicode_CheckExact(parent))
            return PyUnicode_GET_LENGTH(parent) ? put_id_col(c, parent, 16, 0) : sc_null(c);
        int truth = PyObject_IsTrue(parent);
        return truth < 0 ? FAIL : truth ? BAIL : sc_null(c);
    }
    PyObject *ref = PyList_GET_ITEM(refs, 0);
    if (n == 1 && PyDict_CheckExact(ref)) {
        PyObject *f[3];
        dict_fields(ref, R_TYPE, 3, f);
        PyObject *ref_tid = f[1] ? f[1] : tid;
        size_t tn = 0;
        const char *t = f[0] == NULL ? "CHILD_OF" : PyUnicode_CheckExact(f[0]) ? utf8(f[0], &tn) : NULL;
        if (f[0] == NULL)
            tn = 8;
        if (t != NULL && (ascii_ieq(t, tn, "CHILD_OF", 8) || ascii_ieq(t, tn, "FOLLOWS_FROM", 12)) &&
            ref_tid != NULL && PyUnicode_CheckExact(ref_tid) && f[2] != NULL &&
            PyUnicode_CheckExact(f[2]))
            return PyUnicode_GET_LENGTH(f[2]) ? put_id_col(c, f[2], 16, 0) : sc_null(c);
    }
    *other = 1;
    return OK;
}

#define JV(key) v[(key) - J_TRACE_ID]

/* What a trace's spans share: its id (for spans without their own) and its processes. */
typedef struct {
    PyObject *trace_id, *processes;
} JTrace;

/* One span, as jaeger._span reads it; `ctx`: its JTrace. */
static int jaeger_span(Builder *self, PyObject *sp, Py_ssize_t i, void *ctx)
{
    const JTrace *trace = ctx;
    PyObject *trace_id = trace->trace_id, *processes = trace->processes;
    int rc;
    (void)i;
    if (!PyDict_CheckExact(sp))
        return BAIL;
    PyObject *v[J_PARENT - J_TRACE_ID + 1];
    dict_fields(sp, J_TRACE_ID, J_PARENT - J_TRACE_ID + 1, v);
    PyObject *pid = JV(J_PROCESS_ID), *proc;
    if (JV(J_PROCESS) != NULL && PyDict_CheckExact(JV(J_PROCESS)))
        return BAIL; /* its own process */
    if (pid == NULL || !PyUnicode_CheckExact(pid))
        return BAIL;
    if ((proc = PyDict_GetItemWithError(processes, pid)) == NULL)
        return PyErr_Occurred() ? FAIL : BAIL; /* a process the trace lacks: a warning */
    if (!PyTuple_CheckExact(proc) || PyTuple_GET_SIZE(proc) != 2) {
        PyErr_SetString(PyExc_TypeError, "add_jaeger: processes: expected (service, resource)");
        return FAIL;
    }
    int64_t start, duration = 0, end;
    if ((rc = micros_value(JV(J_START), &start)) ||
        (JV(J_DURATION) != NULL && (rc = micros_value(JV(J_DURATION), &duration))))
        return rc;
    if (__builtin_add_overflow(start, duration, &end))
        return BAIL;
    PyObject *tid = JV(J_TRACE_ID) ? JV(J_TRACE_ID) : trace_id;
    if ((rc = put_id_col(&self->s[S_TID], tid, 32, 1)) ||
        (rc = put_id_col(&self->s[S_SID], JV(J_SPAN_ID), 16, 0)) ||
        (rc = JV(J_NAME) == NULL ? sc_add(&self->s[S_NAME], "", 0)
                                 : put_str(&self->s[S_NAME], JV(J_NAME))))
        return rc;
    int other = 0;
    if ((rc = jaeger_parent(self, JV(J_REFERENCES), JV(J_PARENT), JV(J_TRACE_ID), &other)))
        return rc;
    PyObject *logs;
    Py_ssize_t nlogs;
    PyObject *lf = JV(J_LOGS);
    if (lf != NULL && lf != Py_None && !PyList_CheckExact(lf))
        return BAIL;
    if ((rc = list_items(lf, &logs, &nlogs)))
        return rc;
    if (other || nlogs) {
        PyObject *res;
        if ((rc = call_back(self, self->extras, sp, "???", "extras: expected (events, links, parent)",
                            &res)))
            return rc;
        if ((rc = put_answer(&self->s[S_EVENTS], PyTuple_GET_ITEM(res, 0), "extras")) ||
            (rc = put_answer(&self->s[S_LINKS], PyTuple_GET_ITEM(res, 1), "extras")) ||
            (other && (rc = put_answer(&self->s[S_PID], PyTuple_GET_ITEM(res, 2), "extras"))))
            return rc;
    }
    else if ((rc = sc_null(&self->s[S_EVENTS])) || (rc = sc_null(&self->s[S_LINKS])))
        return rc;
    Attr *at;
    size_t k;
    if ((rc = attr_list(self, JV(J_TAGS), jaeger_tag, &at, &k)) ||
        (rc = jaeger_consumed(self, at, k)) || (rc = emit_attrs(self, at, k)))
        return rc;
    if ((rc = put_str(&self->s[S_SERVICE], PyTuple_GET_ITEM(proc, 0))) ||
        (rc = put_opt_text(&self->s[S_RESOURCE], PyTuple_GET_ITEM(proc, 1))))
        return rc;
    return end_row(self, start, end);
}

#undef JV

PyDoc_STRVAR(add_jaeger_doc,
"add_jaeger(spans, trace_id, processes, tag_names) -> bool\n--\n\n"
"Append the spans of one Jaeger trace; processes: processID -> (service, resource JSON);\n"
"tag_names: the consumed tags (span kind, status code, status description, error, scope name,\n"
"library name, scope version, library version).  False when a span " ADD_DOC_BAIL);

static PyObject *Builder_add_jaeger(Builder *self, PyObject *const *args, Py_ssize_t nargs)
{
    int rc = add_begin(self, args, nargs, nargs == 4 && PyDict_Check(args[2]),
                       "add_jaeger() takes (list, str, dict, tuple)", N_CONSUMED);
    if (rc == OK) {
        JTrace trace = {args[1], args[2]};
        rc = each_span(self, args[0], jaeger_span, &trace);
    }
    return added(rc);
}
