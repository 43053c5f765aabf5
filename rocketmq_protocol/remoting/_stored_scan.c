/* One pass over stored-message records (pull-response bodies) into column buffers, for message_codec.

   scan_stored(buf, spans) walks the records of each (start, end) span of `buf` (TOTALSIZE to TOTALSIZE) and
   returns their fixed fields as native-endian columns, their hosts' IPv4 addresses, and their bodies,
   topics and property strings as Arrow-style (int32 offsets, contiguous data) pairs, and, when the
   property strings have one length, each of their byte columns' highest and lowest value. It returns None,
   leaving the caller's numpy decoder to handle (or reject, with its exact error) the pull, whenever a
   record is outside the common layout: an IPv6 host, a COMPRESSED body, an unknown magic code, any size
   that does not fit, or more than 2 GiB of one column's data. The layout is apache/rocketmq's
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

static PyObject *scan_stored(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, spans;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &spans))
        return NULL;
    PyObject *result = NULL;
    const uint8_t *buf = (const uint8_t *)data.buf;
    const int64_t *bounds = (const int64_t *)spans.buf;
    Py_ssize_t n_spans = spans.len / (Py_ssize_t)(2 * sizeof(int64_t));
    int64_t n = 0, body_total = 0, topic_total = 0, props_total = 0, props_width = -1;
    int uniform = 1, common = 1;
    Parts p;

    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < n_spans && common; s++) {
        int64_t pos = bounds[2 * s], end = bounds[2 * s + 1];
        if (pos < 0 || end > data.len || pos > end) {
            common = 0;
            break;
        }
        while (pos < end) {
            if (!parts_of(buf + pos, end - pos, &p)) {
                common = 0;
                break;
            }
            n++;
            body_total += p.body_len;
            topic_total += p.topic_len;
            props_total += p.props_len;
            if (props_width < 0)
                props_width = p.props_len;
            else if (p.props_len != props_width)
                uniform = 0;
            pos += p.size;
        }
    }
    Py_END_ALLOW_THREADS

    if (!common || body_total > INT32_MAX || props_total > INT32_MAX || topic_total > INT32_MAX) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* i32 columns, i64 columns, born ip, store ip, body offsets+data, topic offsets+data, props offsets+data */
    Py_ssize_t sizes[10] = {
        (Py_ssize_t)(N_I32 * n * 4), (Py_ssize_t)(N_I64 * n * 8), (Py_ssize_t)(n * 4), (Py_ssize_t)(n * 4),
        (Py_ssize_t)((n + 1) * 4), (Py_ssize_t)body_total, (Py_ssize_t)((n + 1) * 4), (Py_ssize_t)topic_total,
        (Py_ssize_t)((n + 1) * 4), (Py_ssize_t)props_total,
    };
    /* with one property width: each byte column's highest and lowest value, for parse_property_rows */
    int fold = uniform && n > 0;
    Py_ssize_t width = fold ? (Py_ssize_t)props_width : 0;
    PyObject *out[12] = {NULL};
    for (int i = 0; i < 12; i++) {
        if (i >= 10 && !fold) {
            out[i] = Py_NewRef(Py_None);
            continue;
        }
        out[i] = new_bytearray(i < 10 ? sizes[i] : width);
        if (!out[i]) {
            for (int j = 0; j < i; j++)
                Py_DECREF(out[j]);
            goto done;
        }
    }
    int32_t *i32 = (int32_t *)PyByteArray_AS_STRING(out[0]);
    int64_t *i64 = (int64_t *)PyByteArray_AS_STRING(out[1]);
    uint8_t *born_ip = (uint8_t *)PyByteArray_AS_STRING(out[2]);
    uint8_t *store_ip = (uint8_t *)PyByteArray_AS_STRING(out[3]);
    int32_t *body_off = (int32_t *)PyByteArray_AS_STRING(out[4]);
    uint8_t *body = (uint8_t *)PyByteArray_AS_STRING(out[5]);
    int32_t *topic_off = (int32_t *)PyByteArray_AS_STRING(out[6]);
    uint8_t *topic = (uint8_t *)PyByteArray_AS_STRING(out[7]);
    int32_t *props_off = (int32_t *)PyByteArray_AS_STRING(out[8]);
    uint8_t *props = (uint8_t *)PyByteArray_AS_STRING(out[9]);
    uint8_t *high = fold ? (uint8_t *)PyByteArray_AS_STRING(out[10]) : NULL;
    uint8_t *low = fold ? (uint8_t *)PyByteArray_AS_STRING(out[11]) : NULL;
    if (fold) {
        memset(high, 0, (size_t)width);
        memset(low, 0xFF, (size_t)width);
    }

    Py_BEGIN_ALLOW_THREADS
    int64_t i = 0, b = 0, t = 0, q = 0;
    body_off[0] = topic_off[0] = props_off[0] = 0;
    for (Py_ssize_t s = 0; s < n_spans; s++) {
        int64_t pos = bounds[2 * s], end = bounds[2 * s + 1];
        while (pos < end) {
            const uint8_t *rec = buf + pos;
            parts_of(rec, end - pos, &p); /* validated by the first pass */
            for (int f = 0; f < N_I32; f++)
                i32[f * n + i] = (int32_t)be32(rec + I32_AT[f]);
            for (int f = 0; f < N_I64; f++)
                i64[f * n + i] = (int64_t)be64(rec + I64_AT[f]);
            memcpy(born_ip + 4 * i, rec + 48, 4);
            memcpy(store_ip + 4 * i, rec + 64, 4);
            memcpy(body + b, rec + HEAD, (size_t)p.body_len);
            b += p.body_len;
            memcpy(topic + t, rec + p.topic_start, (size_t)p.topic_len);
            t += p.topic_len;
            memcpy(props + q, rec + p.props_start, (size_t)p.props_len);
            if (fold) {
                const uint8_t *row = props + q;
                for (Py_ssize_t j = 0; j < width; j++) {
                    high[j] = row[j] > high[j] ? row[j] : high[j];
                    low[j] = row[j] < low[j] ? row[j] : low[j];
                }
            }
            q += p.props_len;
            i++;
            body_off[i] = (int32_t)b;
            topic_off[i] = (int32_t)t;
            props_off[i] = (int32_t)q;
            pos += p.size;
        }
    }
    Py_END_ALLOW_THREADS

    result = Py_BuildValue("(LLNNNNNNNNNNNN)", (long long)n, (long long)(fold ? props_width : -1), out[0],
                           out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8], out[9], out[10],
                           out[11]);
done:
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
