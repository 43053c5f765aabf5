/* One pass over stored-message records (pull-response bodies) into column buffers, for message_codec: each
   record is read once, while it is in cache (a pull's answer is larger than a core's cache).

   scan_stored(buf, spans) walks the records of each (start, end) span of `buf` (TOTALSIZE to TOTALSIZE) and
   returns their fixed fields as native-endian columns, their hosts' IPv4 addresses, and their bodies,
   topics and property strings as Arrow-style (int32 offsets, contiguous data) pairs, and, when the
   property strings have one length, each of their byte columns' highest and lowest value. With `names` and
   `hidden` (tuples of bytes) it parses each record's properties while the record is in cache instead of
   copying them, by properties.parse_properties_column's rules: the last value of each of `names`, and
   every property whose name is not hidden, in wire order, as a map (a pull whose properties differ from
   message to message, keys or user properties, costs numpy's parse ~0.5 µs a message). It returns None,
   leaving the caller's numpy decoder to handle (or reject, with its exact error) the pull, whenever a
   record is outside the common layout: an IPv6 host, a COMPRESSED body, an unknown magic code, any size
   that does not fit, or more than 2 GiB of records in all. The layout is apache/rocketmq's
   MessageDecoder (see message_codec.py's module docstring). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAGIC_V1 0xDAA320A7u
#define MAGIC_V2 0xDAA320ABu
#define HEAD 88        /* TOTALSIZE .. BODYLEN with IPv4 hosts */
#define MIN_STORED 91  /* HEAD + 1-byte topic length + 2-byte properties length */
#define NOT_COMMON 0x31u /* COMPRESSED | BORNHOST_V6 | STOREHOST_V6 */

/* Where the fixed fields sit in a record, in the order of the returned columns (message_codec's
   _SCANNED_I32 and _SCANNED_I64): queue id, flag, body CRC, sysflag, born port, store port, reconsume
   times; queue offset, commit-log offset, born timestamp, store timestamp, prepared transaction offset. */
static const int I32_AT[] = {12, 16, 8, 36, 52, 68, 72};
static const int I64_AT[] = {20, 28, 40, 56, 76};
#define N_I32 ((int)(sizeof I32_AT / sizeof I32_AT[0]))
#define N_I64 ((int)(sizeof I64_AT / sizeof I64_AT[0]))

static inline uint32_t be32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static inline uint64_t be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline int16_t be16(const uint8_t *p) {
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

/* A record's variable parts, relative to its start; 0 when the record is outside the common layout. */
typedef struct {
    int64_t size, body_len, topic_start, topic_len, props_start, props_len;
} Parts;

static int parts_of(const uint8_t *rec, int64_t room, Parts *out) {
    if (room < 4)
        return 0;
    int64_t size = (int32_t)be32(rec);
    if (size < MIN_STORED || size > room)
        return 0;
    uint32_t magic = be32(rec + 4);
    if (magic != MAGIC_V1 && magic != MAGIC_V2)
        return 0;
    if (be32(rec + 36) & NOT_COMMON)
        return 0;
    int64_t body_len = (int32_t)be32(rec + 84);
    int v2 = magic == MAGIC_V2;
    int64_t topic_pos = HEAD + body_len;
    if (body_len < 0 || topic_pos + 1 + v2 + 2 > size)
        return 0;
    int64_t topic_len = v2 ? be16(rec + topic_pos) : rec[topic_pos];
    int64_t topic_start = topic_pos + 1 + v2;
    int64_t props_pos = topic_start + topic_len;
    if (topic_len < 0 || props_pos + 2 > size)
        return 0;
    int64_t props_len = be16(rec + props_pos);
    if (props_len < 0 || props_pos + 2 + props_len != size)
        return 0;
    out->size = size;
    out->body_len = body_len;
    out->topic_start = topic_start;
    out->topic_len = topic_len;
    out->props_start = props_pos + 2;
    out->props_len = props_len;
    return 1;
}

static PyObject *new_bytearray(Py_ssize_t n) {
    return PyByteArray_FromStringAndSize(NULL, n > 0 ? n : 0);
}

/* Resizes a column buffer to at least `need` bytes (growing by half again at least); needs the GIL. */
static int grow(PyObject *array, Py_ssize_t need, int exact) {
    Py_ssize_t size = PyByteArray_GET_SIZE(array);
    Py_ssize_t to = exact ? need : size + size / 2;
    return PyByteArray_Resize(array, to > need ? to : need);
}

/* The columns one record at a time, each record read while it is in cache. They are sized from the first
   record (exact when records have one size, as a pull of one producer's messages mostly has), grown when a
   record does not fit and trimmed to what was written; the fixed-field columns are written `cap` apart. */
typedef struct {
    PyObject *out[10];
    int64_t cap; /* records the fixed-field columns have room for */
} Columns;

static int columns_fit(Columns *c, int64_t n, int64_t b, int64_t t, int64_t q, const Parts *p) {
    if (n + 1 > c->cap) {
        int64_t old = c->cap, cap = old + old / 2 + 16;
        if (grow(c->out[0], (Py_ssize_t)(N_I32 * cap * 4), 1) < 0 || grow(c->out[1], (Py_ssize_t)(N_I64 * cap * 8), 1) < 0)
            return -1;
        int32_t *i32 = (int32_t *)PyByteArray_AS_STRING(c->out[0]);
        int64_t *i64 = (int64_t *)PyByteArray_AS_STRING(c->out[1]);
        for (int f = N_I32 - 1; f > 0; f--)
            memmove(i32 + f * cap, i32 + f * old, (size_t)old * 4);
        for (int f = N_I64 - 1; f > 0; f--)
            memmove(i64 + f * cap, i64 + f * old, (size_t)old * 8);
        for (int k = 2; k < 4; k++)
            if (grow(c->out[k], (Py_ssize_t)(cap * 4), 1) < 0)
                return -1;
        for (int k = 4; k < 10; k += 2)
            if (grow(c->out[k], (Py_ssize_t)((cap + 1) * 4), 1) < 0)
                return -1;
        c->cap = cap;
    }
    if (b + p->body_len > PyByteArray_GET_SIZE(c->out[5]) && grow(c->out[5], (Py_ssize_t)(b + p->body_len), 0) < 0)
        return -1;
    if (t + p->topic_len > PyByteArray_GET_SIZE(c->out[7]) && grow(c->out[7], (Py_ssize_t)(t + p->topic_len), 0) < 0)
        return -1;
    if (q + p->props_len > PyByteArray_GET_SIZE(c->out[9]) && grow(c->out[9], (Py_ssize_t)(q + p->props_len), 0) < 0)
        return -1;
    return 0;
}

/* A bytearray written from its start; grown (taking the GIL for the resize) when a write does not fit. */
typedef struct {
    PyObject *ba;
    Py_ssize_t used;
} Out;

static int out_init(Out *o, Py_ssize_t cap) {
    o->used = 0;
    return (o->ba = new_bytearray(cap)) ? 0 : -1;
}

static int out_grow(Out *o, Py_ssize_t extra) {
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = grow(o->ba, o->used + extra, 0);
    PyGILState_Release(gil);
    return rc;
}

static inline int out_reserve(Out *o, Py_ssize_t extra) {
    return o->used + extra <= PyByteArray_GET_SIZE(o->ba) ? 0 : out_grow(o, extra);
}

static inline int out_put(Out *o, const void *src, Py_ssize_t len) {
    if (out_reserve(o, len) < 0)
        return -1;
    memcpy(PyByteArray_AS_STRING(o->ba) + o->used, src, (size_t)len);
    o->used += len;
    return 0;
}

static inline int out_i32(Out *o, int64_t v) {
    int32_t x = (int32_t)v;
    return out_put(o, &x, 4);
}

/* The property names the caller wants (at their position) or hides from the map, found by their length
   and first 8 bytes (open addressing), then compared in full. */
#define MAX_WANTED 32
#define SLOT_BITS 8
#define SLOTS (1 << SLOT_BITS)
typedef struct {
    const char *name;
    Py_ssize_t len;
    uint64_t head; /* its first 8 bytes (fewer: zero-padded), compared before the rest */
    int wanted;    /* position in `names`, or -1 */
    int hidden;
} Name;

typedef struct {
    Name names[SLOTS];
    int slot[SLOTS]; /* index + 1 into names; 0: empty */
    int count;
} NameTable;

/* A name's first 8 bytes, zero-padded when it is shorter. */
static inline uint64_t name_head(const uint8_t *k, int64_t len) {
    uint64_t w = 0;
    if (len >= 8)
        memcpy(&w, k, 8);
    else
        for (int64_t i = 0; i < len; i++)
            w |= (uint64_t)k[i] << (8 * i);
    return w;
}

static inline unsigned name_hash(uint64_t head, int64_t len) {
    return (unsigned)(((head ^ ((uint64_t)len * 0x9E3779B97F4A7C15ull)) * 0xFF51AFD7ED558CCDull) >> (64 - SLOT_BITS));
}

/* Whether `k` is the name `nm`: its length and first 8 bytes, then the rest byte by byte (property names are
   short; a call to memcmp for each cost more than the comparison). */
static inline int is_name(const Name *nm, uint64_t head, const uint8_t *k, int64_t len) {
    if (nm->head != head || nm->len != len)
        return 0;
    for (int64_t i = 8; i < len; i++)
        if ((uint8_t)nm->name[i] != k[i])
            return 0;
    return 1;
}

static inline const Name *name_lookup(const NameTable *t, const uint8_t *k, int64_t len) {
    uint64_t head = name_head(k, len);
    for (unsigned i = name_hash(head, len);; i = (i + 1) & (SLOTS - 1)) {
        int at = t->slot[i];
        if (!at)
            return NULL;
        const Name *nm = &t->names[at - 1];
        if (is_name(nm, head, k, len))
            return nm;
    }
}

/* Adds the names of the tuple `seq` (bytes), wanted (at their position) or hidden. */
static int names_add(NameTable *t, PyObject *seq, int wanted) {
    if (!PyTuple_Check(seq) || (wanted && PyTuple_GET_SIZE(seq) > MAX_WANTED)) {
        PyErr_SetString(PyExc_TypeError, "scan_stored: names and hidden are tuples of bytes (32 names at most)");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "scan_stored: property names are bytes");
            return -1;
        }
        const uint8_t *k = (const uint8_t *)PyBytes_AS_STRING(item);
        Py_ssize_t len = PyBytes_GET_SIZE(item);
        Name *nm = (Name *)name_lookup(t, k, len);
        if (!nm) {
            if (t->count >= SLOTS / 2) {
                PyErr_SetString(PyExc_ValueError, "scan_stored: too many property names");
                return -1;
            }
            nm = &t->names[t->count];
            nm->name = (const char *)k;
            nm->len = len;
            nm->head = name_head(k, len);
            unsigned j = name_hash(nm->head, len);
            while (t->slot[j])
                j = (j + 1) & (SLOTS - 1);
            nm->wanted = -1;
            nm->hidden = 0;
            t->slot[j] = ++t->count;
        }
        if (wanted)
            nm->wanted = (int)i;
        else
            nm->hidden = 1;
    }
    return 0;
}

/* The parsed properties: per wanted name a string column (int32 offsets, data, a validity byte per record,
   nulls), started at the first record that has the name (none: every value null) and its validity at the
   first record without it once started (none: no null); the others as a map (per record an offset into
   the items; the items' names and values as strings). */
typedef struct {
    int k;
    int64_t cap;
    Out off[MAX_WANTED], data[MAX_WANTED], valid[MAX_WANTED];
    int64_t nulls[MAX_WANTED], width[MAX_WANTED];
    int started[MAX_WANTED], n_started; /* the names whose column has started, in order */
    Out map_off, key_off, key_data, val_off, val_data;
    int64_t items;
} Parsed;

/* `n` copies of the byte `v` (n int32 zeros: v 0, n * 4) appended. */
static int out_fill(Out *o, int v, Py_ssize_t n) {
    if (out_reserve(o, n) < 0)
        return -1;
    memset(PyByteArray_AS_STRING(o->ba) + o->used, v, (size_t)n);
    o->used += n;
    return 0;
}

/* An Out of `cap` bytes started mid-scan (taking the GIL to allocate), its first `prefix` bytes `v`. */
static int out_start(Out *o, Py_ssize_t cap, int v, Py_ssize_t prefix) {
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = out_init(o, cap);
    PyGILState_Release(gil);
    return rc < 0 ? -1 : out_fill(o, v, prefix);
}

/* Records a column has room for when it starts at record `row`. */
static inline int64_t rows_from(const Parsed *ps, int64_t row) { return ps->cap > row ? ps->cap : row + 1; }

/* Name j's column from record `row` on (the records before it have no value). */
static int column_start(Parsed *ps, int j, int64_t row) {
    int64_t rows = rows_from(ps, row);
    if (out_start(&ps->off[j], (rows + 1) * 4, 0, (row + 1) * 4) < 0 ||
        out_start(&ps->data[j], rows * ps->width[j], 0, 0) < 0 || (row > 0 && out_start(&ps->valid[j], rows, 0, row) < 0))
        return -1;
    ps->nulls[j] = row;
    return 0;
}

static void parsed_clear(Parsed *ps) {
    for (int j = 0; j < MAX_WANTED; j++) {
        Py_CLEAR(ps->off[j].ba);
        Py_CLEAR(ps->data[j].ba);
        Py_CLEAR(ps->valid[j].ba);
    }
    Py_CLEAR(ps->map_off.ba);
    Py_CLEAR(ps->key_off.ba);
    Py_CLEAR(ps->key_data.ba);
    Py_CLEAR(ps->val_off.ba);
    Py_CLEAR(ps->val_data.ba);
}

/* The first \x01 in [p, e), or e: eight bytes at a time (names are short, a call to memchr costs more). */
static inline const uint8_t *first_one(const uint8_t *p, const uint8_t *e) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (; p + 8 <= e; p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t x = w ^ ones; /* the bytes that were \x01 are now zero */
        uint64_t zero = (x - ones) & ~x & highs;
        if (zero)
            return p + (__builtin_ctzll(zero) >> 3);
    }
    while (p < e && *p != 1)
        p++;
    return p;
}

/* Runs the block for each item of a property string, with `key`, `key_len`, `val` and `val_len` set: items
   end at \x02 (the string's end ends the last one), the name is before the first \x01; items with an empty
   name or value are skipped. */
#define FOR_EACH_PROPERTY(s, len, ...)                                                                     \
    do {                                                                                                   \
        const uint8_t *p_ = (s), *end_ = (s) + (len);                                                      \
        while (p_ < end_) {                                                                                \
            const uint8_t *e_ = memchr(p_, 2, (size_t)(end_ - p_));                                        \
            if (!e_)                                                                                       \
                e_ = end_;                                                                                 \
            const uint8_t *kv_ = first_one(p_, e_);                                                        \
            if (kv_ > p_ && kv_ < e_ - 1) {                                                                 \
                const uint8_t *key = p_, *val = kv_ + 1;                                                   \
                int64_t key_len = kv_ - p_, val_len = e_ - kv_ - 1;                                        \
                __VA_ARGS__                                                                                \
            }                                                                                              \
            p_ = e_ + 1;                                                                                   \
        }                                                                                                  \
    } while (0)

/* Record `row`'s properties into the columns. */
static int parse_props(Parsed *ps, const NameTable *t, const uint8_t *s, int64_t len, int64_t row) {
    const uint8_t *vs[MAX_WANTED];
    int64_t vl[MAX_WANTED];
    int seen[MAX_WANTED], n_seen = 0;
    for (int j = 0; j < ps->k; j++)
        vl[j] = -1;
    int failed = 0;
    FOR_EACH_PROPERTY(s, len, {
        const Name *nm = name_lookup(t, key, key_len);
        if (nm && nm->wanted >= 0) {
            if (vl[nm->wanted] < 0)
                seen[n_seen++] = nm->wanted;
            vs[nm->wanted] = val;
            vl[nm->wanted] = val_len;
        }
        if ((!nm || !nm->hidden) && !failed) {
            failed = out_put(&ps->key_data, key, key_len) < 0 || out_i32(&ps->key_off, ps->key_data.used) < 0 ||
                     out_put(&ps->val_data, val, val_len) < 0 || out_i32(&ps->val_off, ps->val_data.used) < 0;
            ps->items++;
        }
    });
    if (failed || out_i32(&ps->map_off, ps->items) < 0)
        return -1;
    for (int i = 0; i < n_seen; i++) /* names first met in this record: their columns start here */
        if (!ps->off[seen[i]].ba) {
            if (column_start(ps, seen[i], row) < 0)
                return -1;
            ps->started[ps->n_started++] = seen[i];
        }
    for (int i = 0; i < ps->n_started; i++) {
        int j = ps->started[i];
        if (vl[j] >= 0) {
            if (out_put(&ps->data[j], vs[j], vl[j]) < 0 || (ps->valid[j].ba && out_fill(&ps->valid[j], 1, 1) < 0))
                return -1;
        } else {
            if (!ps->valid[j].ba && out_start(&ps->valid[j], rows_from(ps, row), 1, row) < 0) /* its first null */
                return -1;
            if (out_fill(&ps->valid[j], 0, 1) < 0)
                return -1;
            ps->nulls[j]++;
        }
        if (out_i32(&ps->off[j], ps->data[j].used) < 0)
            return -1;
    }
    return 0;
}

/* Columns for `cap` records, sized from the first record's properties. */
static int parsed_init(Parsed *ps, int k, int64_t cap, const NameTable *t, const uint8_t *first, int64_t len) {
    int64_t width[MAX_WANTED] = {0}, keys = 0, vals = 0, items = 0;
    FOR_EACH_PROPERTY(first, len, {
        (void)val;
        const Name *nm = name_lookup(t, key, key_len);
        if (nm && nm->wanted >= 0)
            width[nm->wanted] = val_len;
        if (!nm || !nm->hidden) {
            keys += key_len;
            vals += val_len;
            items++;
        }
    });
    ps->k = k;
    ps->cap = cap;
    ps->items = 0;
    ps->n_started = 0;
    for (int j = 0; j < k; j++)
        ps->width[j] = width[j];
    if (out_init(&ps->map_off, (cap + 1) * 4) < 0 || out_init(&ps->key_off, (cap * items + 1) * 4) < 0 ||
        out_init(&ps->key_data, cap * keys) < 0 || out_init(&ps->val_off, (cap * items + 1) * 4) < 0 ||
        out_init(&ps->val_data, cap * vals) < 0)
        return -1;
    return out_i32(&ps->map_off, 0) < 0 || out_i32(&ps->key_off, 0) < 0 || out_i32(&ps->val_off, 0) < 0 ? -1 : 0;
}

/* ((offsets, data, validity bytes or None, nulls) per name, or None for a name no record has; map offsets,
   name offsets, names, value offsets, values), each trimmed to what was written, or NULL; the caller still
   clears `ps`. */
static PyObject *parsed_result(Parsed *ps) {
    Out *maps[5] = {&ps->map_off, &ps->key_off, &ps->key_data, &ps->val_off, &ps->val_data};
    for (int j = 0; j < ps->k; j++)
        if (ps->off[j].ba && (PyByteArray_Resize(ps->off[j].ba, ps->off[j].used) < 0 ||
                              PyByteArray_Resize(ps->data[j].ba, ps->data[j].used) < 0 ||
                              (ps->valid[j].ba && PyByteArray_Resize(ps->valid[j].ba, ps->valid[j].used) < 0)))
            return NULL;
    for (int i = 0; i < 5; i++)
        if (PyByteArray_Resize(maps[i]->ba, maps[i]->used) < 0)
            return NULL;
    PyObject *per_name = PyTuple_New(ps->k);
    if (!per_name)
        return NULL;
    for (int j = 0; j < ps->k; j++) {
        PyObject *col = !ps->off[j].ba ? Py_NewRef(Py_None)
                                       : Py_BuildValue("(OOOL)", ps->off[j].ba, ps->data[j].ba,
                                                       ps->valid[j].ba ? ps->valid[j].ba : Py_None,
                                                       (long long)ps->nulls[j]);
        if (!col) {
            Py_DECREF(per_name);
            return NULL;
        }
        PyTuple_SET_ITEM(per_name, j, col);
    }
    return Py_BuildValue("(NOOOOO)", per_name, ps->map_off.ba, ps->key_off.ba, ps->key_data.ba, ps->val_off.ba,
                         ps->val_data.ba);
}

static PyObject *scan_stored(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, spans;
    PyObject *names = Py_None, *hidden = Py_None;
    if (!PyArg_ParseTuple(args, "y*y*|OO", &data, &spans, &names, &hidden))
        return NULL;
    PyObject *result = NULL, *parsed = NULL;
    PyObject *fold_out[2] = {NULL, NULL};
    Columns c = {{NULL}, 0};
    int parse = names != Py_None;
    NameTable *table = NULL;
    Parsed ps;
    memset(&ps, 0, sizeof ps);
    int64_t first_pos = 0;
    const uint8_t *buf = (const uint8_t *)data.buf;
    const int64_t *bounds = (const int64_t *)spans.buf;
    Py_ssize_t n_spans = spans.len / (Py_ssize_t)(2 * sizeof(int64_t));
    int64_t room = 0;
    Parts first = {0, 0, 0, 0, 0, 0};
    for (Py_ssize_t s = 0; s < n_spans; s++) {
        int64_t pos = bounds[2 * s], end = bounds[2 * s + 1];
        if (pos < 0 || end > data.len || pos > end) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (room == 0 && end > pos) {
            if (!parts_of(buf + pos, end - pos, &first)) {
                result = Py_NewRef(Py_None);
                goto done;
            }
            first_pos = pos;
        }
        room += end - pos;
    }
    if (room > INT32_MAX) { /* a column's data might not fit int32 offsets: the numpy decoder's case */
        result = Py_NewRef(Py_None);
        goto done;
    }
    c.cap = first.size ? room / first.size + 1 : 1;
    /* parsing the properties, the scan keeps none of their strings */
    int64_t props0 = parse ? 0 : first.props_len;
    if (parse) {
        if (!(table = PyMem_Calloc(1, sizeof *table))) {
            PyErr_NoMemory();
            goto done;
        }
        if (names_add(table, names, 1) < 0 || (hidden != Py_None && names_add(table, hidden, 0) < 0) ||
            parsed_init(&ps, (int)PyTuple_GET_SIZE(names), c.cap, table, buf + first_pos + first.props_start,
                        first.size ? first.props_len : 0) < 0)
            goto done;
    }
    Py_ssize_t sizes[10] = {
        (Py_ssize_t)(N_I32 * c.cap * 4), (Py_ssize_t)(N_I64 * c.cap * 8), (Py_ssize_t)(c.cap * 4),
        (Py_ssize_t)(c.cap * 4), (Py_ssize_t)((c.cap + 1) * 4), (Py_ssize_t)(c.cap * first.body_len),
        (Py_ssize_t)((c.cap + 1) * 4), (Py_ssize_t)(c.cap * first.topic_len), (Py_ssize_t)((c.cap + 1) * 4),
        (Py_ssize_t)(c.cap * props0),
    };
    for (int k = 0; k < 10; k++)
        if (!(c.out[k] = new_bytearray(sizes[k])))
            goto done;
    /* with one property width: each byte column's highest and lowest value, for parse_property_rows */
    int64_t n = 0, b = 0, t = 0, q = 0, width = first.size ? props0 : -1;
    for (int k = 0; k < 2; k++)
        if (!(fold_out[k] = new_bytearray((Py_ssize_t)props0)))
            goto done;
    uint8_t *high = (uint8_t *)PyByteArray_AS_STRING(fold_out[0]);
    uint8_t *low = (uint8_t *)PyByteArray_AS_STRING(fold_out[1]);
    memset(high, 0, (size_t)props0);
    memset(low, 0xFF, (size_t)props0);
    int uniform = !parse, common = 1, failed = 0;
    Parts p;

    Py_BEGIN_ALLOW_THREADS
    int32_t *i32, *body_off, *topic_off, *props_off;
    int64_t *i64;
    uint8_t *born_ip, *store_ip, *body, *topic, *props;
/* the columns' data, again after they grew (their buffers may have moved) */
#define POINT_AT_COLUMNS()                                                                                  \
    do {                                                                                                   \
        i32 = (int32_t *)PyByteArray_AS_STRING(c.out[0]);                                                  \
        i64 = (int64_t *)PyByteArray_AS_STRING(c.out[1]);                                                  \
        born_ip = (uint8_t *)PyByteArray_AS_STRING(c.out[2]);                                              \
        store_ip = (uint8_t *)PyByteArray_AS_STRING(c.out[3]);                                             \
        body_off = (int32_t *)PyByteArray_AS_STRING(c.out[4]);                                             \
        body = (uint8_t *)PyByteArray_AS_STRING(c.out[5]);                                                 \
        topic_off = (int32_t *)PyByteArray_AS_STRING(c.out[6]);                                            \
        topic = (uint8_t *)PyByteArray_AS_STRING(c.out[7]);                                                \
        props_off = (int32_t *)PyByteArray_AS_STRING(c.out[8]);                                            \
        props = (uint8_t *)PyByteArray_AS_STRING(c.out[9]);                                                \
    } while (0)
    POINT_AT_COLUMNS();
    body_off[0] = topic_off[0] = props_off[0] = 0;
    for (Py_ssize_t s = 0; s < n_spans && common && !failed; s++) {
        int64_t pos = bounds[2 * s], end = bounds[2 * s + 1];
        while (pos < end) {
            const uint8_t *rec = buf + pos;
            if (!parts_of(rec, end - pos, &p)) {
                common = 0;
                break;
            }
            Parts kept = p;
            if (parse)
                kept.props_len = 0;
            if (n + 1 > c.cap || b + p.body_len > PyByteArray_GET_SIZE(c.out[5]) ||
                t + p.topic_len > PyByteArray_GET_SIZE(c.out[7]) || q + kept.props_len > PyByteArray_GET_SIZE(c.out[9])) {
                Py_BLOCK_THREADS
                failed = columns_fit(&c, n, b, t, q, &kept) < 0;
                Py_UNBLOCK_THREADS
                if (failed)
                    break;
                POINT_AT_COLUMNS();
            }
            for (int f = 0; f < N_I32; f++)
                i32[f * c.cap + n] = (int32_t)be32(rec + I32_AT[f]);
            for (int f = 0; f < N_I64; f++)
                i64[f * c.cap + n] = (int64_t)be64(rec + I64_AT[f]);
            memcpy(born_ip + 4 * n, rec + 48, 4);
            memcpy(store_ip + 4 * n, rec + 64, 4);
            memcpy(body + b, rec + HEAD, (size_t)p.body_len);
            b += p.body_len;
            memcpy(topic + t, rec + p.topic_start, (size_t)p.topic_len);
            t += p.topic_len;
            if (parse && parse_props(&ps, table, rec + p.props_start, p.props_len, n) < 0) {
                failed = 1;
                break;
            }
            memcpy(props + q, rec + p.props_start, (size_t)kept.props_len);
            if (p.props_len != width)
                uniform = 0;
            if (uniform) {
                const uint8_t *row = props + q;
                for (int64_t j = 0; j < width; j++) {
                    high[j] = row[j] > high[j] ? row[j] : high[j];
                    low[j] = row[j] < low[j] ? row[j] : low[j];
                }
            }
            q += kept.props_len;
            n++;
            body_off[n] = (int32_t)b;
            topic_off[n] = (int32_t)t;
            props_off[n] = (int32_t)q;
            pos += p.size;
        }
    }
    if (!failed) {
        for (int f = 1; f < N_I32; f++)
            memmove(i32 + f * n, i32 + f * c.cap, (size_t)n * 4);
        for (int f = 1; f < N_I64; f++)
            memmove(i64 + f * n, i64 + f * c.cap, (size_t)n * 8);
    }
    Py_END_ALLOW_THREADS
#undef POINT_AT_COLUMNS

    if (failed)
        goto done;
    if (!common) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t used[10] = {
        (Py_ssize_t)(N_I32 * n * 4), (Py_ssize_t)(N_I64 * n * 8), (Py_ssize_t)(n * 4), (Py_ssize_t)(n * 4),
        (Py_ssize_t)((n + 1) * 4), (Py_ssize_t)b, (Py_ssize_t)((n + 1) * 4), (Py_ssize_t)t,
        (Py_ssize_t)((n + 1) * 4), (Py_ssize_t)q,
    };
    for (int k = 0; k < 10; k++)
        if (PyByteArray_Resize(c.out[k], used[k]) < 0)
            goto done;
    if (!(parsed = parse ? parsed_result(&ps) : Py_NewRef(Py_None)))
        goto done;
    int fold = uniform && n > 0;
    if (!fold)
        for (int k = 0; k < 2; k++) {
            Py_DECREF(fold_out[k]);
            fold_out[k] = Py_NewRef(Py_None);
        }
    result = Py_BuildValue("(LLNNNNNNNNNNNNN)", (long long)n, (long long)(fold ? width : -1), c.out[0], c.out[1],
                           c.out[2], c.out[3], c.out[4], c.out[5], c.out[6], c.out[7], c.out[8], c.out[9],
                           fold_out[0], fold_out[1], parsed);
    memset(c.out, 0, sizeof c.out); /* stolen by Py_BuildValue ("N"), whether or not it succeeded */
    fold_out[0] = fold_out[1] = parsed = NULL;
done:
    for (int k = 0; k < 10; k++)
        Py_XDECREF(c.out[k]);
    Py_XDECREF(fold_out[0]);
    Py_XDECREF(fold_out[1]);
    Py_XDECREF(parsed);
    parsed_clear(&ps);
    PyMem_Free(table);
    PyBuffer_Release(&data);
    PyBuffer_Release(&spans);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_stored", scan_stored, METH_VARARGS,
     "scan_stored(buf, spans[, names, hidden]) -> None | (n, props_width, i32 columns, i64 columns, born ips, "
     "store ips, body offsets, bodies, topic offsets, topics, property offsets, properties, property bytes' "
     "highest and lowest per column or None, None, with names: the parsed properties, else None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stored_scan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__stored_scan(void) { return PyModule_Create(&module); }
