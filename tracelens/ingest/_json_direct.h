/* OTLP/JSON straight from the bytes of one document into the builder (_json_builder.h), included
 * by _json_native.c.
 *
 * Why: parsing a document into Python dicts and lists, walking them and freeing them cost about
 * twice what storing the spans does; most of an import.  This reads the bytes of the common shape
 * (the Collector's file exporter: resource, then scopeSpans, each scope then its spans; strings
 * without escapes; attribute values of the four plain types; events whose attributes are such
 * values under distinct keys) and fills the same columns span() fills from parsed objects, by the
 * same rules.  Anything else (an escape, text that is not UTF-8, a key twice in one object, links,
 * an empty scope, a kind or status
 * code spelled as a name, a value of another type, invalid JSON) is BAIL: the caller rolls the
 * builder back and the document goes the parsed way, which alone words errors.  The resource
 * and each scope are handed to Python as their bytes (orjson parses those few).
 *
 * Nesting: the shape is fixed (document > resourceSpans > scopeSpans > spans > attribute >
 * value); values skipped unread are walked with a counter of open brackets, never recursion.
 */

typedef struct {
    const char *p, *end;
} Cur;

static inline void d_ws(Cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

/* The next byte after whitespace (-1 at the end). */
static inline int d_peek(Cur *c)
{
    d_ws(c);
    return c->p < c->end ? (unsigned char)*c->p : -1;
}

static inline int d_byte(Cur *c, char b)
{
    if (d_peek(c) != (unsigned char)b)
        return BAIL;
    c->p++;
    return OK;
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), 0 when it is not one: orjson refuses those texts. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned char b = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    }
    else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    }
    else
        return 0;
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* A string without escapes (its UTF-8 is the text a parser would make of it): its text
 * (between the quotes). */
static int d_str(Cur *c, const char **s, size_t *n)
{
    if (d_peek(c) != '"')
        return BAIL;
    const char *start = ++c->p;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') {
            *s = start;
            *n = (size_t)(c->p - start);
            c->p++;
            return OK;
        }
        if (ch < 0x20 || ch == '\\')
            return BAIL;
        if (ch < 0x80) {
            c->p++;
            continue;
        }
        size_t len = utf8_seq((const unsigned char *)c->p, (const unsigned char *)c->end);
        if (len == 0)
            return BAIL;
        c->p += len;
    }
    return BAIL;
}

/* A JSON number's text; *integer: no fraction, no exponent. */
static int d_num(Cur *c, const char **s, size_t *n, int *integer)
{
    d_ws(c);
    const char *p = c->p, *e = c->end, *start = p;
    if (p < e && *p == '-')
        p++;
    if (p >= e || *p < '0' || *p > '9')
        return BAIL;
    if (*p == '0')
        p++;
    else
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    *integer = 1;
    if (p < e && *p == '.') {
        *integer = 0;
        if (++p >= e || *p < '0' || *p > '9')
            return BAIL;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *integer = 0;
        if (++p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            return BAIL;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    *s = start;
    *n = (size_t)(p - start);
    c->p = p;
    return OK;
}

static inline int d_word(Cur *c, const char *w, size_t n)
{
    d_ws(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n))
        return BAIL;
    c->p += n;
    return OK;
}

/* After a list's item: OK with *end set at its ']', OK before its next item after a ',', else
 * BAIL. */
static inline int d_list_next(Cur *c, int *end)
{
    int next = d_peek(c);
    c->p++;
    *end = next == ']';
    return *end || next == ',' ? OK : BAIL;
}

/* The start of a list that may be null: *items 0 for null or [] (read), 1 with the cursor on its
 * first item. */
static int d_list_open(Cur *c, int *items)
{
    int rc;
    *items = 0;
    if (d_peek(c) == 'n')
        return d_word(c, "null", 4);
    if ((rc = d_byte(c, '[')))
        return rc;
    if (d_peek(c) == ']') {
        c->p++;
        return OK;
    }
    *items = 1;
    return OK;
}

/* An integer given as a JSON integer or as a string of one (as_int's shapes, parse_i64's
 * restriction). */
static int d_int(Cur *c, int64_t *out)
{
    const char *s;
    size_t n;
    int integer, rc;
    if (d_peek(c) == '"')
        rc = d_str(c, &s, &n);
    else if ((rc = d_num(c, &s, &n, &integer)) == OK && !integer)
        rc = BAIL;
    return rc ? rc : parse_i64(s, n, out);
}

/* A JSON number as the parser's float, finite; an integer literal only when `integers` and it
 * is held exactly (15 digits at most), else BAIL. */
static int d_double(Cur *c, int integers, double *out)
{
    const char *s;
    size_t n;
    int integer, rc;
    if ((rc = d_num(c, &s, &n, &integer)))
        return rc;
    if (integer && (!integers || n > 15))
        return BAIL;
    char buf[64];
    if (n >= sizeof buf)
        return BAIL;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    double d = PyOS_string_to_double(buf, &end, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return BAIL;
    }
    if (end != buf + n || !isfinite(d))
        return BAIL;
    *out = d;
    return OK;
}

/* Any value, read and dropped (valid JSON of the shapes above, else BAIL); which containers are
 * open is kept as bits (1: an object), 64 deep at most. */
static int d_skip(Cur *c)
{
    const char *s;
    size_t n;
    int integer, depth = 0, rc;
    uint64_t objects = 0;
    for (;;) {
        int ch = d_peek(c);
        if (ch == '{' || ch == '[') {
            c->p++;
            if (depth == 64)
                return BAIL;
            int obj = ch == '{';
            objects = (objects << 1) | (uint64_t)obj;
            depth++;
            if (d_peek(c) == (obj ? '}' : ']')) {
                c->p++;
                objects >>= 1;
                depth--;
            }
            else {
                if (obj && ((rc = d_str(c, &s, &n)) || (rc = d_byte(c, ':'))))
                    return rc;
                continue;
            }
        }
        else if (ch == '"') {
            if ((rc = d_str(c, &s, &n)))
                return rc;
        }
        else if (ch == 't' || ch == 'f' || ch == 'n') {
            if (d_word(c, ch == 't' ? "true" : ch == 'f' ? "false" : "null", ch == 'f' ? 5 : 4))
                return BAIL;
        }
        else if ((rc = d_num(c, &s, &n, &integer)))
            return rc;
        /* after a value: the containers it closes, then the next member of the one open */
        for (;;) {
            if (depth == 0)
                return OK;
            int obj = (int)(objects & 1);
            ch = d_peek(c);
            if (ch == ',') {
                c->p++;
                if (obj && ((rc = d_str(c, &s, &n)) || (rc = d_byte(c, ':'))))
                    return rc;
                break;
            }
            if (ch != (obj ? '}' : ']'))
                return BAIL;
            c->p++;
            objects >>= 1;
            depth--;
        }
    }
}

/* Members of an object: calls member(key) for each, with the cursor on its value. */
typedef int (*Member)(Builder *self, Cur *c, const char *k, size_t kn, void *ctx);

static int d_object(Builder *self, Cur *c, Member member, void *ctx)
{
    int rc;
    const char *k;
    size_t kn;
    if ((rc = d_byte(c, '{')))
        return rc;
    if (d_peek(c) == '}') {
        c->p++;
        return OK;
    }
    for (;;) {
        if ((rc = d_str(c, &k, &kn)) || (rc = d_byte(c, ':')) || (rc = member(self, c, k, kn, ctx)))
            return rc;
        int ch = d_peek(c);
        c->p++;
        if (ch == '}')
            return OK;
        if (ch != ',')
            return BAIL;
    }
}

#define KEY_IS(lit) (kn == sizeof(lit) - 1 && !memcmp(k, lit, kn))

/* A key seen twice in one object: orjson keeps the last, so this leaves it to the parsed way. */
static inline int d_once(unsigned *seen, int bit)
{
    if (*seen & (1u << bit))
        return BAIL;
    *seen |= 1u << bit;
    return OK;
}

/* A string member that may appear once in its object (d_once, then d_str). */
static inline int d_once_str(Cur *c, unsigned *seen, int bit, const char **s, size_t *n)
{
    int rc = d_once(seen, bit);
    return rc ? rc : d_str(c, s, n);
}

/* ---- a span --------------------------------------------------------------------------------- */

typedef struct {
    unsigned seen;
    const char *v[16];
    size_t n[16];
    int integer[16];
    char type[16]; /* 's' string, 'i' number, 'n' null, 'o' status parsed, 'a' attributes */
    Attr *at;
    size_t k;
    int status_code; /* -1: none given */
    const char *msg;
    size_t mlen;
    int events; /* its events' JSON is written in the events column's data (not closed yet) */
} DSpan;

enum { D_TID, D_SID, D_PID, D_NAME, D_KIND, D_START, D_END, D_STATUS, D_ATTRS, D_EVENTS,
       D_LINKS };

/* A scalar member: a string, an integer or null (anything else: BAIL). */
static int d_scalar(Cur *c, DSpan *sp, int f)
{
    int ch = d_peek(c);
    if (ch == '"') {
        sp->type[f] = 's';
        return d_str(c, &sp->v[f], &sp->n[f]);
    }
    if (ch == 'n') {
        sp->type[f] = 'n';
        return d_word(c, "null", 4);
    }
    sp->type[f] = 'i';
    int rc = d_num(c, &sp->v[f], &sp->n[f], &sp->integer[f]);
    return rc ? rc : sp->integer[f] ? OK : BAIL;
}

typedef struct {
    unsigned seen;
    int code;
    const char *msg;
    size_t mlen;
    int has_msg;
} DStatus;

static int d_status_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    DStatus *st = ctx;
    const char *s;
    size_t n;
    int integer, rc;
    (void)self;
    if (KEY_IS("code")) {
        if ((rc = d_once(&st->seen, 0)) || (rc = d_num(c, &s, &n, &integer)))
            return rc;
        int64_t x;
        if (!integer || parse_i64(s, n, &x) || x < 0 || x >= N_CODES)
            return BAIL;
        st->code = (int)x;
        return OK;
    }
    if (KEY_IS("message")) {
        if ((rc = d_once(&st->seen, 1)))
            return rc;
        if (d_peek(c) == 'n')
            return d_word(c, "null", 4);
        st->has_msg = 1;
        return d_str(c, &st->msg, &st->mlen);
    }
    return d_skip(c);
}

/* {"stringValue" | "intValue" | "doubleValue" | "boolValue": v}: exactly one of them. */
static int d_any_value(Cur *c, Attr *a)
{
    const char *k;
    size_t kn;
    int rc;
    if ((rc = d_byte(c, '{')) || (rc = d_str(c, &k, &kn)) || (rc = d_byte(c, ':')))
        return rc;
    if (KEY_IS("stringValue")) {
        if ((rc = d_str(c, &a->val, &a->vlen)))
            return rc;
        a->cls = C_STRING;
        a->is_json = 0;
        a->obj = NULL;
    }
    else if (KEY_IS("intValue")) {
        int64_t x;
        if ((rc = d_int(c, &x)))
            return rc;
        set_int(a, x);
    }
    else if (KEY_IS("doubleValue")) {
        double d;
        if ((rc = d_double(c, 1, &d)) || (rc = set_double(a, d, NULL)))
            return rc;
    }
    else if (KEY_IS("boolValue")) {
        int ch = d_peek(c);
        if (ch == 't' && !d_word(c, "true", 4))
            set_bool(a, 1);
        else if (ch == 'f' && !d_word(c, "false", 5))
            set_bool(a, 0);
        else
            return BAIL;
    }
    else
        return BAIL;
    return d_byte(c, '}');
}

static int d_attr_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    Attr *a = ctx;
    int rc;
    /* a->known marks what was read here: 1 the key, 2 the value (cleared by the caller) */
    if (KEY_IS("key")) {
        const char *s;
        size_t n;
        if (a->known || (rc = d_str(c, &s, &n))) /* twice, or after its value: parsed way */
            return a->known ? BAIL : rc;
        attr_reset(self, a, s, n);
        a->known = 1;
        return OK;
    }
    if (KEY_IS("value")) {
        if (a->known != 1)
            return BAIL;
        a->known = 3;
        return d_any_value(c, a);
    }
    return d_skip(c);
}

static int d_attributes(Builder *self, Cur *c, DSpan *sp)
{
    int rc, items;
    sp->k = 0;
    if ((rc = d_list_open(c, &items)) || !items)
        return rc;
    for (;;) {
        if (sp->k + 1 > self->attrs.cap / sizeof(Attr)) {
            size_t have = sp->k;
            self->attrs.len = have * sizeof(Attr);
            if (buf_grow(&self->attrs, (have + 8) * sizeof(Attr)))
                return FAIL;
        }
        Attr *a = (Attr *)self->attrs.p + sp->k;
        memset(a, 0, sizeof *a);
        if ((rc = d_object(self, c, d_attr_member, a)))
            return rc;
        if (a->known != 3) /* no key or no value: the parsed way says what is wrong */
            return BAIL;
        a->known = 0;
        sp->k++;
        int end;
        if ((rc = d_list_next(c, &end)))
            return rc;
        if (end)
            break;
    }
    sp->at = (Attr *)self->attrs.p;
    int dups;
    if (sp->k > 1 && (rc = dedupe(&self->sortkeys, sp->at, sp->k, &dups)))
        return rc;
    return OK;
}

/* ---- events ---------------------------------------------------------------------------------- */

/* An event as otlp_json._event makes it, written as json_value writes it: {"time_ns", "name",
 * "attributes"} with the attributes' typed values (strings here have no escapes, so their text is
 * their JSON text).  Taken: a time given as an integer, an integer string or null; a name; the
 * attributes' plain values (d_any_value) under distinct keys (16 at most); anything else BAIL. */
typedef struct {
    unsigned seen;
    int64_t time;
    const char *name;
    size_t name_n;
    Buf *attrs; /* the attributes' JSON text, without its braces */
} DEvent;

#define EVENT_KEYS_MAX 16

static int d_event_attributes(Builder *self, Cur *c, Buf *out)
{
    const char *keys[EVENT_KEYS_MAX];
    size_t lens[EVENT_KEYS_MAX], k = 0;
    int rc, items;
    if ((rc = d_list_open(c, &items)) || !items)
        return rc;
    for (;;) {
        Attr a;
        memset(&a, 0, sizeof a);
        if (k == EVENT_KEYS_MAX)
            return BAIL;
        if ((rc = d_object(self, c, d_attr_member, &a)))
            return rc;
        if (a.known != 3)
            return BAIL;
        for (size_t j = 0; j < k; j++)
            if (lens[j] == a.klen && !memcmp(keys[j], a.key, a.klen))
                return BAIL; /* a repeated key: the parsed way's dict decides */
        keys[k] = a.key;
        lens[k++] = a.klen;
        Text t = attr_text(&a);
        int str = a.cls == C_STRING;
        if ((k > 1 && buf_byte(out, ',')) || buf_byte(out, '"') || buf_put(out, a.key, a.klen) ||
            buf_put(out, "\":", 2) || (str && buf_byte(out, '"')) || buf_put(out, t.p, t.n) ||
            (str && buf_byte(out, '"')))
            return FAIL;
        int end;
        if ((rc = d_list_next(c, &end)))
            return rc;
        if (end)
            return OK;
    }
}

static int d_event_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    DEvent *ev = ctx;
    int rc;
    if (KEY_IS("timeUnixNano")) {
        if ((rc = d_once(&ev->seen, 0)))
            return rc;
        if (d_peek(c) == 'n')
            return d_word(c, "null", 4); /* 0, as absent */
        return d_int(c, &ev->time);
    }
    if (KEY_IS("name")) {
        return d_once_str(c, &ev->seen, 1, &ev->name, &ev->name_n);
    }
    if (KEY_IS("attributes")) {
        if ((rc = d_once(&ev->seen, 2)))
            return rc;
        return d_event_attributes(self, c, ev->attrs);
    }
    return d_skip(c);
}

/* The span's events as one JSON list into the events column's data (*written: any). */
static int d_events(Builder *self, Cur *c, int *written)
{
    StrCol *col = &self->s[S_EVENTS];
    int rc, items;
    *written = 0;
    if ((rc = d_list_open(c, &items)) || !items)
        return rc;
    for (;;) {
        DEvent ev = {0, 0, "", 0, &self->scratch};
        self->scratch.len = 0;
        if ((rc = d_object(self, c, d_event_member, &ev)))
            return rc;
        char num[24];
        if (buf_put(&col->data, *written ? ",{\"time_ns\":" : "[{\"time_ns\":", 12) ||
            buf_put(&col->data, num, fmt_i64(num, ev.time)) ||
            buf_put(&col->data, ",\"name\":\"", 9) || buf_put(&col->data, ev.name, ev.name_n) ||
            buf_put(&col->data, "\",\"attributes\":{", 16) ||
            buf_put(&col->data, self->scratch.p, self->scratch.len) ||
            buf_put(&col->data, "}}", 2))
            return FAIL;
        *written = 1;
        int end;
        if ((rc = d_list_next(c, &end)))
            return rc;
        if (end)
            return buf_byte(&col->data, ']');
    }
}

static int d_span_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    DSpan *sp = ctx;
    int f, rc;
    if (KEY_IS("traceId"))
        f = D_TID;
    else if (KEY_IS("spanId"))
        f = D_SID;
    else if (KEY_IS("parentSpanId"))
        f = D_PID;
    else if (KEY_IS("name"))
        f = D_NAME;
    else if (KEY_IS("kind"))
        f = D_KIND;
    else if (KEY_IS("startTimeUnixNano"))
        f = D_START;
    else if (KEY_IS("endTimeUnixNano"))
        f = D_END;
    else if (KEY_IS("status")) {
        if ((rc = d_once(&sp->seen, D_STATUS)))
            return rc;
        if (d_peek(c) == 'n')
            return d_word(c, "null", 4);
        DStatus st = {0, -1, NULL, 0, 0};
        if ((rc = d_object(self, c, d_status_member, &st)))
            return rc;
        sp->status_code = st.code;
        sp->msg = st.has_msg ? st.msg : NULL;
        sp->mlen = st.mlen;
        return OK;
    }
    else if (KEY_IS("attributes")) {
        if ((rc = d_once(&sp->seen, D_ATTRS)))
            return rc;
        return d_attributes(self, c, sp);
    }
    else if (KEY_IS("events")) {
        if ((rc = d_once(&sp->seen, D_EVENTS)))
            return rc;
        return d_events(self, c, &sp->events);
    }
    else if (KEY_IS("links")) {
        if ((rc = d_once(&sp->seen, D_LINKS)))
            return rc;
        if (d_peek(c) == 'n')
            return d_word(c, "null", 4);
        if ((rc = d_byte(c, '[')) || (rc = d_byte(c, ']'))) /* any: the parsed way */
            return rc;
        return OK;
    }
    else
        return d_skip(c);
    if ((rc = d_once(&sp->seen, f)))
        return rc;
    return d_scalar(c, sp, f);
}

/* An id as put_id writes it (32/16 hex lower-cased; empty or of base64 length: BAIL). */
static int d_id(StrCol *col, const DSpan *sp, int f, size_t hexlen, size_t b64len)
{
    if (!(sp->seen & (1u << f)) || sp->type[f] != 's' || sp->n[f] == 0 || sp->n[f] == b64len)
        return BAIL;
    return put_id_text(col, sp->v[f], sp->n[f], hexlen, 0);
}

static int d_time(const DSpan *sp, int f, int64_t *out)
{
    if (!(sp->seen & (1u << f)) || sp->type[f] == 'n')
        return BAIL;
    return parse_i64(sp->v[f], sp->n[f], out);
}

typedef struct {
    PyObject *service, *resource, *scope_name, *scope_version;
    Py_ssize_t spans;
} DShared;

/* One span's row, as span() writes it from a parsed span. */
static int d_span(Builder *self, Cur *c, const DShared *sh)
{
    DSpan sp;
    sp.seen = 0;
    sp.k = 0;
    sp.at = NULL;
    sp.status_code = -1;
    sp.msg = NULL;
    sp.mlen = 0;
    sp.events = 0;
    int rc;
    if ((rc = d_object(self, c, d_span_member, &sp)))
        return rc;
    int64_t start, end;
    if ((rc = d_time(&sp, D_START, &start)) || (rc = d_time(&sp, D_END, &end)))
        return rc;
    if ((rc = d_id(&self->s[S_TID], &sp, D_TID, 32, 24)) ||
        (rc = d_id(&self->s[S_SID], &sp, D_SID, 16, 12)))
        return rc;
    if (!(sp.seen & (1u << D_PID)) || sp.type[D_PID] == 'n' ||
        (sp.type[D_PID] == 's' && sp.n[D_PID] == 0))
        rc = sc_null(&self->s[S_PID]);
    else if (sp.type[D_PID] == 's')
        rc = d_id(&self->s[S_PID], &sp, D_PID, 16, 12);
    else
        rc = BAIL; /* a number: its truth decides, the parsed way */
    if (rc)
        return rc;
    if (!(sp.seen & (1u << D_NAME)))
        rc = sc_add(&self->s[S_NAME], "", 0);
    else
        rc = sp.type[D_NAME] == 's' ? sc_add(&self->s[S_NAME], sp.v[D_NAME], sp.n[D_NAME]) : BAIL;
    if (rc)
        return rc;
    int64_t kind = 0;
    if (sp.seen & (1u << D_KIND)) {
        if (sp.type[D_KIND] != 'i' || parse_i64(sp.v[D_KIND], sp.n[D_KIND], &kind) || kind < 0 ||
            kind >= N_KINDS)
            return BAIL;
    }
    int code = sp.status_code < 0 ? 0 : sp.status_code;
    if ((rc = sc_add(&self->s[S_KIND], self->kinds[kind].p, self->kinds[kind].n)) ||
        (rc = sc_add(&self->s[S_STATUS], self->codes[code].p, self->codes[code].n)) ||
        (rc = sc_opt(&self->s[S_MSG], sp.msg, sp.mlen)))
        return rc;
    if ((rc = emit_attrs(self, sp.at ? sp.at : (Attr *)self->attrs.p, sp.k)))
        return rc;
    if ((rc = sc_end(&self->s[S_EVENTS], sp.events)) || (rc = sc_null(&self->s[S_LINKS])))
        return rc;
    if ((rc = put_shared(self, sh->service, sh->resource, sh->scope_name, sh->scope_version)))
        return rc;
    return end_row(self, start, end);
}

/* ---- the document ---------------------------------------------------------------------------- */

typedef struct {
    PyObject *resource_cb, *scope_cb, *repeats; /* repeats: a list, one int a scope */
    DShared sh;
    unsigned seen;
    int scopes; /* scopeSpans entries of the resource (0: the parsed way counts it empty) */
} DDoc;

/* cb(the value's bytes) -> a tuple of two, held by self->keep; BAIL when None. */
static int d_callback(Builder *self, Cur *c, PyObject *cb, PyObject **a, PyObject **b)
{
    const char *start;
    int rc;
    d_ws(c);
    start = c->p;
    if (d_peek(c) != '{')
        return BAIL;
    if ((rc = d_skip(c)))
        return rc;
    PyObject *text = PyBytes_FromStringAndSize(start, c->p - start);
    if (text == NULL)
        return FAIL;
    PyObject *res = keep_call(cb, text, self->keep);
    Py_DECREF(text);
    if (res == NULL)
        return FAIL;
    if (res == Py_None)
        return BAIL;
    if (!PyTuple_CheckExact(res) || PyTuple_GET_SIZE(res) != 2) {
        PyErr_SetString(PyExc_TypeError, "a direct reader's callback: expected a pair");
        return FAIL;
    }
    *a = PyTuple_GET_ITEM(res, 0);
    *b = PyTuple_GET_ITEM(res, 1);
    return OK;
}

static Py_ssize_t text_len(PyObject *v)
{
    return v != NULL && PyUnicode_Check(v) ? PyUnicode_GET_LENGTH(v) : 0;
}

static int d_scope_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    DDoc *doc = ctx;
    int rc;
    if (KEY_IS("scope")) {
        if ((rc = d_once(&doc->seen, 8)))
            return rc;
        return d_callback(self, c, doc->scope_cb, &doc->sh.scope_name, &doc->sh.scope_version);
    }
    if (KEY_IS("spans")) {
        if ((rc = d_once(&doc->seen, 9)) || !(doc->seen & (1u << 8))) /* its scope first */
            return rc ? rc : BAIL;
        if ((rc = d_byte(c, '[')))
            return rc;
        if (d_peek(c) == ']') /* no spans: the parsed way counts the empty entry */
            return BAIL;
        Py_ssize_t n = 0;
        for (;;) {
            if ((rc = d_span(self, c, &doc->sh)))
                return rc;
            n++;
            int end;
            if ((rc = d_list_next(c, &end)))
                return rc;
            if (end)
                break;
        }
        Py_ssize_t shared = text_len(doc->sh.service) + text_len(doc->sh.resource) +
                            text_len(doc->sh.scope_name) + text_len(doc->sh.scope_version);
        PyObject *r = PyLong_FromSsize_t(shared * n);
        if (r == NULL)
            return FAIL;
        rc = PyList_Append(doc->repeats, r);
        Py_DECREF(r);
        return rc < 0 ? FAIL : OK;
    }
    if (KEY_IS("instrumentationLibrary"))
        return BAIL;
    return d_skip(c);
}

static int d_resource_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    DDoc *doc = ctx;
    int rc;
    if (KEY_IS("resource")) {
        if ((rc = d_once(&doc->seen, 1)))
            return rc;
        return d_callback(self, c, doc->resource_cb, &doc->sh.service, &doc->sh.resource);
    }
    if (KEY_IS("scopeSpans")) {
        if ((rc = d_once(&doc->seen, 2)) || !(doc->seen & (1u << 1))) /* the resource first */
            return rc ? rc : BAIL;
        if (!PyUnicode_CheckExact(doc->sh.service))
            return BAIL;
        if ((rc = d_byte(c, '[')))
            return rc;
        if (d_peek(c) == ']')
            return BAIL;
        for (;;) {
            doc->seen &= ~((1u << 8) | (1u << 9));
            doc->sh.scope_name = doc->sh.scope_version = NULL;
            if ((rc = d_object(self, c, d_scope_member, doc)))
                return rc;
            if (!(doc->seen & (1u << 9))) /* a scope without spans */
                return BAIL;
            doc->scopes++;
            int end;
            if ((rc = d_list_next(c, &end)))
                return rc;
            if (end)
                return OK;
        }
    }
    if (KEY_IS("instrumentationLibrarySpans"))
        return BAIL;
    return d_skip(c);
}

static int d_document_member(Builder *self, Cur *c, const char *k, size_t kn, void *ctx)
{
    DDoc *doc = ctx;
    int rc;
    if (!KEY_IS("resourceSpans") || (rc = d_once(&doc->seen, 0)) == BAIL)
        return BAIL; /* another key may make it another format, or a wrapped one */
    if ((rc = d_byte(c, '[')))
        return rc;
    if (d_peek(c) == ']')
        return BAIL;
    for (;;) {
        doc->seen &= 1u;
        doc->sh.service = doc->sh.resource = NULL;
        doc->scopes = 0;
        if ((rc = d_object(self, c, d_resource_member, doc)))
            return rc;
        if (!doc->scopes)
            return BAIL;
        int end;
        if ((rc = d_list_next(c, &end)))
            return rc;
        if (end)
            return OK;
    }
}

PyDoc_STRVAR(add_otlp_bytes_doc,
"add_otlp_bytes(data, resource, scope) -> list[int] | None\n"
"--\n\n"
"Append the spans of one OTLP/JSON document given as bytes, read straight from them (see\n"
"_json_direct.h); resource(bytes) -> (service, resource JSON | None) and scope(bytes) -> (name,\n"
"version) decode those parts (None: the parsed way).  Answers what each scope's shared values\n"
"repeat (their length times its spans), for SpanBatch.may_repeat; None when the document needs\n"
"the parsed way, "
ADD_DOC_BAIL);

static PyObject *Builder_add_otlp_bytes(Builder *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (ready(self))
        return NULL;
    if (nargs != 3 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "add_otlp_bytes() takes (bytes, callable, callable)");
        return NULL;
    }
    Cur c = {PyBytes_AS_STRING(args[0]), PyBytes_AS_STRING(args[0]) + PyBytes_GET_SIZE(args[0])};
    DDoc doc;
    memset(&doc, 0, sizeof doc);
    doc.resource_cb = args[1];
    doc.scope_cb = args[2];
    doc.repeats = PyList_New(0);
    if (doc.repeats == NULL)
        return NULL;
    int rc = d_object(self, &c, d_document_member, &doc);
    if (rc == OK && (!(doc.seen & 1u) || d_peek(&c) != -1)) /* no spans, or more after it */
        rc = BAIL;
    int released = release_kept(self);
    if (rc == FAIL || released) {
        Py_DECREF(doc.repeats);
        return NULL;
    }
    if (rc == BAIL) {
        Py_DECREF(doc.repeats);
        Py_RETURN_NONE;
    }
    return doc.repeats;
}

#undef KEY_IS
