/*
 * muster._core: the CPython binding over libmuster.  One Conn object owns
 * one muster_t handle, which libmuster lets threads share: calls from
 * several Python threads run at once, each with the GIL released (a thread
 * blocked in a get does not hold up another thread's set).  The Conn only
 * counts the calls inside the handle, so that close() waits for them.  Exceptions are the classes of
 * muster/errors.py, handed to the module at import (_set_errors).
 */
#ifndef MUSTER_PY_CORE_H
#define MUSTER_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>

#include <muster/muster.h>
#include <muster/rdzv.h>

/* Room for a server or library detail message copied out of a handle. */
#define CORE_DETAIL_MAX 512

/* A connection: the handle, the count of calls inside it (under mu; idle
 * is signalled when it drops to 0), and the last diagnostic the library
 * logged while connecting. */
typedef struct {
    PyObject_HEAD
    muster_t *m;
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int users;
    int sync_ready;     /* mu and idle were made */
    /* The last warning libmuster logged: the handle keeps its log callback
     * for life, so the line lives here, not on conn_init's stack. */
    char log_line[CORE_DETAIL_MAX];
} ConnObject;

extern PyTypeObject Conn_Type;
/* muster._core.World (world.c). */
extern PyTypeObject World_Type;

/* Raise the exception class registered for err with detail; returns NULL. */
PyObject *core_raise(int err, const char *detail);

/* The handle of c, counted as in use until conn_leave (NULL when closed). */
muster_t *conn_enter(ConnObject *c);
/* End a use that conn_enter began. */
void conn_leave(ConnObject *c);

/* Run expr (which may use m, c's handle) with the GIL released; rc gets its
 * result, detail the handle's last error when it failed (on a handle shared
 * by threads, possibly another thread's).  A closed Conn answers
 * MUSTER_ECONN without calling. */
#define CONN_CALL(c, rc, detail, expr)                                                  \
    do {                                                                                \
        Py_BEGIN_ALLOW_THREADS muster_t *m = conn_enter(c);                             \
        if (!m) {                                                                       \
            (rc) = MUSTER_ECONN;                                                        \
            snprintf((detail), sizeof(detail), "the client is closed");                 \
        } else {                                                                        \
            (rc) = (expr);                                                              \
            if ((rc) != MUSTER_OK)                                                      \
                snprintf((detail), sizeof(detail), "%s", muster_last_error(m));         \
            conn_leave(c);                                                              \
        }                                                                               \
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
PyObject *conn_rdzv_recover(ConnObject *c, PyObject *args, PyObject *kw);
PyObject *conn_rdzv_arm(ConnObject *c, PyObject *args, PyObject *kw);
PyObject *conn_rdzv_report(ConnObject *c, PyObject *args);
PyObject *conn_rdzv_heartbeat(ConnObject *c, PyObject *args);
PyObject *conn_rdzv_leave(ConnObject *c, PyObject *args);
PyObject *conn_heartbeat_interval(ConnObject *c, PyObject *noargs);

#endif
