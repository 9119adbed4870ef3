/*
 * muster._core: the CPython binding over libmuster.  One Conn object owns
 * one muster_t handle; a lock per object serialises the threads that share
 * it (libmuster allows one thread per handle at a time), and every call
 * that may block runs with the GIL released.  Exceptions are the classes of
 * muster/errors.py, handed to the module at import (_set_errors).
 */
#ifndef MUSTER_PY_CORE_H
#define MUSTER_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <muster/muster.h>
#include <muster/rdzv.h>

/* Room for a server or library detail message copied out of a handle. */
#define CORE_DETAIL_MAX 512

/* A connection: the handle, the lock that serialises its users, and the
 * last diagnostic the library logged while connecting. */
typedef struct {
    PyObject_HEAD
    muster_t *m;
    PyThread_type_lock lock;
    /* The last warning libmuster logged: the handle keeps its log callback
     * for life, so the line lives here, not on conn_init's stack. */
    char log_line[CORE_DETAIL_MAX];
} ConnObject;

extern PyTypeObject Conn_Type;

/* Raise the exception class registered for err with detail; returns NULL. */
PyObject *core_raise(int err, const char *detail);

/* Run expr (which may use m = c->m) under c's lock with the GIL released;
 * rc gets its result, detail the handle's last error when it failed.  A
 * closed Conn answers MUSTER_ECONN without calling. */
#define CONN_CALL(c, rc, detail, expr)                                                  \
    do {                                                                                \
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock((c)->lock, WAIT_LOCK);             \
        muster_t *m = (c)->m;                                                           \
        if (!m) {                                                                       \
            (rc) = MUSTER_ECONN;                                                        \
            snprintf((detail), sizeof(detail), "the client is closed");                 \
        } else {                                                                        \
            (rc) = (expr);                                                              \
            if ((rc) != MUSTER_OK)                                                      \
                snprintf((detail), sizeof(detail), "%s", muster_last_error(m));         \
        }                                                                               \
        PyThread_release_lock((c)->lock);                                               \
        Py_END_ALLOW_THREADS                                                            \
    } while (0)

/* A borrowed C view of a sequence of str: keys[i] point into the items. */
typedef struct {
    PyObject *seq;
    const char **keys;
    Py_ssize_t n;
} core_keys;

/* Fill k from a sequence of str (at least one); 0, or -1 with an exception. */
int core_keys_from(PyObject *obj, core_keys *k);
/* Release what core_keys_from took. */
void core_keys_done(core_keys *k);

/* Methods of Conn in events.c: watches, pushed events, rendezvous. */
PyObject *conn_watch(ConnObject *c, PyObject *args);
PyObject *conn_unwatch(ConnObject *c, PyObject *args);
PyObject *conn_next_event(ConnObject *c, PyObject *args);
PyObject *conn_events_dropped(ConnObject *c, PyObject *noargs);
PyObject *conn_rdzv_join(ConnObject *c, PyObject *args, PyObject *kw);
PyObject *conn_rdzv_heartbeat(ConnObject *c, PyObject *args);
PyObject *conn_rdzv_leave(ConnObject *c, PyObject *args);
PyObject *conn_heartbeat_interval(ConnObject *c, PyObject *noargs);

#endif
