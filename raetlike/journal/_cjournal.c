/* The journal's hot path, compiled: append one raw-bytes delivery's JSON line.
 *
 * Built at install from this source with the machine's C compiler (pyproject's
 * ext-modules); raetlike.journal._delivery and _writer keep the pure-Python path,
 * which writes the same bytes (property tests hold the two to it) and is used when
 * this module is missing or RAETLIKE_PURE_PYTHON is set.
 *
 *   Batch(prefixes, slow, full)
 *
 * A JournalWriter's batch of lines waiting for their write(), in a buffer of its
 * own that is reused (not given back and grown again after each write), and the
 * writer's record_delivery itself: calling it journals a raw-bytes delivery
 * straight into the buffer, with no Python frame, or hands the call to ``slow``
 * (see Batch's doc below).
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
#include <structmember.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

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

/* The shortest round-trip digits of ``received`` at ``p`` (as repr and orjson write
 * it, given 1e-4 <= received < 1e16); returns the end, or NULL with an exception set. */
static char *put_received(char *p, double received)
{
    char *end = put_time(p, received), *text;
    if (end != NULL) {
        return end;
    }
    text = PyOS_double_to_string(received, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) {
        return NULL;
    }
    p = put(p, text, strlen(text));
    PyMem_Free(text);
    return p;
}

#define TAIL_ROOM 512  /* the numbers and fixed keys after a prefix, at most */

/* What a line takes from its delivery besides the remote. */
typedef struct {
    Py_ssize_t body_bytes;
    long long transaction_id, segments, session_id;
} Numbers;

/* ``delivery``'s numbers by attribute name; 0 (no exception) when it is not one this path
 * writes: a body that is not bytes, a field that is not an exact int in 64 bits. */
static int numbers_by_name(PyObject *delivery, Numbers *numbers)
{
    PyObject *body = PyObject_GetAttr(delivery, s_body);
    if (body == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (!PyBytes_CheckExact(body)) {
        Py_DECREF(body);
        return 0;
    }
    numbers->body_bytes = PyBytes_GET_SIZE(body);
    Py_DECREF(body);
    return attribute_int(delivery, s_transaction_id, &numbers->transaction_id)
        && attribute_int(delivery, s_segments, &numbers->segments)
        && attribute_int(delivery, s_session_id, &numbers->session_id);
}

/* The line's part after the prefix at ``tail`` (TAIL_ROOM bytes), its time written as
 * ``time``'s ``time_size`` bytes (the digits of received, made by the caller); the end. */
static char *put_tail(char *tail, const Numbers *numbers, long long resends,
                      const char *time, Py_ssize_t time_size)
{
    char *p = tail;
    p = put_int(p, numbers->transaction_id);
    p = PUT(p, ",\"request_id\":null,\"sequence\":null,\"body_bytes\":");
    p = put_int(p, (long long)numbers->body_bytes);
    p = PUT(p, ",\"segments\":");
    p = put_int(p, numbers->segments);
    p = PUT(p, ",\"resends\":");
    p = put_int(p, resends);
    p = PUT(p, ",\"sent\":null,\"received\":");
    p = put(p, time, (size_t)time_size);
    p = PUT(p, ",\"session_id\":");
    p = put_int(p, numbers->session_id);
    return PUT(p, "}\n");
}

/* Whether ``received`` is a time this path writes: a float in [1e-4, 1e16), where repr's
 * shortest round trip and orjson's agree. */
static int plain_time(PyObject *received_object, double *received)
{
    if (!PyFloat_CheckExact(received_object)) {
        return 0;
    }
    *received = PyFloat_AS_DOUBLE(received_object);
    return isfinite(*received) && *received >= 1e-4 && *received < 1e16;
}

/* Append the line of ``delivery`` after ``prefix`` to ``buffer``; as append_kept. */
static PyObject *append_line(PyObject *buffer, PyObject *prefix, PyObject *delivery,
                             PyObject *received_object, PyObject *resends_object)
{
    long long resends;
    Py_ssize_t start, prefix_size, size;
    double received;
    Numbers numbers;
    char tail[TAIL_ROOM], time[40], *p;
    if (!PyByteArray_CheckExact(buffer) || !PyBytes_CheckExact(prefix)) {
        PyErr_SetString(PyExc_TypeError, "append_kept: a bytearray and bytes prefixes");
        return NULL;
    }
    if (!plain_time(received_object, &received) || !exact_int(resends_object, &resends)) {
        return PyLong_FromLong(0);
    }
    if (!numbers_by_name(delivery, &numbers)) {
        return PyLong_FromLong(0);
    }
    p = put_received(time, received);
    if (p == NULL) {
        return NULL;
    }
    p = put_tail(tail, &numbers, resends, time, p - time);
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

/* -- Batch ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    char *data;                 /* the lines waiting for their write() */
    Py_ssize_t size, capacity;  /* bytes in it; bytes it has room for */
    Py_ssize_t records;         /* lines in it */
    Py_ssize_t written, written_records;  /* what write() handed to the OS (the owner resets) */
    double start, end;          /* a raw-bytes line joins when start <= received < end, */
    Py_ssize_t limit;           /* ... and the batch holds fewer bytes than this */
    PyObject *prefixes;         /* dict: node -> {remote -> the line up to its numbers} */
    PyObject *slow;             /* slow(node, delivery, received, resends=...): the rest */
    PyObject *full;             /* full(): once a raw-bytes line brings size to limit */
    PyObject *last_node, *last_remote, *last_prefix;  /* the last pair's prefix */
    PyTypeObject *slot_type;    /* a delivery type whose fields are slots (borrowed: */
    unsigned int slot_version;  /* only compared, with its version tag), */
    Py_ssize_t slot_offsets[5]; /* their offsets: remote, body, and the three ints */
    double last_time;           /* the last received time, */
    char time_text[40];         /* its digits, */
    Py_ssize_t time_size;       /* and their length (0: none yet) */
    int busy;                   /* write() is handing data to the OS (see batch_write) */
} Batch;

static PyObject *s_resends, *zero;

/* 0, or -1 with BufferError while write() is under way: a signal handler it runs, or a
 * thread that runs while it waits for the OS without the GIL, must not change the data
 * it writes (a realloc would free it; a clear would make its size negative).  The
 * pure-Python batch's bytearray refuses the same way while its memoryview is out. */
static int not_busy(Batch *self)
{
    if (self->busy) {
        PyErr_SetString(PyExc_BufferError, "the journal batch is being written");
        return -1;
    }
    return 0;
}

/* Room for ``more`` bytes after the batch's; -1 with MemoryError when there is none. */
static int reserve(Batch *self, Py_ssize_t more)
{
    Py_ssize_t need = self->size + more, capacity = self->capacity;
    char *data;
    if (need <= capacity) {
        return 0;
    }
    while (capacity < need) {
        capacity = capacity < 4096 ? 4096 : capacity + capacity / 2;
    }
    data = PyMem_Realloc(self->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->data = data;
    self->capacity = capacity;
    return 0;
}

static Py_ssize_t count_lines(const char *data, Py_ssize_t size)
{
    Py_ssize_t lines = 0;
    const char *end = data + size, *at = data;
    while (at < end && (at = memchr(at, '\n', (size_t)(end - at))) != NULL) {
        lines++;
        at++;
    }
    return lines;
}

/* The prefix kept for (node, remote) (borrowed from the batch, which keeps the last
 * one), NULL when none is (no exception).  The caller holds node and remote: a key of
 * the dicts may run Python in its __eq__, which can change anything else (the inner
 * dict is held here across its lookup). */
static PyObject *kept_prefix(Batch *self, PyObject *node, PyObject *remote)
{
    PyObject *inner, *prefix;
    if (node == self->last_node && remote == self->last_remote) {
        return self->last_prefix;  /* the same two strings: the same prefix */
    }
    inner = PyDict_GetItemWithError(self->prefixes, node);
    if (inner == NULL || !PyDict_CheckExact(inner)) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(inner);
    prefix = PyDict_GetItemWithError(inner, remote);
    if (prefix == NULL || !PyBytes_CheckExact(prefix) || PyBytes_GET_SIZE(prefix) == 0) {
        PyErr_Clear();  /* none yet, too long to keep, or an unhashable remote */
        Py_DECREF(inner);
        return NULL;
    }
    Py_INCREF(node);
    Py_INCREF(remote);
    Py_INCREF(prefix);
    Py_XSETREF(self->last_node, node);
    Py_XSETREF(self->last_remote, remote);
    Py_XSETREF(self->last_prefix, prefix);
    Py_DECREF(inner);
    return self->last_prefix;
}

/* Learn where ``type`` keeps the five fields, when each is a plain slot (a member
 * descriptor, as a slotted dataclass such as road's MessageReceived has) read by the
 * generic getattr; 0 when they are not (then they are read by name). */
static int learn_slots(Batch *self, PyTypeObject *type)
{
    PyObject *names[5] = {s_remote, s_body, s_transaction_id, s_segments, s_session_id};
    Py_ssize_t offsets[5];
    int n;
    self->slot_type = NULL;
    if (type->tp_getattro != PyObject_GenericGetAttr) {
        return 0;
    }
    for (n = 0; n < 5; n++) {
        PyObject *found = _PyType_Lookup(type, names[n]);  /* borrowed */
        PyMemberDef *member;
        /* a member descriptor of this type or a base: one borrowed from another class
         * (C.remote = A.__dict__["remote"]) has A's offsets, which the generic getattr
         * refuses on a C (TypeError), and so does this */
        if (found == NULL || Py_TYPE(found) != &PyMemberDescr_Type
                || !PyType_IsSubtype(type, PyDescr_TYPE(found))) {
            return 0;
        }
        member = ((PyMemberDescrObject *)found)->d_member;
        if (member->type != T_OBJECT_EX) {
            return 0;
        }
        offsets[n] = member->offset;
    }
    if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
        return 0;  /* no tag to tell a later change to the type by */
    }
    memcpy(self->slot_offsets, offsets, sizeof(offsets));
    self->slot_version = type->tp_version_tag;
    self->slot_type = type;
    return 1;
}

#define SLOT(object, offset) (*(PyObject **)((char *)(object) + (offset)))

/* ``delivery``'s remote (a new reference, also in ``*owned``: looking it up may run
 * Python that replaces the delivery's fields) and numbers; 0 (no exception, no
 * reference) when it is not one this path writes. */
static int read_delivery(Batch *self, PyObject *delivery, PyObject **remote, PyObject **owned,
                         Numbers *numbers)
{
    PyTypeObject *type = Py_TYPE(delivery);
    PyObject *body;
    *owned = NULL;
    if (type != self->slot_type || type->tp_version_tag != self->slot_version
            || !PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
        if (!learn_slots(self, type)) {
            *remote = *owned = PyObject_GetAttr(delivery, s_remote);
            if (*remote == NULL) {
                PyErr_Clear();
                return 0;
            }
            if (!numbers_by_name(delivery, numbers)) {
                Py_CLEAR(*owned);
                return 0;
            }
            return 1;
        }
    }
    /* slots, as the generic getattr reads them (an empty one: not this path's) */
    *remote = SLOT(delivery, self->slot_offsets[0]);
    body = SLOT(delivery, self->slot_offsets[1]);
    if (*remote == NULL || !PyUnicode_CheckExact(*remote) || body == NULL
            || !PyBytes_CheckExact(body)) {
        return 0;  /* (a remote of a str subclass: hashed by the general path) */
    }
    numbers->body_bytes = PyBytes_GET_SIZE(body);
    if (!(exact_int(SLOT(delivery, self->slot_offsets[2]), &numbers->transaction_id)
          && exact_int(SLOT(delivery, self->slot_offsets[3]), &numbers->segments)
          && exact_int(SLOT(delivery, self->slot_offsets[4]), &numbers->session_id))) {
        return 0;
    }
    Py_INCREF(*remote);
    *owned = *remote;
    return 1;
}

/* Append a raw-bytes delivery's line; 1 done, 0 not this path's (no exception), -1 error. */
static int batch_plain(Batch *self, PyObject *node, PyObject *delivery,
                       PyObject *received_object, PyObject *resends_object)
{
    PyObject *remote, *owned, *prefix;
    double received;
    long long resends;
    Py_ssize_t prefix_size;
    Numbers numbers;
    char tail[TAIL_ROOM], *end;
    if (not_busy(self) < 0) {
        return -1;
    }
    if (!PyUnicode_CheckExact(node)) {
        return 0;  /* its hash and __eq__ may run Python: the general path's */
    }
    if (!plain_time(received_object, &received)
            || !(received >= self->start && received < self->end)
            || self->size >= self->limit || !exact_int(resends_object, &resends)) {
        return 0;
    }
    if (!read_delivery(self, delivery, &remote, &owned, &numbers)) {
        return 0;
    }
    prefix = kept_prefix(self, node, remote);
    if (prefix == NULL) {
        Py_XDECREF(owned);
        return 0;
    }
    /* no Python runs from here to the copy: the prefix kept by the batch stays; the
     * remote is let go after it (its last reference may run a __del__) */
    if (received != self->last_time || self->time_size == 0) {
        end = put_received(self->time_text, received);
        if (end == NULL) {
            Py_XDECREF(owned);
            return -1;
        }
        self->time_size = end - self->time_text;
        self->last_time = received;
    }
    end = put_tail(tail, &numbers, resends, self->time_text, self->time_size);
    prefix_size = PyBytes_GET_SIZE(prefix);
    if (reserve(self, prefix_size + (end - tail)) < 0) {
        Py_XDECREF(owned);
        return -1;
    }
    memcpy(self->data + self->size, PyBytes_AS_STRING(prefix), (size_t)prefix_size);
    memcpy(self->data + self->size + prefix_size, tail, (size_t)(end - tail));
    self->size += prefix_size + (end - tail);
    self->records++;
    Py_XDECREF(owned);
    return 1;
}

/* batch(node, delivery, received, *, resends=0): JournalWriter.record_delivery. */
static PyObject *batch_call(PyObject *object, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames)
{
    Batch *self = (Batch *)object;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *resends = zero, *result;
    int done = 0;
    if (nargs != 3) {
        goto slow;  /* the method's own signature says what is wrong */
    }
    if (kwnames != NULL) {  /* resends, keyword only, as the method has it */
        if (PyTuple_GET_SIZE(kwnames) != 1
                || PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), s_resends) != 0) {
            goto slow;
        }
        resends = args[3];
    }
    done = batch_plain(self, args[0], args[1], args[2], resends);
    if (done < 0) {
        return NULL;
    }
    if (done) {
        if (self->size >= self->limit) {
            result = PyObject_CallNoArgs(self->full);
            if (result == NULL) {
                return NULL;
            }
            Py_DECREF(result);
        }
        Py_RETURN_NONE;
    }
slow:
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *batch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *prefixes, *slow, *full;
    Batch *self;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Batch(prefixes, slow, full) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!OO:Batch", &PyDict_Type, &prefixes, &slow, &full)) {
        return NULL;
    }
    self = (Batch *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = batch_call;
    self->start = self->end = 0.0;  /* nothing joins until the owner opens a window */
    self->limit = 0;
    Py_INCREF(prefixes);
    self->prefixes = prefixes;
    Py_INCREF(slow);
    self->slow = slow;
    Py_INCREF(full);
    self->full = full;
    return (PyObject *)self;
}

static int batch_traverse(Batch *self, visitproc visit, void *arg)
{
    Py_VISIT(self->prefixes);
    Py_VISIT(self->slow);
    Py_VISIT(self->full);
    return 0;
}

static int batch_clear_references(Batch *self)
{
    Py_CLEAR(self->prefixes);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->full);
    Py_CLEAR(self->last_node);
    Py_CLEAR(self->last_remote);
    Py_CLEAR(self->last_prefix);
    return 0;
}

static void batch_dealloc(Batch *self)
{
    PyObject_GC_UnTrack(self);
    batch_clear_references(self);
    PyMem_Free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t batch_length(Batch *self)
{
    return self->size;
}

static PyObject *batch_append(Batch *self, PyObject *data)
{
    Py_buffer view;
    if (not_busy(self) < 0 || PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (reserve(self, view.len) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    memcpy(self->data + self->size, view.buf, (size_t)view.len);
    self->size += view.len;
    self->records += count_lines(view.buf, view.len);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* write(fd): hand every waiting byte to the OS; what went out leaves the batch (also when
 * a later write() fails: the error is raised, the rest waits).  Busy meanwhile: the data
 * is written without the GIL, and a signal handler runs at EINTR; an error either raises
 * (BufferError from another touch of the batch included) ends the write. */
static PyObject *batch_write(Batch *self, PyObject *fd_object)
{
    int fd = PyObject_AsFileDescriptor(fd_object);
    Py_ssize_t done = 0, lines;
    ssize_t n;
    int error = 0;
    if (fd < 0 || not_busy(self) < 0) {
        return NULL;
    }
    self->busy = 1;
    while (done < self->size) {
        Py_BEGIN_ALLOW_THREADS
        n = write(fd, self->data + done, (size_t)(self->size - done));
        Py_END_ALLOW_THREADS
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) {
                    error = 1;
                    break;
                }
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            error = 1;
            break;
        }
        done += n;
    }
    self->busy = 0;
    lines = done == self->size ? self->records : count_lines(self->data, done);
    self->written += done;
    self->written_records += lines;
    self->records -= lines;
    if (done < self->size) {
        memmove(self->data, self->data + done, (size_t)(self->size - done));
    }
    self->size -= done;
    if (error) {
        return NULL;
    }
    return PyLong_FromSsize_t(done);
}

static PyObject *batch_clear(Batch *self, PyObject *unused)
{
    (void)unused;
    if (not_busy(self) < 0) {
        return NULL;
    }
    self->size = 0;
    self->records = 0;
    Py_RETURN_NONE;
}

static PyObject *batch_getvalue(Batch *self, PyObject *unused)
{
    (void)unused;
    return PyBytes_FromStringAndSize(self->data, self->size);
}

static PyMethodDef batch_methods[] = {
    {"append", (PyCFunction)batch_append, METH_O, "append(line): add a line (bytes-like)"},
    {"write", (PyCFunction)batch_write, METH_O,
     "write(fd) -> bytes written: hand the batch to the OS; what went out leaves it"},
    {"clear", (PyCFunction)batch_clear, METH_NOARGS, "drop what waits"},
    {"getvalue", (PyCFunction)batch_getvalue, METH_NOARGS, "the waiting bytes"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef batch_members[] = {
    {"start", T_DOUBLE, offsetof(Batch, start), 0, "received times from here ..."},
    {"end", T_DOUBLE, offsetof(Batch, end), 0, "... to before here join the batch"},
    {"limit", T_PYSSIZET, offsetof(Batch, limit), 0,
     "raw-bytes lines join while the batch holds fewer bytes"},
    {"records", T_PYSSIZET, offsetof(Batch, records), READONLY, "lines waiting"},
    {"written", T_PYSSIZET, offsetof(Batch, written), 0, "bytes written (the owner resets)"},
    {"written_records", T_PYSSIZET, offsetof(Batch, written_records), 0,
     "lines written (the owner resets)"},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods batch_sequence = {
    .sq_length = (lenfunc)batch_length,
};

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "raetlike.journal._cjournal.Batch",
    .tp_doc = "Batch(prefixes, slow, full): a journal writer's lines waiting for write(), "
              "and its record_delivery.\n\n"
              "Called as batch(node, delivery, received, *, resends=0) it appends a raw-bytes "
              "delivery's line when received is in [start, end), fewer than limit bytes wait "
              "and prefixes[node][delivery.remote] is kept, then calls full() once limit "
              "bytes wait; any other call goes to slow(node, delivery, received, ...) as it "
              "came.",
    .tp_basicsize = sizeof(Batch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = batch_new,
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_traverse = (traverseproc)batch_traverse,
    .tp_clear = (inquiry)batch_clear_references,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Batch, vectorcall),
    .tp_methods = batch_methods,
    .tp_members = batch_members,
    .tp_as_sequence = &batch_sequence,
};

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
    s_resends = PyUnicode_InternFromString("resends");
    zero = PyLong_FromLong(0);
    if (!s_body || !s_transaction_id || !s_segments || !s_session_id || !s_remote
            || !s_resends || !zero || PyType_Ready(&BatchType) < 0) {
        return NULL;
    }
    PyObject *made = PyModule_Create(&module);
    if (made == NULL) {
        return NULL;
    }
    Py_INCREF(&BatchType);
    if (PyModule_AddObject(made, "Batch", (PyObject *)&BatchType) < 0) {
        Py_DECREF(&BatchType);
        Py_DECREF(made);
        return NULL;
    }
    return made;
}
