/* libsodium without ctypes: the crypto facade's per-packet calls, compiled.
 *
 * raetlike.crypto calls libsodium through libnacl's ctypes library; a 100-byte
 * AEAD seal spent more time in ctypes (buffers, argument conversion) than in the
 * cipher.  This module calls the same functions directly.  Built at install from
 * this source with the machine's C compiler (setup.py); raetlike.crypto keeps the
 * ctypes path, which makes the same bytes (tests/test_csodium.py holds the two to
 * it), and uses it when this module is missing, does not bind, or
 * RAETLIKE_PURE_PYTHON is set.
 *
 * No libsodium headers are needed: the prototypes below are libsodium's stable
 * ABI, and bind() resolves them with dlsym in the library libnacl already loaded
 * (RTLD_NOLOAD: never a second copy).
 *
 *   bind(library, error)                        library: libnacl's ctypes name;
 *                                               error: the class to raise
 *   aead_seal(key, plain, nonce, associated)    -> ciphertext ‖ 16-byte tag
 *   aead_open(key, sealed, nonce, associated)   -> plaintext
 *   box_seal(shared, plain, nonce)              -> MAC ‖ ciphertext (crypto_box afternm)
 *   box_open(shared, sealed, nonce)             -> plaintext
 *   sign(secret, message)                       -> 64-byte Ed25519 signature
 *   verify(public, signature, message)          -> None
 *
 * Arguments are any bytes-like object.  Every size is checked here, with the
 * messages raetlike.crypto's ctypes path raises, so hostile input gets the
 * error class given to bind(), never a crash.  The GIL is kept: a packet's
 * crypto takes a few microseconds, less than handing the GIL over would cost.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

#define KEY_SIZE 32
#define AEAD_NONCE_SIZE 12
#define AEAD_TAG_SIZE 16
#define BOX_NONCE_SIZE 24
#define BOX_MAC_SIZE 16
#define SIGNATURE_SIZE 64
#define SIGN_SECRET_SIZE 64
/* crypto_aead_chacha20poly1305_ietf_MESSAGEBYTES_MAX: libsodium aborts the process
 * (sodium_misuse) on a longer plaintext, so it is refused here first */
#define AEAD_PLAIN_MAX (64ULL * ((1ULL << 32) - 1ULL))

typedef unsigned long long ull;
typedef unsigned char uchar;

struct functions {
    int (*aead_encrypt)(uchar *c, ull *clen, const uchar *m, ull mlen, const uchar *ad,
                        ull adlen, const uchar *nsec, const uchar *npub, const uchar *k);
    int (*aead_decrypt)(uchar *m, ull *mlen, uchar *nsec, const uchar *c, ull clen,
                        const uchar *ad, ull adlen, const uchar *npub, const uchar *k);
    int (*box_easy_afternm)(uchar *c, const uchar *m, ull mlen, const uchar *n,
                            const uchar *k);
    int (*box_open_easy_afternm)(uchar *m, const uchar *c, ull clen, const uchar *n,
                                 const uchar *k);
    int (*sign_detached)(uchar *sig, ull *siglen, const uchar *m, ull mlen, const uchar *sk);
    int (*sign_verify_detached)(const uchar *sig, const uchar *m, ull mlen, const uchar *pk);
};

static struct functions sodium;  /* set once bind() has found them all */

static PyObject *crypto_error;  /* raetlike.errors.CryptoError, given to bind() */

/* A contiguous view of any bytes-like object; a non-contiguous one is copied first,
 * as bytes() would.  Anything else: TypeError. */
static int get_view(PyObject *object, Py_buffer *view)
{
    PyObject *copy;
    int result;
    if (PyObject_GetBuffer(object, view, PyBUF_SIMPLE) == 0) {
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_BufferError)) {
        return -1;
    }
    PyErr_Clear();
    copy = PyBytes_FromObject(object);
    if (copy == NULL) {
        return -1;
    }
    result = PyObject_GetBuffer(copy, view, PyBUF_SIMPLE);
    Py_DECREF(copy);  /* the view holds its own reference */
    return result;
}

/* A view of a key or nonce of exactly ``size`` bytes, else the crypto error. */
static int get_sized(PyObject *object, Py_buffer *view, Py_ssize_t size, const char *what)
{
    if (!PyObject_CheckBuffer(object)) {
        PyErr_Format(crypto_error, "%s must be bytes, not %s", what, Py_TYPE(object)->tp_name);
        return -1;
    }
    if (get_view(object, view) < 0) {
        return -1;
    }
    if (view->len != size) {
        PyErr_Format(crypto_error, "%s must be %zd bytes, got %zd", what, size, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int check_bound(Py_ssize_t nargs, Py_ssize_t expected, const char *name)
{
    if (crypto_error == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "raetlike._csodium: bind() was not called");
        return -1;
    }
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, expected,
                     nargs);
        return -1;
    }
    return 0;
}

static PyObject *bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *library;
    void *handle;
    struct functions found;
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "bind(library, error) takes 2 arguments");
        return NULL;
    }
    library = PyUnicode_AsUTF8(args[0]);
    if (library == NULL) {
        return NULL;
    }
    if (!PyType_Check(args[1])
        || !PyType_IsSubtype((PyTypeObject *)args[1], (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "bind(): error must be an exception class");
        return NULL;
    }
    handle = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle == NULL) {
        PyErr_Format(PyExc_OSError, "%s is not loaded: %s", library, dlerror());
        return NULL;
    }
#define RESOLVE(field, symbol)                                                            \
    *(void **)&found.field = dlsym(handle, symbol);                                      \
    if (found.field == NULL) {                                                            \
        PyErr_Format(PyExc_OSError, "%s has no %s", library, symbol);                     \
        dlclose(handle);                                                                  \
        return NULL;                                                                      \
    }
    RESOLVE(aead_encrypt, "crypto_aead_chacha20poly1305_ietf_encrypt")
    RESOLVE(aead_decrypt, "crypto_aead_chacha20poly1305_ietf_decrypt")
    RESOLVE(box_easy_afternm, "crypto_box_easy_afternm")
    RESOLVE(box_open_easy_afternm, "crypto_box_open_easy_afternm")
    RESOLVE(sign_detached, "crypto_sign_detached")
    RESOLVE(sign_verify_detached, "crypto_sign_verify_detached")
#undef RESOLVE
    /* the handle stays open (a reference to the library libnacl keeps loaded) */
    sodium = found;
    Py_INCREF(args[1]);
    Py_XSETREF(crypto_error, args[1]);
    Py_RETURN_NONE;
}

static PyObject *aead_seal(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer key, plain, nonce, associated;
    PyObject *sealed = NULL;
    (void)self;
    if (check_bound(nargs, 4, "aead_seal") < 0
        || get_sized(args[0], &key, KEY_SIZE, "AEAD key") < 0) {
        return NULL;
    }
    if (get_sized(args[2], &nonce, AEAD_NONCE_SIZE, "AEAD nonce") < 0) {
        goto key;
    }
    if (get_view(args[1], &plain) < 0) {
        goto nonce;
    }
    if (get_view(args[3], &associated) < 0) {
        goto plain;
    }
    if ((ull)plain.len > AEAD_PLAIN_MAX) {
        PyErr_SetString(crypto_error, "AEAD plaintext too long");
        goto associated;
    }
    sealed = PyBytes_FromStringAndSize(NULL, plain.len + AEAD_TAG_SIZE);
    if (sealed != NULL) {
        sodium.aead_encrypt((uchar *)PyBytes_AS_STRING(sealed), NULL, plain.buf,
                            (ull)plain.len, associated.buf, (ull)associated.len, NULL,
                            nonce.buf, key.buf);
    }
associated:
    PyBuffer_Release(&associated);
plain:
    PyBuffer_Release(&plain);
nonce:
    PyBuffer_Release(&nonce);
key:
    PyBuffer_Release(&key);
    return sealed;
}

static PyObject *aead_open(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer key, sealed, nonce, associated;
    PyObject *plain = NULL;
    (void)self;
    if (check_bound(nargs, 4, "aead_open") < 0
        || get_sized(args[0], &key, KEY_SIZE, "AEAD key") < 0) {
        return NULL;
    }
    if (get_sized(args[2], &nonce, AEAD_NONCE_SIZE, "AEAD nonce") < 0) {
        goto key;
    }
    if (get_view(args[1], &sealed) < 0) {
        goto nonce;
    }
    if (sealed.len < AEAD_TAG_SIZE) {
        PyErr_SetString(crypto_error, "AEAD packet too short");
        goto sealed;
    }
    if (get_view(args[3], &associated) < 0) {
        goto sealed;
    }
    plain = PyBytes_FromStringAndSize(NULL, sealed.len - AEAD_TAG_SIZE);
    if (plain != NULL
        && sodium.aead_decrypt((uchar *)PyBytes_AS_STRING(plain), NULL, NULL, sealed.buf,
                               (ull)sealed.len, associated.buf, (ull)associated.len,
                               nonce.buf, key.buf) != 0) {
        Py_CLEAR(plain);
        PyErr_SetString(crypto_error, "AEAD packet does not authenticate");
    }
    PyBuffer_Release(&associated);
sealed:
    PyBuffer_Release(&sealed);
nonce:
    PyBuffer_Release(&nonce);
key:
    PyBuffer_Release(&key);
    return plain;
}

static PyObject *box_seal(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer shared, plain, nonce;
    PyObject *sealed = NULL;
    (void)self;
    if (check_bound(nargs, 3, "box_seal") < 0
        || get_sized(args[0], &shared, KEY_SIZE, "shared key") < 0) {
        return NULL;
    }
    if (get_sized(args[2], &nonce, BOX_NONCE_SIZE, "nonce") < 0) {
        goto shared;
    }
    if (get_view(args[1], &plain) < 0) {
        goto nonce;
    }
    if (plain.len > PY_SSIZE_T_MAX - BOX_MAC_SIZE) {
        PyErr_SetString(crypto_error, "box plaintext too long");
        goto plain;
    }
    sealed = PyBytes_FromStringAndSize(NULL, plain.len + BOX_MAC_SIZE);
    if (sealed != NULL
        && sodium.box_easy_afternm((uchar *)PyBytes_AS_STRING(sealed), plain.buf,
                                   (ull)plain.len, nonce.buf, shared.buf) != 0) {
        Py_CLEAR(sealed);
        PyErr_SetString(crypto_error, "box failed");
    }
plain:
    PyBuffer_Release(&plain);
nonce:
    PyBuffer_Release(&nonce);
shared:
    PyBuffer_Release(&shared);
    return sealed;
}

static PyObject *box_open(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer shared, sealed, nonce;
    PyObject *plain = NULL;
    (void)self;
    if (check_bound(nargs, 3, "box_open") < 0
        || get_sized(args[0], &shared, KEY_SIZE, "shared key") < 0) {
        return NULL;
    }
    if (get_sized(args[2], &nonce, BOX_NONCE_SIZE, "nonce") < 0) {
        goto shared;
    }
    if (get_view(args[1], &sealed) < 0) {
        goto nonce;
    }
    if (sealed.len < BOX_MAC_SIZE) {
        PyErr_SetString(crypto_error, "box too short");
        goto sealed;
    }
    plain = PyBytes_FromStringAndSize(NULL, sealed.len - BOX_MAC_SIZE);
    if (plain != NULL
        && sodium.box_open_easy_afternm((uchar *)PyBytes_AS_STRING(plain), sealed.buf,
                                        (ull)sealed.len, nonce.buf, shared.buf) != 0) {
        Py_CLEAR(plain);
        PyErr_SetString(crypto_error, "box does not open");
    }
sealed:
    PyBuffer_Release(&sealed);
nonce:
    PyBuffer_Release(&nonce);
shared:
    PyBuffer_Release(&shared);
    return plain;
}

static PyObject *sign(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer secret, message;
    PyObject *signature = NULL;
    (void)self;
    if (check_bound(nargs, 2, "sign") < 0
        || get_sized(args[0], &secret, SIGN_SECRET_SIZE, "signing secret") < 0) {
        return NULL;
    }
    if (get_view(args[1], &message) < 0) {
        goto secret;
    }
    signature = PyBytes_FromStringAndSize(NULL, SIGNATURE_SIZE);
    if (signature != NULL
        && sodium.sign_detached((uchar *)PyBytes_AS_STRING(signature), NULL, message.buf,
                                (ull)message.len, secret.buf) != 0) {
        Py_CLEAR(signature);
        PyErr_SetString(crypto_error, "signing failed");
    }
    PyBuffer_Release(&message);
secret:
    PyBuffer_Release(&secret);
    return signature;
}

static PyObject *verify(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer public, signature, message;
    int verified = -1;
    (void)self;
    if (check_bound(nargs, 3, "verify") < 0
        || get_sized(args[0], &public, KEY_SIZE, "verify key") < 0) {
        return NULL;
    }
    if (get_sized(args[1], &signature, SIGNATURE_SIZE, "signature") < 0) {
        goto public;
    }
    if (get_view(args[2], &message) < 0) {
        goto signature;
    }
    verified = sodium.sign_verify_detached(signature.buf, message.buf, (ull)message.len,
                                           public.buf);
    if (verified != 0) {
        PyErr_SetString(crypto_error, "signature does not verify");
    }
    PyBuffer_Release(&message);
signature:
    PyBuffer_Release(&signature);
public:
    PyBuffer_Release(&public);
    if (verified != 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

#define FASTCALL(function) (PyCFunction)(void (*)(void))(function), METH_FASTCALL

static PyMethodDef methods[] = {
    {"bind", FASTCALL(bind),
     "bind(library, error): resolve libsodium's functions in the loaded ``library``; "
     "raise ``error`` (a class) on bad input"},
    {"aead_seal", FASTCALL(aead_seal),
     "aead_seal(key, plain, nonce, associated) -> ciphertext and tag (ChaCha20-Poly1305 IETF)"},
    {"aead_open", FASTCALL(aead_open),
     "aead_open(key, sealed, nonce, associated) -> plaintext, or raise the bound error"},
    {"box_seal", FASTCALL(box_seal),
     "box_seal(shared, plain, nonce) -> MAC and ciphertext (crypto_box_easy_afternm)"},
    {"box_open", FASTCALL(box_open),
     "box_open(shared, sealed, nonce) -> plaintext, or raise the bound error"},
    {"sign", FASTCALL(sign), "sign(secret, message) -> the 64-byte Ed25519 signature"},
    {"verify", FASTCALL(verify),
     "verify(public, signature, message): raise the bound error unless it verifies"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_csodium",
    "libsodium without ctypes for raetlike.crypto (see raetlike/_csodium.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__csodium(void)
{
    return PyModule_Create(&module);
}
