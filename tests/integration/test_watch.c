/*
 * Integration tests of watches: set and delete of keys under the prefix push
 * events to the watching handle (and nothing else does), and unwatch stops
 * them.
 */
#include <string.h>

#include "hclient.h"

/* Expect one event of kind on w within 5 s, for key (and value for SET). */
static void t_expect_event(muster_t *w, muster_event_kind kind, const char *key, const char *value,
                           uint64_t watch_id)
{
    muster_event *ev = NULL;
    CHECK_EQ(muster_next_event(w, &ev, 5000), MUSTER_OK);
    if (!ev)
        return;
    CHECK_EQ(ev->kind, kind);
    CHECK_EQ(ev->watch_id, watch_id);
    CHECK_STR(ev->key, key);
    if (value)
        CHECK_MEM(ev->value, ev->value_len, value, strlen(value));
    muster_event_free(ev);
}

/* Expect no event on w for a short while. */
static void t_expect_quiet(muster_t *w)
{
    muster_event *ev = NULL;
    CHECK_EQ(muster_next_event(w, &ev, 200), MUSTER_ETIMEDOUT);
    CHECK(ev == NULL);
    muster_event_free(ev);
}

/* Writes under the prefix by another handle arrive as events in order; others do not. */
static void t_watch_events(const struct h_daemon *d)
{
    muster_t *w = hc_connect(d, "watch", NULL), *m = hc_connect(d, "watch", NULL);
    uint64_t id = 0;
    int64_t r;
    if (!w || !m)
        goto out;
    CHECK_EQ(muster_watch(w, "w/", &id, 0), MUSTER_OK);
    CHECK(id != 0);
    t_expect_quiet(w);
    CHECK_EQ(hc_set_str(m, "w/a", "v1"), MUSTER_OK);
    CHECK_EQ(hc_set_str(m, "other/a", "ignored"), MUSTER_OK);
    CHECK_EQ(muster_add(m, "w/n", 3, &r, 0), MUSTER_OK);
    CHECK_EQ(muster_delete(m, "w/a", NULL, 0), MUSTER_OK);
    t_expect_event(w, MUSTER_EVENT_SET, "w/a", "v1", id);
    t_expect_event(w, MUSTER_EVENT_SET, "w/n", "3", id);
    t_expect_event(w, MUSTER_EVENT_DELETE, "w/a", NULL, id);
    t_expect_quiet(w);
out:
    muster_close(w);
    muster_close(m);
}

/* Calls on a watching handle still work while events are queued; unwatch stops events. */
static void t_unwatch(const struct h_daemon *d)
{
    muster_t *w = hc_connect(d, "watch", NULL), *m = hc_connect(d, "watch", NULL);
    uint64_t id = 0;
    if (!w || !m)
        goto out;
    CHECK_EQ(muster_watch(w, "u/", &id, 0), MUSTER_OK);
    CHECK_EQ(hc_set_str(m, "u/1", "one"), MUSTER_OK);
    /* The event may arrive before this call's reply: the library must queue it. */
    CHECK_EQ(hc_set_str(w, "u/2", "two"), MUSTER_OK);
    HC_EXPECT(w, "u/1", "one");
    t_expect_event(w, MUSTER_EVENT_SET, "u/1", "one", id);
    t_expect_event(w, MUSTER_EVENT_SET, "u/2", "two", id);
    CHECK_EQ(muster_unwatch(w, id, 0), MUSTER_OK);
    CHECK_EQ(hc_set_str(m, "u/3", "three"), MUSTER_OK);
    HC_EXPECT(w, "u/3", "three");
    t_expect_quiet(w);
out:
    muster_close(w);
    muster_close(m);
}

/* A watch in one namespace sees nothing of another namespace. */
static void t_watch_namespaced(const struct h_daemon *d)
{
    muster_t *w = hc_connect(d, "watch", NULL), *m = hc_connect(d, "watch-other", NULL);
    uint64_t id = 0;
    if (!w || !m)
        goto out;
    CHECK_EQ(muster_watch(w, "", &id, 0), MUSTER_OK);
    CHECK_EQ(hc_set_str(m, "x", "y"), MUSTER_OK);
    t_expect_quiet(w);
out:
    muster_close(w);
    muster_close(m);
}

/* Run the watch tests against one daemon. */
int main(void)
{
    struct h_daemon d;
    h_init("watch", 60);
    if (h_start(&d, NULL) < 0)
        return h_finish();
    H_RUN(t_watch_events, &d);
    H_RUN(t_unwatch, &d);
    H_RUN(t_watch_namespaced, &d);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
