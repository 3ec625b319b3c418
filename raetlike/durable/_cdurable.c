/* The durable outbox's hot path, compiled: one raw-bytes message as a framed log record
 * and as the envelope it travels in.
 *
 * Built at install from this source with the machine's C compiler (pyproject's
 * ext-modules); raetlike.durable._outbox keeps the pure-Python path, which makes the
 * same bytes (a property test holds the two to it) and is used when this module is
 * missing or RAETLIKE_PURE_PYTHON is set.
 *
 *   raw_put(store, message_id, seq, remote, expires, body) -> (framed, envelope)
 *
 * framed   = u32 length, u32 CRC-32 (of the length's four bytes, then the payload),
 *            payload = 0x00, u64 message_id, u64 seq, f64 expires, u16 len(remote),
 *            remote, body
 * envelope = "\x00rlkdur1", u64 store, u64 seq, body
 * (all little-endian).  remote is a str (written as UTF-8), body bytes; store,
 * message_id and seq fit 64 bits.
 * The CRC is zlib's crc32, as Python's zlib.crc32 computes it (the same library).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static PyObject *raw_put(PyObject *self, PyObject *args)
{
    unsigned long long store, message_id, seq;
    double expires;
    const char *remote, *body;
    Py_ssize_t remote_size, body_size;
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKs#dy#", &store, &message_id, &seq, &remote,
                          &remote_size, &expires, &body, &body_size)) {
        return NULL;
    }
    if (remote_size > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "a remote name of more than 65535 bytes");
        return NULL;
    }
    Py_ssize_t payload = 1 + 8 + 8 + 8 + 2 + remote_size + body_size;
    if (payload > 0xFFFFFFF0) {
        PyErr_SetString(PyExc_ValueError, "a record of more than 4 GiB");
        return NULL;
    }
    PyObject *framed = PyBytes_FromStringAndSize(NULL, 8 + payload);
    if (framed == NULL) {
        return NULL;
    }
    PyObject *envelope = PyBytes_FromStringAndSize(NULL, 24 + body_size);
    if (envelope == NULL) {
        Py_DECREF(framed);
        return NULL;
    }
    unsigned char *f = (unsigned char *)PyBytes_AS_STRING(framed);
    unsigned char *p = f + 8;
    uint64_t bits;
    memcpy(&bits, &expires, 8);
    p[0] = 0;
    put_u64(p + 1, (uint64_t)message_id);
    put_u64(p + 9, (uint64_t)seq);
    put_u64(p + 17, bits);
    put_u16(p + 25, (uint16_t)remote_size);
    memcpy(p + 27, remote, (size_t)remote_size);
    memcpy(p + 27 + remote_size, body, (size_t)body_size);
    put_u32(f, (uint32_t)payload);
    uLong check = crc32(crc32(0L, f, 4), p, (uInt)payload);
    put_u32(f + 4, (uint32_t)check);

    unsigned char *e = (unsigned char *)PyBytes_AS_STRING(envelope);
    memcpy(e, "\x00rlkdur1", 8);
    put_u64(e + 8, (uint64_t)store);
    put_u64(e + 16, (uint64_t)seq);
    memcpy(e + 24, body, (size_t)body_size);
    PyObject *pair = PyTuple_Pack(2, framed, envelope);
    Py_DECREF(framed);
    Py_DECREF(envelope);
    return pair;
}

static PyMethodDef methods[] = {
    {"raw_put", raw_put, METH_VARARGS,
     "raw_put(store, message_id, seq, remote, expires, body) -> (framed, envelope)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cdurable",
    "The durable outbox's hot path: a raw-bytes message as a log record and an envelope.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cdurable(void)
{
    return PyModule_Create(&module);
}
