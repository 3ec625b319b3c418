/* The journal's hot path, compiled: append one raw-bytes delivery's JSON line.
 *
 * Built at install from this source with the machine's C compiler (pyproject's
 * ext-modules); raetlike.journal._delivery keeps the pure-Python path, which
 * writes the same bytes (a property test holds the two to it) and is used when
 * this module is missing or RAETLIKE_PURE_PYTHON is set.
 *
 *   append_kept(buffer, prefixes, node, delivery, received, resends) -> int
 *
 * ``prefixes[node][delivery.remote]`` is the line up to and including
 * ``"transaction_id":`` for the delivery's (node, remote), made by the Python
 * side; -1 when it is not there yet.  The rest is six numbers and fixed keys.
 * Returns the bytes appended to ``buffer`` (a bytearray), or 0, appending
 * nothing, when the delivery is not one this path
 * writes exactly as orjson would: a body that is not bytes, a field that is not
 * an int (bools included) or past 64 bits, or a ``received`` that is not a
 * float in [1e-4, 1e16), where repr's shortest round trip and orjson's agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

static PyObject *s_body, *s_transaction_id, *s_segments, *s_session_id, *s_remote;

/* Decimal digits of v at p; returns the end. */
static char *put_int(char *p, long long v)
{
    char digits[24];
    int n = 0;
    unsigned long long u;
    if (v < 0) {
        *p++ = '-';
        u = 0ULL - (unsigned long long)v;
    } else {
        u = (unsigned long long)v;
    }
    do {
        digits[n++] = (char)('0' + (u % 10));
        u /= 10;
    } while (u);
    while (n) {
        *p++ = digits[--n];
    }
    return p;
}

static char *put(char *p, const char *text, size_t size)
{
    memcpy(p, text, size);
    return p + size;
}

#define PUT(p, literal) put((p), (literal), sizeof(literal) - 1)

/* The shortest decimal that reads back as x, as repr writes it, for 1 <= x < 2**53
 * (a wall-clock time), in a tenth of the time repr's general algorithm (dtoa) takes.
 * Returns the end, or NULL to leave x to PyOS_double_to_string (x a power of two,
 * whose rounding interval is lopsided, or two candidates equally near).
 *
 * x = m * 2**-s with m in [2**52, 2**53).  A k-digit fraction c / 10**k reads back
 * as x when it lies inside x's rounding interval, half an ulp (2**-s / 2) either side
 * (ties to even m); in integers: |2 * (c * 2**s - m * 10**k)| < 10**k.  repr writes
 * the fewest digits, and of those the fraction nearest x: so for k = 0, 1, ... the
 * integer c nearest m * 10**k / 2**s, until it reads back.  10**17 * 2**53 fits in
 * 128 bits. */
static char *put_time(char *p, double x)
{
    int exponent, k, s;
    long long m;
    unsigned __int128 ten = 1;
    if (!(x >= 1.0 && x < 9007199254740992.0)) {
        return NULL;
    }
    m = (long long)(frexp(x, &exponent) * 9007199254740992.0);
    s = 53 - exponent;
    if (m == (1LL << 52)) {
        return NULL;
    }
    for (k = 0; k <= 17; k++, ten *= 10) {
        unsigned __int128 scaled = (unsigned __int128)m * ten;
        unsigned __int128 c = scaled >> s, rest = scaled - (c << s);
        int tie = s > 0 && rest == ((unsigned __int128)1 << (s - 1));
        if (s > 0 && rest > ((unsigned __int128)1 << (s - 1))) {
            c += 1;
            rest = (c << s) - scaled;
        }
        if (rest * 2 < ten || (rest * 2 == ten && (m & 1) == 0)) {
            if (tie) {
                return NULL;  /* two nearest, both reading back: left to dtoa */
            }
            unsigned long long digits = (unsigned long long)c;
            unsigned long long unit = (unsigned long long)ten;
            char fraction[20];
            int n;
            p = put_int(p, (long long)(digits / unit));
            *p++ = '.';
            if (k == 0) {
                *p++ = '0';
                return p;
            }
            digits %= unit;
            for (n = k - 1; n >= 0; n--) {
                fraction[n] = (char)('0' + (digits % 10));
                digits /= 10;
            }
            return put(p, fraction, (size_t)k);
        }
    }
    return NULL;
}

/* An exact int's value; 0 (and no exception) when it is none or does not fit. */
static int exact_int(PyObject *value, long long *out)
{
    int overflow = 0;
    if (value == NULL || !PyLong_CheckExact(value)) {
        PyErr_Clear();
        return 0;
    }
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static int attribute_int(PyObject *object, PyObject *name, long long *out)
{
    PyObject *value = PyObject_GetAttr(object, name);
    int ok = exact_int(value, out);
    Py_XDECREF(value);
    return ok;
}

/* Append the line of ``delivery`` after ``prefix`` to ``buffer``; as append_kept. */
static PyObject *append_line(PyObject *buffer, PyObject *prefix, PyObject *delivery,
                             PyObject *received_object, PyObject *resends_object)
{
    PyObject *body;
    long long transaction_id, segments, session_id, resends;
    Py_ssize_t body_bytes, start, prefix_size, size;
    double received;
    char tail[512], *p, *end, *text;
    if (!PyByteArray_CheckExact(buffer) || !PyBytes_CheckExact(prefix)) {
        PyErr_SetString(PyExc_TypeError, "append_kept: a bytearray and bytes prefixes");
        return NULL;
    }
    if (!PyFloat_CheckExact(received_object) || !exact_int(resends_object, &resends)) {
        return PyLong_FromLong(0);
    }
    received = PyFloat_AS_DOUBLE(received_object);
    if (!isfinite(received) || received < 1e-4 || received >= 1e16) {
        return PyLong_FromLong(0);
    }
    body = PyObject_GetAttr(delivery, s_body);
    if (body == NULL) {
        PyErr_Clear();
        return PyLong_FromLong(0);
    }
    if (!PyBytes_CheckExact(body)) {
        Py_DECREF(body);
        return PyLong_FromLong(0);
    }
    body_bytes = PyBytes_GET_SIZE(body);
    Py_DECREF(body);
    if (!attribute_int(delivery, s_transaction_id, &transaction_id)
            || !attribute_int(delivery, s_segments, &segments)
            || !attribute_int(delivery, s_session_id, &session_id)) {
        return PyLong_FromLong(0);
    }
    p = tail;
    p = put_int(p, transaction_id);
    p = PUT(p, ",\"request_id\":null,\"sequence\":null,\"body_bytes\":");
    p = put_int(p, (long long)body_bytes);
    p = PUT(p, ",\"segments\":");
    p = put_int(p, segments);
    p = PUT(p, ",\"resends\":");
    p = put_int(p, resends);
    p = PUT(p, ",\"sent\":null,\"received\":");
    end = put_time(p, received);
    if (end != NULL) {
        p = end;
    } else {
        text = PyOS_double_to_string(received, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (text == NULL) {
            return NULL;
        }
        p = put(p, text, strlen(text));
        PyMem_Free(text);
    }
    p = PUT(p, ",\"session_id\":");
    p = put_int(p, session_id);
    p = PUT(p, "}\n");

    prefix_size = PyBytes_GET_SIZE(prefix);
    size = prefix_size + (p - tail);
    start = PyByteArray_GET_SIZE(buffer);
    if (PyByteArray_Resize(buffer, start + size) < 0) {
        return NULL;
    }
    memcpy(PyByteArray_AS_STRING(buffer) + start, PyBytes_AS_STRING(prefix), prefix_size);
    memcpy(PyByteArray_AS_STRING(buffer) + start + prefix_size, tail, p - tail);
    return PyLong_FromSsize_t(size);
}

/* append_kept(buffer, prefixes, node, delivery, received, resends) -> int
 *
 * See the top of this file. */
static PyObject *append_kept(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *remote, *inner, *prefix;
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append_kept takes 6 arguments");
        return NULL;
    }
    if (!PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "append_kept: prefixes must be a dict");
        return NULL;
    }
    inner = PyDict_GetItemWithError(args[1], args[2]);  /* borrowed */
    if (inner == NULL || !PyDict_CheckExact(inner)) {
        return PyErr_Occurred() ? NULL : PyLong_FromLong(-1);
    }
    remote = PyObject_GetAttr(args[3], s_remote);
    if (remote == NULL) {
        PyErr_Clear();
        return PyLong_FromLong(0);
    }
    prefix = PyDict_GetItemWithError(inner, remote);  /* borrowed */
    Py_DECREF(remote);
    if (prefix == NULL) {
        if (PyErr_Occurred()) {  /* an unhashable remote: not ours to write */
            PyErr_Clear();
            return PyLong_FromLong(0);
        }
        return PyLong_FromLong(-1);
    }
    if (!PyBytes_CheckExact(prefix) || PyBytes_GET_SIZE(prefix) == 0) {
        return PyLong_FromLong(0);
    }
    return append_line(args[0], prefix, args[3], args[4], args[5]);
}

static PyMethodDef methods[] = {
    {"append_kept", (PyCFunction)(void (*)(void))append_kept, METH_FASTCALL,
     "append_kept(buffer, prefixes, node, delivery, received, resends) -> bytes appended "
     "(0: not here, -1: no prefix kept for the pair)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cjournal",
    "The journal's compiled hot path (see raetlike/journal/_cjournal.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cjournal(void)
{
    s_body = PyUnicode_InternFromString("body");
    s_transaction_id = PyUnicode_InternFromString("transaction_id");
    s_segments = PyUnicode_InternFromString("segments");
    s_session_id = PyUnicode_InternFromString("session_id");
    s_remote = PyUnicode_InternFromString("remote");
    if (!s_body || !s_transaction_id || !s_segments || !s_session_id || !s_remote) {
        return NULL;
    }
    return PyModule_Create(&module);
}
