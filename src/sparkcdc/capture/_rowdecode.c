/*
 * Row images of ROWS events decoded in C.
 *
 * The values are exactly those of the Python reference in rowcodec.py
 * (read_value, read_image, reference_images): same Python types, same text
 * for temporal values, same Decimal digits. A Layout describes the columns present in one row image (built once
 * per table map and columns-present bitmap by rowcodec.RowDecoder); decode_rows
 * walks a whole event body with one or two layouts.
 *
 * Every read is checked against the length of the body: a value that does not
 * fit raises IndexError inside, turned into the DecodeError given to the Layout
 * with the message shape of rowcodec.reference_images.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum {
    K_INT8 = 1,
    K_UINT8,
    K_INT16,
    K_UINT16,
    K_INT24,
    K_UINT24,
    K_INT32,
    K_UINT32,
    K_INT64,
    K_UINT64,
    K_YEAR,
    K_FLOAT,
    K_DOUBLE,
    K_DECIMAL,   /* a = precision, b = scale */
    K_DATE,
    K_DATETIME2, /* a = fsp */
    K_DATETIME,  /* pre-5.6, 8 bytes */
    K_TIMESTAMP2, /* a = fsp, obj = renderer callable or None (UTC) */
    K_TIMESTAMP, /* pre-5.6, 4 bytes; obj as for K_TIMESTAMP2 */
    K_TIME2,     /* a = fsp */
    K_TIME,      /* pre-5.6, 3 bytes */
    K_BIT,       /* a = bytes */
    K_ENUM,      /* a = bytes, obj = tuple of names */
    K_SET,       /* a = bytes, obj = tuple of names */
    K_STRING,    /* a = length bytes (1-4), b = pad to (BINARY(n)) or 0, obj = codec name or None (bytes) */
    K_JSON,      /* MySQL binary JSON: a = length bytes (1-4), obj = (opaque_text, error class) */
    K_UUID,      /* MariaDB UUID: a = length bytes (1), value padded to 16 bytes, text 8-4-4-4-12 */
    K_INET4,     /* MariaDB INET4: a = length bytes (1), value padded to 4 bytes, dotted quad */
    K_INET6,     /* MariaDB INET6: a = length bytes (1), value padded to 16 bytes, MariaDB's text */
    K_LAST
};

enum { C_BINARY = 0, C_UTF8, C_LATIN1, C_ASCII, C_OTHER };

typedef struct {
    int kind;
    Py_ssize_t index;
    long a;
    long b;
    PyObject *obj;      /* owned or NULL */
    const char *codec;  /* K_STRING with C_OTHER: the codec name (kept alive by obj) */
    int codec_kind;
    Py_ssize_t size;    /* fixed width in bytes, 0 for variable */
} Col;

typedef struct {
    PyObject_HEAD
    PyObject *schema;
    PyObject *table;
    PyObject *error;        /* the exception class raised for a bad row */
    PyObject *dec_fallback; /* decode_decimal(raw, precision, scale) */
    Py_ssize_t ncol;
    Py_ssize_t npresent;
    Py_ssize_t nullbytes;
    Col *cols;
} LayoutObject;

static PyObject *DecimalType = NULL;
static PyObject *EmptyStr = NULL;
static PyObject *Comma = NULL;

/* ---------------------------------------------------------------- helpers */

static const uint64_t POW10[10] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL,
};

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

static Py_ssize_t decimal_size(long precision, long scale)
{
    long intg = precision - scale;
    return (intg / 9) * 4 + DIG2BYTES[intg % 9] + (scale / 9) * 4 + DIG2BYTES[scale % 9];
}

static inline uint64_t be_uint(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t le_uint(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Python's a // b and a % b for b > 0. */
static inline int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b) != 0 && a < 0)
        q -= 1;
    return q;
}

static inline int64_t floormod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    if (r < 0)
        r += b;
    return r;
}

/* Python's a >> n on a signed integer (floor division by 2**n). */
static inline int64_t pyshr(int64_t a, int n)
{
    return floordiv(a, (int64_t)1 << n);
}

/* "%0*d" % v at w; returns the end. */
static char *put_int(char *w, int64_t v, int width)
{
    char tmp[24];
    int n = 0;
    uint64_t u;
    int neg = v < 0;
    u = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (neg) {
        *w++ = '-';
        width -= 1;
    }
    for (int i = n; i < width; i++)
        *w++ = '0';
    while (n)
        *w++ = tmp[--n];
    return w;
}

static char *put_uint(char *w, uint64_t u, int width)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    for (int i = n; i < width; i++)
        *w++ = '0';
    while (n)
        *w++ = tmp[--n];
    return w;
}

/* rowcodec._frac: "." + ("%06d" % usec)[:fsp], nothing when fsp is 0 (usec >= 0). */
static char *put_frac(char *w, int64_t usec, int fsp)
{
    char tmp[32];
    char *e;
    if (fsp <= 0)
        return w;
    e = put_int(tmp, usec, 6);
    *w++ = '.';
    for (int i = 0; i < fsp && tmp + i < e; i++)
        *w++ = tmp[i];
    return w;
}

static PyObject *ascii_str(const char *s, Py_ssize_t n)
{
    PyObject *r = PyUnicode_New(n, 127);
    if (r == NULL)
        return NULL;
    memcpy(PyUnicode_1BYTE_DATA(r), s, (size_t)n);
    return r;
}

/* rowcodec.read_frac: microseconds from the fraction bytes at p. */
static inline int64_t read_frac(const unsigned char *p, int fsp)
{
    if (fsp == 0)
        return 0;
    if (fsp <= 2)
        return (int64_t)p[0] * 10000;
    if (fsp <= 4)
        return (int64_t)be_uint(p, 2) * 100;
    return (int64_t)be_uint(p, 3);
}

static inline Py_ssize_t frac_bytes(int fsp)
{
    return (fsp + 1) / 2;
}

/* ------------------------------------------------------------- decoders */

static PyObject *decode_decimal(LayoutObject *L, const unsigned char *p, long precision, long scale)
{
    Py_ssize_t n = decimal_size(precision, scale);
    unsigned char b[128];
    char text[320];
    char *w = text;
    int positive = (p[0] & 0x80) != 0;
    long intg = precision - scale;
    int off = 0;
    char *istart;

    if (!positive)
        *w++ = '-';
    for (Py_ssize_t i = 0; i < n; i++)
        b[i] = positive ? p[i] : (unsigned char)(p[i] ^ 0xFF);
    b[0] ^= 0x80;

    /* integer part: leading partial group then full groups, zero-padded, leading zeros stripped */
    istart = w;
    {
        long lead = intg % 9;
        long full = intg / 9;
        int started = 0;
        for (long g = -1; g < full; g++) {
            int digits, size;
            uint64_t v;
            char tmp[16];
            char *e;
            if (g < 0) {
                if (!lead)
                    continue;
                digits = (int)lead;
            } else {
                digits = 9;
            }
            size = DIG2BYTES[digits];
            v = be_uint(b + off, size);
            off += size;
            if (v >= POW10[digits])
                goto fallback; /* not a valid group: the reference's arithmetic decides */
            if (!started) {
                if (v == 0)
                    continue;
                w = put_uint(w, v, 0);
                started = 1;
            } else {
                e = put_uint(tmp, v, digits);
                memcpy(w, tmp, (size_t)(e - tmp));
                w += e - tmp;
            }
        }
        if (!started)
            *w++ = '0';
    }
    if (scale == 0) {
        /* Decimal(-iv) of an int: no negative zero */
        const char *t0 = (!positive && w - istart == 1 && istart[0] == '0') ? istart : text;
        {
            PyObject *s = ascii_str(t0, w - t0);
            PyObject *r;
            if (s == NULL)
                return NULL;
            r = PyObject_CallOneArg(DecimalType, s);
            Py_DECREF(s);
            return r;
        }
    }
    *w++ = '.';
    {
        long full = scale / 9;
        long tail = scale % 9;
        for (long g = 0; g <= full; g++) {
            int digits = g < full ? 9 : (int)tail;
            int size;
            uint64_t v;
            if (!digits)
                continue;
            size = DIG2BYTES[digits];
            v = be_uint(b + off, size);
            off += size;
            if (v >= POW10[digits])
                goto fallback;
            w = put_uint(w, v, digits);
        }
    }
    {
        PyObject *s = ascii_str(text, w - text);
        PyObject *r;
        if (s == NULL)
            return NULL;
        r = PyObject_CallOneArg(DecimalType, s);
        Py_DECREF(s);
        return r;
    }

fallback: {
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, n);
    PyObject *r;
    if (raw == NULL)
        return NULL;
    r = PyObject_CallFunction(L->dec_fallback, "Oll", raw, precision, scale);
    Py_DECREF(raw);
    return r;
}
}

static PyObject *decode_datetime2(const unsigned char *p, int fsp)
{
    char text[96];
    char *w = text;
    int64_t ip = (int64_t)be_uint(p, 5) - (int64_t)0x8000000000LL;
    int64_t ymd = pyshr(ip, 17);
    int64_t ym = pyshr(ymd, 5);
    int64_t hms = ip & 0x1FFFF;
    w = put_int(w, floordiv(ym, 13), 4);
    *w++ = '-';
    w = put_int(w, floormod(ym, 13), 2);
    *w++ = '-';
    w = put_int(w, ymd & 31, 2);
    *w++ = ' ';
    w = put_int(w, hms >> 12, 2);
    *w++ = ':';
    w = put_int(w, (hms >> 6) & 63, 2);
    *w++ = ':';
    w = put_int(w, hms & 63, 2);
    w = put_frac(w, read_frac(p + 5, fsp), fsp);
    return ascii_str(text, w - text);
}

static PyObject *decode_date(const unsigned char *p)
{
    char text[32];
    char *w = text;
    uint32_t d = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    w = put_uint(w, d >> 9, 4);
    *w++ = '-';
    w = put_uint(w, (d >> 5) & 15, 2);
    *w++ = '-';
    w = put_uint(w, d & 31, 2);
    return ascii_str(text, w - text);
}

static PyObject *decode_datetime_old(const unsigned char *p)
{
    char text[64];
    char *w = text;
    uint64_t v = le_uint(p, 8);
    uint64_t d = v / 1000000, t = v % 1000000;
    w = put_uint(w, d / 10000, 4);
    *w++ = '-';
    w = put_uint(w, d / 100 % 100, 2);
    *w++ = '-';
    w = put_uint(w, d % 100, 2);
    *w++ = ' ';
    w = put_uint(w, t / 10000, 2);
    *w++ = ':';
    w = put_uint(w, t / 100 % 100, 2);
    *w++ = ':';
    w = put_uint(w, t % 100, 2);
    return ascii_str(text, w - text);
}

static PyObject *decode_time2(const unsigned char *p, int fsp)
{
    char text[64];
    char *w = text;
    int64_t packed, hms, usec;
    if (fsp <= 0) {
        packed = ((int64_t)be_uint(p, 3) - 0x800000) * ((int64_t)1 << 24);
    } else if (fsp <= 2) {
        int64_t intpart = (int64_t)be_uint(p, 3) - 0x800000;
        int64_t frac = p[3];
        if (intpart < 0 && frac) {
            intpart += 1;
            frac -= 0x100;
        }
        packed = intpart * ((int64_t)1 << 24) + frac * 10000;
    } else if (fsp <= 4) {
        int64_t intpart = (int64_t)be_uint(p, 3) - 0x800000;
        int64_t frac = (int64_t)be_uint(p + 3, 2);
        if (intpart < 0 && frac) {
            intpart += 1;
            frac -= 0x10000;
        }
        packed = intpart * ((int64_t)1 << 24) + frac * 100;
    } else {
        packed = (int64_t)be_uint(p, 6) - (int64_t)0x800000000000LL;
    }
    if (packed < 0) {
        *w++ = '-';
        packed = -packed;
    }
    hms = packed >> 24;
    usec = packed % ((int64_t)1 << 24);
    w = put_int(w, (hms >> 12) % (1 << 10), 2);
    *w++ = ':';
    w = put_int(w, (hms >> 6) % 64, 2);
    *w++ = ':';
    w = put_int(w, hms % 64, 2);
    w = put_frac(w, usec, fsp);
    return ascii_str(text, w - text);
}

static PyObject *decode_time_old(const unsigned char *p)
{
    char text[32];
    char *w = text;
    int32_t v = (int32_t)le_uint(p, 3);
    if (v & 0x800000)
        v -= 0x1000000;
    if (v < 0) {
        *w++ = '-';
        v = -v;
    }
    w = put_int(w, v / 10000, 2);
    *w++ = ':';
    w = put_int(w, v / 100 % 100, 2);
    *w++ = ':';
    w = put_int(w, v % 100, 2);
    return ascii_str(text, w - text);
}

/* days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's civil_from_days). */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    int64_t era, yoe, doy, mp;
    uint64_t doe;
    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = (uint64_t)(z - era * 146097);
    yoe = (int64_t)((doe - doe / 1460 + doe / 36524 - doe / 146096) / 365);
    *y = yoe + era * 400;
    doy = (int64_t)doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    if (*m <= 2)
        *y += 1;
}

/* TimestampRenderer.render(sec, usec, fsp): in C for UTC, through the renderer otherwise. */
static PyObject *render_timestamp(PyObject *renderer, uint64_t sec, int64_t usec, int fsp)
{
    char text[96];
    char *w = text;
    if (renderer != Py_None)
        return PyObject_CallFunction(renderer, "KLi", (unsigned long long)sec, (long long)usec, fsp);
    if (sec == 0 && usec == 0) {
        memcpy(w, "0000-00-00 00:00:00", 19);
        w += 19;
        w = put_frac(w, 0, fsp);
        return ascii_str(text, w - text);
    }
    {
        int64_t days = (int64_t)(sec / 86400);
        int64_t rem = (int64_t)(sec % 86400);
        int64_t y;
        int m, d;
        civil_from_days(days, &y, &m, &d);
        w = put_int(w, y, 4);
        *w++ = '-';
        w = put_int(w, m, 2);
        *w++ = '-';
        w = put_int(w, d, 2);
        *w++ = ' ';
        w = put_int(w, rem / 3600, 2);
        *w++ = ':';
        w = put_int(w, rem / 60 % 60, 2);
        *w++ = ':';
        w = put_int(w, rem % 60, 2);
        w = put_frac(w, usec, fsp);
    }
    return ascii_str(text, w - text);
}

static PyObject *decode_enum(PyObject *elements, uint64_t index)
{
    Py_ssize_t n = PyTuple_GET_SIZE(elements);
    PyObject *r;
    if (index > 0 && index <= (uint64_t)n)
        r = PyTuple_GET_ITEM(elements, (Py_ssize_t)index - 1);
    else
        r = EmptyStr;
    Py_INCREF(r);
    return r;
}

static PyObject *decode_set(PyObject *elements, uint64_t bits)
{
    Py_ssize_t n = PyTuple_GET_SIZE(elements);
    PyObject *parts, *r;
    if (n > 64)
        n = 64;
    parts = PyList_New(0);
    if (parts == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (bits >> i & 1) {
            if (PyList_Append(parts, PyTuple_GET_ITEM(elements, i)) < 0) {
                Py_DECREF(parts);
                return NULL;
            }
        }
    }
    r = PyUnicode_Join(Comma, parts);
    Py_DECREF(parts);
    return r;
}

static PyObject *decode_text(const Col *c, const unsigned char *p, Py_ssize_t n)
{
    switch (c->codec_kind) {
    case C_BINARY:
        if (c->b > n) {
            PyObject *r = PyBytes_FromStringAndSize(NULL, c->b);
            if (r == NULL)
                return NULL;
            memcpy(PyBytes_AS_STRING(r), p, (size_t)n);
            memset(PyBytes_AS_STRING(r) + n, 0, (size_t)(c->b - n));
            return r;
        }
        return PyBytes_FromStringAndSize((const char *)p, n);
    case C_UTF8:
        return PyUnicode_DecodeUTF8((const char *)p, n, "surrogateescape");
    case C_LATIN1:
        return PyUnicode_DecodeLatin1((const char *)p, n, "surrogateescape");
    case C_ASCII:
        return PyUnicode_DecodeASCII((const char *)p, n, "surrogateescape");
    default:
        return PyUnicode_Decode((const char *)p, n, c->codec, "surrogateescape");
    }
}


/* ------------------------------------------------------------------------------------------
 * MySQL binary JSON (K_JSON): the document printed as MySQL prints it. The reference is
 * capture/jsonbinary.py (decode_json_binary): same traversal, same bounds checks, same text,
 * doubles by the same my_gcvt rule (j_double); opaque values (DECIMAL, temporal, base64: rare)
 * are printed by its opaque_text (obj = the tuple (opaque_text, JsonBinaryError)).
 * ---------------------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
} JOut;

static int jout_put(JOut *o, const char *s, Py_ssize_t n)
{
    if (o->len + n > o->cap) {
        Py_ssize_t cap = o->cap ? o->cap : 256;
        char *nb;
        while (cap < o->len + n)
            cap *= 2;
        nb = PyMem_Realloc(o->buf, (size_t)cap);
        if (nb == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->buf = nb;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

static int jout_str(JOut *o, const char *s) { return jout_put(o, s, (Py_ssize_t)strlen(s)); }

/* Append a Python str returned by a helper (its UTF-8 bytes, surrogate escapes turned back into bytes). */
static int jout_pystr(JOut *o, PyObject *text)
{
    PyObject *b;
    int r;
    if (text == NULL)
        return -1;
    b = PyUnicode_AsEncodedString(text, "utf-8", "surrogateescape");
    Py_DECREF(text);
    if (b == NULL)
        return -1;
    r = jout_put(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
    Py_DECREF(b);
    return r;
}

/* A JSON string literal: only controls, '"' and '\\' escaped (MySQL's double_quote). */
static int jout_quoted(JOut *o, const unsigned char *s, Py_ssize_t n)
{
    static const char hex[] = "0123456789abcdef";
    Py_ssize_t i, run = 0;
    if (jout_put(o, "\"", 1) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        unsigned char c = s[i];
        char esc[7];
        Py_ssize_t k = 2;
        if (c > 0x1f && c != '"' && c != '\\')
            continue;
        if (jout_put(o, (const char *)s + run, i - run) < 0)
            return -1;
        run = i + 1;
        esc[0] = '\\';
        switch (c) {
        case '\b': esc[1] = 'b'; break;
        case '\t': esc[1] = 't'; break;
        case '\n': esc[1] = 'n'; break;
        case '\f': esc[1] = 'f'; break;
        case '\r': esc[1] = 'r'; break;
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        default:
            esc[1] = 'u'; esc[2] = '0'; esc[3] = '0'; esc[4] = hex[c >> 4]; esc[5] = hex[c & 15];
            k = 6;
        }
        if (jout_put(o, esc, k) < 0)
            return -1;
    }
    if (jout_put(o, (const char *)s + run, n - run) < 0)
        return -1;
    return jout_put(o, "\"", 1);
}

#define J_SMALL_OBJECT 0x00
#define J_LARGE_OBJECT 0x01
#define J_SMALL_ARRAY 0x02
#define J_LARGE_ARRAY 0x03
#define J_LITERAL 0x04
#define J_INT16 0x05
#define J_UINT16 0x06
#define J_INT32 0x07
#define J_UINT32 0x08
#define J_INT64 0x09
#define J_UINT64 0x0A
#define J_DOUBLE 0x0B
#define J_STRING 0x0C
#define J_OPAQUE 0x0F

typedef struct {
    const unsigned char *d;
    Py_ssize_t total;
    PyObject *opaque;
    PyObject *error;
    JOut out;
} JCtx;

static int jerr_truncated(JCtx *x)
{
    PyErr_Format(x->error, "binary JSON value of %zd bytes is truncated", x->total);
    return -1;
}

/* A fixed-size scalar at p must lie within the whole document (the reference's struct.unpack_from). */
#define J_NEED(x, p, n) \
    do { \
        if ((p) < 0 || (x)->total - (p) < (n)) \
            return jerr_truncated(x); \
    } while (0)

static int j_varlen(JCtx *x, Py_ssize_t p, Py_ssize_t end, Py_ssize_t *n, Py_ssize_t *after)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 5; i++) {
        unsigned char b;
        if (p + i >= end) {
            PyErr_Format(x->error, "variable-length length at byte %zd runs past the end of its value (%zd)", p, end);
            return -1;
        }
        b = x->d[p + i];
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *n = (Py_ssize_t)v;
            *after = p + i + 1;
            return 0;
        }
    }
    PyErr_Format(x->error, "variable-length length at byte %zd is longer than 5 bytes", p);
    return -1;
}

static int j_value(JCtx *x, int t, Py_ssize_t p, Py_ssize_t end, int depth);

static int j_container(JCtx *x, int t, Py_ssize_t p, Py_ssize_t end, int depth)
{
    int large = (t == J_LARGE_OBJECT || t == J_LARGE_ARRAY);
    int is_object = (t == J_SMALL_OBJECT || t == J_LARGE_OBJECT);
    Py_ssize_t osz = large ? 4 : 2, count, size, keys_at, values_at, i;
    if (depth >= 100) {
        PyErr_SetString(x->error, "binary JSON nests deeper than 100 levels (MySQL's limit)");
        return -1;
    }
    J_NEED(x, p, 2 * osz);
    count = (Py_ssize_t)le_uint(x->d + p, (int)osz);
    size = (Py_ssize_t)le_uint(x->d + p + osz, (int)osz);
    if (p + size > end) {
        PyErr_Format(x->error, "%s at byte %zd says it has %zd bytes, but its value ends at byte %zd",
                     is_object ? "object" : "array", p, size, end);
        return -1;
    }
    end = p + size;
    keys_at = p + 2 * osz;
    values_at = keys_at + (is_object ? count * (osz + 2) : 0);
    if (values_at + count * (1 + osz) > end) {
        PyErr_Format(x->error, "header of the %zd elements at byte %zd is larger than the value (%zd bytes)", count,
                     p, size);
        return -1;
    }
    if (jout_put(&x->out, is_object ? "{" : "[", 1) < 0)
        return -1;
    for (i = 0; i < count; i++) {
        Py_ssize_t ve = values_at + i * (1 + osz);
        int vt;
        if (i && jout_put(&x->out, ", ", 2) < 0)
            return -1;
        if (is_object) {
            Py_ssize_t ke = keys_at + i * (osz + 2);
            Py_ssize_t koff = (Py_ssize_t)le_uint(x->d + ke, (int)osz);
            Py_ssize_t klen = (Py_ssize_t)le_uint(x->d + ke + osz, 2);
            if (koff + klen > size) {
                PyErr_Format(x->error, "key %zd of the object at byte %zd runs past the object's end", i, p);
                return -1;
            }
            if (jout_quoted(&x->out, x->d + p + koff, klen) < 0 || jout_put(&x->out, ": ", 2) < 0)
                return -1;
        }
        vt = x->d[ve];
        if (vt == J_LITERAL || vt == J_INT16 || vt == J_UINT16 || (large && (vt == J_INT32 || vt == J_UINT32))) {
            if (j_value(x, vt, ve + 1, ve + 1 + osz, depth + 1) < 0)
                return -1;
        } else {
            Py_ssize_t voff = (Py_ssize_t)le_uint(x->d + ve + 1, (int)osz);
            if (voff >= size) {
                PyErr_Format(x->error, "element %zd of the value at byte %zd points past the value's end", i, p);
                return -1;
            }
            if (j_value(x, vt, p + voff, end, depth + 1) < 0)
                return -1;
        }
    }
    return jout_put(&x->out, is_object ? "}" : "]", 1);
}

/* A double as MySQL's JSON printer writes it: my_gcvt(d, DOUBLE, 34) with the shortest round-trip
   digits, plus ".0" when it has neither '.' nor 'e' (the reference: jsonbinary.format_double). */
static int j_double(JCtx *x, double dv)
{
    char digits[40], out[64];
    const char *r, *e;
    char *text;
    int n = 0, decpt, exp = 0, lead = 0, iplen = 0, k = 0, negative = signbit(dv) != 0;
    int width = 34 - (dv < 0 ? 1 : 0), exp_len, have_space, force_e, use_f, f_len;
    if (dv == 0) {
        digits[0] = '0';
        n = 1;
        decpt = 1;
    } else {
        text = PyOS_double_to_string(fabs(dv), 'r', 0, 0, NULL);
        if (text == NULL)
            return -1;
        e = strchr(text, 'e');
        if (e != NULL)
            exp = atoi(e + 1);
        for (r = text; *r && r != e; r++) {
            if (*r == '.') {
                iplen = (int)(r - text);
                continue;
            }
            if (n == 0 && *r == '0') {
                lead++;
                continue;
            }
            if (n < (int)sizeof(digits))
                digits[n++] = *r;
        }
        if (strchr(text, '.') == NULL || (e != NULL && strchr(text, '.') > e))
            iplen = (int)((e != NULL ? e : r) - text);
        PyMem_Free(text);
        decpt = iplen + exp - lead;
        while (n > 1 && digits[n - 1] == '0')
            n--;
    }
    exp_len = 1 + (decpt >= 101 || decpt <= -99) + (decpt >= 11 || decpt <= -9);
    f_len = decpt <= 0 ? n - decpt + 2 : (decpt < n ? n + 1 : decpt);
    have_space = f_len <= width;
    force_e = decpt <= 0 && width <= 2 - decpt && width >= 3 + exp_len;
    use_f = (have_space ||
             (decpt <= width && (decpt >= -1 || (decpt == -2 && (n > 1 || !force_e))) && !force_e)) &&
            (!have_space || (decpt >= -15 + 1 && (decpt <= 15 || n > decpt)));
    if (negative)
        out[k++] = '-';
    if (use_f) {
        int i;
        if (decpt <= 0) {
            out[k++] = '0';
            out[k++] = '.';
            for (i = 0; i < -decpt; i++)
                out[k++] = '0';
            memcpy(out + k, digits, (size_t)n);
            k += n;
        } else if (decpt < n) {
            memcpy(out + k, digits, (size_t)decpt);
            k += decpt;
            out[k++] = '.';
            memcpy(out + k, digits + decpt, (size_t)(n - decpt));
            k += n - decpt;
        } else {
            memcpy(out + k, digits, (size_t)n);
            k += n;
            for (i = n; i < decpt; i++)
                out[k++] = '0';
        }
        if (decpt >= n) {
            out[k++] = '.';
            out[k++] = '0';
        }
    } else {
        out[k++] = digits[0];
        if (n > 1) {
            out[k++] = '.';
            memcpy(out + k, digits + 1, (size_t)(n - 1));
            k += n - 1;
        }
        k += snprintf(out + k, sizeof(out) - (size_t)k, "e%d", decpt - 1);
    }
    return jout_put(&x->out, out, k);
}

static int j_value(JCtx *x, int t, Py_ssize_t p, Py_ssize_t end, int depth)
{
    char num[32];
    const unsigned char *q;
    switch (t) {
    case J_SMALL_OBJECT:
    case J_LARGE_OBJECT:
    case J_SMALL_ARRAY:
    case J_LARGE_ARRAY:
        return j_container(x, t, p, end, depth);
    case J_LITERAL:
        J_NEED(x, p, 1);
        switch (x->d[p]) {
        case 0: return jout_str(&x->out, "null");
        case 1: return jout_str(&x->out, "true");
        case 2: return jout_str(&x->out, "false");
        default:
            PyErr_Format(x->error, "unknown JSON literal 0x%02x at byte %zd", x->d[p], p);
            return -1;
        }
    case J_INT16:
        J_NEED(x, p, 2);
        snprintf(num, sizeof num, "%d", (int)(int16_t)le_uint(x->d + p, 2));
        return jout_str(&x->out, num);
    case J_UINT16:
        J_NEED(x, p, 2);
        snprintf(num, sizeof num, "%u", (unsigned)le_uint(x->d + p, 2));
        return jout_str(&x->out, num);
    case J_INT32:
        J_NEED(x, p, 4);
        snprintf(num, sizeof num, "%ld", (long)(int32_t)le_uint(x->d + p, 4));
        return jout_str(&x->out, num);
    case J_UINT32:
        J_NEED(x, p, 4);
        snprintf(num, sizeof num, "%lu", (unsigned long)le_uint(x->d + p, 4));
        return jout_str(&x->out, num);
    case J_INT64:
        J_NEED(x, p, 8);
        snprintf(num, sizeof num, "%lld", (long long)(int64_t)le_uint(x->d + p, 8));
        return jout_str(&x->out, num);
    case J_UINT64:
        J_NEED(x, p, 8);
        snprintf(num, sizeof num, "%llu", (unsigned long long)le_uint(x->d + p, 8));
        return jout_str(&x->out, num);
    case J_DOUBLE: {
        double dv;
        uint64_t bits;
        J_NEED(x, p, 8);
        bits = le_uint(x->d + p, 8);
        memcpy(&dv, &bits, 8);
        if (!isfinite(dv)) {
            PyObject *r = PyFloat_FromDouble(dv);
            if (r != NULL) {
                PyErr_Format(x->error, "double at byte %zd is %R, which JSON cannot hold", p, r);
                Py_DECREF(r);
            }
            return -1;
        }
        return j_double(x, dv);
    }
    case J_STRING: {
        Py_ssize_t n, after;
        if (j_varlen(x, p, end, &n, &after) < 0)
            return -1;
        if (after + n > end) {
            PyErr_Format(x->error, "string of %zd bytes at byte %zd runs past the end of its value (%zd)", n, after,
                         end);
            return -1;
        }
        return jout_quoted(&x->out, x->d + after, n);
    }
    case J_OPAQUE: {
        Py_ssize_t n, after;
        int ftype;
        PyObject *raw;
        PyObject *text;
        if (p >= end) {
            PyErr_Format(x->error, "opaque value at byte %zd has no type", p);
            return -1;
        }
        ftype = x->d[p];
        if (j_varlen(x, p + 1, end, &n, &after) < 0)
            return -1;
        if (after + n > end) {
            PyErr_Format(x->error, "opaque value of %zd bytes at byte %zd runs past the end of its value (%zd)", n,
                         after, end);
            return -1;
        }
        q = x->d + after;
        raw = PyBytes_FromStringAndSize((const char *)q, n);
        if (raw == NULL)
            return -1;
        text = PyObject_CallFunction(x->opaque, "iO", ftype, raw);
        Py_DECREF(raw);
        return jout_pystr(&x->out, text);
    }
    default:
        PyErr_Format(x->error, "unknown binary JSON type 0x%02x at byte %zd", t, p - 1);
        return -1;
    }
}

/* The text of one binary JSON document (helpers: (opaque_text, JsonBinaryError)). */
static PyObject *decode_json(PyObject *helpers, const unsigned char *d, Py_ssize_t n)
{
    JCtx x;
    PyObject *r = NULL;
    if (n == 0)
        return PyUnicode_FromString("null");
    x.d = d;
    x.total = n;
    x.opaque = PyTuple_GET_ITEM(helpers, 0);
    x.error = PyTuple_GET_ITEM(helpers, 1);
    x.out.buf = NULL;
    x.out.len = x.out.cap = 0;
    if (j_value(&x, d[0], 1, n, 0) == 0)
        r = PyUnicode_DecodeUTF8(x.out.buf, x.out.len, "surrogateescape");
    PyMem_Free(x.out.buf);
    return r;
}

/* MariaDB's data-type plugin values (UUID, INET4, INET6). The binlog carries them as BINARY(n)
   does: a 1-byte length, then the value in its in-memory (text) byte order without its trailing
   zero bytes. The text is the one MariaDB prints (plugin/type_uuid, plugin/type_inet). */
static const char HEX_LOWER[] = "0123456789abcdef";

static PyObject *fbt_text(int kind, const unsigned char *src, Py_ssize_t n)
{
    unsigned char v[16];
    char out[64];
    Py_ssize_t size = kind == K_INET4 ? 4 : 16;
    int len = 0;
    if (n > size) {
        PyErr_Format(PyExc_ValueError, "a %s value of %zd bytes, more than %zd",
                     kind == K_UUID ? "UUID" : kind == K_INET4 ? "INET4" : "INET6", n, size);
        return NULL;
    }
    memset(v, 0, sizeof(v));
    memcpy(v, src, (size_t)n);
    if (kind == K_UUID) {
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10)
                out[len++] = '-';
            out[len++] = HEX_LOWER[v[i] >> 4];
            out[len++] = HEX_LOWER[v[i] & 15];
        }
    } else if (kind == K_INET4) {
        len = snprintf(out, sizeof(out), "%d.%d.%d.%d", v[0], v[1], v[2], v[3]);
    } else {
        unsigned int w[8];
        int gap_pos = -1, gap_len = -1, rg_pos = -1, rg_len = -1;
        for (int i = 0; i < 8; i++)
            w[i] = (unsigned int)(v[2 * i] << 8 | v[2 * i + 1]);
        /* the gap: the first longest run of zero words, even of one word (Inet6::to_string) */
        for (int i = 0; i < 8; i++) {
            if (w[i] != 0) {
                if (rg_pos >= 0) {
                    if (rg_len > gap_len) {
                        gap_pos = rg_pos;
                        gap_len = rg_len;
                    }
                    rg_pos = rg_len = -1;
                }
            } else if (rg_pos >= 0) {
                rg_len++;
            } else {
                rg_pos = i;
                rg_len = 1;
            }
        }
        if (rg_pos >= 0 && rg_len > gap_len) {
            gap_pos = rg_pos;
            gap_len = rg_len;
        }
        for (int i = 0; i < 8; i++) {
            if (i == gap_pos) {
                if (i == 0)
                    out[len++] = ':';
                out[len++] = ':';
                i += gap_len - 1;
            } else if (i == 6 && gap_pos == 0 && (gap_len == 6 || (gap_len == 5 && w[5] == 0xffff))) {
                /* IPv4-compatible or IPv4-mapped: the last 4 bytes as a dotted quad */
                len += snprintf(out + len, sizeof(out) - (size_t)len, "%d.%d.%d.%d", v[12], v[13], v[14], v[15]);
                break;
            } else {
                len += snprintf(out + len, sizeof(out) - (size_t)len, "%x", w[i]);
                if (i != 7)
                    out[len++] = ':';
            }
        }
    }
    return PyUnicode_DecodeASCII(out, len, NULL);
}

static int truncated(Py_ssize_t col, Py_ssize_t need, Py_ssize_t at, Py_ssize_t end)
{
    PyErr_Format(PyExc_IndexError,
                 "column %zd needs %zd bytes at byte %zd but the event body ends at byte %zd", col, need, at,
                 end);
    return -1;
}

/* One row image at *pp; a new tuple, or NULL with an exception set. */
static PyObject *decode_image(LayoutObject *L, const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pp)
{
    Py_ssize_t p = *pp;
    const unsigned char *nulls;
    PyObject *row;

    if (end - p < L->nullbytes) {
        truncated(-1, L->nullbytes, p, end);
        return NULL;
    }
    nulls = buf + p;
    p += L->nullbytes;
    row = PyTuple_New(L->ncol);
    if (row == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < L->ncol; i++) {
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(row, i, Py_None);
    }
    for (Py_ssize_t k = 0; k < L->npresent; k++) {
        const Col *c = &L->cols[k];
        const unsigned char *q;
        PyObject *v;
        if (nulls[k >> 3] >> (k & 7) & 1)
            continue;
        if (c->size) {
            if (end - p < c->size) {
                truncated(c->index, c->size, p, end);
                goto fail;
            }
        }
        q = buf + p;
        switch (c->kind) {
        case K_INT8:
            v = PyLong_FromLong((signed char)q[0]);
            break;
        case K_UINT8:
            v = PyLong_FromLong(q[0]);
            break;
        case K_INT16:
            v = PyLong_FromLong((int16_t)le_uint(q, 2));
            break;
        case K_UINT16:
            v = PyLong_FromLong((long)le_uint(q, 2));
            break;
        case K_INT24: {
            long x = (long)le_uint(q, 3);
            if (x & 0x800000)
                x -= 0x1000000;
            v = PyLong_FromLong(x);
            break;
        }
        case K_UINT24:
            v = PyLong_FromLong((long)le_uint(q, 3));
            break;
        case K_INT32:
            v = PyLong_FromLong((int32_t)le_uint(q, 4));
            break;
        case K_UINT32:
            v = PyLong_FromUnsignedLong((unsigned long)le_uint(q, 4));
            break;
        case K_INT64:
            v = PyLong_FromLongLong((long long)le_uint(q, 8));
            break;
        case K_UINT64:
            v = PyLong_FromUnsignedLongLong(le_uint(q, 8));
            break;
        case K_YEAR:
            v = PyLong_FromLong(q[0] == 0 ? 0 : 1900 + q[0]);
            break;
        case K_FLOAT: {
            double d = PyFloat_Unpack4((const char *)q, 1);
            v = (d == -1.0 && PyErr_Occurred()) ? NULL : PyFloat_FromDouble(d);
            break;
        }
        case K_DOUBLE: {
            double d = PyFloat_Unpack8((const char *)q, 1);
            v = (d == -1.0 && PyErr_Occurred()) ? NULL : PyFloat_FromDouble(d);
            break;
        }
        case K_DECIMAL:
            v = decode_decimal(L, q, c->a, c->b);
            break;
        case K_DATE:
            v = decode_date(q);
            break;
        case K_DATETIME2:
            v = decode_datetime2(q, (int)c->a);
            break;
        case K_DATETIME:
            v = decode_datetime_old(q);
            break;
        case K_TIMESTAMP2:
            v = render_timestamp(c->obj, be_uint(q, 4), read_frac(q + 4, (int)c->a), (int)c->a);
            break;
        case K_TIMESTAMP:
            v = render_timestamp(c->obj, le_uint(q, 4), 0, 0);
            break;
        case K_TIME2:
            v = decode_time2(q, (int)c->a);
            break;
        case K_TIME:
            v = decode_time_old(q);
            break;
        case K_BIT:
            v = PyLong_FromUnsignedLongLong(be_uint(q, (int)c->a));
            break;
        case K_ENUM:
            v = decode_enum(c->obj, le_uint(q, (int)c->a));
            break;
        case K_SET:
            v = decode_set(c->obj, le_uint(q, (int)c->a));
            break;
        case K_STRING:
        case K_JSON:
        case K_UUID:
        case K_INET4:
        case K_INET6: {
            Py_ssize_t lb = c->a;
            Py_ssize_t n;
            if (end - p < lb) {
                truncated(c->index, lb, p, end);
                goto fail;
            }
            n = (Py_ssize_t)le_uint(q, (int)lb);
            p += lb;
            if (end - p < n) {
                truncated(c->index, n, p, end);
                goto fail;
            }
            if (c->kind == K_JSON)
                v = decode_json(c->obj, buf + p, n);
            else if (c->kind == K_STRING)
                v = decode_text(c, buf + p, n);
            else
                v = fbt_text(c->kind, buf + p, n);
            p += n;
            break;
        }
        default:
            PyErr_SetString(PyExc_SystemError, "bad column kind");
            v = NULL;
        }
        if (v == NULL)
            goto fail;
        p += c->size;
        Py_SETREF(((PyTupleObject *)row)->ob_item[c->index], v);
    }
    *pp = p;
    return row;

fail:
    Py_DECREF(row);
    return NULL;
}

/* An IndexError/ValueError/ArithmeticError from decoding becomes the layout's error class, chained. */
static void raise_decode_error(LayoutObject *L, Py_ssize_t at)
{
    PyObject *type, *value, *tb, *msg, *err;
    if (!PyErr_ExceptionMatches(PyExc_IndexError) && !PyErr_ExceptionMatches(PyExc_ValueError) &&
        !PyErr_ExceptionMatches(PyExc_ArithmeticError))
        return;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    msg = PyUnicode_FromFormat("cannot decode a row of %U.%U at byte %zd: %R", L->schema, L->table, at, value);
    if (msg == NULL)
        goto done;
    err = PyObject_CallOneArg(L->error, msg);
    Py_DECREF(msg);
    if (err == NULL)
        goto done;
    Py_INCREF(value);
    PyException_SetCause(err, value);
    PyErr_SetObject((PyObject *)Py_TYPE(err), err);
    Py_DECREF(err);
done:
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* --------------------------------------------------------------- Layout */

static void Layout_dealloc(LayoutObject *self)
{
    if (self->cols != NULL) {
        for (Py_ssize_t k = 0; k < self->npresent; k++)
            Py_XDECREF(self->cols[k].obj);
        PyMem_Free(self->cols);
    }
    Py_XDECREF(self->schema);
    Py_XDECREF(self->table);
    Py_XDECREF(self->error);
    Py_XDECREF(self->dec_fallback);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_col(Col *c, Py_ssize_t ncol, Py_ssize_t prev)
{
    long a = c->a, b = c->b;
    if (c->index <= prev || c->index >= ncol) {
        PyErr_SetString(PyExc_ValueError, "column indexes must be increasing and below the column count");
        return -1;
    }
    switch (c->kind) {
    case K_INT8: case K_UINT8: case K_YEAR: c->size = 1; break;
    case K_INT16: case K_UINT16: c->size = 2; break;
    case K_INT24: case K_UINT24: case K_DATE: case K_TIME: c->size = 3; break;
    case K_INT32: case K_UINT32: case K_FLOAT: c->size = 4; break;
    case K_INT64: case K_UINT64: case K_DOUBLE: case K_DATETIME: c->size = 8; break;
    case K_DECIMAL:
        if (a < 1 || a > 200 || b < 0 || b > a)
            goto bad;
        c->size = decimal_size(a, b);
        break;
    case K_DATETIME2:
    case K_TIMESTAMP2:
    case K_TIME2:
        if (a < 0 || a > 6)
            goto bad;
        c->size = (c->kind == K_DATETIME2 ? 5 : c->kind == K_TIMESTAMP2 ? 4 : 3) + frac_bytes((int)a);
        if (c->kind == K_TIMESTAMP2 && (c->obj == NULL || (c->obj != Py_None && !PyCallable_Check(c->obj))))
            goto bad;
        break;
    case K_TIMESTAMP:
        c->size = 4;
        if (c->obj == NULL || (c->obj != Py_None && !PyCallable_Check(c->obj)))
            goto bad;
        break;
    case K_BIT:
        if (a < 0 || a > 8)
            goto bad;
        c->size = a;
        break;
    case K_ENUM:
    case K_SET:
        if (a < 0 || a > 8 || c->obj == NULL || !PyTuple_CheckExact(c->obj))
            goto bad;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->obj); i++)
            if (!PyUnicode_Check(PyTuple_GET_ITEM(c->obj, i)))
                goto bad;
        c->size = a;
        break;
    case K_STRING:
        if (a < 1 || a > 4 || b < 0 || c->obj == NULL)
            goto bad;
        c->size = 0;
        if (c->obj == Py_None) {
            c->codec_kind = C_BINARY;
        } else if (PyUnicode_Check(c->obj)) {
            const char *name = PyUnicode_AsUTF8(c->obj);
            if (name == NULL)
                return -1;
            if (b != 0)
                goto bad; /* padding is for bytes only */
            c->codec = name;
            if (strcmp(name, "utf-8") == 0 || strcmp(name, "utf8") == 0)
                c->codec_kind = C_UTF8;
            else if (strcmp(name, "latin1") == 0 || strcmp(name, "latin-1") == 0)
                c->codec_kind = C_LATIN1;
            else if (strcmp(name, "ascii") == 0)
                c->codec_kind = C_ASCII;
            else
                c->codec_kind = C_OTHER;
        } else {
            goto bad;
        }
        break;
    case K_JSON:
        if (a < 1 || a > 4 || b != 0 || c->obj == NULL || !PyTuple_CheckExact(c->obj) || PyTuple_GET_SIZE(c->obj) != 2 ||
            !PyCallable_Check(PyTuple_GET_ITEM(c->obj, 0)) || !PyExceptionClass_Check(PyTuple_GET_ITEM(c->obj, 1)))
            goto bad;
        c->size = 0;
        break;
    case K_UUID:
    case K_INET4:
    case K_INET6:
        if (a != 1 || b != 0)
            goto bad;
        c->size = 0;
        break;
    default:
        goto bad;
    }
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "unsupported column spec (kind %d, %ld, %ld) for column %zd", c->kind, a, b,
                 c->index);
    return -1;
}

static PyObject *Layout_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"schema", "table", "ncol", "columns", "error", "decimal_fallback", NULL};
    PyObject *schema, *table, *columns, *error, *fallback, *seq;
    Py_ssize_t ncol, prev = -1;
    LayoutObject *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UUnOOO:Layout", kwlist, &schema, &table, &ncol, &columns,
                                     &error, &fallback))
        return NULL;
    if (ncol < 0) {
        PyErr_SetString(PyExc_ValueError, "ncol must be >= 0");
        return NULL;
    }
    if (!PyCallable_Check(error) || !PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "error and decimal_fallback must be callable");
        return NULL;
    }
    seq = PySequence_Fast(columns, "columns must be a sequence");
    if (seq == NULL)
        return NULL;
    self = (LayoutObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_INCREF(schema);
    self->schema = schema;
    Py_INCREF(table);
    self->table = table;
    Py_INCREF(error);
    self->error = error;
    Py_INCREF(fallback);
    self->dec_fallback = fallback;
    self->ncol = ncol;
    self->npresent = 0;
    self->cols = PyMem_Calloc((size_t)PySequence_Fast_GET_SIZE(seq) + 1, sizeof(Col));
    if (self->cols == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
        Col *c = &self->cols[k];
        PyObject *obj = Py_None;
        int kind;
        if (!PyArg_ParseTuple(item, "inll|O:column", &kind, &c->index, &c->a, &c->b, &obj))
            goto fail;
        c->kind = kind;
        Py_INCREF(obj);
        c->obj = obj;
        self->npresent = k + 1;
        if (check_col(c, ncol, prev) < 0)
            goto fail;
        prev = c->index;
    }
    self->nullbytes = (self->npresent + 7) / 8;
    Py_DECREF(seq);
    return (PyObject *)self;
fail:
    Py_DECREF(seq);
    Py_DECREF(self);
    return NULL;
}

static PyObject *Layout_get_npresent(LayoutObject *self, void *closure)
{
    return PyLong_FromSsize_t(self->npresent);
}

static PyGetSetDef Layout_getset[] = {
    {"npresent", (getter)Layout_get_npresent, NULL, "columns present in the row image", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sparkcdc.capture._rowdecode.Layout",
    .tp_basicsize = sizeof(LayoutObject),
    .tp_dealloc = (destructor)Layout_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Layout(schema, table, ncol, columns, error, decimal_fallback): the columns of one row image.\n\n"
              "columns: (kind, index, a, b, obj) per present column, in column order.",
    .tp_new = Layout_new,
    .tp_getset = Layout_getset,
};

/* ---------------------------------------------------------- decode_rows */

static PyObject *decode_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    LayoutObject *l1, *l2 = NULL;
    Py_buffer view;
    Py_ssize_t pos, end;
    const unsigned char *buf;
    const char *op;
    PyObject *out = NULL;
    int mode;

    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_rows(layout1, layout2_or_None, body, pos, op)");
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &LayoutType)) {
        PyErr_SetString(PyExc_TypeError, "layout1 must be a Layout");
        return NULL;
    }
    l1 = (LayoutObject *)args[0];
    if (args[1] != Py_None) {
        if (!PyObject_TypeCheck(args[1], &LayoutType)) {
            PyErr_SetString(PyExc_TypeError, "layout2 must be a Layout or None");
            return NULL;
        }
        l2 = (LayoutObject *)args[1];
    }
    pos = PyLong_AsSsize_t(args[3]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    if (!PyUnicode_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "op must be a str");
        return NULL;
    }
    op = PyUnicode_AsUTF8(args[4]);
    if (op == NULL)
        return NULL;
    mode = op[0] == 'U' && op[1] == 0 ? 'U' : op[0] == 'I' && op[1] == 0 ? 'I' : 'D';
    if (mode == 'U' && l2 == NULL) {
        PyErr_SetString(PyExc_TypeError, "an update needs two layouts");
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    buf = view.buf;
    end = view.len;
    if (pos < 0) {
        PyErr_SetString(PyExc_ValueError, "pos must be >= 0");
        goto done;
    }
    out = PyList_New(0);
    if (out == NULL)
        goto done;
    while (pos < end) {
        Py_ssize_t start = pos;
        PyObject *first, *second = NULL, *pair;
        first = decode_image(l1, buf, end, &pos);
        if (first == NULL) {
            raise_decode_error(l1, start);
            goto fail;
        }
        if (mode == 'U') {
            start = pos;
            second = decode_image(l2, buf, end, &pos);
            if (second == NULL) {
                Py_DECREF(first);
                raise_decode_error(l2, start);
                goto fail;
            }
            pair = PyTuple_Pack(2, first, second);
            Py_DECREF(second);
        } else if (mode == 'I') {
            pair = PyTuple_Pack(2, Py_None, first);
        } else {
            pair = PyTuple_Pack(2, first, Py_None);
        }
        Py_DECREF(first);
        if (pair == NULL)
            goto fail;
        if (PyList_Append(out, pair) < 0) {
            Py_DECREF(pair);
            goto fail;
        }
        Py_DECREF(pair);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}

/* ---------------------------------------------------------- row_changes */

/*
 * row_changes(cls, op, schema, table, version, ts, images, seq0, pos) -> [cls, ...]: one
 * row change per (before, after) of images, seq counting from seq0, made without calling
 * cls.__init__: cls must be a class with __slots__ exactly the fields below (the model's
 * frozen dataclass RowChange, whose generated __init__ sets each field through
 * object.__setattr__, the larger part of a decoded row's cost) and no __post_init__
 * (checked by the caller, rowcodec.row_change_maker). The offsets of the slots are read
 * from the class's member table once per class.
 */

static const char *const RC_FIELDS[] = {"op", "schema", "table", "table_version", "commit_ts",
                                        "before", "after", "seq", "position"};
#define RC_N 9

static PyTypeObject *rc_type = NULL; /* the class the offsets are of (a strong reference) */
static Py_ssize_t rc_off[RC_N];

static int rc_offsets(PyTypeObject *cls)
{
    Py_ssize_t found[RC_N], k, nmembers = 0;
    PyMemberDef *m;
    if (cls == rc_type)
        return 0;
    if (!(cls->tp_flags & Py_TPFLAGS_HEAPTYPE) || cls->tp_members == NULL || cls->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "row_changes: the class must have __slots__ and no __dict__");
        return -1;
    }
    for (k = 0; k < RC_N; k++)
        found[k] = -1;
    for (m = cls->tp_members; m->name != NULL; m++) {
        nmembers++;
        if (m->type != T_OBJECT_EX)
            continue;
        for (k = 0; k < RC_N; k++) {
            if (strcmp(m->name, RC_FIELDS[k]) == 0)
                found[k] = m->offset;
        }
    }
    if (nmembers != RC_N) {
        PyErr_Format(PyExc_TypeError, "row_changes: %.100s has %zd slots, expected the %d fields",
                     cls->tp_name, nmembers, RC_N);
        return -1;
    }
    for (k = 0; k < RC_N; k++) {
        if (found[k] < 0) {
            PyErr_Format(PyExc_TypeError, "row_changes: %.100s has no slot %s", cls->tp_name, RC_FIELDS[k]);
            return -1;
        }
    }
    memcpy(rc_off, found, sizeof rc_off);
    Py_INCREF(cls);
    Py_XSETREF(rc_type, cls);
    return 0;
}

static inline void rc_set(PyObject *obj, int k, PyObject *v)
{
    Py_INCREF(v);
    *(PyObject **)((char *)obj + rc_off[k]) = v;
}

static PyObject *row_changes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyTypeObject *cls;
    PyObject *images, *out;
    Py_ssize_t n, i, seq0;
    (void)module;
    if (nargs != 9 || !PyType_Check(args[0]) || !PyList_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "row_changes(cls, op, schema, table, version, ts, images: list, seq0, pos)");
        return NULL;
    }
    cls = (PyTypeObject *)args[0];
    images = args[6];
    seq0 = PyLong_AsSsize_t(args[7]);
    if (seq0 == -1 && PyErr_Occurred())
        return NULL;
    if (rc_offsets(cls) < 0)
        return NULL;
    n = PyList_GET_SIZE(images);
    out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *img = PyList_GET_ITEM(images, i), *obj, *seq;
        if (!PyTuple_Check(img) || PyTuple_GET_SIZE(img) != 2) {
            PyErr_SetString(PyExc_TypeError, "row_changes: each image is a (before, after) tuple");
            Py_DECREF(out);
            return NULL;
        }
        seq = PyLong_FromSsize_t(seq0 + i);
        if (seq == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        obj = cls->tp_alloc(cls, 0);
        if (obj == NULL) {
            Py_DECREF(seq);
            Py_DECREF(out);
            return NULL;
        }
        rc_set(obj, 0, args[1]);
        rc_set(obj, 1, args[2]);
        rc_set(obj, 2, args[3]);
        rc_set(obj, 3, args[4]);
        rc_set(obj, 4, args[5]);
        rc_set(obj, 5, PyTuple_GET_ITEM(img, 0));
        rc_set(obj, 6, PyTuple_GET_ITEM(img, 1));
        *(PyObject **)((char *)obj + rc_off[7]) = seq; /* the new reference */
        rc_set(obj, 8, args[8]);
        PyList_SET_ITEM(out, i, obj);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"decode_rows", (PyCFunction)(void (*)(void))decode_rows, METH_FASTCALL,
     "decode_rows(layout1, layout2_or_None, body, pos, op) -> [(before, after), ...]\n\n"
     "The row images of one ROWS event body from pos (after the columns-present bitmaps)."},
    {"row_changes", (PyCFunction)(void (*)(void))row_changes, METH_FASTCALL,
     "row_changes(cls, op, schema, table, version, ts, images, seq0, pos) -> [cls, ...]\n\n"
     "One cls instance per (before, after) of images, its slots set without calling __init__."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "sparkcdc.capture._rowdecode", "ROWS event row images decoded in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rowdecode(void)
{
    PyObject *m, *decimal;
    static const struct {
        const char *name;
        int value;
    } kinds[] = {
        {"K_INT8", K_INT8},         {"K_UINT8", K_UINT8},       {"K_INT16", K_INT16},
        {"K_UINT16", K_UINT16},     {"K_INT24", K_INT24},       {"K_UINT24", K_UINT24},
        {"K_INT32", K_INT32},       {"K_UINT32", K_UINT32},     {"K_INT64", K_INT64},
        {"K_UINT64", K_UINT64},     {"K_YEAR", K_YEAR},         {"K_FLOAT", K_FLOAT},
        {"K_DOUBLE", K_DOUBLE},     {"K_DECIMAL", K_DECIMAL},   {"K_DATE", K_DATE},
        {"K_DATETIME2", K_DATETIME2}, {"K_DATETIME", K_DATETIME}, {"K_TIMESTAMP2", K_TIMESTAMP2},
        {"K_TIMESTAMP", K_TIMESTAMP}, {"K_TIME2", K_TIME2},     {"K_TIME", K_TIME},
        {"K_BIT", K_BIT},           {"K_ENUM", K_ENUM},         {"K_SET", K_SET},
        {"K_STRING", K_STRING},     {"K_JSON", K_JSON},         {"K_UUID", K_UUID},
        {"K_INET4", K_INET4},       {"K_INET6", K_INET6},
    };

    if (PyType_Ready(&LayoutType) < 0)
        return NULL;
    if (DecimalType == NULL) {
        decimal = PyImport_ImportModule("decimal");
        if (decimal == NULL)
            return NULL;
        DecimalType = PyObject_GetAttrString(decimal, "Decimal");
        Py_DECREF(decimal);
        if (DecimalType == NULL)
            return NULL;
        EmptyStr = PyUnicode_FromString("");
        Comma = PyUnicode_FromString(",");
        if (EmptyStr == NULL || Comma == NULL)
            return NULL;
    }
    m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LayoutType);
    if (PyModule_AddObject(m, "Layout", (PyObject *)&LayoutType) < 0) {
        Py_DECREF(&LayoutType);
        Py_DECREF(m);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (PyModule_AddIntConstant(m, kinds[i].name, kinds[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
