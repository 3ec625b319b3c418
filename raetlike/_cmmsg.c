/* Batched datagram syscalls for the lane's driver (raetlike.uxd): recvmmsg and sendmmsg,
 * which Python's socket module does not have, on UNIX datagram sockets.
 *
 * Built at install from this source with the machine's C compiler (setup.py); the
 * driver keeps its one-datagram-per-call path, used when this module is missing or
 * RAETLIKE_PURE_PYTHON is set, and both give the stack the same datagrams.
 *
 *   receiver = Receiver()
 *   receiver.recv_batch(fd, count, size) -> [source, ...]
 *   receiver.take(index) -> data
 *
 * A Receiver owns a receive buffer (grown to the largest count * size asked of it, 4 MiB
 * at most): each driver makes its own, so drivers on different threads never read one
 * another's datagrams (one buffer for the whole module did: a batch taken on one thread
 * was overwritten by another's before it was read, or take raised IndexError).  One
 * Receiver is for one thread at a time, as the driver that owns it is.
 *
 * recv_batch takes up to ``count`` (1..64) datagrams waiting on socket ``fd`` in one
 * recvmmsg, each into a slot of ``size`` (1..65536) bytes, and returns their sources;
 * take(i) then returns the i-th one's bytes, until that receiver's next recv_batch.  A
 * datagram larger than its slot comes back cut to ``size`` bytes (MSG_TRUNC), as
 * recvfrom(size) gives it.  An empty list: none waiting (EAGAIN).  Other errors raise
 * OSError.  ``source`` is what Python's socket module makes of the sender's address: its
 * path as a str, bytes for an abstract name, None for an unbound sender.
 *
 * The bytes are made one at a time, when asked for: made all at once, 64 datagrams of
 * 60 KB grew the heap by 4 MB, which glibc gave back when they were freed, and faulting
 * it in again cost ~80 us a datagram here (recvfrom: ~7 us).
 *
 *   send_batch(fd, datagrams, start) -> (taken, error)
 *
 * Sends ``datagrams[start:]`` (a list of ``(bytes, path)``) in sendmmsg calls until one
 * is refused.  ``taken``: how many the kernel took; ``error`` 0 when it took them all,
 * else why ``datagrams[start + taken]`` was not: its errno (the rest untried), or
 * SEND_ALONE when it is not one this path sends (data that is not bytes, a path that is
 * not a str of 1..107 bytes without NUL): the caller sends that one with
 * ``socket.sendto``, which refuses it or sends it as it always has.
 *
 * Both calls pass MSG_DONTWAIT and keep the GIL: they never block, and no other thread
 * runs while a receiver's buffer is filled.  (The GIL alone does not keep a buffer to one
 * thread: another may run between recv_batch and take.  Hence a buffer per Receiver.)
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#define MAX_COUNT 64     /* datagrams per call: 64 slots of 64 KiB is a 4 MiB buffer */
#define MAX_SIZE 65536   /* bytes a slot holds: the lane's largest page, and one more */
#define SEND_ALONE (-1)

typedef struct {
    PyObject_HEAD
    char *slots;       /* the receive buffer, MAX_COUNT * MAX_SIZE at most */
    size_t slots_size;
    Py_ssize_t held;   /* datagrams of the last recv_batch in it, each in a slot of */
    size_t held_size;  /* held_size bytes, */
    size_t lengths[MAX_COUNT];  /* of these lengths */
} Receiver;

/* A received datagram's source, as CPython's makesockaddr makes it for AF_UNIX. */
static PyObject *source_of(const struct sockaddr_un *address, socklen_t length)
{
    if (length < sizeof address->sun_family || address->sun_family != AF_UNIX) {
        Py_RETURN_NONE;  /* no address (an unbound sender), or not a UNIX socket's */
    }
    if (length > sizeof *address) {
        length = sizeof *address;
    }
    size_t room = length > offsetof(struct sockaddr_un, sun_path)
        ? length - offsetof(struct sockaddr_un, sun_path) : 0;
    if (room > 0 && address->sun_path[0] == '\0') {  /* an abstract name */
        return PyBytes_FromStringAndSize(address->sun_path, (Py_ssize_t)room);
    }
    return PyUnicode_DecodeFSDefaultAndSize(address->sun_path,
                                            (Py_ssize_t)strnlen(address->sun_path, room));
}

/* An int argument; -1 with an error set when it is not one (check PyErr_Occurred). */
static int as_int(PyObject *number)
{
    long value = PyLong_AsLong(number);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (value < INT_MIN || value > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "value does not fit in a C int");
        return -1;
    }
    return (int)value;
}

static int grow_slots(Receiver *self, size_t size)
{
    if (size <= self->slots_size) {
        return 0;
    }
    char *bigger = PyMem_RawRealloc(self->slots, size);
    if (bigger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->slots = bigger;
    self->slots_size = size;
    return 0;
}

static PyObject *recv_batch(Receiver *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "recv_batch(fd, count, size) takes 3 arguments");
        return NULL;
    }
    int fd = as_int(args[0]);
    long count = PyLong_AsLong(args[1]);
    long size = PyLong_AsLong(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (count < 1 || count > MAX_COUNT || size < 1 || size > MAX_SIZE) {
        PyErr_Format(PyExc_ValueError, "recv_batch: count must be 1..%d and size 1..%d",
                     MAX_COUNT, MAX_SIZE);
        return NULL;
    }
    self->held = 0;  /* whatever happens below, the last batch is gone */
    if (grow_slots(self, (size_t)count * (size_t)size) < 0) {
        return NULL;
    }
    char *slots = self->slots;
    struct mmsghdr headers[MAX_COUNT];
    struct iovec vectors[MAX_COUNT];
    struct sockaddr_un sources[MAX_COUNT];
    memset(headers, 0, sizeof headers[0] * (size_t)count);
    for (long i = 0; i < count; i++) {
        vectors[i].iov_base = slots + (size_t)i * (size_t)size;
        vectors[i].iov_len = (size_t)size;
        headers[i].msg_hdr.msg_iov = &vectors[i];
        headers[i].msg_hdr.msg_iovlen = 1;
        headers[i].msg_hdr.msg_name = &sources[i];
        headers[i].msg_hdr.msg_namelen = sizeof sources[i];
    }
    int taken;
    do {  /* a call that cannot block is not left to signal handlers: they run after it */
        taken = recvmmsg(fd, headers, (unsigned int)count, MSG_DONTWAIT, NULL);
    } while (taken < 0 && errno == EINTR);
    if (taken < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return PyList_New(0);
        }
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *list = PyList_New(taken);
    if (list == NULL) {
        return NULL;
    }
    PyObject *source = NULL;  /* reused while consecutive datagrams come from one address */
    for (int i = 0; i < taken; i++) {
        size_t length = headers[i].msg_len;
        if (length > (size_t)size) {  /* never past the slot, whatever the kernel says */
            length = (size_t)size;
        }
        self->lengths[i] = length;
        socklen_t name_length = headers[i].msg_hdr.msg_namelen;
        if (i == 0 || name_length != headers[i - 1].msg_hdr.msg_namelen
            || memcmp(&sources[i], &sources[i - 1],
                      name_length < sizeof sources[i] ? name_length : sizeof sources[i])) {
            source = source_of(&sources[i], name_length);
            if (source == NULL) {
                Py_DECREF(list);
                return NULL;
            }
        } else {
            Py_INCREF(source);
        }
        PyList_SET_ITEM(list, i, source);
    }
    self->held = taken;
    self->held_size = (size_t)size;
    return list;
}

static PyObject *take(Receiver *self, PyObject *number)
{
    Py_ssize_t index = PyLong_AsSsize_t(number);
    if (index == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (index < 0 || index >= self->held) {
        PyErr_SetString(PyExc_IndexError, "take: no such datagram in the last batch");
        return NULL;
    }
    return PyBytes_FromStringAndSize(self->slots + (size_t)index * self->held_size,
                                     (Py_ssize_t)self->lengths[index]);
}

static PyObject *receiver_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Receiver() takes no arguments");
        return NULL;
    }
    Receiver *self = (Receiver *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->slots = NULL;  /* (tp_alloc zeroed the rest) */
    return (PyObject *)self;
}

static void receiver_dealloc(Receiver *self)
{
    PyMem_RawFree(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef receiver_methods[] = {
    {"recv_batch", (PyCFunction)(void (*)(void))recv_batch, METH_FASTCALL,
     "recv_batch(fd, count, size) -> [source, ...] (one recvmmsg; [] on EAGAIN)"},
    {"take", (PyCFunction)(void (*)(void))take, METH_O,
     "take(index) -> bytes: a datagram of this receiver's last recv_batch"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReceiverType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "raetlike._cmmsg.Receiver",
    .tp_doc = "A receive buffer of its own for recv_batch and take (one per driver).",
    .tp_basicsize = sizeof(Receiver),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = receiver_new,
    .tp_dealloc = (destructor)receiver_dealloc,
    .tp_methods = receiver_methods,
};

/* ``path`` as a sockaddr; 0 when it is not one this path sends (SEND_ALONE), with no
 * Python error left set. */
static socklen_t address_of(PyObject *path, struct sockaddr_un *address)
{
    if (!PyUnicode_CheckExact(path)) {
        return 0;
    }
    PyObject *encoded = PyUnicode_EncodeFSDefault(path);
    if (encoded == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t length = PyBytes_GET_SIZE(encoded);
    const char *bytes = PyBytes_AS_STRING(encoded);
    socklen_t result = 0;
    if (length > 0 && (size_t)length < sizeof address->sun_path
        && memchr(bytes, '\0', (size_t)length) == NULL) {
        memset(address, 0, sizeof *address);
        address->sun_family = AF_UNIX;
        memcpy(address->sun_path, bytes, (size_t)length);
        result = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)length);
    }
    Py_DECREF(encoded);
    return result;
}

static PyObject *send_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "send_batch(fd, datagrams, start) takes 3 arguments");
        return NULL;
    }
    int fd = as_int(args[0]);
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *datagrams = args[1];
    if (!PyList_Check(datagrams)) {
        PyErr_SetString(PyExc_TypeError, "send_batch: datagrams must be a list");
        return NULL;
    }
    Py_ssize_t total = PyList_GET_SIZE(datagrams);
    if (start < 0 || start > total) {
        PyErr_SetString(PyExc_ValueError, "send_batch: start out of range");
        return NULL;
    }
    struct mmsghdr headers[MAX_COUNT];
    struct iovec vectors[MAX_COUNT];
    struct sockaddr_un destinations[MAX_COUNT];
    Py_ssize_t next = start;
    int error = 0;
    /* No Python code runs below (only exact types are read), so the list and its items
     * stay as they are while the kernel reads them. */
    while (next < total && error == 0) {
        int ready = 0;
        PyObject *previous = NULL;
        while (ready < MAX_COUNT && next + ready < total) {
            PyObject *item = PyList_GET_ITEM(datagrams, next + ready);
            if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2
                || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0))) {
                break;
            }
            PyObject *data = PyTuple_GET_ITEM(item, 0);
            PyObject *address = PyTuple_GET_ITEM(item, 1);
            socklen_t length;
            if (address == previous) {  /* the same destination object: the same sockaddr */
                destinations[ready] = destinations[ready - 1];
                length = headers[ready - 1].msg_hdr.msg_namelen;
            } else if ((length = address_of(address, &destinations[ready])) == 0) {
                break;
            }
            previous = address;
            vectors[ready].iov_base = PyBytes_AS_STRING(data);
            vectors[ready].iov_len = (size_t)PyBytes_GET_SIZE(data);
            memset(&headers[ready], 0, sizeof headers[ready]);
            headers[ready].msg_hdr.msg_name = &destinations[ready];
            headers[ready].msg_hdr.msg_namelen = length;
            headers[ready].msg_hdr.msg_iov = &vectors[ready];
            headers[ready].msg_hdr.msg_iovlen = 1;
            ready++;
        }
        if (ready == 0) {
            error = SEND_ALONE;
            break;
        }
        int sent;
        do {  /* no signal handler may run here: it could free what the kernel reads */
            sent = sendmmsg(fd, headers, (unsigned int)ready, MSG_DONTWAIT);
        } while (sent < 0 && errno == EINTR);
        if (sent < 0) {
            error = errno;
        } else if (sent == 0) {
            error = EAGAIN;  /* never seen; stops rather than spinning */
        } else {
            /* fewer than ready: the kernel refused the next one, and sendmmsg dropped why;
             * the next round asks again, starting there */
            next += sent;
        }
    }
    return Py_BuildValue("(ni)", next - start, error);
}

static PyMethodDef methods[] = {
    {"send_batch", (PyCFunction)(void (*)(void))send_batch, METH_FASTCALL,
     "send_batch(fd, datagrams, start) -> (taken, error): sendmmsg until a refusal"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cmmsg",
    "Batched UNIX datagram syscalls, recvmmsg and sendmmsg (see raetlike/_cmmsg.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cmmsg(void)
{
    if (PyType_Ready(&ReceiverType) < 0) {
        return NULL;
    }
    PyObject *created = PyModule_Create(&module);
    if (created == NULL) {
        return NULL;
    }
    Py_INCREF(&ReceiverType);
    if (PyModule_AddObject(created, "Receiver", (PyObject *)&ReceiverType) < 0) {
        Py_DECREF(&ReceiverType);
        Py_DECREF(created);
        return NULL;
    }
    if (PyModule_AddIntConstant(created, "SEND_ALONE", SEND_ALONE) < 0
        || PyModule_AddIntConstant(created, "MAX_COUNT", MAX_COUNT) < 0
        || PyModule_AddIntConstant(created, "MAX_SIZE", MAX_SIZE) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
