/* One pass over stored-message records (pull-response bodies) into column buffers, for message_codec: each
   record is read once, while it is in cache (a pull's answer is larger than a core's cache).

   scan_stored(buf, spans) walks the records of each (start, end) span of `buf` (TOTALSIZE to TOTALSIZE) and
   returns their fixed fields as native-endian columns, their hosts' IPv4 addresses, and their bodies,
   topics and property strings as Arrow-style (int32 offsets, contiguous data) pairs, and, when the
   property strings have one length, each of their byte columns' highest and lowest value. It returns None,
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

static PyObject *scan_stored(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, spans;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &spans))
        return NULL;
    PyObject *result = NULL;
    PyObject *fold_out[2] = {NULL, NULL};
    Columns c = {{NULL}, 0};
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
        if (room == 0 && end > pos && !parts_of(buf + pos, end - pos, &first)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        room += end - pos;
    }
    if (room > INT32_MAX) { /* a column's data might not fit int32 offsets: the numpy decoder's case */
        result = Py_NewRef(Py_None);
        goto done;
    }
    c.cap = first.size ? room / first.size + 1 : 1;
    Py_ssize_t sizes[10] = {
        (Py_ssize_t)(N_I32 * c.cap * 4), (Py_ssize_t)(N_I64 * c.cap * 8), (Py_ssize_t)(c.cap * 4),
        (Py_ssize_t)(c.cap * 4), (Py_ssize_t)((c.cap + 1) * 4), (Py_ssize_t)(c.cap * first.body_len),
        (Py_ssize_t)((c.cap + 1) * 4), (Py_ssize_t)(c.cap * first.topic_len), (Py_ssize_t)((c.cap + 1) * 4),
        (Py_ssize_t)(c.cap * first.props_len),
    };
    for (int k = 0; k < 10; k++)
        if (!(c.out[k] = new_bytearray(sizes[k])))
            goto done;
    /* with one property width: each byte column's highest and lowest value, for parse_property_rows */
    int64_t n = 0, b = 0, t = 0, q = 0, width = first.size ? first.props_len : -1;
    for (int k = 0; k < 2; k++)
        if (!(fold_out[k] = new_bytearray((Py_ssize_t)first.props_len)))
            goto done;
    uint8_t *high = (uint8_t *)PyByteArray_AS_STRING(fold_out[0]);
    uint8_t *low = (uint8_t *)PyByteArray_AS_STRING(fold_out[1]);
    memset(high, 0, (size_t)first.props_len);
    memset(low, 0xFF, (size_t)first.props_len);
    int uniform = 1, common = 1, failed = 0;
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
            if (n + 1 > c.cap || b + p.body_len > PyByteArray_GET_SIZE(c.out[5]) ||
                t + p.topic_len > PyByteArray_GET_SIZE(c.out[7]) || q + p.props_len > PyByteArray_GET_SIZE(c.out[9])) {
                Py_BLOCK_THREADS
                failed = columns_fit(&c, n, b, t, q, &p) < 0;
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
            memcpy(props + q, rec + p.props_start, (size_t)p.props_len);
            if (p.props_len != width)
                uniform = 0;
            if (uniform) {
                const uint8_t *row = props + q;
                for (int64_t j = 0; j < width; j++) {
                    high[j] = row[j] > high[j] ? row[j] : high[j];
                    low[j] = row[j] < low[j] ? row[j] : low[j];
                }
            }
            q += p.props_len;
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
    int fold = uniform && n > 0;
    if (!fold)
        for (int k = 0; k < 2; k++) {
            Py_DECREF(fold_out[k]);
            fold_out[k] = Py_NewRef(Py_None);
        }
    result = Py_BuildValue("(LLNNNNNNNNNNNN)", (long long)n, (long long)(fold ? width : -1), c.out[0], c.out[1],
                           c.out[2], c.out[3], c.out[4], c.out[5], c.out[6], c.out[7], c.out[8], c.out[9],
                           fold_out[0], fold_out[1]);
    memset(c.out, 0, sizeof c.out); /* stolen by Py_BuildValue ("N"), whether or not it succeeded */
    fold_out[0] = fold_out[1] = NULL;
done:
    for (int k = 0; k < 10; k++)
        Py_XDECREF(c.out[k]);
    Py_XDECREF(fold_out[0]);
    Py_XDECREF(fold_out[1]);
    PyBuffer_Release(&data);
    PyBuffer_Release(&spans);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_stored", scan_stored, METH_VARARGS,
     "scan_stored(buf, spans) -> None | (n, props_width, i32 columns, i64 columns, born ips, store ips, "
     "body offsets, bodies, topic offsets, topics, property offsets, properties, property bytes' highest and "
     "lowest per column or None, None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stored_scan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__stored_scan(void) { return PyModule_Create(&module); }
