/* Compiled fingerprints of builtin scalars: the part of a traced call that grows with its
 * arguments and result.
 *
 * Why: with a new argument value on every call (ids, prompts), hashing the arguments and the
 * result in Python costs about as much as the rest of the decorator together (three BLAKE2b
 * objects, a dozen bytes objects, the interpreter around them).  Here the same bytes are fed to
 * an embedded BLAKE2b (RFC 7693) without building them as Python objects.
 *
 * The output is, byte for byte, that of the Python functions in fingerprint.py, which stay the
 * reference: every value this code does not handle itself (containers, objects, subclasses, ints
 * beyond 62 bits, strings and bytes longer than MAX_BYTES) goes to Python, either one value at a
 * time (``value_ref`` for an argument) or the whole call (the Python function itself).  Tests
 * compare both on generated values (tests/test_fingerprint_native.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define DIGEST_SIZE 16
#define FP_SIZE 8
#define MAX_BYTES 16384
#define MIN_FP_STR 1 /* see fingerprint.py: only "" is too common to link */
#define MIN_FP_INT 2 /* only -1, 0, 1 are too common to link */
#define INLINE_MAX 15
#define INT_LIMIT (1LL << 62) /* ints at or beyond this magnitude: Python's encoder */

/* ---------------------------------------------------------------------------------------- */
/* BLAKE2b-512 (RFC 7693), unkeyed; callers keep the first DIGEST_SIZE bytes as Python does.  */

typedef struct {
    uint64_t h[8];
    uint64_t t;
    uint8_t buf[128];
    size_t n;
} b2b;

static const uint64_t IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t rotr64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t load64le(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
#endif
}

#define G(a, b, c, d, x, y)             \
    do {                                \
        v[a] = v[a] + v[b] + (x);       \
        v[d] = rotr64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d];             \
        v[b] = rotr64(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y);       \
        v[d] = rotr64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];             \
        v[b] = rotr64(v[b] ^ v[c], 63); \
    } while (0)

static void b2b_compress(b2b *s, int last)
{
    uint64_t v[16], m[16];
    for (int i = 0; i < 8; i++) {
        v[i] = s->h[i];
        v[i + 8] = IV[i];
    }
    v[12] ^= s->t; /* the counter's high word stays 0: inputs here are far below 2**64 bytes */
    if (last) v[14] = ~v[14];
    for (int i = 0; i < 16; i++) m[i] = load64le(s->buf + 8 * i);
    for (int r = 0; r < 12; r++) {
        const uint8_t *q = SIGMA[r];
        G(0, 4, 8, 12, m[q[0]], m[q[1]]);
        G(1, 5, 9, 13, m[q[2]], m[q[3]]);
        G(2, 6, 10, 14, m[q[4]], m[q[5]]);
        G(3, 7, 11, 15, m[q[6]], m[q[7]]);
        G(0, 5, 10, 15, m[q[8]], m[q[9]]);
        G(1, 6, 11, 12, m[q[10]], m[q[11]]);
        G(2, 7, 8, 13, m[q[12]], m[q[13]]);
        G(3, 4, 9, 14, m[q[14]], m[q[15]]);
    }
    for (int i = 0; i < 8; i++) s->h[i] ^= v[i] ^ v[i + 8];
}

static void b2b_init(b2b *s)
{
    memcpy(s->h, IV, sizeof IV);
    s->h[0] ^= 0x01010000ULL ^ 64; /* fanout 1, depth 1, no key, 64-byte digest */
    s->t = 0;
    s->n = 0;
}

static void b2b_update(b2b *s, const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    while (len > 0) {
        if (s->n == 128) { /* a full buffer is compressed only once more input follows */
            s->t += 128;
            b2b_compress(s, 0);
            s->n = 0;
        }
        size_t take = 128 - s->n;
        if (take > len) take = len;
        memcpy(s->buf + s->n, p, take);
        s->n += take;
        p += take;
        len -= take;
    }
}

static void b2b_final16(b2b *s, uint8_t out[DIGEST_SIZE])
{
    s->t += s->n;
    memset(s->buf + s->n, 0, 128 - s->n);
    b2b_compress(s, 1);
    for (int i = 0; i < DIGEST_SIZE; i++) out[i] = (uint8_t)(s->h[i / 8] >> (8 * (i % 8)));
}

static void digest16(const void *data, size_t len, uint8_t out[DIGEST_SIZE])
{
    b2b s;
    b2b_init(&s);
    b2b_update(&s, data, len);
    b2b_final16(&s, out);
}

/* ---------------------------------------------------------------------------------------- */
/* Encodings (see fingerprint.py's module docstring).                                        */

static PyObject *hex_of(const uint8_t *d, int n)
{
    static const char digits[] = "0123456789abcdef";
    PyObject *out = PyUnicode_New(2 * n, 127);
    if (out == NULL) return NULL;
    Py_UCS1 *w = PyUnicode_1BYTE_DATA(out);
    for (int i = 0; i < n; i++) {
        w[2 * i] = (Py_UCS1)digits[d[i] >> 4];
        w[2 * i + 1] = (Py_UCS1)digits[d[i] & 15];
    }
    return out;
}

/* 'i' + the int as ``to_bytes(bit_length // 8 + 1, "big", signed=True)``; |v| < 2**62. */
static Py_ssize_t enc_int(long long v, uint8_t *out)
{
    unsigned long long mag = v < 0 ? (unsigned long long)(-v) : (unsigned long long)v;
    int bits = 0;
    while (mag) {
        bits++;
        mag >>= 1;
    }
    int n = bits / 8 + 1;
    unsigned long long u = (unsigned long long)v;
    out[0] = 'i';
    for (int i = 0; i < n; i++) out[n - i] = (uint8_t)(u >> (8 * i));
    return 1 + n;
}

static Py_ssize_t enc_float(double v, uint8_t *out)
{
    if (v != v) {
        memcpy(out, "dnan", 4);
        return 4;
    }
    double z = v + 0.0;
    uint64_t u;
    memcpy(&u, &z, 8);
    out[0] = 'd';
    for (int i = 0; i < 8; i++) out[1 + i] = (uint8_t)(u >> (56 - 8 * i));
    return 9;
}

/* Length in code points; -1 with an exception set if a (legacy, pre-3.12) string cannot be
 * made ready. */
static Py_ssize_t str_chars(PyObject *s)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) return -1;
#endif
    return PyUnicode_GET_LENGTH(s);
}

/* A str's UTF-8 bytes (surrogates passed through).  ``*owner`` keeps them alive when they had
 * to be encoded; ASCII strings are read in place. */
static int str_utf8(PyObject *s, const char **data, Py_ssize_t *len, PyObject **owner)
{
    *owner = NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) return -1; /* (legacy strings; a no-op for every other) */
#endif
    if (PyUnicode_IS_ASCII(s)) {
        *data = (const char *)PyUnicode_1BYTE_DATA(s);
        *len = PyUnicode_GET_LENGTH(s);
        return 0;
    }
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-8", "surrogatepass");
    if (b == NULL) return -1;
    *owner = b;
    *data = PyBytes_AS_STRING(b);
    *len = PyBytes_GET_SIZE(b);
    return 0;
}

/* Digest of tag + payload. */
static void tagged_digest(char tag, const void *data, Py_ssize_t len, uint8_t out[DIGEST_SIZE])
{
    b2b s;
    b2b_init(&s);
    b2b_update(&s, &tag, 1);
    b2b_update(&s, data, (size_t)len);
    b2b_final16(&s, out);
}

/* ---------------------------------------------------------------------------------------- */
/* Python fallbacks, installed by fingerprint.py.                                             */

static PyObject *py_args_fingerprint; /* the Python args_fingerprint(names, values) */
static PyObject *py_result_fingerprint;
static PyObject *py_value_ref;        /* value_ref(value) -> (ref, parts) */
static PyObject *py_collect_fps;      /* collect_fps([parts]) -> list[str] */

static PyObject *sp_install(PyObject *self, PyObject *args)
{
    PyObject *a, *r, *v, *c;
    if (!PyArg_ParseTuple(args, "OOOO", &a, &r, &v, &c)) return NULL;
    Py_XSETREF(py_args_fingerprint, Py_NewRef(a));
    Py_XSETREF(py_result_fingerprint, Py_NewRef(r));
    Py_XSETREF(py_value_ref, Py_NewRef(v));
    Py_XSETREF(py_collect_fps, Py_NewRef(c));
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------- */
/* args_fingerprint                                                                            */

/* Content-bearing parts found so far: the first kept in C, a Python list from the second on
 * (most calls have at most one: an id, a prompt). */
typedef struct {
    int count;
    uint8_t first[DIGEST_SIZE];
    PyObject *first_obj; /* the first part as a Python (depth, digest) tuple, if it came so */
    PyObject *list;      /* (depth, digest) tuples once there are two or more */
} found_t;

static PyObject *part_tuple(long depth, const uint8_t *digest)
{
    return Py_BuildValue("(ly#)", depth, (const char *)digest, (Py_ssize_t)DIGEST_SIZE);
}

static int found_add(found_t *f, PyObject *part, const uint8_t *digest)
{
    /* part: a borrowed (depth, digest) tuple from Python, or NULL for a depth-0 scalar here */
    if (f->count == 0) {
        f->count = 1;
        if (part != NULL) {
            f->first_obj = Py_NewRef(part);
        } else {
            memcpy(f->first, digest, DIGEST_SIZE);
        }
        return 0;
    }
    if (f->list == NULL) {
        f->list = PyList_New(0);
        if (f->list == NULL) return -1;
        PyObject *first = f->first_obj ? Py_NewRef(f->first_obj) : part_tuple(0, f->first);
        if (first == NULL || PyList_Append(f->list, first) < 0) {
            Py_XDECREF(first);
            return -1;
        }
        Py_DECREF(first);
    }
    f->count++;
    PyObject *item = part != NULL ? Py_NewRef(part) : part_tuple(0, digest);
    if (item == NULL) return -1;
    int rc = PyList_Append(f->list, item);
    Py_DECREF(item);
    return rc;
}

/* A tuple of short fingerprints (str), left untracked by the garbage collector: it holds only
 * strings, as the collector itself would find at its next pass (``_PyTuple_MaybeUntrack``), and
 * a span's attribute dict then stays untracked too.  Spans wait in the exporter's queue long
 * enough to be traversed by several collections; this keeps their fingerprints out of them. */
static PyObject *untracked(PyObject *tuple)
{
    if (tuple != NULL && PyTuple_GET_SIZE(tuple) > 0 && PyObject_GC_IsTracked(tuple)) {
        PyObject_GC_UnTrack(tuple);
    }
    return tuple;
}

static PyObject *found_fps(found_t *f)
{
    if (f->count == 0) return PyTuple_New(0);
    if (f->count == 1) {
        const uint8_t *d = f->first;
        PyObject *bytes = NULL;
        if (f->first_obj != NULL) {
            bytes = PyTuple_GetItem(f->first_obj, 1);
            if (bytes == NULL || !PyBytes_Check(bytes) || PyBytes_GET_SIZE(bytes) < FP_SIZE) {
                PyErr_SetString(PyExc_TypeError, "value_ref gave a malformed part");
                return NULL;
            }
            d = (const uint8_t *)PyBytes_AS_STRING(bytes);
        }
        PyObject *h = hex_of(d, FP_SIZE);
        if (h == NULL) return NULL;
        PyObject *out = PyTuple_New(1);
        if (out == NULL) {
            Py_DECREF(h);
            return NULL;
        }
        PyTuple_SET_ITEM(out, 0, h);
        return untracked(out);
    }
    PyObject *list = PyObject_CallFunction(py_collect_fps, "([O])", f->list);
    if (list == NULL) return NULL;
    PyObject *out = PySequence_Tuple(list);
    Py_DECREF(list);
    return untracked(out);
}

static void found_clear(found_t *f)
{
    Py_CLEAR(f->first_obj);
    Py_CLEAR(f->list);
}

/* Appends the reference of one argument value to the hash; 1: done, 0: not handled here (the
 * whole call goes to Python), -1: error. */
/* Mirrors fingerprint.has_forms from above (a superset is enough: Python is the reference):
   strings with a separator ("/?&=%" or whitespace) or DERIVED_MIN+ characters go to Python. */
#define DERIVED_MIN 32
static int has_forms(const char *data, Py_ssize_t len, Py_ssize_t chars)
{
    if (chars >= DERIVED_MIN) return 1;
    for (Py_ssize_t i = 0; i < len; i++) {
        switch (data[i]) {
        case '/': case '?': case '&': case '=': case '%': case ' ': case '\t': case '\r':
        case '\n':
            return 1;
        default:
            break;
        }
    }
    return 0;
}

static int arg_ref(b2b *s, PyObject *value, found_t *f)
{
    uint8_t enc[16];
    uint8_t digest[DIGEST_SIZE];
    PyTypeObject *typ = Py_TYPE(value);
    if (typ == &PyLong_Type) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow || v >= INT_LIMIT || v <= -INT_LIMIT) return 0;
        Py_ssize_t n = enc_int(v, enc);
        if (v > -MIN_FP_INT && v < MIN_FP_INT) {
            uint8_t len = (uint8_t)n;
            b2b_update(s, &len, 1);
            b2b_update(s, enc, (size_t)n);
            return 1;
        }
        digest16(enc, (size_t)n, digest);
    }
    else if (typ == &PyUnicode_Type) {
        Py_ssize_t chars = str_chars(value);
        if (chars < 0) return -1;
        if (chars > MAX_BYTES) return 0;
        const char *data;
        Py_ssize_t len;
        PyObject *owner;
        if (str_utf8(value, &data, &len, &owner) < 0) return -1;
        if (chars >= MIN_FP_STR && has_forms(data, len, chars)) {
            Py_XDECREF(owner); /* parts or a digest shape: fingerprint.py's arg_forms decides */
            return 0;
        }
        if (chars < MIN_FP_STR && len + 1 <= INLINE_MAX) {
            uint8_t head[2] = {(uint8_t)(len + 1), 's'};
            b2b_update(s, head, 2);
            b2b_update(s, data, (size_t)len);
            Py_XDECREF(owner);
            return 1;
        }
        tagged_digest('s', data, len, digest);
        Py_XDECREF(owner);
        if (chars < MIN_FP_STR) { /* short but long in UTF-8: by digest, not content-bearing */
            uint8_t mark = 0xff;
            b2b_update(s, &mark, 1);
            b2b_update(s, digest, DIGEST_SIZE);
            return 1;
        }
    }
    else if (value == Py_None) {
        b2b_update(s, "\x01n", 2);
        return 1;
    }
    else if (typ == &PyBytes_Type) {
        Py_ssize_t len = PyBytes_GET_SIZE(value);
        if (len > MAX_BYTES) return 0;
        if (len < MIN_FP_STR) { /* 'y' + at most 7 bytes: always inline */
            uint8_t head[2] = {(uint8_t)(len + 1), 'y'};
            b2b_update(s, head, 2);
            b2b_update(s, PyBytes_AS_STRING(value), (size_t)len);
            return 1;
        }
        tagged_digest('y', PyBytes_AS_STRING(value), len, digest);
    }
    else if (typ == &PyFloat_Type) {
        Py_ssize_t n = enc_float(PyFloat_AS_DOUBLE(value), enc);
        uint8_t len = (uint8_t)n;
        b2b_update(s, &len, 1);
        b2b_update(s, enc, (size_t)n);
        return 1;
    }
    else if (typ == &PyBool_Type) {
        b2b_update(s, value == Py_True ? "\x01t" : "\x01" "f", 2);
        return 1;
    }
    else { /* anything else: Python's value_ref, for this value only */
        PyObject *res = PyObject_CallOneArg(py_value_ref, value);
        if (res == NULL) return -1;
        PyObject *ref, *parts;
        if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2 ||
            !PyBytes_Check(ref = PyTuple_GET_ITEM(res, 0)) ||
            !PyList_Check(parts = PyTuple_GET_ITEM(res, 1))) {
            Py_DECREF(res);
            PyErr_SetString(PyExc_TypeError, "value_ref must return (bytes, list)");
            return -1;
        }
        b2b_update(s, PyBytes_AS_STRING(ref), (size_t)PyBytes_GET_SIZE(ref));
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++) {
            if (found_add(f, PyList_GET_ITEM(parts, i), NULL) < 0) {
                Py_DECREF(res);
                return -1;
            }
        }
        Py_DECREF(res);
        return 1;
    }
    /* a content-bearing scalar: referenced by digest, and one of the arg_fps */
    uint8_t mark = 0xff;
    b2b_update(s, &mark, 1);
    b2b_update(s, digest, DIGEST_SIZE);
    return found_add(f, NULL, digest) < 0 ? -1 : 1;
}

static PyObject *args_fp(PyObject *names, PyObject *values)
{
    PyObject *nseq = PySequence_Fast(names, "names must be a sequence");
    if (nseq == NULL) return NULL;
    PyObject *vseq = PySequence_Fast(values, "values must be a sequence");
    if (vseq == NULL) {
        Py_DECREF(nseq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(nseq);
    if (PySequence_Fast_GET_SIZE(vseq) < n) n = PySequence_Fast_GET_SIZE(vseq);
    b2b s;
    b2b_init(&s);
    b2b_update(&s, "A", 1);
    found_t f = {0, {0}, NULL, NULL};
    PyObject *out = NULL;
    int handled = 1;
    for (Py_ssize_t i = 0; i < n && handled == 1; i++) {
        PyObject *name = PySequence_Fast_GET_ITEM(nseq, i);
        if (!PyBytes_CheckExact(name)) {
            handled = 0;
            break;
        }
        b2b_update(&s, PyBytes_AS_STRING(name), (size_t)PyBytes_GET_SIZE(name));
        handled = arg_ref(&s, PySequence_Fast_GET_ITEM(vseq, i), &f);
    }
    if (handled < 0) goto done;
    if (handled == 0) {
        out = PyObject_CallFunctionObjArgs(py_args_fingerprint, names, values, NULL);
        goto done;
    }
    uint8_t digest[DIGEST_SIZE];
    b2b_final16(&s, digest);
    PyObject *h = hex_of(digest, DIGEST_SIZE);
    if (h == NULL) goto done;
    PyObject *fps = found_fps(&f);
    if (fps == NULL) {
        Py_DECREF(h);
        goto done;
    }
    out = PyTuple_Pack(2, h, fps);
    Py_DECREF(h);
    Py_DECREF(fps);
done:
    found_clear(&f);
    Py_DECREF(nseq);
    Py_DECREF(vseq);
    return out;
}

static int ready(void)
{
    if (py_args_fingerprint == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tracelens _speedups: install() was not called");
        return 0;
    }
    return 1;
}

static PyObject *sp_args_fingerprint(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "args_fingerprint(names, values)");
        return NULL;
    }
    if (!ready()) return NULL;
    return args_fp(args[0], args[1]);
}

/* small_args_hash(names, values, memo): see fingerprint.py. */
#define MEMO_MAX 4096
static PyObject *sp_small_args_hash(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_Check(args[1]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "small_args_hash(names, values: tuple, memo: dict)");
        return NULL;
    }
    if (!ready()) return NULL;
    PyObject *values = args[1], *memo = args[2];
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(values); i++) {
        PyObject *v = PyTuple_GET_ITEM(values, i);
        PyTypeObject *typ = Py_TYPE(v);
        if (typ == &PyLong_Type) {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (x == -1 && PyErr_Occurred()) return NULL;
            if (overflow || x <= -MIN_FP_INT || x >= MIN_FP_INT) Py_RETURN_NONE;
        }
        else if (typ == &PyUnicode_Type) {
            Py_ssize_t chars = str_chars(v);
            if (chars < 0) return NULL;
            if (chars >= MIN_FP_STR) Py_RETURN_NONE;
        }
        else if (v != Py_None) {
            Py_RETURN_NONE;
        }
    }
    PyObject *known = PyDict_GetItemWithError(memo, values);
    if (known != NULL) return Py_NewRef(known);
    if (PyErr_Occurred()) return NULL;
    PyObject *res = args_fp(args[0], values);
    if (res == NULL) return NULL;
    PyObject *hash = PyTuple_GET_ITEM(res, 0);
    PyObject *fps = PyTuple_GET_ITEM(res, 1);
    Py_INCREF(hash);
    int memoise = PyTuple_Check(fps) && PyTuple_GET_SIZE(fps) == 0;
    Py_DECREF(res);
    if (memoise) {
        if (PyDict_GET_SIZE(memo) >= MEMO_MAX) PyDict_Clear(memo);
        if (PyDict_SetItem(memo, values, hash) < 0) {
            Py_DECREF(hash);
            return NULL;
        }
    }
    return hash;
}

/* ---------------------------------------------------------------------------------------- */
/* result_fingerprint                                                                          */

static PyObject *pair(PyObject *hex, int candidate)
{
    if (hex == NULL) return NULL;
    PyObject *fps = PyTuple_New(candidate ? 1 : 0);
    if (fps == NULL) {
        Py_DECREF(hex);
        return NULL;
    }
    if (candidate) {
        PyObject *head = PyUnicode_Substring(hex, 0, 2 * FP_SIZE);
        if (head == NULL) {
            Py_DECREF(hex);
            Py_DECREF(fps);
            return NULL;
        }
        PyTuple_SET_ITEM(fps, 0, head);
        untracked(fps);
    }
    PyObject *out = PyTuple_Pack(2, hex, fps);
    Py_DECREF(hex);
    Py_DECREF(fps);
    return out;
}

/* result_hash of the commonest results (None, booleans, small ints), hashed once: the hash is
 * most of what fingerprinting such a result costs. */
#define SMALL_LO (-256)
#define SMALL_HI 1024
static PyObject *small_hex[SMALL_HI - SMALL_LO + 1];
static PyObject *none_hex, *true_hex, *false_hex;

static PyObject *cached_hex(PyObject **slot, const uint8_t *enc, Py_ssize_t n)
{
    if (*slot == NULL) {
        uint8_t digest[DIGEST_SIZE];
        digest16(enc, (size_t)n, digest);
        *slot = hex_of(digest, DIGEST_SIZE);
        if (*slot == NULL) return NULL;
    }
    return Py_NewRef(*slot);
}

static PyObject *sp_result_fingerprint(PyObject *self, PyObject *value)
{
    if (!ready()) return NULL;
    uint8_t enc[16];
    uint8_t digest[DIGEST_SIZE];
    PyTypeObject *typ = Py_TYPE(value);
    if (value == Py_None) return pair(cached_hex(&none_hex, (const uint8_t *)"n", 1), 0);
    if (typ == &PyBool_Type) {
        if (value == Py_True) return pair(cached_hex(&true_hex, (const uint8_t *)"t", 1), 0);
        return pair(cached_hex(&false_hex, (const uint8_t *)"f", 1), 0);
    }
    if (typ == &PyLong_Type) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (!overflow && v >= SMALL_LO && v <= SMALL_HI) {
            Py_ssize_t n = enc_int(v, enc);
            return pair(cached_hex(&small_hex[v - SMALL_LO], enc, n), v >= MIN_FP_INT || v <= -MIN_FP_INT);
        }
        if (!overflow && v < INT_LIMIT && v > -INT_LIMIT) {
            Py_ssize_t n = enc_int(v, enc);
            digest16(enc, (size_t)n, digest);
            return pair(hex_of(digest, DIGEST_SIZE), v >= MIN_FP_INT || v <= -MIN_FP_INT);
        }
    }
    else if (typ == &PyUnicode_Type) {
        Py_ssize_t chars = str_chars(value);
        if (chars < 0) return NULL;
        if (chars <= MAX_BYTES) {
            const char *data;
            Py_ssize_t len;
            PyObject *owner;
            if (str_utf8(value, &data, &len, &owner) < 0) return NULL;
            tagged_digest('s', data, len, digest);
            Py_XDECREF(owner);
            return pair(hex_of(digest, DIGEST_SIZE), chars >= MIN_FP_STR);
        }
    }
    else if (typ == &PyBytes_Type) {
        Py_ssize_t len = PyBytes_GET_SIZE(value);
        if (len <= MAX_BYTES) {
            tagged_digest('y', PyBytes_AS_STRING(value), len, digest);
            return pair(hex_of(digest, DIGEST_SIZE), len >= MIN_FP_STR);
        }
    }
    return PyObject_CallOneArg(py_result_fingerprint, value);
}

/* The embedded BLAKE2b's first 16 bytes, for the tests (compared with hashlib). */
static PyObject *sp_digest(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint8_t digest[DIGEST_SIZE];
    digest16(view.buf, (size_t)view.len, digest);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)digest, DIGEST_SIZE);
}

/* send(coro, value) -> (finished, value): one step of a coroutine or generator without the
 * StopIteration that ``coro.send`` raises when it returns (an exception object, a traceback and
 * an unwinding per traced coroutine that finishes without suspending, the common case). */
static PyObject *sp_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "send(coro, value)");
        return NULL;
    }
    PyObject *result = NULL;
    PySendResult status = PyIter_Send(args[0], args[1], &result);
    if (status == PYGEN_ERROR) return NULL;
    PyObject *out = PyTuple_Pack(2, status == PYGEN_RETURN ? Py_True : Py_False, result);
    Py_DECREF(result);
    return out;
}

static PyMethodDef methods[] = {
    {"send", (PyCFunction)(void (*)(void))sp_send, METH_FASTCALL,
     "send(coro, value) -> (finished, value), without raising StopIteration"},
    {"install", sp_install, METH_VARARGS,
     "install(args_fingerprint, result_fingerprint, value_ref, collect_fps): the Python code "
     "for what is not handled here"},
    {"args_fingerprint", (PyCFunction)(void (*)(void))sp_args_fingerprint, METH_FASTCALL,
     "fingerprint.args_fingerprint, compiled"},
    {"small_args_hash", (PyCFunction)(void (*)(void))sp_small_args_hash, METH_FASTCALL,
     "fingerprint.small_args_hash, compiled"},
    {"result_fingerprint", sp_result_fingerprint, METH_O, "fingerprint.result_fingerprint, compiled"},
    {"digest", sp_digest, METH_O, "BLAKE2b-512 of a buffer, first 16 bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups", "Compiled fingerprints of builtin scalars.", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
