/*
 * muster._core module: error mapping, helpers shared by the Conn methods,
 * and the module table.  The exception classes live in Python
 * (muster/errors.py); _set_errors() hands them over once at import.
 */
#include "core.h"

#include "keys.h"

/* Base exception class and {code: class} map, set by _set_errors(). */
static PyObject *core_error_base;
static PyObject *core_error_map;

/* Raise the exception class registered for err with detail; returns NULL. */
PyObject *core_raise(int err, const char *detail)
{
    PyObject *cls = NULL;
    if (core_error_map) {
        PyObject *code = PyLong_FromLong(err);
        if (!code)
            return NULL;
        cls = PyDict_GetItemWithError(core_error_map, code);
        Py_DECREF(code);
        if (!cls && PyErr_Occurred())
            return NULL;
    }
    if (!cls)
        cls = core_error_base ? core_error_base : PyExc_RuntimeError;
    const char *what = muster_strerror(err);
    PyObject *exc = PyObject_CallFunction(cls, "siOs", what, err, muster_err_retryable(err) ? Py_True : Py_False,
                                          detail ? detail : "");
    if (!exc)
        return NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

/* Fill k from a sequence of str (at least one); 0, or -1 with an exception. */
int core_keys_from(PyObject *obj, core_keys *k)
{
    memset(k, 0, sizeof *k);
    if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "keys must be a sequence of str, not one string");
        return -1;
    }
    k->seq = PySequence_Fast(obj, "keys must be a sequence of str");
    if (!k->seq)
        return -1;
    k->n = PySequence_Fast_GET_SIZE(k->seq);
    if (k->n == 0) {
        PyErr_SetString(PyExc_ValueError, "keys must not be empty");
        goto fail;
    }
    k->keys = PyMem_Calloc((size_t)k->n, sizeof *k->keys);
    if (!k->keys) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(k->seq, i);
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "key %zd is %.80s, not str", i, Py_TYPE(item)->tp_name);
            goto fail;
        }
        Py_ssize_t len;
        k->keys[i] = PyUnicode_AsUTF8AndSize(item, &len);
        if (!k->keys[i])
            goto fail;
        if ((size_t)len != strlen(k->keys[i])) {
            PyErr_Format(PyExc_ValueError, "key %zd contains a NUL character", i);
            goto fail;
        }
    }
    return 0;
fail:
    core_keys_done(k);
    return -1;
}

/* Release what core_keys_from took. */
void core_keys_done(core_keys *k)
{
    PyMem_Free(k->keys);
    Py_CLEAR(k->seq);
    k->keys = NULL;
    k->n = 0;
}

/* _set_errors(base, {code: class}): the classes core_raise() uses. */
static PyObject *mod_set_errors(PyObject *self, PyObject *args)
{
    PyObject *base, *map;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!", &base, &PyDict_Type, &map))
        return NULL;
    Py_INCREF(base);
    Py_INCREF(map);
    Py_XSETREF(core_error_base, base);
    Py_XSETREF(core_error_map, map);
    Py_RETURN_NONE;
}

/* strerror(code): libmuster's static message for an error code. */
static PyObject *mod_strerror(PyObject *self, PyObject *args)
{
    int code;
    (void)self;
    if (!PyArg_ParseTuple(args, "i", &code))
        return NULL;
    return PyUnicode_FromString(muster_strerror(code));
}

/* retryable(code): whether retrying the same call later may succeed. */
static PyObject *mod_retryable(PyObject *self, PyObject *args)
{
    int code;
    (void)self;
    if (!PyArg_ParseTuple(args, "i", &code))
        return NULL;
    return PyBool_FromLong(muster_err_retryable(code));
}

/* check_url(text): None when libmuster parses the URL, else BadURL with why. */
static PyObject *mod_check_url(PyObject *self, PyObject *args)
{
    const char *text;
    muster_url url;
    char why[256] = "";
    (void)self;
    if (!PyArg_ParseTuple(args, "s", &text))
        return NULL;
    int rc = muster_url_parse_detail(text, &url, why, sizeof why);
    if (rc != MUSTER_OK)
        return core_raise(rc, why);
    Py_RETURN_NONE;
}

/* key_rdzv_broken(generation): the key musterd sets when that generation breaks. */
static PyObject *mod_key_rdzv_broken(PyObject *self, PyObject *args)
{
    unsigned long long gen;
    char key[64];
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &gen))
        return NULL;
    keys_rdzv_broken(key, sizeof key, (uint64_t)gen);
    return PyUnicode_FromString(key);
}

static PyMethodDef mod_methods[] = {
    {"_set_errors", mod_set_errors, METH_VARARGS, "Register the exception classes."},
    {"strerror", mod_strerror, METH_VARARGS, "libmuster's message for an error code."},
    {"retryable", mod_retryable, METH_VARARGS, "Whether an error code is retryable."},
    {"check_url", mod_check_url, METH_VARARGS, "Raise BadURL unless libmuster parses the URL."},
    {"key_rdzv_broken", mod_key_rdzv_broken, METH_VARARGS, "The key set when a generation breaks."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "muster._core", "CPython binding over libmuster.", -1, mod_methods,
    NULL, NULL, NULL, NULL,
};

/* Module init: the Conn type, the version, the default port and the reserved key names Python writes. */
PyMODINIT_FUNC PyInit__core(void)
{
    if (PyType_Ready(&Conn_Type) < 0 || PyType_Ready(&World_Type) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&mod_def);
    if (!mod)
        return NULL;
    Py_INCREF(&Conn_Type);
    Py_INCREF(&World_Type);
    if (PyModule_AddObject(mod, "Conn", (PyObject *)&Conn_Type) < 0 ||
        PyModule_AddObject(mod, "World", (PyObject *)&World_Type) < 0 ||
        PyModule_AddStringConstant(mod, "KEY_TORCH_INPLACE_PREFIX", KEYS_TORCH_INPLACE_PREFIX) < 0 ||
        PyModule_AddStringConstant(mod, "version", MUSTER_VERSION) < 0 ||
        PyModule_AddIntConstant(mod, "DEFAULT_PORT", MUSTER_DEFAULT_PORT) < 0 ||
        PyModule_AddStringConstant(mod, "KEY_RDZV_GENERATION", KEYS_RDZV_GENERATION) < 0 ||
        PyModule_AddStringConstant(mod, "KEY_TORCHRUN_CLOSED", KEYS_TORCHRUN_CLOSED) < 0 ||
        PyModule_AddStringConstant(mod, "KEY_TORCHRUN_STORE_PREFIX", KEYS_TORCHRUN_STORE_PREFIX) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
