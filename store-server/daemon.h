/* The composition root: musterd's life from options to exit (main.c and the fuzz targets drive it). */
#ifndef MUSTERD_DAEMON_H
#define MUSTERD_DAEMON_H

struct server;

/* Parse options and set up logging, the loop and tokens; -1 to go on, else an exit status. */
int daemon_init(struct server *srv, int argc, char **argv);
/* Bind every listener, write the port file and install signal handlers; 0 or an exit status. */
int daemon_start(struct server *srv);
/* Run the loop until drained; returns the exit status. */
int daemon_run(struct server *srv);
/* Free everything daemon_init and daemon_start made (safe after a partial init). */
void daemon_fini(struct server *srv);

#endif
