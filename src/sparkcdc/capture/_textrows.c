/*
 * Text-protocol result rows of a MySQL/MariaDB SELECT split and converted in C.
 *
 * The snapshot reader (capture/snapshot.py, TextRowReader) lets PyMySQL send the query and read
 * the column definitions, then hands the raw bytes of the row packets to parse_rows, which
 * splits them into packets (checking their sequence numbers) and converts each value to the
 * Python value the binlog decoder yields for that column: the kinds below are chosen per
 * column by capture.snapshot.text_kinds, and the reference is PyMySQL's own parsing followed
 * by capture.snapshot.RowConverter (the tests compare the two, and both with the binlog).
 *
 * parse_rows stops at the end of the data it was given (an incomplete packet is left for the
 * next call), at the EOF packet that ends the result set, at an error packet, or at a packet of
 * 16 MiB - 1 bytes (a row continued in further packets), which the caller joins and converts
 * with parse_row.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    T_INT = 1,   /* decimal text -> int */
    T_DOUBLE,    /* decimal text -> float */
    T_FLOAT32,   /* decimal text of CAST(f AS DOUBLE) -> float rounded to float32 */
    T_DECIMAL,   /* decimal text -> obj(text) (obj = decimal.Decimal) */
    T_TEXT,      /* utf-8 text -> str (surrogateescape, as the binlog decoder) */
    T_BYTES,     /* bytes */
    T_BIT,       /* big-endian bytes -> int */
    T_CALL,      /* utf-8 text -> obj(str) (obj = a converter, e.g. TIMESTAMP into a time zone) */
    T_LAST
};

enum { S_MORE = 0, S_EOF = 1, S_ERROR = 2, S_BIG = 3 };

#define MAX_PACKET 0xFFFFFF

/* The length-encoded integer at p (NULL marker 0xFB gives *is_null); -1 if it runs past end. */
static int read_lenenc(const unsigned char *p, const unsigned char *end, uint64_t *out, int *is_null,
                       const unsigned char **next)
{
    if (p >= end)
        return -1;
    unsigned char c = *p;
    *is_null = 0;
    if (c < 0xFB) {
        *out = c;
        *next = p + 1;
        return 0;
    }
    if (c == 0xFB) {
        *is_null = 1;
        *out = 0;
        *next = p + 1;
        return 0;
    }
    int n = c == 0xFC ? 2 : c == 0xFD ? 3 : c == 0xFE ? 8 : -1;
    if (n < 0 || end - p < 1 + n)
        return -1;
    uint64_t v = 0;
    for (int i = n; i >= 1; i--)
        v = (v << 8) | p[i];
    *out = v;
    *next = p + 1 + n;
    return 0;
}

static PyObject *int_from_text(const char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    int neg = 0;
    if (n > 0 && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i < n && n - i <= 19) {
        uint64_t v = 0;
        Py_ssize_t j = i;
        for (; j < n; j++) {
            unsigned d = (unsigned char)s[j] - '0';
            if (d > 9)
                break;
            v = v * 10 + d;
        }
        if (j == n) {
            if (!neg)
                return PyLong_FromUnsignedLongLong(v);
            if (v <= (uint64_t)INT64_MAX)
                return PyLong_FromLongLong(-(long long)v);
            if (v == (uint64_t)INT64_MAX + 1)
                return PyLong_FromLongLong(INT64_MIN);
        }
    }
    char buf[72];
    if (n >= (Py_ssize_t)sizeof(buf)) {
        PyErr_Format(PyExc_ValueError, "an integer value of %zd characters", n);
        return NULL;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    return PyLong_FromString(buf, NULL, 10);
}

static int double_from_text(const char *s, Py_ssize_t n, double *out)
{
    char buf[72];
    if (n >= (Py_ssize_t)sizeof(buf)) {
        PyErr_Format(PyExc_ValueError, "a floating-point value of %zd characters", n);
        return -1;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    char *endp = NULL;
    double d = PyOS_string_to_double(buf, &endp, NULL);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    if (endp != buf + n) {
        PyErr_Format(PyExc_ValueError, "not a floating-point value: %s", buf);
        return -1;
    }
    *out = d;
    return 0;
}

static PyObject *convert(int kind, PyObject *obj, const char *s, Py_ssize_t n)
{
    switch (kind) {
    case T_INT:
        return int_from_text(s, n);
    case T_DOUBLE:
    case T_FLOAT32: {
        double d;
        if (double_from_text(s, n, &d) < 0)
            return NULL;
        if (kind == T_FLOAT32)
            d = (double)(float)d;
        return PyFloat_FromDouble(d);
    }
    case T_DECIMAL: {
        PyObject *text = PyUnicode_DecodeASCII(s, n, NULL);
        if (text == NULL)
            return NULL;
        PyObject *v = PyObject_CallOneArg(obj, text);
        Py_DECREF(text);
        return v;
    }
    case T_TEXT:
        return PyUnicode_DecodeUTF8(s, n, "surrogateescape");
    case T_BYTES:
        return PyBytes_FromStringAndSize(s, n);
    case T_BIT: {
        if (n > 8) {
            PyErr_Format(PyExc_ValueError, "a BIT value of %zd bytes", n);
            return NULL;
        }
        uint64_t v = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            v = (v << 8) | (unsigned char)s[i];
        return PyLong_FromUnsignedLongLong(v);
    }
    case T_CALL: {
        PyObject *text = PyUnicode_DecodeUTF8(s, n, "surrogateescape");
        if (text == NULL)
            return NULL;
        PyObject *v = PyObject_CallOneArg(obj, text);
        Py_DECREF(text);
        return v;
    }
    }
    PyErr_Format(PyExc_ValueError, "unknown value kind %d", kind);
    return NULL;
}

typedef struct {
    Py_ssize_t ncol;
    int *kinds;
    PyObject **objs; /* borrowed from the caller's tuple */
} Columns;

static int columns_from(PyObject *kinds, PyObject *objs, Columns *c)
{
    if (!PyTuple_Check(kinds) || !PyTuple_Check(objs) || PyTuple_GET_SIZE(kinds) != PyTuple_GET_SIZE(objs)) {
        PyErr_SetString(PyExc_TypeError, "kinds and objs must be tuples of the same length");
        return -1;
    }
    c->ncol = PyTuple_GET_SIZE(kinds);
    c->kinds = PyMem_Malloc(sizeof(int) * (c->ncol ? c->ncol : 1));
    c->objs = PyMem_Malloc(sizeof(PyObject *) * (c->ncol ? c->ncol : 1));
    if (c->kinds == NULL || c->objs == NULL) {
        PyMem_Free(c->kinds);
        PyMem_Free(c->objs);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < c->ncol; i++) {
        long k = PyLong_AsLong(PyTuple_GET_ITEM(kinds, i));
        if (k == -1 && PyErr_Occurred())
            goto fail;
        if (k < T_INT || k >= T_LAST) {
            PyErr_Format(PyExc_ValueError, "unknown value kind %ld", k);
            goto fail;
        }
        c->kinds[i] = (int)k;
        c->objs[i] = PyTuple_GET_ITEM(objs, i);
        if ((k == T_DECIMAL || k == T_CALL) && !PyCallable_Check(c->objs[i])) {
            PyErr_Format(PyExc_TypeError, "column %zd needs a callable", i);
            goto fail;
        }
    }
    return 0;
fail:
    PyMem_Free(c->kinds);
    PyMem_Free(c->objs);
    return -1;
}

static void columns_free(Columns *c)
{
    PyMem_Free(c->kinds);
    PyMem_Free(c->objs);
}

/* One row from a whole row payload. */
static PyObject *row_of(const Columns *c, const unsigned char *p, const unsigned char *end)
{
    PyObject *row = PyTuple_New(c->ncol);
    if (row == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < c->ncol; i++) {
        uint64_t len;
        int is_null;
        const unsigned char *next;
        if (read_lenenc(p, end, &len, &is_null, &next) < 0 || (uint64_t)(end - next) < len) {
            PyErr_Format(PyExc_ValueError, "a row packet ends inside column %zd", i);
            Py_DECREF(row);
            return NULL;
        }
        PyObject *v;
        if (is_null) {
            v = Py_None;
            Py_INCREF(v);
        } else {
            v = convert(c->kinds[i], c->objs[i], (const char *)next, (Py_ssize_t)len);
            if (v == NULL) {
                Py_DECREF(row);
                return NULL;
            }
            next += len;
        }
        PyTuple_SET_ITEM(row, i, v);
        p = next;
    }
    if (p != end) {
        PyErr_Format(PyExc_ValueError, "a row packet has %zd bytes after its %zd columns", (Py_ssize_t)(end - p),
                     c->ncol);
        Py_DECREF(row);
        return NULL;
    }
    return row;
}

PyDoc_STRVAR(parse_rows_doc,
             "parse_rows(data, pos, seq, kinds, objs) -> (rows, pos, seq, state)\n\n"
             "Row packets of a text result set from data[pos:]; rows is a list of tuples, pos the first\n"
             "byte not consumed, seq the next expected sequence number and state 0 (more data needed),\n"
             "1 (the EOF packet was consumed), 2 (an error packet starts at pos) or 3 (a packet of\n"
             "16 MiB - 1 bytes starts at pos: a row in several packets).");

static PyObject *parse_rows(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos;
    int seq;
    PyObject *kinds, *objs;
    if (!PyArg_ParseTuple(args, "y*niO!O!", &buf, &pos, &seq, &PyTuple_Type, &kinds, &PyTuple_Type, &objs))
        return NULL;
    Columns c;
    PyObject *rows = NULL;
    if (columns_from(kinds, objs, &c) < 0)
        goto done_buf;
    rows = PyList_New(0);
    if (rows == NULL)
        goto done;
    const unsigned char *base = buf.buf;
    const unsigned char *end = base + buf.len;
    if (pos < 0 || pos > buf.len) {
        PyErr_SetString(PyExc_ValueError, "pos out of range");
        goto fail;
    }
    const unsigned char *p = base + pos;
    int state = S_MORE;
    while (end - p >= 4) {
        Py_ssize_t len = (Py_ssize_t)p[0] | ((Py_ssize_t)p[1] << 8) | ((Py_ssize_t)p[2] << 16);
        int s = p[3];
        if (s != (seq & 0xFF)) {
            PyErr_Format(PyExc_ValueError, "packet sequence number wrong: got %d, expected %d", s, seq & 0xFF);
            goto fail;
        }
        if (len == MAX_PACKET) {
            state = S_BIG;
            break;
        }
        if (len > 0 && end - p >= 5 && p[4] == 0xFF) {
            state = S_ERROR;
            break;
        }
        if (end - p - 4 < len)
            break;
        const unsigned char *payload = p + 4;
        if (len < 9 && len > 0 && payload[0] == 0xFE) {
            p = payload + len;
            seq = (seq + 1) & 0xFF;
            state = S_EOF;
            break;
        }
        PyObject *row = row_of(&c, payload, payload + len);
        if (row == NULL)
            goto fail;
        if (PyList_Append(rows, row) < 0) {
            Py_DECREF(row);
            goto fail;
        }
        Py_DECREF(row);
        p = payload + len;
        seq = (seq + 1) & 0xFF;
    }
    PyObject *out = Py_BuildValue("(Nnii)", rows, (Py_ssize_t)(p - base), seq, state);
    columns_free(&c);
    PyBuffer_Release(&buf);
    return out;
fail:
    Py_XDECREF(rows);
done:
    columns_free(&c);
done_buf:
    PyBuffer_Release(&buf);
    return NULL;
}

PyDoc_STRVAR(parse_row_doc,
             "parse_row(payload, kinds, objs) -> tuple\n\n"
             "One row from the whole payload of a row (its packets joined).");

static PyObject *parse_row(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    PyObject *kinds, *objs;
    if (!PyArg_ParseTuple(args, "y*O!O!", &buf, &PyTuple_Type, &kinds, &PyTuple_Type, &objs))
        return NULL;
    Columns c;
    PyObject *row = NULL;
    if (columns_from(kinds, objs, &c) == 0) {
        const unsigned char *p = buf.buf;
        row = row_of(&c, p, p + buf.len);
        columns_free(&c);
    }
    PyBuffer_Release(&buf);
    return row;
}

static PyMethodDef methods[] = {
    {"parse_rows", parse_rows, METH_VARARGS, parse_rows_doc},
    {"parse_row", parse_row, METH_VARARGS, parse_row_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_textrows",
    "Text-protocol result rows split and converted to the binlog decoder's values.", -1, methods,
};

PyMODINIT_FUNC PyInit__textrows(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "T_INT", T_INT) < 0 || PyModule_AddIntConstant(m, "T_DOUBLE", T_DOUBLE) < 0 ||
        PyModule_AddIntConstant(m, "T_FLOAT32", T_FLOAT32) < 0 ||
        PyModule_AddIntConstant(m, "T_DECIMAL", T_DECIMAL) < 0 || PyModule_AddIntConstant(m, "T_TEXT", T_TEXT) < 0 ||
        PyModule_AddIntConstant(m, "T_BYTES", T_BYTES) < 0 || PyModule_AddIntConstant(m, "T_BIT", T_BIT) < 0 ||
        PyModule_AddIntConstant(m, "T_CALL", T_CALL) < 0 || PyModule_AddIntConstant(m, "S_MORE", S_MORE) < 0 ||
        PyModule_AddIntConstant(m, "S_EOF", S_EOF) < 0 || PyModule_AddIntConstant(m, "S_ERROR", S_ERROR) < 0 ||
        PyModule_AddIntConstant(m, "S_BIG", S_BIG) < 0 || PyModule_AddIntConstant(m, "MAX_PACKET", MAX_PACKET) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
