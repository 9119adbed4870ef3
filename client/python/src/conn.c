/*
 * muster._core.Conn: one libmuster handle and its key-value methods.  The
 * Python layer (muster/client.py) converts timeouts to milliseconds (0 =
 * the handle's default) and str values to bytes before calling these.
 */
#include "core.h"

#include <string.h>

/* Log callback: remember warnings and errors, for a failed connect's
 * detail.  It runs without the GIL, under the handle's own lock (or while
 * connecting, on the one thread that connects), so the line needs no lock
 * of its own. */
static void conn_log_fn(void *arg, int level, const char *msg)
{
    ConnObject *c = arg;
    if (level <= MUSTER_LOG_WARN)
        snprintf(c->log_line, sizeof c->log_line, "%s", msg);
}

/* Conn(url, connect_timeout_ms, default_timeout_ms, name): connect or raise. */
static int conn_init(ConnObject *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"url", "connect_timeout_ms", "default_timeout_ms", "name", NULL};
    const char *url = NULL, *name = NULL;
    unsigned int connect_ms = 0, default_ms = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "z|IIz", kwlist, &url, &connect_ms, &default_ms, &name))
        return -1;
    if (c->m) {
        PyErr_SetString(PyExc_RuntimeError, "Conn is already connected");
        return -1;
    }
    c->log_line[0] = '\0';
    muster_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.connect_timeout_ms = connect_ms;
    opts.default_timeout_ms = default_ms;
    opts.client_name = name;
    opts.log_fn = conn_log_fn;
    opts.log_arg = c;
    int err = MUSTER_OK;
    muster_t *m;
    Py_BEGIN_ALLOW_THREADS m = muster_connect_opts(url, &opts, &err);
    Py_END_ALLOW_THREADS if (!m)
    {
        core_raise(err, c->log_line);
        return -1;
    }
    c->m = m;
    return 0;
}

/* Conn.__new__: the object with its use count and no handle yet. */
static PyObject *conn_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    ConnObject *c = (ConnObject *)type->tp_alloc(type, 0);
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    if (pthread_cond_init(&c->idle, NULL) != 0) {
        pthread_mutex_destroy(&c->mu);
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    c->sync_ready = 1;
    return (PyObject *)c;
}

/* The handle of c, counted as in use until conn_leave (NULL when closed). */
muster_t *conn_enter(ConnObject *c)
{
    pthread_mutex_lock(&c->mu);
    muster_t *m = c->m;
    if (m)
        c->users++;
    pthread_mutex_unlock(&c->mu);
    return m;
}

/* End a use that conn_enter began. */
void conn_leave(ConnObject *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->users == 0)
        pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->mu);
}

/* Close the handle once the calls inside it (on other threads) returned:
 * libmuster frees a handle only when nobody uses it. */
static void conn_close_handle(ConnObject *c)
{
    if (!c->sync_ready)
        return;
    muster_t *m;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&c->mu);
    m = c->m;
    c->m = NULL;
    while (c->users > 0)
        pthread_cond_wait(&c->idle, &c->mu);
    pthread_mutex_unlock(&c->mu);
    muster_close(m);
    Py_END_ALLOW_THREADS
}

/* Free: close the handle, then the use count's lock. */
static void conn_dealloc(ConnObject *c)
{
    conn_close_handle(c);
    if (c->sync_ready) {
        pthread_cond_destroy(&c->idle);
        pthread_mutex_destroy(&c->mu);
    }
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* close(): close the connection; later calls raise ConnectionLost. */
static PyObject *conn_close(ConnObject *c, PyObject *noargs)
{
    (void)noargs;
    conn_close_handle(c);
    Py_RETURN_NONE;
}

/* set(key, value, timeout_ms) */
static PyObject *conn_set(ConnObject *c, PyObject *args)
{
    const char *key, *val;
    Py_ssize_t len;
    unsigned int t = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "sy#|I", &key, &val, &len, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_set(m, key, val, (size_t)len, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    Py_RETURN_NONE;
}

/* get(key, wait, timeout_ms) -> bytes; NotFound when absent and not waiting. */
static PyObject *conn_get(ConnObject *c, PyObject *args)
{
    const char *key;
    int wait = 0;
    unsigned int t = 0;
    void *val = NULL;
    size_t len = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "s|pI", &key, &wait, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_get(m, key, wait, t, &val, &len));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    PyObject *out = PyBytes_FromStringAndSize(val, (Py_ssize_t)len);
    muster_free(val);
    return out;
}

/* add(key, delta, timeout_ms) -> int, the new value. */
static PyObject *conn_add(ConnObject *c, PyObject *args)
{
    const char *key;
    long long delta;
    unsigned int t = 0;
    int64_t result = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "sL|I", &key, &delta, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_add(m, key, (int64_t)delta, &result, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    return PyLong_FromLongLong((long long)result);
}

/* compare_set(key, expected, desired, timeout_ms) -> (swapped, value). */
static PyObject *conn_compare_set(ConnObject *c, PyObject *args)
{
    const char *key, *exp, *des;
    Py_ssize_t elen, dlen;
    unsigned int t = 0;
    int swapped = 0;
    void *val = NULL;
    size_t vlen = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "sy#y#|I", &key, &exp, &elen, &des, &dlen, &t))
        return NULL;
    CONN_CALL(c, rc, detail,
              muster_compare_set(m, key, exp, (size_t)elen, des, (size_t)dlen, &swapped, &val, &vlen, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    PyObject *out = Py_BuildValue("(Ny#)", PyBool_FromLong(swapped), val ? (const char *)val : "",
                                  (Py_ssize_t)vlen);
    muster_free(val);
    return out;
}

/* delete(key, timeout_ms) -> bool, whether it existed. */
static PyObject *conn_delete(ConnObject *c, PyObject *args)
{
    const char *key;
    unsigned int t = 0;
    int deleted = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "s|I", &key, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_delete(m, key, &deleted, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    return PyBool_FromLong(deleted);
}

/* check(keys, timeout_ms) -> bool, whether all exist. */
static PyObject *conn_check(ConnObject *c, PyObject *args)
{
    PyObject *obj;
    unsigned int t = 0;
    int present = 0;
    core_keys k;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "O|I", &obj, &t) || core_keys_from(obj, &k) < 0)
        return NULL;
    CONN_CALL(c, rc, detail, muster_check(m, k.keys, (size_t)k.n, &present, t));
    core_keys_done(&k);
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    return PyBool_FromLong(present);
}

/* wait(keys, timeout_ms): until all exist, or Timeout. */
static PyObject *conn_wait(ConnObject *c, PyObject *args)
{
    PyObject *obj;
    unsigned int t = 0;
    core_keys k;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "O|I", &obj, &t) || core_keys_from(obj, &k) < 0)
        return NULL;
    CONN_CALL(c, rc, detail, muster_wait(m, k.keys, (size_t)k.n, t));
    core_keys_done(&k);
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    Py_RETURN_NONE;
}

/* num_keys(timeout_ms) -> int. */
static PyObject *conn_num_keys(ConnObject *c, PyObject *args)
{
    unsigned int t = 0;
    uint64_t count = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "|I", &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_num_keys(m, &count, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    return PyLong_FromUnsignedLongLong(count);
}

/* multi_get(keys, wait, timeout_ms) -> list of bytes, all or nothing. */
static PyObject *conn_multi_get(ConnObject *c, PyObject *args)
{
    PyObject *obj, *out = NULL;
    int wait = 0;
    unsigned int t = 0;
    core_keys k;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "O|pI", &obj, &wait, &t) || core_keys_from(obj, &k) < 0)
        return NULL;
    void **vals = PyMem_Calloc((size_t)k.n, sizeof *vals);
    size_t *lens = PyMem_Calloc((size_t)k.n, sizeof *lens);
    if (!vals || !lens) {
        PyErr_NoMemory();
        goto done;
    }
    CONN_CALL(c, rc, detail, muster_multi_get(m, k.keys, (size_t)k.n, wait, vals, lens, t));
    if (rc != MUSTER_OK) {
        core_raise(rc, detail);
        goto done;
    }
    out = PyList_New(k.n);
    for (Py_ssize_t i = 0; out && i < k.n; i++) {
        PyObject *v = PyBytes_FromStringAndSize(vals[i], (Py_ssize_t)lens[i]);
        if (!v)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, v);
    }
    for (Py_ssize_t i = 0; i < k.n; i++)
        muster_free(vals[i]);
done:
    PyMem_Free(vals);
    PyMem_Free(lens);
    core_keys_done(&k);
    return out;
}

/* multi_set(keys, values, timeout_ms): atomically; values are bytes. */
static PyObject *conn_multi_set(ConnObject *c, PyObject *args)
{
    PyObject *kobj, *vobj, *vseq = NULL, *out = NULL;
    unsigned int t = 0;
    core_keys k;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "OO|I", &kobj, &vobj, &t) || core_keys_from(kobj, &k) < 0)
        return NULL;
    const void **vals = PyMem_Calloc((size_t)k.n, sizeof *vals);
    size_t *lens = PyMem_Calloc((size_t)k.n, sizeof *lens);
    if (!vals || !lens) {
        PyErr_NoMemory();
        goto done;
    }
    vseq = PySequence_Fast(vobj, "values must be a sequence of bytes");
    if (!vseq)
        goto done;
    if (PySequence_Fast_GET_SIZE(vseq) != k.n) {
        PyErr_Format(PyExc_ValueError, "%zd keys but %zd values", k.n, PySequence_Fast_GET_SIZE(vseq));
        goto done;
    }
    for (Py_ssize_t i = 0; i < k.n; i++) {
        char *p;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(vseq, i), &p, &n) < 0)
            goto done;
        vals[i] = p;
        lens[i] = (size_t)n;
    }
    CONN_CALL(c, rc, detail, muster_multi_set(m, k.keys, (const void *const *)vals, lens, (size_t)k.n, t));
    if (rc != MUSTER_OK)
        core_raise(rc, detail);
    else
        out = Py_NewRef(Py_None);
done:
    Py_XDECREF(vseq);
    PyMem_Free(vals);
    PyMem_Free(lens);
    core_keys_done(&k);
    return out;
}

/* A call taking (key, value, timeout_ms) and answering a length: muster_append and muster_queue_push. */
typedef int (*conn_length_fn)(muster_t *m, const char *key, const void *value, size_t len, uint64_t *length,
                              uint32_t timeout_ms);

/* Run fn with (key, value, timeout_ms) from args; the length it answers. */
static PyObject *conn_key_value_length(ConnObject *c, PyObject *args, conn_length_fn fn)
{
    const char *key, *val;
    Py_ssize_t len;
    unsigned int t = 0;
    uint64_t length = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "sy#|I", &key, &val, &len, &t))
        return NULL;
    CONN_CALL(c, rc, detail, fn(m, key, val, (size_t)len, &length, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    return PyLong_FromUnsignedLongLong(length);
}

/* append(key, value, timeout_ms) -> int, the new length. */
static PyObject *conn_append(ConnObject *c, PyObject *args)
{
    return conn_key_value_length(c, args, muster_append);
}

/* queue_push(key, value, timeout_ms) -> int, the queue's length after. */
static PyObject *conn_queue_push(ConnObject *c, PyObject *args)
{
    return conn_key_value_length(c, args, muster_queue_push);
}

/* queue_pop(key, timeout_ms) -> (length before, value or None). */
static PyObject *conn_queue_pop(ConnObject *c, PyObject *args)
{
    const char *key;
    unsigned int t = 0;
    uint64_t before = 0;
    void *val = NULL;
    size_t len = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "s|I", &key, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_queue_pop(m, key, &before, &val, &len, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    PyObject *out = before ? Py_BuildValue("(Ky#)", (unsigned long long)before, (const char *)val, (Py_ssize_t)len)
                           : Py_BuildValue("(KO)", 0ULL, Py_None);
    muster_free(val);
    return out;
}

/* queue_len(key, timeout_ms) -> int. */
static PyObject *conn_queue_len(ConnObject *c, PyObject *args)
{
    const char *key;
    unsigned int t = 0;
    uint64_t length = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "s|I", &key, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_queue_len(m, key, &length, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    return PyLong_FromUnsignedLongLong(length);
}

/* list(prefix, after, limit, timeout_ms) -> ([keys], more). */
static PyObject *conn_list(ConnObject *c, PyObject *args)
{
    const char *prefix, *after = NULL;
    unsigned int limit = 0, t = 0;
    char **keys = NULL;
    size_t n = 0;
    int more = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "s|zII", &prefix, &after, &limit, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_list(m, prefix, after, limit, &keys, &n, &more, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(keys[i], (Py_ssize_t)strlen(keys[i]), "surrogateescape");
        if (!s)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, s);
    }
    muster_free_list((void **)keys, n);
    if (!list)
        return NULL;
    return Py_BuildValue("(NO)", list, more ? Py_True : Py_False);
}

/* ping(timeout_ms) -> round trip in microseconds. */
static PyObject *conn_ping(ConnObject *c, PyObject *args)
{
    unsigned int t = 0;
    uint64_t rtt = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "|I", &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_ping(m, &rtt, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    return PyLong_FromUnsignedLongLong(rtt);
}

/* barrier(name, count, key, timeout_ms) -> (round, value): value is the key's
 * bytes at release (None when absent), or None when key is None. */
static PyObject *conn_barrier(ConnObject *c, PyObject *args)
{
    const char *name, *key = NULL;
    unsigned int count, t = 0;
    uint64_t round = 0;
    void *val = NULL;
    size_t len = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "sI|zI", &name, &count, &key, &t))
        return NULL;
    if (key)
        CONN_CALL(c, rc, detail, muster_barrier_fetch(m, name, count, key, &val, &len, &round, t));
    else
        CONN_CALL(c, rc, detail, muster_barrier(m, name, count, &round, t));
    if (rc == MUSTER_ENOTFOUND && key)
        return Py_BuildValue("(KO)", (unsigned long long)round, Py_None);
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    if (!key)
        return Py_BuildValue("(KO)", (unsigned long long)round, Py_None);
    PyObject *out = Py_BuildValue("(Ky#)", (unsigned long long)round, (const char *)val, (Py_ssize_t)len);
    muster_free(val);
    return out;
}

/* The handle's state: broken code, session id, value limit, fd. */
static PyObject *conn_info(ConnObject *c, PyObject *noargs)
{
    (void)noargs;
    int broken = MUSTER_ECONN, fd = -1;
    unsigned long long session = 0, max_value = 0;
    Py_BEGIN_ALLOW_THREADS muster_t *m = conn_enter(c);
    if (m) {
        broken = muster_broken(m);
        fd = muster_fd(m);
        session = muster_session_id(m);
        max_value = muster_max_value(m);
        conn_leave(c);
    }
    Py_END_ALLOW_THREADS return Py_BuildValue("{s:i,s:i,s:K,s:K}", "broken", broken, "fd", fd, "session_id",
                                              session, "max_value", max_value);
}

static PyMethodDef conn_methods[] = {
    {"close", (PyCFunction)conn_close, METH_NOARGS, "Close the connection."},
    {"set", (PyCFunction)conn_set, METH_VARARGS, "set(key, value, timeout_ms)"},
    {"get", (PyCFunction)conn_get, METH_VARARGS, "get(key, wait, timeout_ms) -> bytes"},
    {"add", (PyCFunction)conn_add, METH_VARARGS, "add(key, delta, timeout_ms) -> int"},
    {"compare_set", (PyCFunction)conn_compare_set, METH_VARARGS,
     "compare_set(key, expected, desired, timeout_ms) -> (swapped, value)"},
    {"delete", (PyCFunction)conn_delete, METH_VARARGS, "delete(key, timeout_ms) -> bool"},
    {"check", (PyCFunction)conn_check, METH_VARARGS, "check(keys, timeout_ms) -> bool"},
    {"wait", (PyCFunction)conn_wait, METH_VARARGS, "wait(keys, timeout_ms)"},
    {"num_keys", (PyCFunction)conn_num_keys, METH_VARARGS, "num_keys(timeout_ms) -> int"},
    {"multi_get", (PyCFunction)conn_multi_get, METH_VARARGS, "multi_get(keys, wait, timeout_ms) -> [bytes]"},
    {"multi_set", (PyCFunction)conn_multi_set, METH_VARARGS, "multi_set(keys, values, timeout_ms)"},
    {"append", (PyCFunction)conn_append, METH_VARARGS, "append(key, value, timeout_ms) -> int"},
    {"queue_push", (PyCFunction)conn_queue_push, METH_VARARGS, "queue_push(key, value, timeout_ms) -> int"},
    {"queue_pop", (PyCFunction)conn_queue_pop, METH_VARARGS, "queue_pop(key, timeout_ms) -> (int, bytes | None)"},
    {"queue_len", (PyCFunction)conn_queue_len, METH_VARARGS, "queue_len(key, timeout_ms) -> int"},
    {"list", (PyCFunction)conn_list, METH_VARARGS, "list(prefix, after, limit, timeout_ms) -> ([str], more)"},
    {"ping", (PyCFunction)conn_ping, METH_VARARGS, "ping(timeout_ms) -> microseconds"},
    {"barrier", (PyCFunction)conn_barrier, METH_VARARGS, "barrier(name, count, key, timeout_ms) -> (round, value)"},
    {"info", (PyCFunction)conn_info, METH_NOARGS, "The handle's state as a dict."},
    {"watch", (PyCFunction)conn_watch, METH_VARARGS, "watch(prefix, timeout_ms) -> watch id"},
    {"unwatch", (PyCFunction)conn_unwatch, METH_VARARGS, "unwatch(watch_id, timeout_ms)"},
    {"next_event", (PyCFunction)conn_next_event, METH_VARARGS, "next_event(timeout_ms) -> tuple or None"},
    {"events_dropped", (PyCFunction)conn_events_dropped, METH_NOARGS, "Events dropped by a full queue."},
    {"rdzv_join", (PyCFunction)(void (*)(void))conn_rdzv_join, METH_VARARGS | METH_KEYWORDS,
     "rdzv_join(node_id, local_world_size, min_nodes, max_nodes, last_call_ms, want_members, timeout_ms, standby)"},
    {"rdzv_recover", (PyCFunction)(void (*)(void))conn_rdzv_recover, METH_VARARGS | METH_KEYWORDS,
     "rdzv_recover(local_world_size, want_members, timeout_ms)"},
    {"rdzv_arm", (PyCFunction)(void (*)(void))conn_rdzv_arm, METH_VARARGS | METH_KEYWORDS,
     "rdzv_arm(local_world_size, want_members, timeout_ms)"},
    {"rdzv_report", (PyCFunction)conn_rdzv_report, METH_VARARGS, "rdzv_report(node_id, cause, timeout_ms)"},
    {"rdzv_heartbeat", (PyCFunction)conn_rdzv_heartbeat, METH_VARARGS, "rdzv_heartbeat(generation, timeout_ms)"},
    {"rdzv_leave", (PyCFunction)conn_rdzv_leave, METH_VARARGS, "rdzv_leave(timeout_ms)"},
    {"heartbeat_interval", (PyCFunction)conn_heartbeat_interval, METH_NOARGS, "Heartbeat interval in ms."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject Conn_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "muster._core.Conn",
    .tp_basicsize = sizeof(ConnObject),
    .tp_dealloc = (destructor)conn_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One libmuster connection; use muster.connect() instead.",
    .tp_methods = conn_methods,
    .tp_init = (initproc)conn_init,
    .tp_new = conn_new,
};
