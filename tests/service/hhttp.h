/* A minimal HTTP/1.0 GET for tests of musterd's metrics endpoint, and reading a port file. */
#ifndef MUSTER_TEST_HHTTP_H
#define MUSTER_TEST_HHTTP_H

#include <stddef.h>
#include <stdint.h>

/* GET path from 127.0.0.1:port within timeout_ms; the status code (body malloc'd, NUL-terminated), or -1. */
int hh_get(uint16_t port, const char *path, char **body, unsigned timeout_ms);
/* As hh_get, sending host as the Host header (NULL: none). */
int hh_get_host(uint16_t port, const char *path, const char *host, char **body, unsigned timeout_ms);
/* The port a port file holds now, or 0 (missing, empty or not a port). */
uint16_t hh_port_read(const char *path);
/* Wait up to timeout_ms for a port file to hold a port; the port, or 0. */
uint16_t hh_port_file(const char *path, unsigned timeout_ms);
/* The value of the Prometheus sample whose line starts with "name{labels} " or "name "; -1 when absent. */
double hh_sample(const char *text, const char *series);
/* Check every non-comment line of a Prometheus text body is "series value"; the bad line count. */
int hh_prom_bad_lines(const char *text);

#endif
