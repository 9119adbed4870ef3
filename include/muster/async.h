/*
 * libmuster, asynchronous calls: submit a call, return at once, and learn
 * its outcome through a callback.  Any number of calls may be in flight on
 * one handle (requests carry ids, so answers may come back in any order: a
 * blocking get parked at the server does not hold up the sets after it).
 *
 * The handle is the same muster_t as the synchronous calls', made by
 * muster_connect() and freed by muster_close().  The synchronous calls are
 * this machinery plus a wait, so deadlines, errors, failover and re-sending
 * are the same (see muster.h); a call's outcome arrives as a muster_reply.
 *
 * Who owns the loop: the caller.  The library never starts a thread.  Give
 * the handle's socket to your event loop and call muster_async_handle()
 * when it is ready or when the timeout passed:
 *   - muster_async_fd(): the socket (it changes after a failover reconnect);
 *   - muster_async_events(): MUSTER_ASYNC_READ, plus MUSTER_ASYNC_WRITE
 *     while output waits;
 *   - muster_async_timeout(): milliseconds until the next deadline of a
 *     call in flight (-1: none, 0: call muster_async_handle now).
 * Or attach hooks (muster_async_attach) that the library calls whenever
 * those three change; muster/adapters/libevent.h does that for libevent,
 * muster/adapters/poll.h serves a plain poll() loop.  A synchronous call
 * on the handle also moves its calls along while it waits.
 *
 * Callback context: a callback runs exactly once per call that was
 * submitted (MUSTER_OK returned by the muster_async_* function; any other
 * return means no callback), on the thread that completed it: the one in
 * muster_async_handle(), one waiting in a synchronous call on the same
 * handle, or the one in muster_close() (MUSTER_ECANCELED).  It runs without
 * the handle's lock, so it may submit new calls on the handle, asynchronous
 * or (blocking the loop meanwhile) synchronous; it must not close the
 * handle.  The muster_reply and every pointer in it are valid only during
 * the callback: copy what you keep.
 *
 * Threads: a handle is safe to share.  Calls from any thread are
 * serialised on one lock held only for short, non-blocking work, except
 * during a failover reconnect (up to the deadline of the calls waiting for
 * it).  A thread blocked in a synchronous wait polls the socket without the
 * lock and completes other threads' calls as their answers arrive, so a
 * set on thread B returns promptly while thread A waits in a blocking get.
 * When callbacks may run on more than one thread (a loop plus synchronous
 * calls elsewhere), they must be thread-safe.  muster_close() must be the
 * handle's last call: no other thread may be using it.
 *
 * Events: watch and membership events read while handling the socket wait
 * in the handle's queue; take them with muster_next_event(m, &ev, 0) after
 * muster_async_handle().  The library never prints and keeps no global
 * state.
 */
#ifndef MUSTER_ASYNC_H
#define MUSTER_ASYNC_H

#include <muster/muster.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bits of muster_async_events() and muster_async_handle(). */
#define MUSTER_ASYNC_READ 1
#define MUSTER_ASYNC_WRITE 2

/* The outcome of one call, lent to its callback. */
typedef struct muster_reply {
    int err;                      /* a muster_err (MUSTER_OK on success) */
    const char *detail;           /* the server's or the library's message ("" for MUSTER_OK) */
    const void *value;            /* get, compare_set, barrier with a fetch key: the value */
    size_t len;
    int64_t number;               /* add: the new value; delete: 1 when the key existed; check: 1 when
                                   * all were present; num_keys: the count; append: the new length;
                                   * barrier: the round; compare_set: 1 when it wrote; ping: the round
                                   * trip in microseconds; wait: 1 when a queue push released it (one
                                   * wait per push); queue_push: the length after; queue_pop: the
                                   * length before (value holds the value when > 0); queue_len: it */
    size_t n;                     /* multi_get: values; list: keys */
    const void *const *values;    /* multi_get: n values, with lens */
    const size_t *lens;
    const char *const *keys;      /* list: n keys */
    int more;                     /* list: another page exists */
} muster_reply;

/* Receives one call's outcome (see "Callback context" above); arg is the submitter's. */
typedef void (*muster_callback)(muster_t *m, const muster_reply *r, void *arg);

/* Hooks that keep a caller's loop in step with a handle (see muster_async_attach). */
typedef struct muster_loop {
    /* The handle now waits on fd (-1: no socket) for events (MUSTER_ASYNC_*
     * bits) and wants muster_async_handle() after timeout_ms (-1: no timer;
     * 0: at once).  Called with the handle's lock held, from whichever thread
     * changed it: it must not call libmuster. */
    void (*update)(void *arg, int fd, int events, int timeout_ms);
    /* The handle is closing or another loop is attached: forget it. */
    void (*detach)(void *arg);
} muster_loop;

/* Attach a loop's hooks to m (loop is copied; NULL detaches); the update
 * hook is called at once with the current state.  One loop per handle. */
MUSTER_API int muster_async_attach(muster_t *m, const muster_loop *loop, void *arg);
/* The socket to wait on (-1 while there is none). */
MUSTER_API int muster_async_fd(muster_t *m);
/* The MUSTER_ASYNC_* events the handle waits for now. */
MUSTER_API int muster_async_events(muster_t *m);
/* Milliseconds until muster_async_handle() is due without an event (-1: never, 0: now). */
MUSTER_API int muster_async_timeout(muster_t *m);
/* Read and write what events (MUSTER_ASYNC_* bits, 0 after a timeout)
 * allow, complete calls and run their callbacks.  Returns 0, or the error
 * that broke the handle (muster_broken()). */
MUSTER_API int muster_async_handle(muster_t *m, int events);

/* The calls.  Each copies its arguments before returning; cb may be NULL.
 * timeout_ms is as for the synchronous call of the same name (0: the
 * handle's default).  Returns MUSTER_OK when submitted (cb will run once),
 * else the error, with no callback: MUSTER_EINVAL, MUSTER_ENOMEM,
 * MUSTER_ELIMIT (too large for the server), MUSTER_ECONN (a broken handle
 * without failover), MUSTER_ECANCELED (the handle is closing). */
MUSTER_API int muster_async_set(muster_t *m, const char *key, const void *value, size_t len, uint32_t timeout_ms,
                                muster_callback cb, void *arg);
/* With wait != 0 the server parks the get until key exists or the timeout. */
MUSTER_API int muster_async_get(muster_t *m, const char *key, int wait, uint32_t timeout_ms, muster_callback cb,
                                void *arg);
MUSTER_API int muster_async_add(muster_t *m, const char *key, int64_t delta, uint32_t timeout_ms,
                                muster_callback cb, void *arg);
MUSTER_API int muster_async_compare_set(muster_t *m, const char *key, const void *expected, size_t elen,
                                        const void *desired, size_t dlen, uint32_t timeout_ms, muster_callback cb,
                                        void *arg);
/* An absent key is MUSTER_OK with number 0, as muster_delete. */
MUSTER_API int muster_async_delete(muster_t *m, const char *key, uint32_t timeout_ms, muster_callback cb,
                                   void *arg);
MUSTER_API int muster_async_check(muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms,
                                  muster_callback cb, void *arg);
MUSTER_API int muster_async_wait(muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms,
                                 muster_callback cb, void *arg);
/* A wait for one key whose queue counts as present only with more than skip values when it is parked
 * (a push releases it whatever skip says): for a caller that waits for several parties at once and was
 * handed skip values for some of them, which have not popped them yet (muster run's relay). */
MUSTER_API int muster_async_wait_skip(muster_t *m, const char *key, uint64_t skip, uint32_t timeout_ms,
                                      muster_callback cb, void *arg);
/* As muster_wait_count. */
MUSTER_API int muster_async_wait_count(muster_t *m, const char *key, int64_t at_least, uint32_t timeout_ms,
                                       muster_callback cb, void *arg);
MUSTER_API int muster_async_num_keys(muster_t *m, uint32_t timeout_ms, muster_callback cb, void *arg);
MUSTER_API int muster_async_multi_get(muster_t *m, const char *const *keys, size_t n, int wait,
                                      uint32_t timeout_ms, muster_callback cb, void *arg);
MUSTER_API int muster_async_multi_set(muster_t *m, const char *const *keys, const void *const *values,
                                      const size_t *lens, size_t n, uint32_t timeout_ms, muster_callback cb,
                                      void *arg);
MUSTER_API int muster_async_append(muster_t *m, const char *key, const void *value, size_t len,
                                   uint32_t timeout_ms, muster_callback cb, void *arg);
MUSTER_API int muster_async_list(muster_t *m, const char *prefix, const char *after, uint32_t limit,
                                 uint32_t timeout_ms, muster_callback cb, void *arg);
MUSTER_API int muster_async_ping(muster_t *m, uint32_t timeout_ms, muster_callback cb, void *arg);
MUSTER_API int muster_async_queue_push(muster_t *m, const char *key, const void *value, size_t len,
                                       uint32_t timeout_ms, muster_callback cb, void *arg);
MUSTER_API int muster_async_queue_pop(muster_t *m, const char *key, uint32_t timeout_ms, muster_callback cb,
                                      void *arg);
MUSTER_API int muster_async_queue_len(muster_t *m, const char *key, uint32_t timeout_ms, muster_callback cb,
                                      void *arg);
/* A watch of prefix, as muster_watch: the reply's number is the watch's id; its events are taken with
 * muster_next_event(m, &ev, 0) after muster_async_handle(). */
MUSTER_API int muster_async_watch(muster_t *m, const char *prefix, uint32_t timeout_ms, muster_callback cb,
                                  void *arg);
/* fetch_key NULL: a plain barrier; else the release also answers with that
 * key's value (MUSTER_ENOTFOUND when absent; number still holds the round). */
MUSTER_API int muster_async_barrier(muster_t *m, const char *name, uint32_t count, const char *fetch_key,
                                    uint32_t timeout_ms, muster_callback cb, void *arg);

#ifdef __cplusplus
}
#endif
#endif
