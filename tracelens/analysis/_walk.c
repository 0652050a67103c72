/* Compiled critical-path walk: the same algorithm as critical_path._walk, line for line.
 *
 * Why: the walk is a tight loop over every span (1M spans: about a second of Python), the
 * largest single cost of an analysis.  The arrays come from tree.build_forest (int64, C order);
 * the result is the flat section arrays critical_paths returns.  The Python walk stays the
 * reference (tests compare both on generated forests) and the fallback where this is not built.
 *
 * Iterative, with an explicit stack of frames, like the Python code; a frame whose children tie
 * at the window's end gets a reordered copy of its child list on a LIFO scratch arena.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t span, ws, we, cursor;
    const int64_t *lst; /* the children list: the CSR payload, or a copy on the arena */
    int64_t pos, stop;
    int64_t arena_mark; /* arena top before this frame's copy (restored when it pops) */
} Frame;

typedef struct {
    int64_t *data;
    int64_t len, cap;
} Vec;

static int vec_push(Vec *v, int64_t x) {
    if (v->len == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 1024;
        int64_t *d = realloc(v->data, (size_t)cap * sizeof(int64_t));
        if (!d) return -1;
        v->data = d;
        v->cap = cap;
    }
    v->data[v->len++] = x;
    return 0;
}

static int vec_reserve(Vec *v, int64_t extra) {
    if (v->len + extra <= v->cap) return 0;
    int64_t cap = v->cap ? v->cap : 1024;
    while (cap < v->len + extra) cap *= 2;
    int64_t *d = realloc(v->data, (size_t)cap * sizeof(int64_t));
    if (!d) return -1;
    v->data = d;
    v->cap = cap;
    return 0;
}

typedef struct {
    const int64_t *start, *end, *off, *kids, *row;
    int64_t n, nkids;
} Forest;

/* Sort key of tied children: (start, row). */
static _Thread_local const Forest *sort_forest; /* qsort has no context argument */
static int tie_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    int64_t sx = sort_forest->start[x], sy = sort_forest->start[y];
    if (sx != sy) return sx < sy ? -1 : 1;
    int64_t rx = sort_forest->row[x], ry = sort_forest->row[y];
    return (rx > ry) - (rx < ry);
}

/* Builds the frame for `span` with window [ws, we]; 0, or -1 when out of memory. */
static int new_frame(const Forest *f, Vec *arena, Frame *fr, int64_t span, int64_t ws, int64_t we) {
    int64_t a = f->off[span], b = f->off[span + 1];
    fr->span = span;
    fr->ws = ws;
    fr->we = we;
    fr->cursor = we;
    fr->arena_mark = arena->len;
    if (b - a > 1 && f->end[f->kids[a + 1]] >= we) {
        /* Several children reach past the (clamped) end and so tie there: the contract orders
         * ties by original start, then input order.  They lead the list (sorted by end). */
        if (vec_reserve(arena, b - a) < 0) return -1;
        int64_t *local = arena->data + arena->len;
        memcpy(local, f->kids + a, (size_t)(b - a) * sizeof(int64_t));
        int64_t tied = 0;
        for (int64_t i = 0; i < b - a; i++)
            if (f->end[local[i]] >= we) tied++;
        /* The Python code sorts the tied ones, which are a prefix here: the children are ordered
         * by end descending, so every tied child comes before every untied one. */
        sort_forest = f;
        qsort(local, (size_t)tied, sizeof(int64_t), tie_cmp);
        arena->len += b - a;
        fr->lst = NULL; /* resolved from the arena (it may move when it grows) */
        fr->pos = 0;
        fr->stop = b - a;
        return 0;
    }
    fr->lst = f->kids;
    fr->pos = a;
    fr->stop = b;
    return 0;
}

/* The parent's own section [from, to): it extends the newest section of this root (from `first`
 * on) when that is the same span's, else it is a new one.  0, or -1 when out of memory. */
static int own_section(Vec *o_span, Vec *o_start, Vec *o_end, int64_t first, int64_t span,
                       int64_t from, int64_t to) {
    int64_t last = o_span->len - 1;
    if (last >= first && o_span->data[last] == span) {
        o_start->data[last] = from;
        return 0;
    }
    if (vec_push(o_span, span) < 0 || vec_push(o_start, from) < 0 || vec_push(o_end, to) < 0)
        return -1;
    return 0;
}

/* One root: appends its sections (chronological) to the outputs. */
static int walk_root(const Forest *f, int64_t root, Vec *stack_v, Vec *arena, Vec *o_root,
                     Vec *o_span, Vec *o_start, Vec *o_end) {
    Frame *stack = (Frame *)stack_v->data;
    int64_t cap = stack_v->cap * (int64_t)sizeof(int64_t) / (int64_t)sizeof(Frame);
    int64_t depth = 0;
    int64_t first = o_span->len; /* this root's sections start here (newest first) */
    arena->len = 0;
    if (cap < 1) {
        if (vec_reserve(stack_v, (int64_t)(64 * sizeof(Frame) / sizeof(int64_t))) < 0) return -1;
        stack = (Frame *)stack_v->data;
        cap = stack_v->cap * (int64_t)sizeof(int64_t) / (int64_t)sizeof(Frame);
    }
    if (new_frame(f, arena, &stack[0], root, f->start[root], f->end[root]) < 0) return -1;
    depth = 1;
    while (depth > 0) {
        Frame *fr = &stack[depth - 1];
        int64_t span = fr->span, ws = fr->ws, we = fr->we, cursor = fr->cursor;
        const int64_t *lst = fr->lst ? fr->lst : arena->data + fr->arena_mark;
        int64_t pos = fr->pos, stop = fr->stop;
        int64_t chosen = -1, cs = 0, ce = 0;
        while (pos < stop) {
            int64_t c = lst[pos++];
            cs = f->start[c];
            if (cs >= we) continue; /* starts at or after the parent's end */
            ce = f->end[c];
            if (ce <= ws) continue; /* ends at or before the parent's start */
            if (ce > we) ce = we;
            if (ce > cursor) continue; /* overlaps the path already walked */
            chosen = c;
            break;
        }
        if (chosen < 0) {
            if (ws < cursor && own_section(o_span, o_start, o_end, first, span, ws, cursor) < 0)
                return -1;
            arena->len = fr->arena_mark;
            depth--;
            continue;
        }
        if (ce < cursor && own_section(o_span, o_start, o_end, first, span, ce, cursor) < 0)
            return -1;
        if (cs < ws) cs = ws;
        fr->cursor = cs;
        fr->pos = pos;
        if (f->off[chosen] == f->off[chosen + 1]) { /* a leaf: its window is its section */
            if (cs < ce) {
                if (vec_push(o_span, chosen) < 0 || vec_push(o_start, cs) < 0 ||
                    vec_push(o_end, ce) < 0)
                    return -1;
            }
            continue;
        }
        if (depth == cap) {
            stack_v->len = stack_v->cap; /* (the frames fill it) */
            int grown = vec_reserve(stack_v, stack_v->cap); /* doubles */
            stack_v->len = 0;
            if (grown < 0) return -1;
            stack = (Frame *)stack_v->data;
            cap = stack_v->cap * (int64_t)sizeof(int64_t) / (int64_t)sizeof(Frame);
        }
        if (new_frame(f, arena, &stack[depth], chosen, cs, ce) < 0) return -1;
        depth++;
    }
    /* Newest first -> chronological. */
    for (int64_t i = first, j = o_span->len - 1; i < j; i++, j--) {
        int64_t t;
        t = o_span->data[i]; o_span->data[i] = o_span->data[j]; o_span->data[j] = t;
        t = o_start->data[i]; o_start->data[i] = o_start->data[j]; o_start->data[j] = t;
        t = o_end->data[i]; o_end->data[i] = o_end->data[j]; o_end->data[j] = t;
    }
    for (int64_t i = first; i < o_span->len; i++)
        if (vec_push(o_root, root) < 0) return -1;
    return 0;
}

static int get_buffer(PyObject *obj, Py_buffer *view, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != 8 || view->ndim != 1 || !view->format ||
        (strcmp(view->format, "l") != 0 && strcmp(view->format, "q") != 0 &&
         strcmp(view->format, "<q") != 0 && strcmp(view->format, "<l") != 0 &&
         strcmp(view->format, "=q") != 0 && strcmp(view->format, "=l") != 0)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be a 1-d int64 array", name);
        return -1;
    }
    return 0;
}

static PyObject *to_bytes(Vec *v) { /* a bytearray: NumPy views of it are writable */
    return PyByteArray_FromStringAndSize((const char *)v->data, (Py_ssize_t)(v->len * 8));
}

/* walk(start, end, child_off, children, row, roots) -> (root, span, start, end) as bytearrays
 * of int64.  Ids are checked against the array bounds first, so bad input raises, never crashes. */
static PyObject *walk(PyObject *self, PyObject *args) {
    PyObject *objs[6];
    const char *names[6] = {"start", "end", "child_off", "children", "row", "roots"};
    if (!PyArg_ParseTuple(args, "OOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5]))
        return NULL;
    Py_buffer views[6];
    int got = 0;
    PyObject *result = NULL;
    Vec stack = {0}, arena = {0}, o_root = {0}, o_span = {0}, o_start = {0}, o_end = {0};
    for (; got < 6; got++)
        if (get_buffer(objs[got], &views[got], names[got]) < 0) goto done;
    Forest f;
    f.n = views[0].len / 8;
    f.start = views[0].buf;
    f.end = views[1].buf;
    f.off = views[2].buf;
    f.kids = views[3].buf;
    f.row = views[4].buf;
    f.nkids = views[3].len / 8;
    const int64_t *roots = views[5].buf;
    int64_t nroots = views[5].len / 8;
    if (views[1].len / 8 != f.n || views[4].len / 8 != f.n || views[2].len / 8 != f.n + 1) {
        PyErr_SetString(PyExc_ValueError, "start, end, row need n entries and child_off n + 1");
        goto done;
    }
    if (f.off[0] != 0 || f.off[f.n] != f.nkids) {
        PyErr_SetString(PyExc_ValueError, "child_off does not span children");
        goto done;
    }
    for (int64_t i = 0; i < f.n; i++)
        if (f.off[i] > f.off[i + 1]) {
            PyErr_SetString(PyExc_ValueError, "child_off is not ascending");
            goto done;
        }
    for (int64_t i = 0; i < f.nkids; i++)
        if (f.kids[i] < 0 || f.kids[i] >= f.n) {
            PyErr_SetString(PyExc_ValueError, "a child row is out of range");
            goto done;
        }
    for (int64_t i = 0; i < nroots; i++)
        if (roots[i] < 0 || roots[i] >= f.n) {
            PyErr_SetString(PyExc_ValueError, "a root row is out of range");
            goto done;
        }
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < nroots && !failed; i++)
        if (walk_root(&f, roots[i], &stack, &arena, &o_root, &o_span, &o_start, &o_end) < 0)
            failed = 1;
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("(NNNN)", to_bytes(&o_root), to_bytes(&o_span), to_bytes(&o_start),
                           to_bytes(&o_end));
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    free(stack.data);
    free(arena.data);
    free(o_root.data);
    free(o_span.data);
    free(o_start.data);
    free(o_end.data);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Critical-path sections of every root (see critical_path.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_walk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__walk(void) { return PyModule_Create(&module); }
