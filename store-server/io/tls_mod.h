/* The interface between musterd and its TLS module (musterd-tls.so): one table of OpenSSL glue. */
#ifndef MUSTERD_TLS_MOD_H
#define MUSTERD_TLS_MOD_H

#include <stddef.h>

struct bufferevent;
struct event_base;

/* Bumped whenever the table below changes shape; musterd refuses a module of another version. */
#define TLS_MOD_ABI 1
/* The one symbol the module exports. */
#define TLS_MOD_SYMBOL "tls_mod_ops"
/* The module's file name, looked up beside the musterd binary, then in the install directory. */
#define TLS_MOD_FILE "musterd-tls.so"

struct tls_mod {
    int abi;
    /* A server context from a PEM chain, key and optional CA bundle ("" = none); NULL with err filled. */
    void *(*ctx_new)(const char *cert, const char *key, const char *ca, char *err, size_t n);
    /* Free a context from ctx_new. */
    void (*ctx_free)(void *ctx);
    /* A server-side TLS bufferevent around fd; NULL on failure (fd then closed). */
    struct bufferevent *(*bev_new)(void *ctx, struct event_base *base, int fd);
    /* The first TLS error queued on bev as text (the rest drained); 0 when there was none. */
    int (*bev_error)(struct bufferevent *bev, char *err, size_t n);
};

#endif
