/* The `run` verb: hands its command line to the launcher (client/launcher/). */
#include "cli.h"
#include "launcher.h"

/* The `run` row of the verb table: its arguments are the launcher's own command line. */
int cmd_run(struct cli *c, const struct cli_args *a)
{
    return run_main(a->raw_argc, a->raw_argv, c->url);
}
