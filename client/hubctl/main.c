/* hubctl: the command-line client of hubd.
 *
 * main only sets up the process and reports a failed stdout; cli.c parses
 * the command line and runs the command, each in its own module (fetch,
 * listing, admin), over one blocking connection (conn). */
#include "cli.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* stdout is buffered: a full disk or closed pipe shows only at the flush. */
static int finish_stdout(int rc)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return rc;
    if (errno != EPIPE)
        fprintf(stderr, "hubctl: write error on stdout: %s\n", strerror(errno));
    return rc ? rc : EXIT_FAILED;
}

int main(int argc, char **argv)
{
    /* A daemon that dies mid-write must be an error return, not a signal. */
    struct sigaction sa = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &sa, NULL);

    cli_t c;
    int rc = cli_parse(argc, argv, &c);
    if (rc == CLI_RUN)
        rc = cli_dispatch(&c);
    cli_free(&c);
    return finish_stdout(rc);
}
