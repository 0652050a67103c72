/* What the two compiled importers share: the OTLP JSON column builder (ingest/_json_native.c) and
 * the OTLP protobuf decoder (ingest/otlp_proto/_native.c).
 *
 * Why one header: both turn a span's attributes into the same Arrow columns by the same rules
 * (a repeated key keeps its first place and its last value, numbers are written as json_scalar
 * writes them, the promoted attributes go to their own columns) and read their Python callbacks'
 * answers the same way (check_answer, set_slow), so those rules live here once.
 * Each file includes it first; everything is static, so each extension keeps its own copy of the
 * code and no symbol is shared between the two shared objects.
 */

#ifndef TRACELENS_INGEST_NATIVE_COMMON_H
#define TRACELENS_INGEST_NATIVE_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Every step answers OK, BAIL (leave the input to the Python decoder) or FAIL (Python exception
 * set). */
#define OK 0
#define BAIL 1
#define FAIL (-1)

#define N_PROMOTED 6
#define N_KINDS 6 /* SPAN_KINDS */
#define N_CODES 3 /* STATUS_CODES */
/* Roles of the promoted attributes, in the order Python passes their keys. */
enum { P_KIND, P_CPU_NS, P_ARGS_HASH, P_RESULT_HASH, P_ARG_FPS, P_RESULT_FPS };

/* Classes of attribute value: the four fast shapes, C_JSON (an array the protobuf decoder wrote
 * as JSON text itself; never a promoted attribute) and C_SLOW (decoded by a Python callback). */
enum { C_STRING, C_INT, C_BOOL, C_DOUBLE, C_SLOW, C_JSON };

#define SORT_ABOVE 16 /* spans with more attributes than this dedupe by sorting */

/* UTF-8 text that lives as long as the str it was taken from. */
typedef struct {
    const char *p;
    size_t n;
} Text;

/* ---- growable buffers ----------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_grow(Buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra) {
        if (cap > ((size_t)PY_SSIZE_T_MAX) / 2) {
            PyErr_NoMemory();
            return FAIL;
        }
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return FAIL;
    }
    b->p = p;
    b->cap = cap;
    return OK;
}

static inline int buf_put(Buf *b, const void *src, size_t n)
{
    if (b->cap - b->len < n && buf_grow(b, n))
        return FAIL;
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
    return OK;
}

static void buf_free(Buf *b)
{
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static PyObject *buf_bytes(const Buf *b)
{
    return PyBytes_FromStringAndSize(b->len ? b->p : "", (Py_ssize_t)b->len);
}

/* ---- attributes ----------------------------------------------------------------------------- */

typedef struct {
    const char *key;
    size_t klen;
    const char *val; /* C_STRING / C_SLOW: UTF-8 in the input or of a str alive while the call runs */
    size_t vlen;
    uint8_t cls, is_json, dropped, known; /* known: same key as the previous span's here */
    int8_t promoted;
    int64_t ival;
    double dval;
    PyObject *obj; /* the typed value when the input already holds it (C_SLOW: always), borrowed */
    char num[32];  /* text of C_INT / C_BOOL / C_DOUBLE */
    size_t nlen;
} Attr;

static size_t fmt_i64(char *out, int64_t v)
{
    char tmp[24];
    size_t n = 0, k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[k++] = '-';
    while (n)
        out[k++] = tmp[--n];
    return k;
}

/* json_scalar(float) into out[32]: repr() when finite, json.dumps's names otherwise. */
static int fmt_double_text(char *out, size_t *len, double d)
{
    const char *fixed = NULL;
    if (isnan(d))
        fixed = "NaN";
    else if (isinf(d))
        fixed = d > 0 ? "Infinity" : "-Infinity";
    if (fixed) {
        *len = strlen(fixed);
        memcpy(out, fixed, *len);
        return OK;
    }
    char *s = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL)
        return FAIL;
    size_t n = strlen(s);
    if (n >= 32) {
        PyMem_Free(s);
        return BAIL;
    }
    memcpy(out, s, n);
    *len = n;
    PyMem_Free(s);
    return OK;
}

static int fmt_double(Attr *a, double d)
{
    return fmt_double_text(a->num, &a->nlen, d);
}

static inline void set_bool(Attr *a, int v)
{
    a->cls = C_BOOL;
    a->is_json = 1;
    a->ival = v != 0;
    a->nlen = v ? 4 : 5;
    memcpy(a->num, v ? "true" : "false", a->nlen);
}

/* A value a Python callback decoded: whether its text (already in a->val) is JSON, and the typed
 * value, borrowed. */
static inline int set_slow(Attr *a, PyObject *is_json, PyObject *typed)
{
    int json = PyObject_IsTrue(is_json);
    if (json < 0)
        return FAIL;
    a->is_json = (uint8_t)json;
    a->obj = typed;
    a->cls = C_SLOW;
    return OK;
}

/* The text written to the values column: the value itself for strings, else its JSON text. */
static inline Text attr_text(const Attr *a)
{
    int plain = a->cls == C_STRING || a->cls == C_SLOW || a->cls == C_JSON;
    Text t = {plain ? a->val : a->num, plain ? a->vlen : a->nlen};
    return t;
}

/* Which promoted attribute `key` is (its role), else -1. */
static int8_t promoted_role(const Text *pkeys, const char *key, size_t klen)
{
    for (int p = 0; p < N_PROMOTED; p++)
        if (klen == pkeys[p].n && klen && key[0] == pkeys[p].p[0] && !memcmp(key, pkeys[p].p, klen))
            return (int8_t)p;
    return -1;
}

static inline int same_key(const Attr *x, const Attr *y)
{
    return x->klen == y->klen && (x->klen == 0 || memcmp(x->key, y->key, x->klen) == 0);
}

typedef struct {
    const char *k;
    size_t n;
    size_t idx;
} SortKey;

static int cmp_sortkey(const void *l, const void *r)
{
    const SortKey *a = l, *b = r;
    size_t n = a->n < b->n ? a->n : b->n;
    int d = n ? memcmp(a->k, b->k, n) : 0;
    if (d)
        return d;
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    return a->idx < b->idx ? -1 : (a->idx > b->idx ? 1 : 0);
}

/* A key repeated within a span keeps its first place and its last value (a dict, as
 * _anyvalue.key_values and the JSON importer read it).  `sortkeys` is scratch space.
 * Sets *dups when there was one. */
static int dedupe(Buf *sortkeys, Attr *at, size_t k, int *dups)
{
    *dups = 0;
    if (k <= SORT_ABOVE) {
        for (size_t j = 1; j < k; j++)
            for (size_t i = 0; i < j; i++)
                if (!at[i].dropped && same_key(&at[i], &at[j])) {
                    at[i] = at[j];
                    at[j].dropped = 1;
                    *dups = 1;
                    break;
                }
        return OK;
    }
    sortkeys->len = 0;
    if (buf_grow(sortkeys, k * sizeof(SortKey)))
        return FAIL;
    SortKey *sk = (SortKey *)sortkeys->p;
    for (size_t i = 0; i < k; i++) {
        sk[i].k = at[i].key;
        sk[i].n = at[i].klen;
        sk[i].idx = i;
    }
    qsort(sk, k, sizeof(SortKey), cmp_sortkey);
    for (size_t a = 0; a < k;) {
        size_t b = a + 1;
        while (b < k && sk[b].n == sk[a].n && (sk[a].n == 0 || !memcmp(sk[b].k, sk[a].k, sk[a].n)))
            b++;
        if (b - a > 1) {
            size_t first = sk[a].idx, last = sk[b - 1].idx;
            *dups = 1;
            at[first] = at[last];
            for (size_t i = a + 1; i < b; i++)
                at[sk[i].idx].dropped = 1;
            at[first].dropped = 0;
        }
        a = b;
    }
    return OK;
}

/* The Python value of an attribute: the one the input held when there is one. */
static PyObject *typed_value(const Attr *a)
{
    if (a->obj)
        return Py_NewRef(a->obj);
    switch (a->cls) {
    case C_STRING:
        return PyUnicode_DecodeUTF8(a->val, (Py_ssize_t)a->vlen, "strict");
    case C_INT:
        return PyLong_FromLongLong(a->ival);
    case C_BOOL:
        return PyBool_FromLong((long)a->ival);
    case C_DOUBLE:
        return PyFloat_FromDouble(a->dval);
    }
    PyErr_SetString(PyExc_SystemError, "slow attribute without a value");
    return NULL;
}

/* Whether a promoted attribute goes to its string column as it is (kind, args_hash, result_hash
 * given as a str or an int: as_str gives what is written here). */
static inline int promoted_as_text(const Attr *a)
{
    int p = a->promoted;
    return (p == P_KIND || p == P_ARGS_HASH || p == P_RESULT_HASH) &&
           (a->cls == C_STRING || a->cls == C_INT);
}

/* A promoted value Python converts (as_str / as_int / as_str_list of the typed value, as
 * _promoted_column does): (role, row, typed value) appended to `later`. */
static int promote_later(PyObject *later, const Attr *a, size_t row)
{
    PyObject *typed = typed_value(a);
    if (typed == NULL)
        return FAIL;
    PyObject *item = Py_BuildValue("(inN)", (int)a->promoted, (Py_ssize_t)row, typed);
    if (item == NULL)
        return FAIL;
    int rc = PyList_Append(later, item);
    Py_DECREF(item);
    return rc < 0 ? FAIL : OK;
}

/* ---- arguments and results ------------------------------------------------------------------ */

/* fn(arg), a borrowed reference that `keep` holds until the caller empties it; NULL on error. */
static PyObject *keep_call(PyObject *fn, PyObject *arg, PyObject *keep)
{
    PyObject *res = PyObject_CallOneArg(fn, arg);
    if (res == NULL)
        return NULL;
    int rc = PyList_Append(keep, res);
    Py_DECREF(res);
    return rc < 0 ? NULL : res;
}

/* Whether a callback's answer is a tuple of the shape `shape` spells, a letter an item ('s' a str,
 * 'i' an int, '?' anything); when it is not, FAIL with a TypeError saying `expected`. */
static int check_answer(PyObject *res, const char *shape, const char *expected)
{
    Py_ssize_t n = (Py_ssize_t)strlen(shape);
    int fits = PyTuple_Check(res) && PyTuple_GET_SIZE(res) == n;
    for (Py_ssize_t i = 0; fits && i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(res, i);
        fits = shape[i] == 's' ? PyUnicode_Check(item) : shape[i] == 'i' ? PyLong_Check(item) : 1;
    }
    if (fits)
        return OK;
    PyErr_SetString(PyExc_TypeError, expected);
    return FAIL;
}

/* An int within int64 (BAIL beyond). */
static inline int long_value(PyObject *v, int64_t *out)
{
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return FAIL;
    if (overflow)
        return BAIL;
    *out = x;
    return OK;
}

/* A tuple of `count` str as UTF-8 (it lives as long as the caller's tuple). */
static int text_tuple(PyObject *tuple, Text *out, Py_ssize_t count, const char *what)
{
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != count) {
        PyErr_Format(PyExc_TypeError, "%s: expected a tuple of %zd str", what, count);
        return FAIL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *k = PyTuple_GET_ITEM(tuple, i);
        Py_ssize_t n;
        const char *s = PyUnicode_Check(k) ? PyUnicode_AsUTF8AndSize(k, &n) : NULL;
        if (s == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%s: expected str", what);
            return FAIL;
        }
        out[i].p = s;
        out[i].n = (size_t)n;
    }
    return OK;
}

/* dict[key] = value, taking the reference; FAIL when value is NULL (its error stands). */
static int put_item(PyObject *dict, const char *key, PyObject *value)
{
    if (value == NULL)
        return FAIL;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc < 0 ? FAIL : OK;
}

#endif /* TRACELENS_INGEST_NATIVE_COMMON_H */
