/*
 * canal-json row messages rendered in C.
 *
 * A Columns object describes the columns of one canal-json "data"/"old" object
 * (built once per table shape by codec.canal_json.native): for each
 * column its kind, its index in the row image, its key ('"name":' in UTF-8), the
 * DECIMAL scale, the column's reference formatter and, for ENUM, the map from
 * element name to token. Values of the Python type the model documents for the
 * column are rendered here; any other value goes through the column's reference
 * formatter, so the text is always the reference's (codec.canal_json.reference).
 * Strings are escaped like easyjson's jwriter.String
 * (codec.canal_json.reference.json_str): <, >, & and U+2028/2029
 * as \uXXXX, control bytes as \u00xx in lower case except \t \n \r, a lone
 * surrogate that stands for one undecodable byte (U+DC80..U+DCFF) as one
 * \ufffd, any other lone surrogate as three.
 *
 * Columns.message(prefix, before, middle, img, suffix) returns the whole message
 * as bytes: prefix, the columns of before (when given) and middle, the columns of
 * img, suffix. Columns.message_changed(prefix, before, middle, img, suffix) is the
 * same with only the columns of before whose token differs from img's (canal-json's
 * only-output-updated-columns). Both return None, "not handled here", when an
 * image is not a tuple of the table's width: the caller renders that row with the
 * reference. Any other failure (a formatter's error included) raises.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    R_INT = 1, /* int: "123" */
    R_DOUBLE,  /* float (DOUBLE): Go's FormatFloat(v, 'f', -1, 64) */
    R_DECIMAL, /* decimal.Decimal with `scale` fraction digits */
    R_BYTES,   /* bytes as ISO-8859-1 text */
    R_STR,     /* str */
    R_ENUM,    /* str looked up in `map` */
    R_OTHER,   /* always the reference formatter */
    R_LAST
};

typedef struct {
    int kind;
    Py_ssize_t index;
    PyObject *key; /* bytes: '"name":' */
    long scale;    /* R_DECIMAL: fraction digits, -1 for none */
    PyObject *fmt; /* callable(value) -> str: the reference formatter */
    PyObject *map; /* R_ENUM: dict name -> token (str), else NULL */
} RCol;

typedef struct {
    PyObject_HEAD
    Py_ssize_t width; /* length of a row image */
    Py_ssize_t n;
    RCol *cols;
    PyObject *decimal_type;
} ColumnsObject;

static PyObject *S_op, *S_before, *S_after, *S_commit_ts; /* interned attribute names of a row change */

/* ------------------------------------------------------------------ output buffer */

#define STACK_BYTES 4096

typedef struct {
    char *p;
    size_t len;
    size_t cap;
    char *heap; /* NULL while p is the caller's stack buffer */
} Buf;

static int buf_grow(Buf *b, size_t need)
{
    size_t cap = b->cap;
    char *np;
    if (need > (size_t)PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    while (cap < b->len + need) {
        if (cap > (size_t)PY_SSIZE_T_MAX / 2) {
            cap = b->len + need;
            break;
        }
        cap *= 2;
    }
    if (b->heap == NULL) {
        np = PyMem_Malloc(cap);
        if (np == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(np, b->p, b->len);
    } else {
        np = PyMem_Realloc(b->heap, cap);
        if (np == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    b->heap = np;
    b->p = np;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(Buf *b, size_t need)
{
    if (b->cap - b->len >= need)
        return 0;
    return buf_grow(b, need);
}

static inline int buf_put(Buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static inline int buf_putc(Buf *b, char c)
{
    if (buf_reserve(b, 1) < 0)
        return -1;
    b->p[b->len++] = c;
    return 0;
}

/* The UTF-8 of a str, written verbatim. */
static int buf_put_str(Buf *b, PyObject *s)
{
    Py_ssize_t n;
    const char *u;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "canal-json: expected str, got %.80s", Py_TYPE(s)->tp_name);
        return -1;
    }
    u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL)
        return -1;
    return buf_put(b, u, (size_t)n);
}

/* ------------------------------------------------------------------ easyjson escaping */

static const char HEX[] = "0123456789abcdef";

/* 1 for ASCII characters that need an escape */
static unsigned char NEEDS_ESCAPE[128];

static void init_escape_table(void)
{
    int i;
    for (i = 0; i < 0x20; i++)
        NEEDS_ESCAPE[i] = 1;
    NEEDS_ESCAPE['"'] = 1;
    NEEDS_ESCAPE['\\'] = 1;
    NEEDS_ESCAPE['<'] = 1;
    NEEDS_ESCAPE['>'] = 1;
    NEEDS_ESCAPE['&'] = 1;
}

/* One ASCII character that needs an escape (at most 6 bytes; room reserved by the caller). */
static inline void put_ascii_escape(Buf *b, unsigned int c)
{
    char *o = b->p + b->len;
    switch (c) {
    case '\t':
        o[0] = '\\';
        o[1] = 't';
        b->len += 2;
        return;
    case '\n':
        o[0] = '\\';
        o[1] = 'n';
        b->len += 2;
        return;
    case '\r':
        o[0] = '\\';
        o[1] = 'r';
        b->len += 2;
        return;
    case '"':
        o[0] = '\\';
        o[1] = '"';
        b->len += 2;
        return;
    case '\\':
        o[0] = '\\';
        o[1] = '\\';
        b->len += 2;
        return;
    default:
        o[0] = '\\';
        o[1] = 'u';
        o[2] = '0';
        o[3] = '0';
        o[4] = HEX[(c >> 4) & 0xF];
        o[5] = HEX[c & 0xF];
        b->len += 6;
        return;
    }
}

/* A JSON string of ISO-8859-1 bytes (every byte one code point). */
static int put_latin1(Buf *b, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0, run;
    if (buf_putc(b, '"') < 0)
        return -1;
    while (i < n) {
        run = i;
        while (run < n && s[run] < 0x80 && !NEEDS_ESCAPE[s[run]])
            run++;
        if (run > i) {
            if (buf_put(b, (const char *)s + i, (size_t)(run - i)) < 0)
                return -1;
            i = run;
            if (i >= n)
                break;
        }
        if (buf_reserve(b, 6) < 0)
            return -1;
        if (s[i] >= 0x80) {
            b->p[b->len++] = (char)(0xC0 | (s[i] >> 6));
            b->p[b->len++] = (char)(0x80 | (s[i] & 0x3F));
        } else {
            put_ascii_escape(b, s[i]);
        }
        i++;
    }
    return buf_putc(b, '"');
}

/* A JSON string of a str, escaped like easyjson (see the file comment). */
static int put_str(Buf *b, PyObject *s)
{
    int kind;
    const void *data;
    Py_ssize_t n, i;
    if (PyUnicode_READY(s) < 0)
        return -1;
    n = PyUnicode_GET_LENGTH(s);
    kind = PyUnicode_KIND(s);
    data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND)
        return put_latin1(b, (const unsigned char *)data, n);
    if (buf_putc(b, '"') < 0)
        return -1;
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        char *o;
        /* at most 18 bytes: a lone surrogate other than U+DC80..U+DCFF */
        if (buf_reserve(b, 18) < 0)
            return -1;
        if (c < 0x80) {
            if (NEEDS_ESCAPE[c])
                put_ascii_escape(b, c);
            else
                b->p[b->len++] = (char)c;
            continue;
        }
        o = b->p + b->len;
        if (c < 0x800) {
            o[0] = (char)(0xC0 | (c >> 6));
            o[1] = (char)(0x80 | (c & 0x3F));
            b->len += 2;
        } else if (c == 0x2028 || c == 0x2029) {
            memcpy(o, c == 0x2028 ? "\\u2028" : "\\u2029", 6);
            b->len += 6;
        } else if (c >= 0xD800 && c <= 0xDFFF) {
            if (c >= 0xDC80 && c <= 0xDCFF) {
                memcpy(o, "\\ufffd", 6);
                b->len += 6;
            } else {
                memcpy(o, "\\ufffd\\ufffd\\ufffd", 18);
                b->len += 18;
            }
        } else if (c < 0x10000) {
            o[0] = (char)(0xE0 | (c >> 12));
            o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            o[2] = (char)(0x80 | (c & 0x3F));
            b->len += 3;
        } else {
            o[0] = (char)(0xF0 | (c >> 18));
            o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
            o[3] = (char)(0x80 | (c & 0x3F));
            b->len += 4;
        }
    }
    return buf_putc(b, '"');
}

/* ------------------------------------------------------------------ values */

/* The reference formatter's token for v (a str), written as UTF-8. */
static int put_reference(Buf *b, const RCol *c, PyObject *v)
{
    int rc;
    PyObject *tok = PyObject_CallOneArg(c->fmt, v);
    if (tok == NULL)
        return -1;
    rc = buf_put_str(b, tok);
    Py_DECREF(tok);
    return rc;
}

static int put_quoted(Buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n + 2) < 0)
        return -1;
    b->p[b->len++] = '"';
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len++] = '"';
    return 0;
}

/* '"<digits>"' of a magnitude with an optional minus sign */
static int put_u64(Buf *b, int negative, unsigned long long u)
{
    char tmp[24];
    size_t k = sizeof tmp;
    do {
        tmp[--k] = (char)('0' + (u % 10));
        u /= 10;
    } while (u != 0 && k > 1);
    if (negative)
        tmp[--k] = '-';
    return put_quoted(b, tmp + k, sizeof tmp - k);
}

static int put_int(Buf *b, const RCol *c, PyObject *v)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow == 0) {
        if (x < 0)
            return put_u64(b, 1, (unsigned long long)0 - (unsigned long long)x);
        return put_u64(b, 0, (unsigned long long)x);
    } else if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return -1;
            PyErr_Clear();
            return put_reference(b, c, v); /* wider than 64 bits */
        }
        return put_u64(b, 0, u);
    }
    return put_reference(b, c, v); /* below -2**63 */
}

/* The shortest repr of ``d`` (Python's, the same digits as Go) with a trailing ".0" dropped, its
 * length in *n; free it with PyMem_Free. NULL without an error set when it has an exponent or is
 * inf/nan (the column's formatter spells those out), NULL with an error set on failure. */
static char *double_text(double d, size_t *n)
{
    char *r = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (r == NULL)
        return NULL;
    if (strchr(r, 'e') != NULL || strchr(r, 'n') != NULL) {
        PyMem_Free(r);
        return NULL;
    }
    *n = strlen(r);
    if (*n >= 2 && r[*n - 2] == '.' && r[*n - 1] == '0')
        *n -= 2;
    return r;
}

/* str(v) of a Decimal when it is already the column's text: no exponent, exactly ``scale``
 * fractional digits; its UTF-8 in *u, *n. NULL without an error set when it needs the column's
 * formatter (quantizing, an exponent), NULL with an error set on failure. */
static PyObject *decimal_text(PyObject *v, int scale, const char **u, Py_ssize_t *n)
{
    int ok;
    PyObject *s = PyObject_Str(v);
    if (s == NULL)
        return NULL;
    *u = PyUnicode_AsUTF8AndSize(s, n);
    if (*u == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    ok = memchr(*u, 'E', (size_t)*n) == NULL;
    if (ok && scale == 0)
        ok = memchr(*u, '.', (size_t)*n) == NULL;
    else if (ok && scale > 0)
        ok = *n > scale && (*u)[*n - scale - 1] == '.';
    if (!ok) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

static int put_double(Buf *b, const RCol *c, PyObject *v)
{
    int rc;
    size_t n;
    char *r = double_text(PyFloat_AS_DOUBLE(v), &n);
    if (r == NULL) /* an exponent, inf or nan: the reference spells it out */
        return PyErr_Occurred() ? -1 : put_reference(b, c, v);
    rc = put_quoted(b, r, n);
    PyMem_Free(r);
    return rc;
}

static int put_decimal(Buf *b, const RCol *c, PyObject *v)
{
    int rc;
    Py_ssize_t n;
    const char *u;
    PyObject *s = decimal_text(v, c->scale, &u, &n);
    if (s == NULL) /* needs quantizing or has an exponent */
        return PyErr_Occurred() ? -1 : put_reference(b, c, v);
    rc = put_quoted(b, u, (size_t)n);
    Py_DECREF(s);
    return rc;
}

static int put_value(ColumnsObject *self, Buf *b, const RCol *c, PyObject *v)
{
    if (v == Py_None)
        return buf_put(b, "null", 4);
    switch (c->kind) {
    case R_INT:
        if (PyLong_CheckExact(v))
            return put_int(b, c, v);
        break;
    case R_DOUBLE:
        if (PyFloat_CheckExact(v))
            return put_double(b, c, v);
        break;
    case R_DECIMAL:
        if ((PyObject *)Py_TYPE(v) == self->decimal_type)
            return put_decimal(b, c, v);
        break;
    case R_BYTES:
        if (PyBytes_CheckExact(v))
            return put_latin1(b, (const unsigned char *)PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
        break;
    case R_STR:
        if (PyUnicode_CheckExact(v))
            return put_str(b, v);
        break;
    case R_ENUM:
        if (PyUnicode_CheckExact(v) && c->map != NULL) {
            PyObject *tok = PyDict_GetItemWithError(c->map, v); /* borrowed */
            if (tok != NULL)
                return buf_put_str(b, tok);
            if (PyErr_Occurred())
                return -1;
        }
        break;
    default:
        break;
    }
    return put_reference(b, c, v);
}

/* '"a":"1","b":null' for one image (its width checked by the caller). */
static int put_columns(ColumnsObject *self, Buf *b, PyObject *img)
{
    Py_ssize_t i;
    for (i = 0; i < self->n; i++) {
        const RCol *c = &self->cols[i];
        if (i > 0 && buf_putc(b, ',') < 0)
            return -1;
        if (buf_put(b, PyBytes_AS_STRING(c->key), (size_t)PyBytes_GET_SIZE(c->key)) < 0)
            return -1;
        if (put_value(self, b, c, PyTuple_GET_ITEM(img, c->index)) < 0)
            return -1;
    }
    return 0;
}

static int image_ok(ColumnsObject *self, PyObject *img)
{
    return PyTuple_CheckExact(img) && PyTuple_GET_SIZE(img) == self->width;
}

/* ------------------------------------------------------------------ Columns */

static void Columns_clear_cols(ColumnsObject *self)
{
    Py_ssize_t i;
    if (self->cols == NULL)
        return;
    for (i = 0; i < self->n; i++) {
        Py_XDECREF(self->cols[i].key);
        Py_XDECREF(self->cols[i].fmt);
        Py_XDECREF(self->cols[i].map);
    }
    PyMem_Free(self->cols);
    self->cols = NULL;
    self->n = 0;
}

static void Columns_dealloc(ColumnsObject *self)
{
    Columns_clear_cols(self);
    Py_XDECREF(self->decimal_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Columns_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"width", "columns", "decimal_type", NULL};
    Py_ssize_t width, n, i;
    PyObject *columns, *decimal_type, *seq;
    ColumnsObject *self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nOO", kwlist, &width, &columns, &decimal_type))
        return NULL;
    if (width < 0) {
        PyErr_SetString(PyExc_ValueError, "Columns: width must be >= 0");
        return NULL;
    }
    if (!PyType_Check(decimal_type)) {
        PyErr_SetString(PyExc_TypeError, "Columns: decimal_type must be a type");
        return NULL;
    }
    seq = PySequence_Fast(columns, "Columns: columns must be a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    self = (ColumnsObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    self->width = width;
    Py_INCREF(decimal_type);
    self->decimal_type = decimal_type;
    self->cols = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(RCol));
    if (self->cols == NULL) {
        Py_DECREF(seq);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        int kind;
        Py_ssize_t index;
        long scale;
        PyObject *key, *fmt, *map;
        RCol *c = &self->cols[i];
        if (!PyTuple_Check(item)
            || !PyArg_ParseTuple(item, "inSlOO", &kind, &index, &key, &scale, &fmt, &map)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "Columns: each column is (kind, index, key, scale, fmt, map)");
            goto fail;
        }
        if (kind < R_INT || kind >= R_LAST) {
            PyErr_Format(PyExc_ValueError, "Columns: unknown kind %d", kind);
            goto fail;
        }
        if (index < 0 || index >= width) {
            PyErr_Format(PyExc_ValueError, "Columns: index %zd outside a row of %zd columns", index, width);
            goto fail;
        }
        if (!PyCallable_Check(fmt)) {
            PyErr_SetString(PyExc_TypeError, "Columns: fmt must be callable");
            goto fail;
        }
        if (map != Py_None && !PyDict_Check(map)) {
            PyErr_SetString(PyExc_TypeError, "Columns: map must be a dict or None");
            goto fail;
        }
        if (kind == R_ENUM && map == Py_None) {
            PyErr_SetString(PyExc_ValueError, "Columns: an ENUM column needs its map");
            goto fail;
        }
        c->kind = kind;
        c->index = index;
        c->scale = scale;
        Py_INCREF(key);
        c->key = key;
        Py_INCREF(fmt);
        c->fmt = fmt;
        if (map != Py_None) {
            Py_INCREF(map);
            c->map = map;
        }
        self->n = i + 1;
    }
    Py_DECREF(seq);
    return (PyObject *)self;
fail:
    Py_DECREF(seq);
    Py_DECREF(self);
    return NULL;
}

static PyObject *finish(Buf *b)
{
    PyObject *out = PyBytes_FromStringAndSize(b->p, (Py_ssize_t)b->len);
    if (b->heap != NULL)
        PyMem_Free(b->heap);
    return out;
}

static PyObject *fail_buf(Buf *b)
{
    if (b->heap != NULL)
        PyMem_Free(b->heap);
    return NULL;
}

static PyObject *Columns_render(ColumnsObject *self, PyObject *img)
{
    char stack[STACK_BYTES];
    Buf b = {stack, 0, sizeof stack, NULL};
    if (!image_ok(self, img))
        Py_RETURN_NONE;
    if (put_columns(self, &b, img) < 0)
        return fail_buf(&b);
    return finish(&b);
}

static PyObject *Columns_message(ColumnsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    char stack[STACK_BYTES];
    Buf b = {stack, 0, sizeof stack, NULL};
    PyObject *prefix, *before, *middle, *img, *suffix;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "message(prefix, before, middle, img, suffix) takes 5 arguments");
        return NULL;
    }
    prefix = args[0];
    before = args[1];
    middle = args[2];
    img = args[3];
    suffix = args[4];
    if (!image_ok(self, img) || (before != Py_None && !image_ok(self, before)))
        Py_RETURN_NONE;
    if (buf_put_str(&b, prefix) < 0)
        return fail_buf(&b);
    if (before != Py_None) {
        if (put_columns(self, &b, before) < 0 || buf_put_str(&b, middle) < 0)
            return fail_buf(&b);
    }
    if (put_columns(self, &b, img) < 0 || buf_put_str(&b, suffix) < 0)
        return fail_buf(&b);
    return finish(&b);
}

/* One message of messages(): NULL on error, Py_None (a new reference) when the fallback must render it. */
static PyObject *run_message(ColumnsObject *self, PyObject *row, PyObject *ts, PyObject *const *args,
                             PyObject *promotions)
{
    char stack[STACK_BYTES];
    Buf b = {stack, 0, sizeof stack, NULL};
    PyObject *op, *before, *after, *img, *prefix, *out = NULL;
    Py_ssize_t i, np;
    int is_update = 0;
    Py_UCS4 c;
    PyObject *row_ts = PyObject_GetAttr(row, S_commit_ts);
    int same_ts;
    if (row_ts == NULL)
        return NULL;
    same_ts = PyObject_RichCompareBool(row_ts, ts, Py_EQ);
    Py_DECREF(row_ts);
    if (same_ts != 1) {
        /* the prefixes carry another commit_ts (or the comparison failed): the fallback writes it */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    op = PyObject_GetAttr(row, S_op);
    if (op == NULL)
        return NULL;
    before = PyObject_GetAttr(row, S_before);
    if (before == NULL) {
        Py_DECREF(op);
        return NULL;
    }
    after = PyObject_GetAttr(row, S_after);
    if (after == NULL) {
        Py_DECREF(op);
        Py_DECREF(before);
        return NULL;
    }
    c = PyUnicode_Check(op) && PyUnicode_GET_LENGTH(op) == 1 ? PyUnicode_READ_CHAR(op, 0) : 0;
    if (c == 'D') {
        img = before;
        prefix = args[2];
    } else if (c == 'I' || (c == 'U' && before == Py_None)) {
        img = after;
        prefix = args[0];
    } else if (c == 'U') {
        img = after;
        prefix = args[1];
        is_update = 1;
    } else {
        goto fallback;
    }
    if (prefix == Py_None || !image_ok(self, img) || (is_update && !image_ok(self, before)))
        goto fallback;
    /* an UNSIGNED value above its signed range changes the sqlType: the fallback writes that one */
    np = PyTuple_GET_SIZE(promotions);
    for (i = 0; i < np; i++) {
        PyObject *p = PyTuple_GET_ITEM(promotions, i);
        PyObject *v = PyTuple_GET_ITEM(img, PyLong_AsSsize_t(PyTuple_GET_ITEM(p, 0)));
        int gt;
        if (v == Py_None)
            continue;
        gt = PyObject_RichCompareBool(v, PyTuple_GET_ITEM(p, 1), Py_GT);
        if (gt != 0) {
            PyErr_Clear(); /* an error: the fallback raises it the reference's way */
            goto fallback;
        }
    }
    if (buf_put_str(&b, prefix) < 0)
        goto fail;
    if (is_update) {
        if (put_columns(self, &b, before) < 0 || buf_put_str(&b, args[3]) < 0)
            goto fail;
    }
    if (put_columns(self, &b, img) < 0 || buf_put_str(&b, args[4]) < 0)
        goto fail;
    out = finish(&b);
    Py_DECREF(op);
    Py_DECREF(before);
    Py_DECREF(after);
    return out;
fallback:
    Py_DECREF(op);
    Py_DECREF(before);
    Py_DECREF(after);
    if (b.heap != NULL)
        PyMem_Free(b.heap);
    Py_RETURN_NONE;
fail:
    Py_DECREF(op);
    Py_DECREF(before);
    Py_DECREF(after);
    return fail_buf(&b);
}

static PyObject *Columns_messages(ColumnsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *rows, *ts, *promotions, *fallback, *seq, *out;
    Py_ssize_t n, i, k;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "messages(rows, ts, insert, update, delete, middle, suffix, promotions, "
                                         "fallback) takes 9 arguments");
        return NULL;
    }
    rows = args[0];
    ts = args[1];
    promotions = args[7];
    fallback = args[8];
    for (k = 2; k <= 4; k++) {
        if (args[k] != Py_None && !PyUnicode_Check(args[k])) {
            PyErr_SetString(PyExc_TypeError, "messages: the prefixes must be str or None");
            return NULL;
        }
    }
    if (!PyTuple_Check(promotions)) {
        PyErr_SetString(PyExc_TypeError, "messages: promotions must be a tuple of (index, limit)");
        return NULL;
    }
    for (k = 0; k < PyTuple_GET_SIZE(promotions); k++) {
        PyObject *p = PyTuple_GET_ITEM(promotions, k);
        Py_ssize_t idx;
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2) {
            PyErr_SetString(PyExc_TypeError, "messages: promotions must be a tuple of (index, limit)");
            return NULL;
        }
        idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(p, 0));
        if (idx == -1 && PyErr_Occurred())
            return NULL;
        if (idx < 0 || idx >= self->width) {
            PyErr_SetString(PyExc_ValueError, "messages: a promotion's index is outside the row");
            return NULL;
        }
    }
    seq = PySequence_Fast(rows, "messages: rows must be a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    /* run_message sees args[2..6]: insert, update, delete, middle, suffix */
    for (i = 0; i < n; i++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *m = run_message(self, row, ts, args + 2, promotions);
        if (m == Py_None) {
            Py_DECREF(m);
            m = PyObject_CallOneArg(fallback, row);
            if (m != NULL && !PyBytes_Check(m)) {
                PyErr_SetString(PyExc_TypeError, "messages: the fallback must return bytes");
                Py_CLEAR(m);
            }
        }
        if (m == NULL) {
            Py_DECREF(seq);
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, m);
    }
    Py_DECREF(seq);
    return out;
}

/* The value tokens of img's columns, one after another, in b; ends[i] is where column i's ends. */
static int put_tokens(ColumnsObject *self, Buf *b, PyObject *img, size_t *ends)
{
    Py_ssize_t i;
    for (i = 0; i < self->n; i++) {
        const RCol *c = &self->cols[i];
        if (put_value(self, b, c, PyTuple_GET_ITEM(img, c->index)) < 0)
            return -1;
        ends[i] = b->len;
    }
    return 0;
}

static PyObject *Columns_message_changed(ColumnsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    char stack[STACK_BYTES], scratch[STACK_BYTES];
    Buf b = {stack, 0, sizeof stack, NULL};
    Buf t = {scratch, 0, sizeof scratch, NULL};
    PyObject *prefix, *before, *middle, *img, *suffix;
    size_t *ends;
    Py_ssize_t i, n = self->n;
    int first = 1;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "message_changed(prefix, before, middle, img, suffix) takes 5 arguments");
        return NULL;
    }
    prefix = args[0];
    before = args[1];
    middle = args[2];
    img = args[3];
    suffix = args[4];
    if (!image_ok(self, img) || !image_ok(self, before))
        Py_RETURN_NONE;
    ends = PyMem_Malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof(size_t));
    if (ends == NULL)
        return PyErr_NoMemory();
    /* before's tokens, then img's (the order the reference formats them in) */
    if (put_tokens(self, &t, before, ends) < 0 || put_tokens(self, &t, img, ends + n) < 0)
        goto fail;
    if (buf_put_str(&b, prefix) < 0)
        goto fail;
    for (i = 0; i < n; i++) {
        size_t o0 = i > 0 ? ends[i - 1] : 0, o1 = ends[i];
        size_t d0 = i > 0 ? ends[n + i - 1] : ends[n - 1], d1 = ends[n + i];
        const RCol *c = &self->cols[i];
        if (o1 - o0 == d1 - d0 && memcmp(t.p + o0, t.p + d0, o1 - o0) == 0)
            continue;
        if ((!first && buf_putc(&b, ',') < 0)
            || buf_put(&b, PyBytes_AS_STRING(c->key), (size_t)PyBytes_GET_SIZE(c->key)) < 0
            || buf_put(&b, t.p + o0, o1 - o0) < 0)
            goto fail;
        first = 0;
    }
    if (buf_put_str(&b, middle) < 0)
        goto fail;
    for (i = 0; i < n; i++) {
        size_t d0 = i > 0 ? ends[n + i - 1] : ends[n - 1], d1 = ends[n + i];
        const RCol *c = &self->cols[i];
        if ((i > 0 && buf_putc(&b, ',') < 0)
            || buf_put(&b, PyBytes_AS_STRING(c->key), (size_t)PyBytes_GET_SIZE(c->key)) < 0
            || buf_put(&b, t.p + d0, d1 - d0) < 0)
            goto fail;
    }
    if (buf_put_str(&b, suffix) < 0)
        goto fail;
    PyMem_Free(ends);
    if (t.heap != NULL)
        PyMem_Free(t.heap);
    return finish(&b);
fail:
    PyMem_Free(ends);
    if (t.heap != NULL)
        PyMem_Free(t.heap);
    return fail_buf(&b);
}

static PyObject *Columns_get_width(ColumnsObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(self->width);
}

static PyMethodDef Columns_methods[] = {
    {"render", (PyCFunction)Columns_render, METH_O,
     "render(img) -> bytes | None: the columns of one image ('\"a\":\"1\",...'), None for a wrong image."},
    {"message", (PyCFunction)(void (*)(void))Columns_message, METH_FASTCALL,
     "message(prefix, before, middle, img, suffix) -> bytes | None: prefix, before's columns and middle "
     "(when before is not None), img's columns, suffix; None for a wrong image."},
    {"message_changed", (PyCFunction)(void (*)(void))Columns_message_changed, METH_FASTCALL,
     "message_changed(prefix, before, middle, img, suffix) -> bytes | None: message() with only the columns "
     "of before whose token differs from img's; None for a wrong image."},
    {"messages", (PyCFunction)(void (*)(void))Columns_messages, METH_FASTCALL,
     "messages(rows, ts, insert, update, delete, middle, suffix, promotions, fallback) -> list[bytes]: the "
     "message of each row change (op, before, after): insert/update/delete prefix, before's columns and middle "
     "(an UPDATE with its pre-image), the image's columns, suffix. A row whose commit_ts is not ts, whose "
     "prefix is None, whose image is wrong, or whose image holds a value above a promotion's (index, limit) "
     "is fallback(row)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Columns_getset[] = {
    {"width", (getter)Columns_get_width, NULL, "length of a row image", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ColumnsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sparkcdc.codec._canaljson.Columns",
    .tp_basicsize = sizeof(ColumnsObject),
    .tp_dealloc = (destructor)Columns_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Columns(width, columns, decimal_type): the columns of one canal-json data/old object.\n\n"
              "columns: (kind, index, key, scale, fmt, map) each, in output order.",
    .tp_new = Columns_new,
    .tp_methods = Columns_methods,
    .tp_getset = Columns_getset,
};

/* ------------------------------------------------------------------ CSV records
 *
 * A CsvFields object renders the value fields of one table's CSV records
 * (codec.csv, TiCDC's pkg/sink/codec/csv), built once per table shape and
 * [sink.csv] options: for each column its kind, its DECIMAL scale and its
 * formatter (codec.csv_kinds.column_formatter, the reference of its text). Values
 * of the type the model documents for the kind are rendered here; NULL is the
 * null string; any other value, and every value of an F_OTHER column, goes
 * through the column's formatter, whose text is the field as it is. String
 * fields are quoted (the quote byte doubled inside) or, with no quote,
 * backslash-escaped (\, CR, LF and the delimiter); text is UTF-8 with
 * surrogateescape (undecodable upstream bytes travel through unchanged).
 *
 * CsvFields.record(head, img, end) returns head, the fields of img joined by
 * the delimiter, and end, as bytes; None when img is not a tuple of the table's
 * width (the caller renders it with the reference, or reports it).
 */

enum {
    F_INT = 1, /* int: digits */
    F_DOUBLE,  /* float (DOUBLE): repr inside (-1e6, 1e6) without an exponent, ".0" dropped */
    F_DECIMAL, /* decimal.Decimal with `scale` fraction digits, as a string field */
    F_TEXT,    /* str as a string field */
    F_BINARY,  /* bytes as base64 or lower-case hex, as a string field */
    F_OTHER,   /* always the formatter */
    F_LAST
};

typedef struct {
    int kind;
    long scale;    /* F_DECIMAL: fraction digits, -1 for none */
    PyObject *fmt; /* callable(value) -> str: the field's text */
} FCol;

typedef struct {
    PyObject_HEAD
    Py_ssize_t width;
    FCol *cols;
    PyObject *decimal_type;
    PyObject *delim;     /* bytes */
    PyObject *null;      /* bytes */
    PyObject *esc_delim; /* bytes: the delimiter with a backslash before each character */
    int quote;           /* the quote byte, -1: no quote, backslash escaping */
    int hex;             /* binary as hex, else base64 */
    unsigned char special[256]; /* escaping: bytes that may start an escape */
} CsvFieldsObject;

/* The UTF-8 of a str (surrogateescape): *u and *n; *hold gets a bytes object to release when one was made. */
static int utf8_of(PyObject *s, const char **u, Py_ssize_t *n, PyObject **hold)
{
    *hold = NULL;
    if (PyUnicode_READY(s) < 0)
        return -1;
    if (PyUnicode_IS_ASCII(s)) {
        *u = (const char *)PyUnicode_DATA(s);
        *n = PyUnicode_GET_LENGTH(s);
        return 0;
    }
    *u = PyUnicode_AsUTF8AndSize(s, n);
    if (*u != NULL)
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
    PyErr_Clear();
    *hold = PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape");
    if (*hold == NULL)
        return -1;
    *u = PyBytes_AS_STRING(*hold);
    *n = PyBytes_GET_SIZE(*hold);
    return 0;
}

/* A str's UTF-8 written as it is (a formatter's field, a record's head or end). */
static int put_utf8(Buf *b, PyObject *s)
{
    const char *u;
    Py_ssize_t n;
    PyObject *hold;
    int rc;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "csv: expected str, got %.80s", Py_TYPE(s)->tp_name);
        return -1;
    }
    if (utf8_of(s, &u, &n, &hold) < 0)
        return -1;
    rc = buf_put(b, u, (size_t)n);
    Py_XDECREF(hold);
    return rc;
}

/* Text as a string field: quoted with the quote doubled, or backslash-escaped. */
static int put_string_field(CsvFieldsObject *self, Buf *b, const char *u, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    if (self->quote >= 0) {
        const char q = (char)self->quote;
        if (buf_putc(b, q) < 0)
            return -1;
        while (i < n) {
            const char *hit = memchr(u + i, q, (size_t)(n - i));
            Py_ssize_t run = hit == NULL ? n - i : hit - (u + i);
            if (buf_put(b, u + i, (size_t)run) < 0)
                return -1;
            i += run;
            if (hit != NULL) {
                if (buf_put(b, u + i, 1) < 0 || buf_putc(b, q) < 0)
                    return -1;
                i++;
            }
        }
        return buf_putc(b, q);
    } else {
        const char *d = PyBytes_AS_STRING(self->delim);
        Py_ssize_t dn = PyBytes_GET_SIZE(self->delim);
        while (i < n) {
            Py_ssize_t run = i;
            unsigned char c;
            while (run < n && !self->special[(unsigned char)u[run]])
                run++;
            if (buf_put(b, u + i, (size_t)(run - i)) < 0)
                return -1;
            i = run;
            if (i >= n)
                break;
            c = (unsigned char)u[i];
            if (dn <= n - i && memcmp(u + i, d, (size_t)dn) == 0) {
                if (buf_put(b, PyBytes_AS_STRING(self->esc_delim), (size_t)PyBytes_GET_SIZE(self->esc_delim)) < 0)
                    return -1;
                i += dn;
            } else if (c == '\\') {
                if (buf_put(b, "\\\\", 2) < 0)
                    return -1;
                i++;
            } else if (c == '\r') {
                if (buf_put(b, "\\r", 2) < 0)
                    return -1;
                i++;
            } else if (c == '\n') {
                if (buf_put(b, "\\n", 2) < 0)
                    return -1;
                i++;
            } else {
                if (buf_put(b, u + i, 1) < 0)
                    return -1;
                i++;
            }
        }
        return 0;
    }
}

static int put_formatted(Buf *b, const FCol *c, PyObject *v)
{
    int rc;
    PyObject *s = PyObject_CallOneArg(c->fmt, v);
    if (s == NULL)
        return -1;
    rc = put_utf8(b, s);
    Py_DECREF(s);
    return rc;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int put_binary_field(CsvFieldsObject *self, Buf *b, const unsigned char *s, Py_ssize_t n)
{
    char stack[1024];
    Buf t = {stack, 0, sizeof stack, NULL};
    Py_ssize_t i;
    int rc;
    if (self->hex) {
        if (buf_reserve(&t, (size_t)n * 2) < 0)
            goto fail;
        for (i = 0; i < n; i++) {
            t.p[t.len++] = HEX[s[i] >> 4];
            t.p[t.len++] = HEX[s[i] & 15];
        }
    } else {
        if (buf_reserve(&t, ((size_t)n + 2) / 3 * 4) < 0)
            goto fail;
        for (i = 0; i + 2 < n; i += 3) {
            unsigned int x = ((unsigned int)s[i] << 16) | ((unsigned int)s[i + 1] << 8) | s[i + 2];
            t.p[t.len++] = B64[(x >> 18) & 63];
            t.p[t.len++] = B64[(x >> 12) & 63];
            t.p[t.len++] = B64[(x >> 6) & 63];
            t.p[t.len++] = B64[x & 63];
        }
        if (n - i == 1) {
            unsigned int x = (unsigned int)s[i] << 16;
            t.p[t.len++] = B64[(x >> 18) & 63];
            t.p[t.len++] = B64[(x >> 12) & 63];
            t.p[t.len++] = '=';
            t.p[t.len++] = '=';
        } else if (n - i == 2) {
            unsigned int x = ((unsigned int)s[i] << 16) | ((unsigned int)s[i + 1] << 8);
            t.p[t.len++] = B64[(x >> 18) & 63];
            t.p[t.len++] = B64[(x >> 12) & 63];
            t.p[t.len++] = B64[(x >> 6) & 63];
            t.p[t.len++] = '=';
        }
    }
    rc = put_string_field(self, b, t.p, (Py_ssize_t)t.len);
    if (t.heap != NULL)
        PyMem_Free(t.heap);
    return rc;
fail:
    if (t.heap != NULL)
        PyMem_Free(t.heap);
    return -1;
}

static int put_csv_int(Buf *b, const FCol *c, PyObject *v)
{
    char tmp[24];
    size_t k = sizeof tmp;
    int overflow = 0, negative = 0;
    unsigned long long u;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow != 0)
        return put_formatted(b, c, v); /* wider than 64 bits */
    if (x < 0) {
        negative = 1;
        u = (unsigned long long)0 - (unsigned long long)x;
    } else {
        u = (unsigned long long)x;
    }
    do {
        tmp[--k] = (char)('0' + (u % 10));
        u /= 10;
    } while (u != 0 && k > 1);
    if (negative)
        tmp[--k] = '-';
    return buf_put(b, tmp + k, sizeof tmp - k);
}

static int put_csv_double(Buf *b, const FCol *c, PyObject *v)
{
    int rc;
    size_t n;
    char *r;
    double d = PyFloat_AS_DOUBLE(v);
    if (!(d > -1e6 && d < 1e6))
        return put_formatted(b, c, v); /* Go's %v has an exponent from 1e6 on (NaN too) */
    r = double_text(d, &n);
    if (r == NULL)
        return PyErr_Occurred() ? -1 : put_formatted(b, c, v);
    rc = buf_put(b, r, n);
    PyMem_Free(r);
    return rc;
}

static int put_csv_decimal(CsvFieldsObject *self, Buf *b, const FCol *c, PyObject *v)
{
    int rc;
    Py_ssize_t n;
    const char *u;
    PyObject *s = decimal_text(v, c->scale, &u, &n);
    if (s == NULL) /* needs quantizing or has an exponent */
        return PyErr_Occurred() ? -1 : put_formatted(b, c, v);
    rc = put_string_field(self, b, u, n);
    Py_DECREF(s);
    return rc;
}

static int put_csv_value(CsvFieldsObject *self, Buf *b, const FCol *c, PyObject *v)
{
    if (v == Py_None)
        return buf_put(b, PyBytes_AS_STRING(self->null), (size_t)PyBytes_GET_SIZE(self->null));
    switch (c->kind) {
    case F_INT:
        if (PyLong_CheckExact(v))
            return put_csv_int(b, c, v);
        break;
    case F_DOUBLE:
        if (PyFloat_CheckExact(v))
            return put_csv_double(b, c, v);
        break;
    case F_DECIMAL:
        if ((PyObject *)Py_TYPE(v) == self->decimal_type)
            return put_csv_decimal(self, b, c, v);
        break;
    case F_TEXT:
        if (PyUnicode_CheckExact(v)) {
            const char *u;
            Py_ssize_t n;
            PyObject *hold;
            int rc;
            if (utf8_of(v, &u, &n, &hold) < 0)
                return -1;
            if (hold != NULL && self->quote < 0) {
                /* undecodable bytes next to each other may spell a non-ASCII delimiter's UTF-8,
                   which the reference (matching characters) does not escape: its formatter decides */
                Py_DECREF(hold);
                return put_formatted(b, c, v);
            }
            rc = put_string_field(self, b, u, n);
            Py_XDECREF(hold);
            return rc;
        }
        break;
    case F_BINARY:
        if (PyBytes_CheckExact(v))
            return put_binary_field(self, b, (const unsigned char *)PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
        break;
    default:
        break;
    }
    return put_formatted(b, c, v);
}

static void CsvFields_dealloc(CsvFieldsObject *self)
{
    Py_ssize_t i;
    if (self->cols != NULL) {
        for (i = 0; i < self->width; i++)
            Py_XDECREF(self->cols[i].fmt);
        PyMem_Free(self->cols);
    }
    Py_XDECREF(self->decimal_type);
    Py_XDECREF(self->delim);
    Py_XDECREF(self->null);
    Py_XDECREF(self->esc_delim);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *CsvFields_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"columns", "decimal_type", "delimiter", "quote", "null", "hex", NULL};
    Py_ssize_t n, i;
    PyObject *columns, *decimal_type, *delim, *quote, *null, *seq;
    int hex;
    CsvFieldsObject *self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOSSSp", kwlist, &columns, &decimal_type, &delim, &quote,
                                     &null, &hex))
        return NULL;
    if (!PyType_Check(decimal_type)) {
        PyErr_SetString(PyExc_TypeError, "CsvFields: decimal_type must be a type");
        return NULL;
    }
    if (PyBytes_GET_SIZE(delim) < 1 || PyBytes_GET_SIZE(quote) > 1) {
        PyErr_SetString(PyExc_ValueError, "CsvFields: the delimiter must not be empty, the quote one byte at most");
        return NULL;
    }
    seq = PySequence_Fast(columns, "CsvFields: columns must be a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    self = (CsvFieldsObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_INCREF(decimal_type);
    self->decimal_type = decimal_type;
    Py_INCREF(delim);
    self->delim = delim;
    Py_INCREF(null);
    self->null = null;
    self->hex = hex;
    self->quote = PyBytes_GET_SIZE(quote) == 1 ? (unsigned char)PyBytes_AS_STRING(quote)[0] : -1;
    {
        /* the delimiter with a backslash before each character (a UTF-8 lead byte or an ASCII byte) */
        const char *d = PyBytes_AS_STRING(delim);
        Py_ssize_t dn = PyBytes_GET_SIZE(delim), k, m = 0;
        char esc[16];
        for (k = 0; k < dn && m < (Py_ssize_t)sizeof esc - 1; k++) {
            if (((unsigned char)d[k] & 0xC0) != 0x80)
                esc[m++] = '\\';
            esc[m++] = d[k];
        }
        if (k < dn) {
            PyErr_SetString(PyExc_ValueError, "CsvFields: delimiter too long");
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
        self->esc_delim = PyBytes_FromStringAndSize(esc, m);
        if (self->esc_delim == NULL) {
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
        memset(self->special, 0, sizeof self->special);
        self->special['\\'] = self->special['\r'] = self->special['\n'] = 1;
        self->special[(unsigned char)d[0]] = 1;
    }
    self->cols = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(FCol));
    if (self->cols == NULL) {
        Py_DECREF(seq);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        int kind;
        long scale;
        PyObject *fmt;
        FCol *c = &self->cols[i];
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "ilO", &kind, &scale, &fmt)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "CsvFields: each column is (kind, scale, fmt)");
            goto fail;
        }
        if (kind < F_INT || kind >= F_LAST) {
            PyErr_Format(PyExc_ValueError, "CsvFields: unknown kind %d", kind);
            goto fail;
        }
        if (!PyCallable_Check(fmt)) {
            PyErr_SetString(PyExc_TypeError, "CsvFields: fmt must be callable");
            goto fail;
        }
        c->kind = kind;
        c->scale = scale;
        Py_INCREF(fmt);
        c->fmt = fmt;
        self->width = i + 1;
    }
    Py_DECREF(seq);
    return (PyObject *)self;
fail:
    Py_DECREF(seq);
    Py_DECREF(self);
    return NULL;
}

static PyObject *CsvFields_record(CsvFieldsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    char stack[STACK_BYTES];
    Buf b = {stack, 0, sizeof stack, NULL};
    PyObject *head, *img, *end;
    Py_ssize_t i;
    const char *d = PyBytes_AS_STRING(self->delim);
    size_t dn = (size_t)PyBytes_GET_SIZE(self->delim);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record(head, img, end) takes 3 arguments");
        return NULL;
    }
    head = args[0];
    img = args[1];
    end = args[2];
    if (!PyTuple_CheckExact(img) || PyTuple_GET_SIZE(img) != self->width)
        Py_RETURN_NONE;
    if (put_utf8(&b, head) < 0)
        return fail_buf(&b);
    for (i = 0; i < self->width; i++) {
        if (i > 0 && buf_put(&b, d, dn) < 0)
            return fail_buf(&b);
        if (put_csv_value(self, &b, &self->cols[i], PyTuple_GET_ITEM(img, i)) < 0)
            return fail_buf(&b);
    }
    if (put_utf8(&b, end) < 0)
        return fail_buf(&b);
    return finish(&b);
}

static PyObject *CsvFields_get_width(CsvFieldsObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(self->width);
}

static PyMethodDef CsvFields_methods[] = {
    {"record", (PyCFunction)(void (*)(void))CsvFields_record, METH_FASTCALL,
     "record(head, img, end) -> bytes | None: head, img's fields joined by the delimiter, end (UTF-8, "
     "surrogateescape); None when img is not a tuple of the table's width."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CsvFields_getset[] = {
    {"width", (getter)CsvFields_get_width, NULL, "length of a row image", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CsvFieldsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sparkcdc.codec._canaljson.CsvFields",
    .tp_basicsize = sizeof(CsvFieldsObject),
    .tp_dealloc = (destructor)CsvFields_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CsvFields(columns, decimal_type, delimiter, quote, null, hex): one table's CSV value fields.\n\n"
              "columns: (kind, scale, fmt) of every column, in order; delimiter, quote (b'' or one byte) and "
              "null as UTF-8 bytes.",
    .tp_new = CsvFields_new,
    .tp_methods = CsvFields_methods,
    .tp_getset = CsvFields_getset,
};

/* ------------------------------------------------------------------ module */

static PyObject *mod_json_str(PyObject *module, PyObject *s)
{
    char stack[STACK_BYTES];
    Buf b = {stack, 0, sizeof stack, NULL};
    (void)module;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "json_str: expected str, got %.80s", Py_TYPE(s)->tp_name);
        return NULL;
    }
    if (put_str(&b, s) < 0)
        return fail_buf(&b);
    return finish(&b);
}

static PyObject *mod_json_latin1(PyObject *module, PyObject *s)
{
    char stack[STACK_BYTES];
    Buf b = {stack, 0, sizeof stack, NULL};
    (void)module;
    if (!PyBytes_Check(s)) {
        PyErr_Format(PyExc_TypeError, "json_latin1: expected bytes, got %.80s", Py_TYPE(s)->tp_name);
        return NULL;
    }
    if (put_latin1(&b, (const unsigned char *)PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s)) < 0)
        return fail_buf(&b);
    return finish(&b);
}

static PyMethodDef methods[] = {
    {"json_str", (PyCFunction)mod_json_str, METH_O, "json_str(s) -> bytes: the easyjson string literal (UTF-8)."},
    {"json_latin1", (PyCFunction)mod_json_latin1, METH_O,
     "json_latin1(b) -> bytes: the easyjson string literal of bytes read as ISO-8859-1 (UTF-8)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "sparkcdc.codec._canaljson", "canal-json row messages and CSV records rendered in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__canaljson(void)
{
    PyObject *m;
    init_escape_table();
    S_op = PyUnicode_InternFromString("op");
    S_before = PyUnicode_InternFromString("before");
    S_after = PyUnicode_InternFromString("after");
    S_commit_ts = PyUnicode_InternFromString("commit_ts");
    if (S_op == NULL || S_before == NULL || S_after == NULL || S_commit_ts == NULL)
        return NULL;
    if (PyType_Ready(&ColumnsType) < 0 || PyType_Ready(&CsvFieldsType) < 0)
        return NULL;
    m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ColumnsType);
    if (PyModule_AddObject(m, "Columns", (PyObject *)&ColumnsType) < 0) {
        Py_DECREF(&ColumnsType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&CsvFieldsType);
    if (PyModule_AddObject(m, "CsvFields", (PyObject *)&CsvFieldsType) < 0) {
        Py_DECREF(&CsvFieldsType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "F_INT", F_INT) < 0 || PyModule_AddIntConstant(m, "F_DOUBLE", F_DOUBLE) < 0
        || PyModule_AddIntConstant(m, "F_DECIMAL", F_DECIMAL) < 0
        || PyModule_AddIntConstant(m, "F_TEXT", F_TEXT) < 0 || PyModule_AddIntConstant(m, "F_BINARY", F_BINARY) < 0
        || PyModule_AddIntConstant(m, "F_OTHER", F_OTHER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "R_INT", R_INT) < 0 || PyModule_AddIntConstant(m, "R_DOUBLE", R_DOUBLE) < 0
        || PyModule_AddIntConstant(m, "R_DECIMAL", R_DECIMAL) < 0
        || PyModule_AddIntConstant(m, "R_BYTES", R_BYTES) < 0 || PyModule_AddIntConstant(m, "R_STR", R_STR) < 0
        || PyModule_AddIntConstant(m, "R_ENUM", R_ENUM) < 0 || PyModule_AddIntConstant(m, "R_OTHER", R_OTHER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
