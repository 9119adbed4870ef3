/*
 * muster._core.Conn, continued: watches, pushed events and the native
 * rendezvous (join, recover, report, heartbeat, leave).  Heartbeats are the
 * caller's job, as in libmuster; muster/rdzv.py runs them from a thread.
 */
#include "core.h"

/* watch(prefix, timeout_ms) -> watch id. */
PyObject *conn_watch(ConnObject *c, PyObject *args)
{
    const char *prefix;
    unsigned int t = 0;
    uint64_t id = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "s|I", &prefix, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_watch(m, prefix, &id, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    return PyLong_FromUnsignedLongLong(id);
}

/* unwatch(watch_id, timeout_ms). */
PyObject *conn_unwatch(ConnObject *c, PyObject *args)
{
    unsigned long long id;
    unsigned int t = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "K|I", &id, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_unwatch(m, (uint64_t)id, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    Py_RETURN_NONE;
}

/* Whether a MUSTER_ETIMEDOUT from next_event means "none came" (handle fine). */
static int conn_quiet(ConnObject *c)
{
    int broken;
    Py_BEGIN_ALLOW_THREADS muster_t *m = conn_enter(c);
    broken = m ? muster_broken(m) : MUSTER_ECONN;
    if (m)
        conn_leave(c);
    Py_END_ALLOW_THREADS return broken == MUSTER_OK;
}

/* next_event(timeout_ms) -> (kind, watch_id, key, value, generation, node_id,
 * reason), or None when none came within timeout_ms (0 = do not wait). */
PyObject *conn_next_event(ConnObject *c, PyObject *args)
{
    unsigned int t = 0;
    muster_event *ev = NULL;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "|I", &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_next_event(m, &ev, t));
    if (rc == MUSTER_ETIMEDOUT && conn_quiet(c))
        Py_RETURN_NONE;
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    PyObject *out = Py_BuildValue("(iKzy#Kzz)", (int)ev->kind, (unsigned long long)ev->watch_id, ev->key,
                                  ev->value ? (const char *)ev->value : NULL, (Py_ssize_t)ev->value_len,
                                  (unsigned long long)ev->generation, ev->node_id, ev->reason);
    muster_event_free(ev);
    return out;
}

/* events_dropped() -> how many events a full queue dropped. */
PyObject *conn_events_dropped(ConnObject *c, PyObject *noargs)
{
    (void)noargs;
    unsigned long long n = 0;
    Py_BEGIN_ALLOW_THREADS muster_t *m = conn_enter(c);
    n = m ? muster_events_dropped(m) : 0;
    if (m)
        conn_leave(c);
    Py_END_ALLOW_THREADS return PyLong_FromUnsignedLongLong(n);
}

/* A list of the assignment's members as dicts (empty unless the join asked for them); NULL on error. */
static PyObject *members_list(const muster_assignment *a)
{
    PyObject *members = PyList_New((Py_ssize_t)a->n_members);
    for (size_t i = 0; members && i < a->n_members; i++) {
        const muster_member *mm = &a->members[i];
        PyObject *d = Py_BuildValue("{s:s,s:I,s:I,s:I,s:I}", "node_id", mm->node_id, "node_rank", mm->node_rank,
                                    "rank_start", mm->rank_start, "local_world_size", mm->local_world_size,
                                    "old_node_rank", mm->old_node_rank);
        if (!d)
            Py_CLEAR(members);
        else
            PyList_SET_ITEM(members, (Py_ssize_t)i, d);
    }
    return members;
}

/* A list of the members a recovery left out as (node_id, old_node_rank, cause) tuples; NULL on error. */
static PyObject *excluded_list(const muster_assignment *a)
{
    PyObject *out = PyList_New((Py_ssize_t)a->n_excluded);
    for (size_t i = 0; out && i < a->n_excluded; i++) {
        const muster_excluded *x = &a->excluded[i];
        PyObject *t = Py_BuildValue("(sIs)", x->node_id, x->old_node_rank, x->cause);
        if (!t)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)i, t);
    }
    return out;
}

/* An assignment as a dict: members as a list of dicts (empty unless asked), and for a recovery the
 * previous generation, this node's old rank and the excluded members. */
static PyObject *assignment_dict(const muster_assignment *a)
{
    PyObject *members = members_list(a);
    if (!members)
        return NULL;
    PyObject *excluded = excluded_list(a);
    if (!excluded) {
        Py_DECREF(members);
        return NULL;
    }
    return Py_BuildValue("{s:K,s:s,s:I,s:I,s:I,s:I,s:I,s:N,s:K,s:I,s:N}", "generation",
                         (unsigned long long)a->generation, "node_id", a->node_id, "node_rank", a->node_rank,
                         "num_nodes", a->num_nodes, "rank_start", a->rank_start, "local_world_size",
                         a->local_world_size, "world_size", a->world_size, "members", members,
                         "previous_generation", (unsigned long long)a->previous_generation, "old_node_rank",
                         a->old_node_rank, "excluded", excluded);
}

/* rdzv_join(node_id, local_world_size, min_nodes, max_nodes, last_call_ms,
 * want_members, timeout_ms, standby) -> assignment dict. */
PyObject *conn_rdzv_join(ConnObject *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"node_id", "local_world_size", "min_nodes", "max_nodes", "last_call_ms",
                             "want_members", "timeout_ms", "standby", NULL};
    const char *node_id = NULL;
    unsigned int lws = 1, min_nodes = 1, max_nodes = 1, last_call = 0, t = 0;
    int want = 0, standby = 0;
    muster_assignment *a = NULL;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "z|IIIIpIp", kwlist, &node_id, &lws, &min_nodes, &max_nodes,
                                     &last_call, &want, &t, &standby))
        return NULL;
    muster_rdzv_opts o = {.node_id = node_id,
                          .local_world_size = lws,
                          .min_nodes = min_nodes,
                          .max_nodes = max_nodes,
                          .last_call_ms = last_call,
                          .want_members = want,
                          .standby = standby};
    CONN_CALL(c, rc, detail, muster_rdzv_join(m, &o, &a, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    PyObject *out = assignment_dict(a);
    muster_assignment_free(a);
    return out;
}

/* rdzv_recover(local_world_size, want_members, timeout_ms) -> assignment dict of the
 * generation that replaces this handle's broken one (Excluded when left out). */
PyObject *conn_rdzv_recover(ConnObject *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"local_world_size", "want_members", "timeout_ms", NULL};
    unsigned int lws = 1, t = 0;
    int want = 0;
    muster_assignment *a = NULL;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|IpI", kwlist, &lws, &want, &t))
        return NULL;
    /* min/max are the broken generation's; these only pass the library's checks. */
    muster_rdzv_opts o = {.local_world_size = lws, .min_nodes = 1, .max_nodes = 1, .want_members = want};
    CONN_CALL(c, rc, detail, muster_rdzv_recover(m, &o, &a, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    PyObject *out = assignment_dict(a);
    muster_assignment_free(a);
    return out;
}

/* rdzv_arm(local_world_size, want_members, timeout_ms): arm this member's recovery of its running
 * generation (muster_rdzv_arm); rdzv_recover then takes the armed call's answer. */
PyObject *conn_rdzv_arm(ConnObject *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"local_world_size", "want_members", "timeout_ms", NULL};
    unsigned int lws = 1, t = 0;
    int want = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|IpI", kwlist, &lws, &want, &t))
        return NULL;
    muster_rdzv_opts o = {.local_world_size = lws, .min_nodes = 1, .max_nodes = 1, .want_members = want};
    CONN_CALL(c, rc, detail, muster_rdzv_arm(m, &o, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    Py_RETURN_NONE;
}

/* rdzv_report(node_id, cause, timeout_ms): member node_id of this handle's generation failed. */
PyObject *conn_rdzv_report(ConnObject *c, PyObject *args)
{
    const char *node_id, *cause = NULL;
    unsigned int t = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "s|zI", &node_id, &cause, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_rdzv_report(m, node_id, cause, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    Py_RETURN_NONE;
}

/* rdzv_heartbeat(generation, timeout_ms): Stale once the generation broke. */
PyObject *conn_rdzv_heartbeat(ConnObject *c, PyObject *args)
{
    unsigned long long gen;
    unsigned int t = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "K|I", &gen, &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_rdzv_heartbeat(m, (uint64_t)gen, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    Py_RETURN_NONE;
}

/* rdzv_leave(timeout_ms): the running generation breaks for the others. */
PyObject *conn_rdzv_leave(ConnObject *c, PyObject *args)
{
    unsigned int t = 0;
    char detail[CORE_DETAIL_MAX] = "";
    int rc;
    if (!PyArg_ParseTuple(args, "|I", &t))
        return NULL;
    CONN_CALL(c, rc, detail, muster_rdzv_leave(m, t));
    if (rc != MUSTER_OK)
        return core_raise(rc, detail);
    Py_RETURN_NONE;
}

/* heartbeat_interval() -> ms between heartbeats (a third of the server's timeout). */
PyObject *conn_heartbeat_interval(ConnObject *c, PyObject *noargs)
{
    (void)noargs;
    unsigned int ms = 0;
    Py_BEGIN_ALLOW_THREADS muster_t *m = conn_enter(c);
    ms = m ? muster_rdzv_heartbeat_interval(m) : 0;
    if (m)
        conn_leave(c);
    Py_END_ALLOW_THREADS return PyLong_FromUnsignedLong(ms);
}
