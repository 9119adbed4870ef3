/*
 * The `muster run` launcher as the CLI sees it: one entry point.  Everything
 * else of the launcher is internal to client/launcher/ (run.h).  Its exit
 * statuses are the CLI's (enum cli_exit in client/cli/cli.h), plus the
 * workers' own statuses and 128+signal, as docs/launcher.md lists them.
 */
#ifndef MUSTER_LAUNCHER_H
#define MUSTER_LAUNCHER_H

/* Parse the launcher's command line and run the job; url is the CLI's --url or NULL; returns the process
 * exit status. */
int run_main(int argc, char **argv, const char *url);

#endif
