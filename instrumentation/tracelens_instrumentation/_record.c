/* The per-span clocks of measure.py (``Record``), compiled.
 *
 * Why: every traced call runs ``step_begin``, ``step_end`` and ``finish``; as Python they are
 * about as costly as the rest of the decorator together (dozens of attribute reads and writes
 * on a cold instruction cache, between the SDK's own work).  This is a line-for-line
 * translation of ``measure.PyRecord``, which stays the reference and the fallback: same fields,
 * same methods, same results (tests/test_record_native.py runs both).  Linux only (the kernel
 * thread id and the per-thread CPU clock of another thread are read the Linux way).
 *
 * Python integers are unbounded, these fields are 64-bit: nanosecond clocks fit for centuries,
 * and the products in ``finish`` are taken in 128 bits with Python's floor division.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REUSE_NS 20000LL /* measure.REUSE_NS */

typedef struct {
    PyObject_HEAD
    PyObject *thread; /* the ident passed to step_begin (NULL: 0) */
    unsigned long long thread_v;
    long long native, cpu, step_w, step_c, step_no, last_w, last_c, open, cov_w, cov_c,
        mark_w, mark_c, io, wait, plain, gil, run, sw_io, sw_wait, susp_t, susp_cov, samp_w, samp_c,
        samp_step, t0;
    char in_step, suspended, ended, measured;
    PyObject *susp_kind;
    PyObject *prof; /* CPU stacks the sampler saw (stacks.record), NULL: none */
} Record;

/* Set by install(): measure.stacks, measure._parked, measure._wake and the kind strings. */
static PyObject *stacks, *parked, *wake, *s_cpu, *s_io, *s_wait, *s_plain;

/* The latest real CPU clock reading of any thread (measure._recent). */
static struct {
    unsigned long long thread;
    long long wall, cpu;
} recent;
static __thread long cached_tid;

static void after_fork_child(void)
{
    cached_tid = 0;
    recent.thread = 0;
    recent.wall = recent.cpu = 0;
}

static inline long long clock_ns(clockid_t id, int *ok)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) {
        *ok = 0;
        return 0;
    }
    *ok = 1;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline long long perf_ns(void)
{
    int ok;
    return clock_ns(CLOCK_MONOTONIC, &ok); /* time.perf_counter_ns on Linux */
}

static inline long long thread_cpu_ns(void)
{
    int ok;
    return clock_ns(CLOCK_THREAD_CPUTIME_ID, &ok);
}

static inline long native_tid(void)
{
    if (!cached_tid) cached_tid = (long)syscall(SYS_gettid);
    return cached_tid;
}

/* This thread's CPU clock at wall time ``now``: a real reading younger than REUSE_NS is reused,
 * as it is at the start of a step (``carry`` 0) and carried forward by the wall time since at its
 * end (``carry`` 1); see measure.Record.step_begin.  Otherwise the clock is read, and kept: only
 * real readings are kept, so estimates never compound. */
static inline long long cpu_reading(unsigned long long thread, long long now, int carry)
{
    if (recent.thread == thread && now - recent.wall < REUSE_NS)
        return recent.cpu + (carry ? now - recent.wall : 0);
    long long c = thread_cpu_ns();
    recent.thread = thread;
    recent.wall = now;
    recent.cpu = c;
    return c;
}

/* measure.other_thread_cpu: ok = 0 where it gives None. */
static long long other_thread_cpu(long long tid, int *ok)
{
    if (tid <= 0) {
        *ok = 0;
        return 0;
    }
    return clock_ns((clockid_t)(((~tid) << 3) | 6), ok);
}

/* Python's a // b for 128-bit a. */
static inline long long floordiv(__int128 a, long long b)
{
    __int128 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return (long long)q;
}

static int read_ll(PyObject *obj, long long *out)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* The fastcall convention's argument count: -1 with a TypeError spelling the call otherwise. */
static int want_args(Py_ssize_t nargs, Py_ssize_t n, const char *usage)
{
    if (nargs == n) return 0;
    PyErr_SetString(PyExc_TypeError, usage);
    return -1;
}

static int read_thread(PyObject *obj, unsigned long long *out)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* cpu_now with the thread already converted; ok = 0 only on a Python error. */
static long long cpu_now(Record *self, unsigned long long thread, PyObject *reading, int *ok)
{
    *ok = 1;
    if (!self->in_step) return self->cpu;
    long long now;
    if (thread == self->thread_v) {
        if (reading != NULL && reading != Py_None) {
            if (read_ll(reading, &now) < 0) {
                *ok = 0;
                return 0;
            }
        }
        else {
            now = thread_cpu_ns();
        }
    }
    else {
        int got;
        now = other_thread_cpu(self->native, &got);
        if (!got) return self->cpu;
    }
    return self->cpu + now - self->step_c;
}

static PyObject *rec_cpu_now(Record *self, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned long long thread;
    int ok;
    if (want_args(nargs, 2, "cpu_now(thread, reading)") < 0 || read_thread(args[0], &thread) < 0)
        return NULL;
    long long v = cpu_now(self, thread, args[1], &ok);
    return ok ? PyLong_FromLongLong(v) : NULL;
}

static inline long long covered_at(Record *self, long long now)
{
    return self->cov_w + (self->open ? now - self->mark_w : 0);
}

static PyObject *rec_covered_at(Record *self, PyObject *arg)
{
    long long now;
    if (read_ll(arg, &now) < 0) return NULL;
    return PyLong_FromLongLong(covered_at(self, now));
}

static int child_args(PyObject *const *args, Py_ssize_t nargs, const char *what, long long *now,
                      unsigned long long *thread)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s(now, thread, reading)", what);
        return -1;
    }
    if (read_ll(args[0], now) < 0) return -1;
    return read_thread(args[1], thread);
}

static PyObject *rec_child_open(Record *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long now;
    unsigned long long thread;
    if (child_args(args, nargs, "child_open", &now, &thread) < 0) return NULL;
    if (self->ended) Py_RETURN_NONE;
    if (!self->open) {
        int ok;
        long long c = cpu_now(self, thread, args[2], &ok);
        if (!ok) return NULL;
        self->mark_w = now;
        self->mark_c = c;
    }
    self->open += 1;
    Py_RETURN_NONE;
}

static PyObject *rec_child_close(Record *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long now;
    unsigned long long thread;
    if (child_args(args, nargs, "child_close", &now, &thread) < 0) return NULL;
    if (self->ended || !self->open) Py_RETURN_NONE;
    self->open -= 1;
    if (!self->open) {
        int ok;
        long long c = cpu_now(self, thread, args[2], &ok);
        if (!ok) {
            self->open += 1;
            return NULL;
        }
        self->cov_w += now - self->mark_w;
        long long d = c - self->mark_c;
        self->cov_c += d > 0 ? d : 0;
    }
    Py_RETURN_NONE;
}

static PyObject *rec_step_begin(Record *self, PyObject *thread_obj)
{
    unsigned long long thread;
    if (stacks == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_record.install() was not called");
        return NULL;
    }
    if (read_thread(thread_obj, &thread) < 0) return NULL;
    if (self->measured && PyList_GET_ITEM(parked, 0) != Py_False) {
        int is_parked = PyObject_IsTrue(PyList_GET_ITEM(parked, 0));
        if (is_parked < 0) return NULL;
        if (is_parked) {
            PyObject *fn = PyList_GET_ITEM(wake, 0);
            Py_INCREF(fn);
            PyObject *r = PyObject_CallNoArgs(fn);
            Py_DECREF(fn);
            if (r == NULL) return NULL;
            Py_DECREF(r);
        }
    }
    Py_INCREF(thread_obj);
    Py_XSETREF(self->thread, thread_obj);
    self->thread_v = thread;
    self->native = native_tid();
    long long step_no = self->step_no = self->step_no + 1;
    long long now = self->step_w = perf_ns();
    self->step_c = cpu_reading(thread, now, 0);
    if (step_no == 1) self->t0 = now;
    self->in_step = 1;
    if (self->measured) {
        PyObject *stack = PyDict_GetItemWithError(stacks, thread_obj);
        if (stack == NULL) {
            if (PyErr_Occurred()) return NULL;
            stack = PyList_New(0);
            if (stack == NULL) return NULL;
            int bad = PyDict_SetItem(stacks, thread_obj, stack);
            Py_DECREF(stack); /* the dict holds it */
            if (bad < 0) return NULL;
        }
        if (PyList_Append(stack, (PyObject *)self) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *rec_step_end(Record *self, PyObject *unused)
{
    long long now = self->last_w = perf_ns();
    long long c = self->last_c = cpu_reading(self->thread_v, now, 1);
    long long used = c - self->step_c;
    if (used > now - self->step_w) used = now - self->step_w; /* no more than the wall time */
    if (used > 0) self->cpu += used;
    self->in_step = 0;
    if (self->measured && stacks != NULL) {
        PyObject *key = self->thread;
        PyObject *zero = NULL;
        if (key == NULL) key = zero = PyLong_FromLong(0);
        if (key == NULL) return NULL;
        PyObject *stack = PyDict_GetItemWithError(stacks, key);
        Py_XDECREF(zero);
        if (stack == NULL) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        if (!PyList_Check(stack)) Py_RETURN_NONE;
        Py_ssize_t n = PyList_GET_SIZE(stack);
        /* (an emptied list stays: a thread's next call reuses it) */
        for (Py_ssize_t i = n - 1; i >= 0; i--) {
            if (PyList_GET_ITEM(stack, i) == (PyObject *)self) {
                if (PyList_SetSlice(stack, i, i + 1, NULL) < 0) return NULL;
                break;
            }
        }
    }
    Py_RETURN_NONE;
}

static int is_kind(PyObject *kind, PyObject *name)
{
    if (kind == name) return 1;
    return PyObject_RichCompareBool(kind, name, Py_EQ);
}

static PyObject *rec_suspend(Record *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long now;
    if (want_args(nargs, 2, "suspend(now, kind)") < 0 || read_ll(args[0], &now) < 0) return NULL;
    self->susp_t = now;
    Py_INCREF(args[1]);
    Py_XSETREF(self->susp_kind, args[1]);
    self->susp_cov = covered_at(self, now);
    self->suspended = 1;
    Py_RETURN_NONE;
}

static PyObject *rec_resume(Record *self, PyObject *arg)
{
    long long now;
    if (read_ll(arg, &now) < 0) return NULL;
    if (!self->suspended) Py_RETURN_NONE;
    self->suspended = 0;
    PyObject *kind = self->susp_kind;
    if (kind == NULL || kind == Py_None) Py_RETURN_NONE;
    long long own = (now - self->susp_t) - (covered_at(self, now) - self->susp_cov);
    if (own > 0) {
        int io = is_kind(kind, s_io);
        if (io < 0) return NULL;
        if (io)
            self->sw_io += own;
        else
            self->sw_wait += own;
    }
    Py_RETURN_NONE;
}

static PyObject *rec_evidence(Record *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long amount;
    if (want_args(nargs, 2, "evidence(kind, amount)") < 0 || read_ll(args[1], &amount) < 0)
        return NULL;
    PyObject *kind = args[0];
    int hit;
    if ((hit = is_kind(kind, s_io)) != 0) {
        if (hit < 0) return NULL;
        self->io += amount;
    }
    else if ((hit = is_kind(kind, s_wait)) != 0) {
        if (hit < 0) return NULL;
        self->wait += amount;
    }
    else if ((hit = is_kind(kind, s_plain)) != 0) {
        if (hit < 0) return NULL;
        self->plain += amount;
    }
    else if ((hit = is_kind(kind, s_cpu)) != 0) {
        if (hit < 0) return NULL;
        self->gil += amount;
    }
    else {
        self->run += amount;
    }
    Py_RETURN_NONE;
}

/* measure._split_in_step */
static void split_in_step(long long off, long long on_cpu, long long io, long long wait,
                          long long plain, long long gil, long long run, long long out[3])
{
    long long seen = io + wait + plain;
    if (seen <= 0 || off <= 0) {
        out[0] = out[1] = 0;
        out[2] = off > 0 ? off : 0;
        return;
    }
    if (run > seen) run = seen;
    long long kept = seen - run;
    long long plain_kept = floordiv((__int128)plain * kept, seen);
    long long gil_kept = plain_kept < gil ? plain_kept : gil;
    long long preempted = floordiv((__int128)off * run, seen);
    long long rest = off - preempted;
    long long rest_io = floordiv((__int128)rest * io, seen);
    long long rest_cpu = kept > 0 ? floordiv((__int128)rest * gil_kept, kept) : 0;
    long long rest_wait = rest - rest_io - rest_cpu;
    long long weight = on_cpu + rest_cpu + rest_io + rest_wait;
    if (weight <= 0) {
        out[0] = preempted + rest_cpu;
        out[1] = rest_io;
        out[2] = rest_wait;
        return;
    }
    long long run_io = floordiv((__int128)preempted * rest_io, weight);
    long long run_wait = floordiv((__int128)preempted * rest_wait, weight);
    long long run_cpu = preempted - run_io - run_wait;
    out[0] = rest_cpu + run_cpu;
    out[1] = rest_io + run_io;
    out[2] = rest_wait + run_wait;
}

static PyObject *result(PyObject *kind, long long cpu, long long io, long long wait)
{
    if (kind == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_record.install() was not called");
        return NULL;
    }
    PyObject *out = PyTuple_New(4);
    if (out == NULL) return NULL;
    Py_INCREF(kind);
    PyTuple_SET_ITEM(out, 0, kind);
    PyObject *a = PyLong_FromLongLong(cpu), *b = PyLong_FromLongLong(io),
             *c = PyLong_FromLongLong(wait);
    if (a == NULL || b == NULL || c == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        Py_DECREF(out);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 1, a);
    PyTuple_SET_ITEM(out, 2, b);
    PyTuple_SET_ITEM(out, 3, c);
    return out;
}

static PyObject *rec_finish(Record *self, PyObject *arg)
{
    long long now;
    if (read_ll(arg, &now) < 0) return NULL;
    if (self->open) {
        self->cov_w += now - self->mark_w;
        long long d = self->cpu - self->mark_c;
        self->cov_c += d > 0 ? d : 0;
        self->open = 0;
    }
    self->ended = 1;
    long long self_wall = now - self->t0 - self->cov_w;
    if (self_wall < 0) self_wall = 0;
    long long self_cpu = self->cpu - self->cov_c;
    if (self_cpu < 0)
        self_cpu = 0;
    else if (self_cpu > self_wall)
        self_cpu = self_wall;
    long long off = self_wall - self_cpu;
    if (!(self->sw_io || self->sw_wait || self->io || self->wait || self->plain))
        return result(self_cpu >= off ? s_cpu : s_wait, self->cpu, 0, off);
    long long suspended = self->sw_io + self->sw_wait, sus_io, sus_wait;
    if (suspended > off) {
        sus_io = floordiv((__int128)off * self->sw_io, suspended);
        sus_wait = off - sus_io;
    }
    else {
        sus_io = self->sw_io;
        sus_wait = self->sw_wait;
    }
    long long in[3];
    split_in_step(off - sus_io - sus_wait, self_cpu, self->io, self->wait, self->plain,
                  self->gil, self->run, in);
    long long io = sus_io + in[1], wait = sus_wait + in[2], cpu_side = self_cpu + in[0];
    PyObject *kind;
    if (cpu_side >= io && cpu_side >= wait)
        kind = s_cpu;
    else
        kind = io >= wait ? s_io : s_wait;
    return result(kind, self->cpu, io, wait);
}

static int rec_init(Record *self, PyObject *args, PyObject *kwds)
{
    PyObject *measured;
    static char *names[] = {"measured", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Record", names, &measured)) return -1;
    int m = PyObject_IsTrue(measured);
    if (m < 0) return -1;
    self->measured = (char)m;
    self->t0 = perf_ns();
    return 0;
}

static void rec_dealloc(Record *self)
{
    Py_CLEAR(self->thread);
    Py_CLEAR(self->susp_kind);
    Py_CLEAR(self->prof);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *get_thread(Record *self, void *closure)
{
    if (self->thread == NULL) return PyLong_FromLong(0);
    return Py_NewRef(self->thread);
}

static int set_thread(Record *self, PyObject *value, void *closure)
{
    unsigned long long v;
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "thread cannot be deleted");
        return -1;
    }
    if (read_thread(value, &v) < 0) return -1;
    Py_INCREF(value);
    Py_XSETREF(self->thread, value);
    self->thread_v = v;
    return 0;
}

static PyGetSetDef getset[] = {
    {"thread", (getter)get_thread, (setter)set_thread, "the thread ident of the latest step"},
    {NULL},
};

#define LL(name) {#name, T_LONGLONG, offsetof(Record, name), 0, NULL}
#define FLAG(name) {#name, T_BOOL, offsetof(Record, name), 0, NULL}
static PyMemberDef members[] = {
    LL(native), LL(cpu), LL(step_w), LL(step_c), LL(step_no), LL(last_w), LL(last_c), LL(open),
    LL(cov_w), LL(cov_c), LL(mark_w), LL(mark_c), LL(io), LL(wait), LL(plain), LL(gil), LL(run),
    LL(sw_io), LL(sw_wait), LL(susp_t), LL(susp_cov), LL(samp_w), LL(samp_c), LL(samp_step),
    LL(t0), FLAG(in_step), FLAG(suspended), FLAG(ended), FLAG(measured),
    {"susp_kind", T_OBJECT, offsetof(Record, susp_kind), 0, NULL},
    {"prof", T_OBJECT, offsetof(Record, prof), 0, NULL},
    {NULL},
};

#define FAST(name, doc) {#name, (PyCFunction)(void (*)(void))rec_##name, METH_FASTCALL, doc}
static PyMethodDef rec_methods[] = {
    FAST(cpu_now, "This span's CPU so far, read from any thread."),
    {"covered_at", (PyCFunction)rec_covered_at, METH_O, NULL},
    FAST(child_open, NULL),
    FAST(child_close, NULL),
    {"step_begin", (PyCFunction)rec_step_begin, METH_O, NULL},
    {"step_end", (PyCFunction)rec_step_end, METH_NOARGS, NULL},
    FAST(suspend, NULL),
    {"resume", (PyCFunction)rec_resume, METH_O, NULL},
    FAST(evidence, NULL),
    {"finish", (PyCFunction)rec_finish, METH_O, "(kind, cpu_ns, io_ns, wait_ns)"},
    {NULL},
};

static PyTypeObject RecordType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracelens_instrumentation._record.Record",
    .tp_doc = "measure.PyRecord, compiled",
    .tp_basicsize = sizeof(Record),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)rec_init,
    .tp_dealloc = (destructor)rec_dealloc,
    .tp_members = members,
    .tp_getset = getset,
    .tp_methods = rec_methods,
};

static PyObject *mod_install(PyObject *self, PyObject *args)
{
    PyObject *st, *pk, *wk, *c, *io, *w, *pl;
    if (!PyArg_ParseTuple(args, "O!O!O!UUUU:install", &PyDict_Type, &st, &PyList_Type, &pk,
                          &PyList_Type, &wk, &c, &io, &w, &pl))
        return NULL;
    if (PyList_GET_SIZE(pk) != 1 || PyList_GET_SIZE(wk) != 1) {
        PyErr_SetString(PyExc_ValueError, "parked and wake are one-item lists");
        return NULL;
    }
    Py_INCREF(st);
    Py_XSETREF(stacks, st);
    Py_INCREF(pk);
    Py_XSETREF(parked, pk);
    Py_INCREF(wk);
    Py_XSETREF(wake, wk);
    Py_INCREF(c);
    Py_XSETREF(s_cpu, c);
    Py_INCREF(io);
    Py_XSETREF(s_io, io);
    Py_INCREF(w);
    Py_XSETREF(s_wait, w);
    Py_INCREF(pl);
    Py_XSETREF(s_plain, pl);
    Py_RETURN_NONE;
}

static PyObject *mod_perf(PyObject *self, PyObject *unused) { return PyLong_FromLongLong(perf_ns()); }

static PyMethodDef methods[] = {
    {"install", mod_install, METH_VARARGS,
     "install(stacks, parked, wake, cpu, io, wait, plain): measure's shared state and kind names"},
    {"perf", mod_perf, METH_NOARGS, "the clock step_begin/step_end read (time.perf_counter_ns)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_record", "measure.Record, compiled.", -1, methods,
};

PyMODINIT_FUNC PyInit__record(void)
{
    if (PyType_Ready(&RecordType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&RecordType);
    if (PyModule_AddObject(m, "Record", (PyObject *)&RecordType) < 0) {
        Py_DECREF(&RecordType);
        Py_DECREF(m);
        return NULL;
    }
    pthread_atfork(NULL, NULL, after_fork_child);
    return m;
}
