/* The JSON header of a remoting frame read in one pass, for frames.decode_header: a pipelined pull reads tens
   of thousands of response headers a second, and the json module's scanner plus the checks around it cost
   ~2.5 µs each.

   parse(header) reads the header as RocketMQ's RemotingCommand serialization writes it: one object whose
   keys are code, language, version, opaque, flag, remark, extFields (an object of string values) and
   serializeTypeCurrentRPC, in any order, with any JSON whitespace between tokens. It returns (code,
   language, version, opaque, flag, remark, extFields): the ints (0 when absent, code required), language
   and remark as str or None when absent, extFields as a dict or None. For anything else it returns None and
   frames.py's json-module path decodes the header, or rejects it with its exact error: another key, a
   value of another type (null, a float, a number of more than 18 digits, a nested value), a string with an
   escape or a control character, invalid UTF-8, or text that is not one well-formed object. Duplicate
   keys keep the last value, as the json module does. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *p, *end;
} Cursor;

static inline void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* A string's bytes between its quotes (the cursor on its opening quote); 0 when it has an escape or a
   control character, or does not end. */
static int string_span(Cursor *c, const unsigned char **start, Py_ssize_t *len) {
    if (c->p >= c->end || *c->p != '"')
        return 0;
    const unsigned char *s = ++c->p;
    while (c->p < c->end) {
        unsigned char ch = *c->p;
        if (ch == '"') {
            *start = s;
            *len = c->p - s;
            c->p++;
            return 1;
        }
        if (ch == '\\' || ch < 0x20)
            return 0;
        c->p++;
    }
    return 0;
}

/* A str of `n` bytes (NULL, without an exception set, when they are not valid UTF-8). */
static PyObject *decode(const unsigned char *s, Py_ssize_t n) {
    PyObject *v = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (v == NULL)
        PyErr_Clear();
    return v;
}

/* A string value as a str (NULL, without an exception set, outside the accepted form). */
static PyObject *string_value(Cursor *c) {
    const unsigned char *s;
    Py_ssize_t n;
    return string_span(c, &s, &n) ? decode(s, n) : NULL;
}

/* The names seen most (extFields' keys, language's values): the same few in every header of a peer, so each
   is made once and keeps its hash; up to NAMES of at most 64 bytes, held for the life of the process. */
#define NAMES 64
static PyObject *names[NAMES];
static int n_names;

static PyObject *name_value(Cursor *c) {
    const unsigned char *s;
    Py_ssize_t n;
    if (!string_span(c, &s, &n))
        return NULL;
    for (int i = 0; i < n_names; i++) {
        PyObject *u = names[i];
        if (PyUnicode_GET_LENGTH(u) == n && memcmp(PyUnicode_1BYTE_DATA(u), s, n) == 0) {
            Py_INCREF(u);
            return u;
        }
    }
    PyObject *v = decode(s, n);
    if (v == NULL)
        return NULL;
    if (n_names < NAMES && n <= 64 && PyUnicode_IS_ASCII(v)) {
        names[n_names++] = v;
        Py_INCREF(v);
    }
    return v;
}

/* An integer of at most 18 digits, no leading zero, no fraction or exponent. */
static int int_value(Cursor *c, long long *out) {
    int negative = 0;
    if (c->p < c->end && *c->p == '-') {
        negative = 1;
        c->p++;
    }
    const unsigned char *s = c->p;
    long long v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        v = v * 10 + (*c->p - '0');
        c->p++;
    }
    Py_ssize_t digits = c->p - s;
    if (digits == 0 || digits > 18 || (digits > 1 && *s == '0'))
        return 0;
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E'))
        return 0;
    *out = negative ? -v : v;
    return 1;
}

/* extFields: an object of string values, into a new dict (NULL when outside the accepted form). */
static PyObject *ext_object(Cursor *c) {
    if (c->p >= c->end || *c->p != '{')
        return NULL;
    c->p++;
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return d;
    }
    for (;;) {
        skip_ws(c);
        PyObject *k = name_value(c);
        if (k == NULL)
            goto fail;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') {
            Py_DECREF(k);
            goto fail;
        }
        c->p++;
        skip_ws(c);
        PyObject *v = string_value(c);
        if (v == NULL) {
            Py_DECREF(k);
            goto fail;
        }
        int rc = PyDict_SetItem(d, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (rc < 0)
            goto fail;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return d;
        }
        goto fail;
    }
fail:
    Py_DECREF(d);
    PyErr_Clear();
    return NULL;
}

enum { K_CODE, K_VERSION, K_OPAQUE, K_FLAG, K_LANGUAGE, K_REMARK, K_EXT, K_SERIALIZE, K_OTHER };

static int key_of(const unsigned char *s, Py_ssize_t n) {
#define IS(lit) (n == (Py_ssize_t)(sizeof(lit) - 1) && memcmp(s, lit, sizeof(lit) - 1) == 0)
    if (IS("code"))
        return K_CODE;
    if (IS("extFields"))
        return K_EXT;
    if (IS("flag"))
        return K_FLAG;
    if (IS("language"))
        return K_LANGUAGE;
    if (IS("opaque"))
        return K_OPAQUE;
    if (IS("remark"))
        return K_REMARK;
    if (IS("serializeTypeCurrentRPC"))
        return K_SERIALIZE;
    if (IS("version"))
        return K_VERSION;
    return K_OTHER;
#undef IS
}

static PyObject *parse(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Cursor c = {(const unsigned char *)view.buf, (const unsigned char *)view.buf + view.len};
    long long ints[4] = {0, 0, 0, 0}; /* code, version, opaque, flag */
    int have_code = 0;
    PyObject *language = NULL, *remark = NULL, *ext = NULL, *result = NULL;

    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{')
        goto done;
    c.p++;
    for (;;) {
        skip_ws(&c);
        const unsigned char *ks;
        Py_ssize_t kn;
        if (!string_span(&c, &ks, &kn))
            goto done;
        skip_ws(&c);
        if (c.p >= c.end || *c.p != ':')
            goto done;
        c.p++;
        skip_ws(&c);
        int key = key_of(ks, kn);
        PyObject *s;
        switch (key) {
        case K_CODE:
        case K_VERSION:
        case K_OPAQUE:
        case K_FLAG:
            if (!int_value(&c, &ints[key]))
                goto done;
            have_code |= key == K_CODE;
            break;
        case K_LANGUAGE:
        case K_REMARK:
            if ((s = key == K_LANGUAGE ? name_value(&c) : string_value(&c)) == NULL)
                goto done;
            if (key == K_LANGUAGE)
                Py_XSETREF(language, s);
            else
                Py_XSETREF(remark, s);
            break;
        case K_SERIALIZE: /* informational; read only to be valid UTF-8 as the whole header must be */
            if ((s = name_value(&c)) == NULL)
                goto done;
            Py_DECREF(s);
            break;
        case K_EXT:
            if ((s = ext_object(&c)) == NULL)
                goto done;
            Py_XSETREF(ext, s);
            break;
        default:
            goto done;
        }
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        goto done;
    }
    skip_ws(&c);
    if (c.p != c.end || !have_code)
        goto done;
    result = Py_BuildValue("(LOLLLOO)", ints[K_CODE], language ? language : Py_None, ints[K_VERSION],
                           ints[K_OPAQUE], ints[K_FLAG], remark ? remark : Py_None, ext ? ext : Py_None);
done:
    Py_XDECREF(language);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    PyBuffer_Release(&view);
    if (result == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return result;
}

static PyMethodDef methods[] = {
    {"parse", parse, METH_O,
     "parse(header) -> (code, language, version, opaque, flag, remark, extFields) | None (see the module doc)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json_header", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__json_header(void) { return PyModule_Create(&module); }
