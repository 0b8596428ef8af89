/* The item tokenizer of the console reader's bulk path (console_items.py): splits the bodies of
 * clean verl step lines, `k:v - k:v - ...`, into keys and values in one pass over the bytes.
 *
 * It means exactly what console_items.items_polars() means (and that, what the line parser
 * means): items are split on " - " (leftmost, not overlapping, like str.split), an item's key is
 * the text before its first ':'. A value that matches verl_text.DECIMAL,
 * -?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?, is converted here to the double nearest to it
 * (what Python's float() gives: Clinger's fast path, else Eisel-Lemire with the 128-bit powers of
 * ten that Python computes and hands over). Every other item (no ':', an empty key, nan, inf,
 * numpy wrappers, more than 19 significant digits, a case Eisel-Lemire cannot decide, ...) is
 * flagged, and Python reads its text with the line parser's rules.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MIN_EXP10 (-348)
#define N_POWERS 696
static uint64_t P_HI[N_POWERS], P_LO[N_POWERS];
static int have_powers = 0;

static const double EXACT[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

enum { NEEDS_TEXT = 1, NOT_THREE = 2 };

/* The 128-bit product of two 64-bit numbers, from 32-bit halves (portable C). */
static void mul128(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo) {
    uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32, b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
    uint64_t p0 = a_lo * b_lo, p1 = a_lo * b_hi, p2 = a_hi * b_lo, p3 = a_hi * b_hi;
    uint64_t mid = (p0 >> 32) + (p1 & 0xFFFFFFFFu) + (p2 & 0xFFFFFFFFu);
    *lo = (p0 & 0xFFFFFFFFu) | (mid << 32);
    *hi = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
}

static int leading_zeros(uint64_t x) {
    int n = 0;
    while (!(x & 0x8000000000000000ull)) {
        x <<= 1;
        n++;
    }
    return n;
}

/* Eisel-Lemire (as in Go's strconv): the bits of the double nearest man * 10^exp10, man > 0.
 * Returns 0 when it cannot decide (the caller then leaves the value to Python). */
static int eisel_lemire(uint64_t man, int64_t exp10, uint64_t *bits) {
    if (exp10 < MIN_EXP10 || exp10 >= MIN_EXP10 + N_POWERS) return 0;
    int clz = leading_zeros(man);
    man <<= clz;
    /* floor(exp10 * log2(10)) without relying on >> of a negative number */
    int64_t scaled = 217706 * exp10;
    int64_t floor_log2 = scaled >= 0 ? scaled / 65536 : -((-scaled + 65535) / 65536);
    uint64_t ret_exp2 = (uint64_t)(floor_log2 + 64 + 1023) - (uint64_t)clz;
    uint64_t x_hi, x_lo;
    mul128(man, P_HI[exp10 - MIN_EXP10], &x_hi, &x_lo);
    if ((x_hi & 0x1FF) == 0x1FF && x_lo + man < man) {
        uint64_t y_hi, y_lo;
        mul128(man, P_LO[exp10 - MIN_EXP10], &y_hi, &y_lo);
        uint64_t m_hi = x_hi, m_lo = x_lo + y_hi;
        if (m_lo < x_lo) m_hi++;
        if ((m_hi & 0x1FF) == 0x1FF && m_lo + 1 == 0 && y_lo + man < man) return 0;
        x_hi = m_hi;
        x_lo = m_lo;
    }
    uint64_t msb = x_hi >> 63;
    uint64_t ret_man = x_hi >> (msb + 9);
    ret_exp2 -= 1 ^ msb;
    if (x_lo == 0 && (x_hi & 0x1FF) == 0 && (ret_man & 3) == 1) return 0; /* halfway */
    ret_man += ret_man & 1;
    ret_man >>= 1;
    if (ret_man >> 53) {
        ret_man >>= 1;
        ret_exp2 += 1;
    }
    if (ret_exp2 - 1 >= 0x7FF - 1) return 0; /* subnormal, zero or infinite */
    *bits = ret_exp2 << 52 | (ret_man & 0x000FFFFFFFFFFFFFull);
    return 1;
}

/* A value in the number grammar, converted exactly: 1 (and *out, *three) or 0 (flag it). */
static int parse_number(const unsigned char *a, const unsigned char *e, double *out, int *three) {
    int neg = 0;
    if (a < e && *a == '-') {
        neg = 1;
        a++;
    }
    uint64_t m = 0;
    int nd = 0, lost = 0;
    int64_t exp = 0;
    const unsigned char *d0 = a;
    while (a < e && (unsigned)(*a - '0') < 10) {
        if (nd < 19) {
            m = m * 10 + (uint64_t)(*a - '0');
            if (m) nd++;
        } else {
            exp++;
            lost |= *a != '0';
        }
        a++;
    }
    int64_t int_digits = a - d0, frac = -1;
    if (a < e && *a == '.') {
        const unsigned char *f0 = ++a;
        while (a < e && (unsigned)(*a - '0') < 10) {
            if (nd < 19) {
                m = m * 10 + (uint64_t)(*a - '0');
                if (m) nd++;
                exp--;
            } else {
                lost |= *a != '0';
            }
            a++;
        }
        frac = a - f0;
    }
    if (int_digits == 0 && frac <= 0) return 0;
    int has_exp = 0;
    if (a < e && (*a == 'e' || *a == 'E')) {
        has_exp = 1;
        a++;
        int64_t sign = 1, ee = 0;
        if (a < e && (*a == '-' || *a == '+')) sign = *a++ == '-' ? -1 : 1;
        const unsigned char *x0 = a;
        while (a < e && (unsigned)(*a - '0') < 10) {
            if (ee < 100000) ee = ee * 10 + (*a - '0');
            a++;
        }
        if (a == x0) return 0;
        exp += sign * ee;
    }
    if (a != e || lost) return 0;
    double v;
    if (m == 0) {
        v = 0.0;
    } else if (m <= (1ull << 53) && exp >= -22 && exp <= 22) {
        v = exp < 0 ? (double)m / EXACT[-exp] : (double)m * EXACT[exp];
    } else {
        uint64_t bits;
        if (!eisel_lemire(m, exp, &bits)) return 0;
        memcpy(&v, &bits, sizeof v);
    }
    *out = neg ? -v : v;
    *three = int_digits > 0 && frac == 3 && !has_exp;
    return 1;
}

/* The first " - " in [p, e), or e. */
static const unsigned char *next_sep(const unsigned char *p, const unsigned char *e) {
    while (p + 3 <= e) {
        const unsigned char *s = memchr(p, ' ', (size_t)(e - p) - 2);
        if (s == NULL) break;
        if (s[1] == '-' && s[2] == ' ') return s;
        p = s + 1;
    }
    return e;
}

/* Distinct keys of one call: open addressing on (start, length) in the data. */
typedef struct {
    int32_t *slots;
    Py_ssize_t *start, *len;
    int32_t *next; /* the key that followed each key last time (a guess for the next item) */
    Py_ssize_t n, cap, mask;
} Keys;

static uint64_t hash_bytes(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ull;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int keys_init(Keys *k) {
    k->n = 0;
    k->cap = 256;
    k->mask = 2 * k->cap - 1;
    k->slots = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(2 * k->cap));
    k->start = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)k->cap);
    k->len = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)k->cap);
    k->next = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(k->cap + 1));
    if (!k->slots || !k->start || !k->len || !k->next) return -1;
    memset(k->slots, 0xff, sizeof(int32_t) * (size_t)(2 * k->cap));
    memset(k->next, 0xff, sizeof(int32_t) * (size_t)(k->cap + 1));
    return 0;
}

static void keys_free(Keys *k) {
    PyMem_RawFree(k->slots);
    PyMem_RawFree(k->start);
    PyMem_RawFree(k->len);
    PyMem_RawFree(k->next);
}

static int keys_grow(Keys *k, const unsigned char *data) {
    Py_ssize_t cap = k->cap * 2;
    int32_t *slots = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(2 * cap));
    Py_ssize_t *start = PyMem_RawRealloc(k->start, sizeof(Py_ssize_t) * (size_t)cap);
    if (start) k->start = start;
    Py_ssize_t *len = PyMem_RawRealloc(k->len, sizeof(Py_ssize_t) * (size_t)cap);
    if (len) k->len = len;
    int32_t *next = PyMem_RawRealloc(k->next, sizeof(int32_t) * (size_t)(cap + 1));
    if (next) k->next = next;
    if (!slots || !start || !len || !next) {
        PyMem_RawFree(slots);
        return -1;
    }
    memset(slots, 0xff, sizeof(int32_t) * (size_t)(2 * cap));
    for (Py_ssize_t i = k->cap + 1; i <= cap; i++) k->next[i] = -1;
    k->next[cap] = k->next[k->cap]; /* the guess for a line's first key lives at index cap */
    k->next[k->cap] = -1;
    Py_ssize_t mask = 2 * cap - 1;
    for (Py_ssize_t i = 0; i < k->n; i++) {
        Py_ssize_t s = (Py_ssize_t)(hash_bytes(data + k->start[i], k->len[i]) & (uint64_t)mask);
        while (slots[s] >= 0) s = (s + 1) & mask;
        slots[s] = (int32_t)i;
    }
    PyMem_RawFree(k->slots);
    k->slots = slots;
    k->cap = cap;
    k->mask = mask;
    return 0;
}

/* The id of key data[p:p+n] (added if new), or -1 on memory error. */
static int32_t key_id(Keys *k, const unsigned char *data, Py_ssize_t p, Py_ssize_t n) {
    Py_ssize_t s = (Py_ssize_t)(hash_bytes(data + p, n) & (uint64_t)k->mask);
    for (;;) {
        int32_t id = k->slots[s];
        if (id < 0) break;
        if (k->len[id] == n && memcmp(data + k->start[id], data + p, (size_t)n) == 0) return id;
        s = (s + 1) & k->mask;
    }
    if (k->n == k->cap) {
        if (keys_grow(k, data) < 0) return -1;
        s = (Py_ssize_t)(hash_bytes(data + p, n) & (uint64_t)k->mask);
        while (k->slots[s] >= 0) s = (s + 1) & k->mask;
    }
    int32_t id = (int32_t)k->n++;
    k->slots[s] = id;
    k->start[id] = p;
    k->len[id] = n;
    return id;
}

static PyObject *set_powers(PyObject *self, PyObject *args) {
    Py_buffer hi, lo;
    if (!PyArg_ParseTuple(args, "y*y*", &hi, &lo)) return NULL;
    if (hi.len != (Py_ssize_t)sizeof P_HI || lo.len != (Py_ssize_t)sizeof P_LO) {
        PyBuffer_Release(&hi);
        PyBuffer_Release(&lo);
        PyErr_SetString(PyExc_ValueError, "expected 696 uint64 each");
        return NULL;
    }
    memcpy(P_HI, hi.buf, sizeof P_HI);
    memcpy(P_LO, lo.buf, sizeof P_LO);
    have_powers = 1;
    PyBuffer_Release(&hi);
    PyBuffer_Release(&lo);
    Py_RETURN_NONE;
}

/* items(data, line, body, length) -> (line i32, key i32, value f64, flag u8, vstart i64,
 * vend i64, keys: list[bytes]).
 *
 * data: the chunk's bytes; line: ascending 0-based indices of the clean step lines in it (lines
 * end at b"\n"); body: where the items start in each line (-1: no items); length: each line's
 * length without its line break. vstart is -1 for an item without ':'. */
static PyObject *items(PyObject *self, PyObject *args) {
    Py_buffer data, line, body, length;
    PyObject *result = NULL;
    if (!have_powers) {
        PyErr_SetString(PyExc_RuntimeError, "set_powers() first");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &data, &line, &body, &length)) return NULL;
    Py_ssize_t n_lines = line.len / 8;
    const unsigned char *buf = data.buf;
    const int64_t *line_i = line.buf, *body_i = body.buf, *len_i = length.buf;
    Py_ssize_t *starts = NULL;
    PyObject *out[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    Keys keys = {0};
    if (body.len != line.len || length.len != line.len) {
        PyErr_SetString(PyExc_ValueError, "line, body and length differ in size");
        goto done;
    }
    if (keys_init(&keys) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    /* Where each line starts, checked against its length; and how many items there are. */
    starts = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)(n_lines + 1));
    if (!starts) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n_items = 0, pos = 0, at = 0;
    for (Py_ssize_t i = 0; i < n_lines; i++) {
        for (; at < line_i[i]; at++) {
            const unsigned char *nl = pos < data.len ? memchr(buf + pos, '\n', (size_t)(data.len - pos)) : NULL;
            if (nl == NULL) break;
            pos = nl - buf + 1;
        }
        /* The line ends at its newline (polars drops a '\r' before it). */
        const unsigned char *nl = pos < data.len ? memchr(buf + pos, '\n', (size_t)(data.len - pos)) : NULL;
        Py_ssize_t len = nl ? nl - (buf + pos) : -1, end = pos + len_i[i];
        if (at != line_i[i] || nl == NULL || len_i[i] < 0 || (i > 0 && line_i[i] <= line_i[i - 1]) ||
            !(len_i[i] == len || (len_i[i] == len - 1 && buf[end] == '\r')) || body_i[i] > len_i[i] ||
            (body_i[i] >= 0 && (body_i[i] < 3 || memcmp(buf + pos + body_i[i] - 3, " - ", 3) != 0))) {
            PyErr_Format(PyExc_ValueError, "line %zd is not where the lines say", i);
            goto done;
        }
        starts[i] = pos;
        if (body_i[i] >= 0) {
            const unsigned char *p = buf + pos + body_i[i], *e = buf + end;
            n_items++;
            while ((p = next_sep(p, e)) < e) {
                n_items++;
                p += 3;
            }
        }
    }
    out[0] = PyBytes_FromStringAndSize(NULL, n_items * 4);
    out[1] = PyBytes_FromStringAndSize(NULL, n_items * 4);
    out[2] = PyBytes_FromStringAndSize(NULL, n_items * 8);
    out[3] = PyBytes_FromStringAndSize(NULL, n_items);
    out[4] = PyBytes_FromStringAndSize(NULL, n_items * 8);
    out[5] = PyBytes_FromStringAndSize(NULL, n_items * 8);
    for (int j = 0; j < 6; j++)
        if (out[j] == NULL) goto done;
    int32_t *o_line = (int32_t *)PyBytes_AS_STRING(out[0]), *o_key = (int32_t *)PyBytes_AS_STRING(out[1]);
    double *o_value = (double *)PyBytes_AS_STRING(out[2]);
    uint8_t *o_flag = (uint8_t *)PyBytes_AS_STRING(out[3]);
    int64_t *o_vs = (int64_t *)PyBytes_AS_STRING(out[4]), *o_ve = (int64_t *)PyBytes_AS_STRING(out[5]);

    Py_ssize_t k = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n_lines && k >= 0; i++) {
        if (body_i[i] < 0) continue;
        const unsigned char *p = buf + starts[i] + body_i[i], *e = buf + starts[i] + len_i[i];
        int32_t prev = -1; /* -1: the first item of the line */
        for (;;) {
            const unsigned char *q = next_sep(p, e);
            const unsigned char *colon = memchr(p, ':', (size_t)(q - p));
            const unsigned char *kend = colon ? colon : q;
            Py_ssize_t klen = kend - p;
            int32_t guess = keys.next[prev < 0 ? keys.cap : prev], id;
            if (guess >= 0 && keys.len[guess] == klen && memcmp(buf + keys.start[guess], p, (size_t)klen) == 0) {
                id = guess;
            } else {
                id = key_id(&keys, buf, p - buf, klen);
                if (id < 0) {
                    k = -1;
                    break;
                }
                keys.next[prev < 0 ? keys.cap : prev] = id;
            }
            int three = 0;
            double v = 0.0;
            int converted = colon && klen > 0 && parse_number(colon + 1, q, &v, &three);
            o_line[k] = (int32_t)i;
            o_key[k] = id;
            o_value[k] = converted ? v : Py_NAN;
            o_flag[k] = (uint8_t)((converted ? 0 : NEEDS_TEXT) | (three ? 0 : NOT_THREE));
            o_vs[k] = colon ? colon + 1 - buf : -1;
            o_ve[k] = q - buf;
            k++;
            prev = id;
            if (q == e) break;
            p = q + 3;
        }
    }
    Py_END_ALLOW_THREADS
    if (k < 0) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *names = PyList_New(keys.n);
    if (names == NULL) goto done;
    for (Py_ssize_t i = 0; i < keys.n; i++) {
        PyObject *name = PyBytes_FromStringAndSize((const char *)buf + keys.start[i], keys.len[i]);
        if (name == NULL) {
            Py_DECREF(names);
            goto done;
        }
        PyList_SET_ITEM(names, i, name);
    }
    result = PyTuple_New(7);
    if (result == NULL) {
        Py_DECREF(names);
        goto done;
    }
    for (int j = 0; j < 6; j++) {
        PyTuple_SET_ITEM(result, j, out[j]);
        out[j] = NULL;
    }
    PyTuple_SET_ITEM(result, 6, names);
done:
    for (int j = 0; j < 6; j++) Py_XDECREF(out[j]);
    PyMem_RawFree(starts);
    keys_free(&keys);
    PyBuffer_Release(&data);
    PyBuffer_Release(&line);
    PyBuffer_Release(&body);
    PyBuffer_Release(&length);
    return result;
}

static PyMethodDef methods[] = {
    {"set_powers", set_powers, METH_VARARGS, "Hand over the 128-bit powers of ten (hi, lo)."},
    {"items", items, METH_VARARGS, "Split clean step lines into keys and values."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_items", NULL, -1, methods};

PyMODINIT_FUNC PyInit__items(void) { return PyModule_Create(&module); }
