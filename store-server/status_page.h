/* The live status page at / of the metrics listener, and the /v1/ JSON it draws from. */
#ifndef MUSTERD_STATUS_PAGE_H
#define MUSTERD_STATUS_PAGE_H

struct server;
struct evhttp_request;

/* Answer path when it is the page (/ or /index.html); 1 when answered, else 0. */
int status_page_route(struct server *srv, struct evhttp_request *req, const char *path);

#endif
