/* CPU stack samples taken by each traced thread's own CPU clock (see sampler.py, "timer").
 *
 * Why: a sampler thread can only read another thread's Python stack where that thread yields
 * the GIL, so the instants it sees depend on the code (a long C call holding the GIL, a tight
 * loop, a generator yield all yield it at different rates), and the flame graph is biased
 * (tests/test_cpu_samples_truth.py).  Here each traced thread gets a clock of its own CPU time
 * that raises SIGPROF on it: its perf task clock where the kernel allows it (``open_perf``),
 * else a POSIX timer on its CPU clock (timer_create on the thread's CPUCLOCK, SIGEV_THREAD_ID).
 * It is interrupted after every period of CPU it uses (random around the interval asked for,
 * ``next_period``), wherever it is, and the signal handler, on that thread, copies
 * the chain of its current Python frames (code object and frame addresses, innermost first)
 * into a ring of preallocated samples.  The sampler thread drains the rings under the GIL
 * (``drain``), turns the addresses into code objects (checked, see ``code_at``) and charges
 * each sample to its span.
 *
 * The handler's rules: no allocation, no lock, no Python API but reading the thread's own
 * frames; errno saved.  It reads only memory it knows is mapped: a frame inside one of the
 * thread's live frame-stack chunks, any other frame (a generator's or coroutine's, or one being
 * popped while its chunk was just freed) through process_vm_readv, which fails instead of
 * faulting.  CPython 3.11 only (the frame layout is internal): elsewhere ``supported()`` is
 * False and the sampler keeps its GIL-switch stacks.  Linux only (per-thread CPU timers).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__linux__) && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define TL_SUPPORTED 1
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_SLOTS 64 /* threads sampled at once; more fall back to the GIL-switch stacks */
#define RING 64      /* samples a thread keeps until the sampler thread drains them */
#define MAX_DEPTH 128 /* frames copied per sample (innermost first) */
#define MAX_CHUNKS 16
#define SIG SIGPROF
#define MAGIC 0x71000000
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

typedef struct {
    long long cpu; /* the thread's CPU clock at the sample */
    int depth;
    int truncated;
    void *instr; /* the innermost frame's prev_instr (its call site) */
    void *code[MAX_DEPTH];
    void *frame[MAX_DEPTH];
} sample_t;

typedef struct {
    volatile long tid; /* kernel thread id; 0: free */
    timer_t timer;
    int has_timer;
    int running;
    volatile int fd; /* the perf event counting the thread's task clock, or -1 */
    unsigned long long interval, rng;
    long long prev_cpu; /* CPU clock at the previous drained sample (or at arming) */
    volatile unsigned long head; /* written by the handler only */
    volatile unsigned long tail; /* written by drain only */
    volatile unsigned long dropped;
    sample_t *ring; /* allocated at first arming, never freed (a late signal may write) */
} slot_t;

static slot_t slots[MAX_SLOTS];
static int installed;
static pid_t self_pid;
static unsigned long n_samples, n_unreadable;

static int readable(const void *addr, void *out, size_t size)
{
    struct iovec local = {out, size};
    struct iovec remote = {(void *)addr, size};
    return process_vm_readv(self_pid, &local, 1, &remote, 1, 0) == (ssize_t)size;
}

/* The next period of a perf-event slot: uniform in [interval/2, 3*interval/2), so that the
 * instants cannot lock on to a periodic workload (xorshift: no lock, no libc state). */
static unsigned long long next_period(slot_t *slot)
{
    unsigned long long x = slot->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    slot->rng = x;
    return slot->interval / 2 + x % (slot->interval ? slot->interval : 1);
}

static void handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    int saved = errno;
    if (si == NULL)
        goto out;
    slot_t *slot = NULL;
    if (si->si_code == SI_TIMER) {
        int idx = si->si_value.sival_int - MAGIC;
        if (idx < 0 || idx >= MAX_SLOTS)
            goto out;
        slot = &slots[idx];
    } else if (si->si_code == POLL_HUP || si->si_code == POLL_IN) {
        for (int i = 0; i < MAX_SLOTS && slot == NULL; i++)
            if (slots[i].fd >= 0 && slots[i].fd == si->si_fd && slots[i].tid != 0)
                slot = &slots[i];
        if (slot == NULL)
            goto out;
    } else {
        goto out;
    }
    long tid = (long)syscall(SYS_gettid);
    if (slot->tid != tid || slot->ring == NULL)
        goto out;
    /* the next sample after a randomised period */
    unsigned long long period = next_period(slot);
    int fd = slot->fd;
    if (si->si_code != SI_TIMER && fd >= 0) {
        ioctl(fd, PERF_EVENT_IOC_PERIOD, &period);
    } else if (si->si_code == SI_TIMER && slot->has_timer && slot->running) {
        struct itimerspec its;
        memset(&its, 0, sizeof its);
        its.it_value.tv_sec = (time_t)(period / 1000000000ULL);
        its.it_value.tv_nsec = (long)(period % 1000000000ULL);
        timer_settime(slot->timer, 0, &its, NULL);
    }
    /* this thread's own state, NULL once it is being deleted (cleared before it is freed) */
    PyThreadState *ts = PyGILState_GetThisThreadState();
    if (ts == NULL)
        goto out;
    unsigned long head = slot->head;
    unsigned long tail = __atomic_load_n(&slot->tail, __ATOMIC_ACQUIRE);
    if (head - tail >= RING) {
        slot->dropped++;
        goto out;
    }
    sample_t *s = &slot->ring[head % RING];
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
        goto out;
    s->cpu = (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
    /* the live chunks of the frame stack: frames inside them are mapped */
    const char *lo[MAX_CHUNKS], *hi[MAX_CHUNKS];
    int nchunks = 0;
    for (_PyStackChunk *c = ts->datastack_chunk; c != NULL && nchunks < MAX_CHUNKS;
         c = c->previous) {
        lo[nchunks] = (const char *)c;
        hi[nchunks] = (const char *)c + c->size;
        nchunks++;
    }
    _PyCFrame *cf = ts->cframe;
    _PyInterpreterFrame *f = cf != NULL ? cf->current_frame : NULL;
    int n = 0;
    s->instr = NULL;
    while (f != NULL && n < MAX_DEPTH) {
        _PyInterpreterFrame copy;
        const _PyInterpreterFrame *view = NULL;
        for (int i = 0; i < nchunks; i++) {
            if ((const char *)f >= lo[i] &&
                (const char *)f + sizeof(_PyInterpreterFrame) <= hi[i]) {
                view = f;
                break;
            }
        }
        if (view == NULL) {
            if (!readable(f, &copy, sizeof copy)) {
                __atomic_fetch_add(&n_unreadable, 1, __ATOMIC_RELAXED);
                break;
            }
            view = &copy;
        }
        if (n == 0)
            s->instr = (void *)view->prev_instr;
        s->code[n] = (void *)view->f_code;
        s->frame[n] = (void *)f;
        n++;
        f = view->previous;
    }
    s->depth = n;
    s->truncated = f != NULL;
    __atomic_fetch_add(&n_samples, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->head, head + 1, __ATOMIC_RELEASE);
out:
    errno = saved;
}

static int is_ours(void)
{
    struct sigaction cur;
    if (sigaction(SIG, NULL, &cur) != 0)
        return 0;
    return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == handler;
}

/* install(): takes SIGPROF when nobody else handles it; False (and nothing changed) when
 * another profiler owns it. */
static PyObject *mod_install(PyObject *self, PyObject *unused)
{
    if (installed && is_ours())
        Py_RETURN_TRUE;
    struct sigaction cur;
    if (sigaction(SIG, NULL, &cur) != 0)
        Py_RETURN_FALSE;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN)
        Py_RETURN_FALSE;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction != handler)
        Py_RETURN_FALSE;
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = handler;
    act.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (sigaction(SIG, &act, NULL) != 0)
        Py_RETURN_FALSE;
    self_pid = getpid();
    installed = 1;
    Py_RETURN_TRUE;
}

/* owned(): whether the handler is still ours (another library may have replaced it). */
static PyObject *mod_owned(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(installed && is_ours());
}

/* Where the kernel allows it (perf_event_paranoid <= 2, no seccomp filter against it), the
 * thread's task clock as a perf event: it overflows at the exact CPU instant (an hrtimer),
 * where a POSIX CPU timer fires only at the scheduler's tick (250 Hz here), whose instants can
 * lock on to a periodic workload.  The overflow raises SIGPROF on that thread (F_SETOWN_EX). */
static int use_perf = 1;

static int open_perf(slot_t *slot, long tid)
{
    struct perf_event_attr pe;
    memset(&pe, 0, sizeof pe);
    pe.type = PERF_TYPE_SOFTWARE;
    pe.size = sizeof pe;
    pe.config = PERF_COUNT_SW_TASK_CLOCK;
    pe.sample_period = slot->interval;
    pe.disabled = 1;
    /* Counted in system calls too: a sample that falls in the kernel is delivered when the
     * call returns, in the Python code that made it.  With exclude_kernel (all an unprivileged
     * process gets at perf_event_paranoid 2) such samples are skipped and their CPU lands on a
     * later stack: then the POSIX timer, which has no such gap, is the better clock. */
    pe.exclude_kernel = 0;
    int fd = (int)syscall(SYS_perf_event_open, &pe, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return 0;
    struct f_owner_ex owner = {F_OWNER_TID, (pid_t)tid};
    if (fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0 || fcntl(fd, F_SETSIG, SIG) != 0 ||
        fcntl(fd, F_SETOWN_EX, &owner) != 0) {
        close(fd);
        return 0;
    }
    slot->fd = fd;
    return 1;
}

static void close_perf(slot_t *slot)
{
    int fd = slot->fd;
    if (fd >= 0) {
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        slot->fd = -1;
        close(fd);
    }
}

static clockid_t thread_clock(long tid) { return (clockid_t)(((~(clockid_t)tid) << 3) | 6); }

static long long clock_of(long tid, int *ok)
{
    struct timespec t;
    if (clock_gettime(thread_clock(tid), &t) != 0) {
        *ok = 0;
        return 0;
    }
    *ok = 1;
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static slot_t *find(long tid)
{
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].tid == tid)
            return &slots[i];
    return NULL;
}

static int set_timer(slot_t *slot, long long interval)
{
    struct itimerspec its;
    its.it_interval.tv_sec = interval / 1000000000LL;
    its.it_interval.tv_nsec = interval % 1000000000LL;
    its.it_value = its.it_interval;
    return timer_settime(slot->timer, 0, &its, NULL);
}

/* arm(tid, interval_ns): samples kernel thread ``tid`` every ``interval_ns`` of its CPU time.
 * False when it cannot (no free slot, the thread is gone, not installed). */
static PyObject *mod_arm(PyObject *self, PyObject *args)
{
    long tid;
    long long interval;
    if (!PyArg_ParseTuple(args, "lL", &tid, &interval))
        return NULL;
    if (!installed || tid <= 0 || interval <= 0)
        Py_RETURN_FALSE;
    slot_t *slot = find(tid);
    int ok;
    if (slot != NULL && slot->running)
        Py_RETURN_TRUE;
    if (slot == NULL) {
        slot = find(0);
        if (slot == NULL)
            Py_RETURN_FALSE;
        if (slot->ring == NULL) {
            slot->ring = PyMem_RawCalloc(RING, sizeof(sample_t));
            if (slot->ring == NULL)
                Py_RETURN_FALSE;
        }
        slot->interval = (unsigned long long)interval;
        slot->rng = ((unsigned long long)tid * 0x9E3779B97F4A7C15ULL) | 1;
        slot->tail = slot->head;
        if (use_perf && open_perf(slot, tid)) {
            __atomic_store_n(&slot->tid, tid, __ATOMIC_RELEASE);
            slot->prev_cpu = clock_of(tid, &ok);
            unsigned long long period = next_period(slot);
            if (ok && ioctl(slot->fd, PERF_EVENT_IOC_PERIOD, &period) == 0 &&
                ioctl(slot->fd, PERF_EVENT_IOC_ENABLE, 0) == 0) {
                slot->running = 1;
                Py_RETURN_TRUE;
            }
            close_perf(slot); /* and try the POSIX timer */
            __atomic_store_n(&slot->tid, 0, __ATOMIC_RELEASE);
        }
        struct sigevent sev;
        memset(&sev, 0, sizeof sev);
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = SIG;
        sev.sigev_value.sival_int = MAGIC + (int)(slot - slots);
        sev.sigev_notify_thread_id = (pid_t)tid;
        if (timer_create(thread_clock(tid), &sev, &slot->timer) != 0)
            Py_RETURN_FALSE;
        slot->has_timer = 1;
        slot->tail = slot->head;
        __atomic_store_n(&slot->tid, tid, __ATOMIC_RELEASE);
    }
    slot->prev_cpu = clock_of(tid, &ok);
    slot->tail = slot->head; /* what came in before is nobody's */
    if (!ok || set_timer(slot, interval) != 0) {
        Py_RETURN_FALSE;
    }
    slot->running = 1;
    Py_RETURN_TRUE;
}

static void stop(slot_t *slot)
{
    struct itimerspec zero;
    memset(&zero, 0, sizeof zero);
    if (slot->has_timer)
        timer_settime(slot->timer, 0, &zero, NULL);
    close_perf(slot);
    slot->running = 0;
}

/* disarm(tid): deletes the thread's timer and frees its slot (the thread is gone). */
static PyObject *mod_disarm(PyObject *self, PyObject *arg)
{
    long tid = PyLong_AsLong(arg);
    if (tid == -1 && PyErr_Occurred())
        return NULL;
    slot_t *slot = find(tid);
    if (slot != NULL) {
        stop(slot);
        if (slot->has_timer)
            timer_delete(slot->timer);
        slot->has_timer = 0;
        __atomic_store_n(&slot->tid, 0, __ATOMIC_RELEASE);
    }
    Py_RETURN_NONE;
}

/* A code object at ``addr``, or NULL.  The address was read from a frame that was running at
 * the sample; the code object may have been freed since (rare: code lives as long as its
 * function), so its header is read with process_vm_readv first (no fault on unmapped memory)
 * and must carry the code type and a plausible reference count (a freed block's first words
 * are the allocator's links).  The first PINS/2 code objects found are then kept alive for
 * good (a reference each: code of functions, which mostly live as long as the process), so
 * that their next samples need no check. */
#define PINS 8192 /* code objects kept alive once checked: a power of two */
static void *pinned[PINS];
static int n_pinned;

static int pin_find(void *addr, size_t *at)
{
    size_t h = ((uintptr_t)addr >> 4) * 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < PINS; i++) {
        size_t k = (h + i) & (PINS - 1);
        if (pinned[k] == addr || pinned[k] == NULL) {
            *at = k;
            return pinned[k] == addr;
        }
    }
    *at = PINS;
    return 0;
}

static PyObject *code_at(void *addr)
{
    if (addr == NULL)
        return NULL;
    size_t at;
    if (pin_find(addr, &at))
        return (PyObject *)addr; /* checked before, and alive since: we hold a reference */
    PyObject head;
    if (!readable(addr, &head, sizeof head))
        return NULL;
    if (Py_TYPE(&head) != &PyCode_Type || head.ob_refcnt <= 0 ||
        head.ob_refcnt > (Py_ssize_t)0xFFFFFFFF)
        return NULL;
    if (at < PINS && n_pinned < PINS / 2) { /* keep it alive: next time no check is needed */
        Py_INCREF((PyObject *)addr);
        pinned[at] = addr;
        n_pinned++;
    }
    return (PyObject *)addr;
}

/* drain(tid) -> [(cpu_ns, clock, codes, frame_addrs, lasti, truncated)], oldest first.
 * ``cpu_ns``: the thread's CPU time since the sample before (or since arming); ``clock``: the
 * thread's CPU clock at the sample; ``codes``: code objects
 * innermost first (None where one could not be read); ``frame_addrs``: the frames' addresses
 * (see ``frame_addr``); ``lasti``: the innermost frame's offset in bytes, as ``f_lasti``, or
 * -1. */
static PyObject *mod_drain(PyObject *self, PyObject *arg)
{
    long tid = PyLong_AsLong(arg);
    if (tid == -1 && PyErr_Occurred())
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    slot_t *slot = find(tid);
    if (slot == NULL || slot->ring == NULL)
        return out;
    unsigned long head = __atomic_load_n(&slot->head, __ATOMIC_ACQUIRE);
    for (unsigned long i = slot->tail; i != head; i++) {
        sample_t *s = &slot->ring[i % RING];
        long long used = s->cpu - slot->prev_cpu;
        slot->prev_cpu = s->cpu;
        PyObject *codes = PyTuple_New(s->depth);
        PyObject *addrs = PyTuple_New(s->depth);
        if (codes == NULL || addrs == NULL)
            goto fail_tuples;
        long long lasti = -1;
        for (int j = 0; j < s->depth; j++) {
            PyObject *code = code_at(s->code[j]);
            if (code == NULL)
                code = Py_None;
            else if (j == 0 && s->instr != NULL) {
                char *start = (char *)_PyCode_CODE((PyCodeObject *)code);
                char *at = (char *)s->instr;
                if (at >= start && at < start + Py_SIZE(code) * (Py_ssize_t)sizeof(_Py_CODEUNIT))
                    lasti = (long long)(at - start);
            }
            Py_INCREF(code);
            PyTuple_SET_ITEM(codes, j, code);
            PyObject *a = PyLong_FromVoidPtr(s->frame[j]);
            if (a == NULL)
                goto fail_tuples;
            PyTuple_SET_ITEM(addrs, j, a);
        }
        PyObject *item = Py_BuildValue("(LLNNLi)", used > 0 ? used : 0, s->cpu, codes, addrs,
                                       lasti, s->truncated);
        if (item == NULL || PyList_Append(out, item) != 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        __atomic_store_n(&slot->tail, i + 1, __ATOMIC_RELEASE);
        continue;
    fail_tuples:
        Py_XDECREF(codes);
        Py_XDECREF(addrs);
        goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* frame_addr(frame) -> the address of a frame object's frame data, as ``drain`` reports it. */
static PyObject *mod_frame_addr(PyObject *self, PyObject *arg)
{
    if (!PyFrame_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "frame_addr() wants a frame");
        return NULL;
    }
    return PyLong_FromVoidPtr(((PyFrameObject *)arg)->f_frame);
}

/* stats() -> (samples taken, samples dropped on a full ring, frames unreadable) */
static PyObject *mod_stats(PyObject *self, PyObject *unused)
{
    unsigned long dropped = 0;
    for (int i = 0; i < MAX_SLOTS; i++)
        dropped += slots[i].dropped;
    return Py_BuildValue("(kkk)", n_samples, dropped, n_unreadable);
}

/* after_fork(): a child has none of its parent's timers. */
static PyObject *mod_after_fork(PyObject *self, PyObject *unused)
{
    for (int i = 0; i < MAX_SLOTS; i++) {
        slots[i].tid = 0;
        if (slots[i].fd >= 0) /* the child's copy only: no ioctl, the event is the parent's */
            close(slots[i].fd);
        slots[i].fd = -1;
        slots[i].has_timer = 0;
        slots[i].running = 0;
        slots[i].tail = slots[i].head;
    }
    self_pid = getpid();
    Py_RETURN_NONE;
}

static PyObject *mod_supported(PyObject *self, PyObject *unused) { Py_RETURN_TRUE; }

/* use_perf(on): whether threads armed from now on try the perf task clock first. */
static PyObject *mod_use_perf(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    use_perf = on;
    Py_RETURN_NONE;
}

/* source(tid) -> "perf", "timer" or None: how that thread is sampled. */
static PyObject *mod_source(PyObject *self, PyObject *arg)
{
    long tid = PyLong_AsLong(arg);
    if (tid == -1 && PyErr_Occurred())
        return NULL;
    slot_t *slot = find(tid);
    if (slot == NULL || !slot->running)
        Py_RETURN_NONE;
    return PyUnicode_FromString(slot->fd >= 0 ? "perf" : "timer");
}

static PyMethodDef methods[] = {
    {"supported", mod_supported, METH_NOARGS, "Whether this build can sample by CPU clock."},
    {"install", mod_install, METH_NOARGS, "Takes SIGPROF; False when another handler owns it."},
    {"owned", mod_owned, METH_NOARGS, "Whether the SIGPROF handler is still ours."},
    {"arm", mod_arm, METH_VARARGS, "arm(tid, interval_ns): sample a thread by its CPU clock."},
    {"disarm", mod_disarm, METH_O, "disarm(tid): delete a (gone) thread's timer."},
    {"drain", mod_drain, METH_O, "drain(tid): the thread's samples since the last drain."},
    {"frame_addr", mod_frame_addr, METH_O, "The address drain reports for a frame."},
    {"stats", mod_stats, METH_NOARGS, "(samples, dropped, unreadable frames)."},
    {"use_perf", mod_use_perf, METH_O, "Whether to try the perf task clock first."},
    {"source", mod_source, METH_O, "How a thread is sampled: perf, timer or None."},
    {"after_fork", mod_after_fork, METH_NOARGS, "Forgets the parent's timers (child)."},
    {NULL, NULL, 0, NULL},
};
#else
#define TL_SUPPORTED 0
static PyObject *mod_supported(PyObject *self, PyObject *unused) { Py_RETURN_FALSE; }
static PyMethodDef methods[] = {
    {"supported", mod_supported, METH_NOARGS, "Whether this build can sample by CPU clock."},
    {NULL, NULL, 0, NULL},
};
#endif

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cpusample", "Per-thread CPU-clock stack samples.", -1, methods,
};

PyMODINIT_FUNC PyInit__cpusample(void)
{
#if TL_SUPPORTED
    for (int i = 0; i < MAX_SLOTS; i++)
        slots[i].fd = -1;
#endif
    return PyModule_Create(&module);
}
