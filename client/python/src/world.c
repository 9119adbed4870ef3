/*
 * muster._core.World: a worker's view of its job's world across
 * generations (include/muster/world.h).  One lock serialises the calls, so
 * a watcher thread's wait and the training thread's next take turns; each
 * call runs with the GIL released.
 */
#include "core.h"

#include <muster/world.h>

/* A world handle and the lock its calls take. */
typedef struct {
    PyObject_HEAD
    muster_world *w;
    pthread_mutex_t mu;
} WorldObject;

/* World(url=None, node_id=None, local_rank=-1, generation=0): open or raise. */
static int world_init(WorldObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"url", "node_id", "local_rank", "generation", NULL};
    muster_world_opts opts = MUSTER_WORLD_OPTS_INIT;
    const char *url = NULL;
    unsigned long long gen = 0;
    int err = MUSTER_OK;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zziK", kwlist, &url, &opts.node_id, &opts.local_rank, &gen))
        return -1;
    if (o->w) {
        PyErr_SetString(PyExc_RuntimeError, "World is already open");
        return -1;
    }
    opts.generation = gen;
    Py_BEGIN_ALLOW_THREADS o->w = muster_world_open(url, &opts, &err);
    Py_END_ALLOW_THREADS if (!o->w)
    {
        core_raise(err, err == MUSTER_EINVAL ? "no node id or generation: start the program with `muster run`" : "");
        return -1;
    }
    return 0;
}

/* World.__new__ with its lock. */
static PyObject *world_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    WorldObject *o = (WorldObject *)type->tp_alloc(type, 0);
    if (o && pthread_mutex_init(&o->mu, NULL) != 0) {
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    return (PyObject *)o;
}

/* The excluded list of a change as [(node_id, old_node_rank, cause)]. */
static PyObject *world_excluded(const muster_world_change *c)
{
    PyObject *list = PyList_New((Py_ssize_t)c->n_excluded);
    for (size_t i = 0; list && i < c->n_excluded; i++) {
        PyObject *t = Py_BuildValue("(sIs)", c->excluded[i].node_id, c->excluded[i].old_node_rank,
                                    c->excluded[i].cause);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* A change as a dict (muster/inplace.py wraps it). */
static PyObject *world_change_dict(const muster_world_change *c)
{
    PyObject *x = world_excluded(c);
    if (!x)
        return NULL;
    return Py_BuildValue("{sKsKsKsssisisisisisisIsIsIsN}", "generation", (unsigned long long)c->generation,
                         "previous_generation", (unsigned long long)c->previous_generation, "skipped",
                         (unsigned long long)c->skipped, "plan", muster_world_plan_name(c->plan), "rank", c->rank,
                         "world_size", c->world_size, "local_rank", c->local_rank, "carried", c->carried,
                         "previous_rank", c->previous_rank, "previous_world_size", c->previous_world_size,
                         "node_rank", c->node_rank, "num_nodes", c->num_nodes, "old_node_rank", c->old_node_rank,
                         "excluded", x);
}

/* next(timeout_ms) -> dict: the world this process is to be part of next, or raise with the reason. */
static PyObject *world_next(WorldObject *o, PyObject *args)
{
    unsigned int t = 0;
    const muster_world_change *c = NULL;
    char why[CORE_DETAIL_MAX] = "";
    int rc = MUSTER_ECONN;
    if (!PyArg_ParseTuple(args, "I", &t))
        return NULL;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&o->mu);
    if (o->w) {
        rc = muster_world_next(o->w, t, &c);
        snprintf(why, sizeof why, "%s", muster_world_error(o->w));
    }
    Py_END_ALLOW_THREADS if (rc != MUSTER_OK)
    {
        pthread_mutex_unlock(&o->mu);
        return core_raise(rc, o->w ? why : "the world is closed");
    }
    PyObject *d = world_change_dict(c);
    pthread_mutex_unlock(&o->mu);
    return d;
}

/* ready(): this process built what the last change asked for. */
static PyObject *world_ready(WorldObject *o, PyObject *unused)
{
    (void)unused;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&o->mu);
    muster_world_ready(o->w);
    pthread_mutex_unlock(&o->mu);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* wait(timeout_ms) -> bool: whether a newer generation formed, waiting on the watch up to timeout_ms. */
static PyObject *world_wait(WorldObject *o, PyObject *args)
{
    unsigned int t = 0;
    int changed = 0;
    if (!PyArg_ParseTuple(args, "I", &t))
        return NULL;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&o->mu);
    changed = o->w ? muster_world_wait(o->w, t) : 0;
    pthread_mutex_unlock(&o->mu);
    Py_END_ALLOW_THREADS return PyBool_FromLong(changed);
}

/* close(): let go of the handle (idempotent). */
static PyObject *world_close(WorldObject *o, PyObject *unused)
{
    (void)unused;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&o->mu);
    muster_world_close(o->w);
    o->w = NULL;
    pthread_mutex_unlock(&o->mu);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* Free the handle with the object. */
static void world_dealloc(WorldObject *o)
{
    muster_world_close(o->w);
    pthread_mutex_destroy(&o->mu);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyMethodDef world_methods[] = {
    {"next", (PyCFunction)world_next, METH_VARARGS, "next(timeout_ms) -> dict: the next world change."},
    {"ready", (PyCFunction)world_ready, METH_NOARGS, "Confirm the last change was built."},
    {"wait", (PyCFunction)world_wait, METH_VARARGS, "wait(timeout_ms) -> bool: a newer generation formed."},
    {"close", (PyCFunction)world_close, METH_NOARGS, "Close the handle."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject World_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "muster._core.World",
    .tp_basicsize = sizeof(WorldObject),
    .tp_dealloc = (destructor)world_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A worker's view of its job's world; use muster.torch in place instead.",
    .tp_methods = world_methods,
    .tp_init = (initproc)world_init,
    .tp_new = world_new,
};
