/* hubctl: the command-line client of hubd.
 *
 * main only sets up the process and reports a failed stdout; cli.c parses
 * the command line and runs the command, each in its own module (fetch,
 * listing, admin), over one blocking connection (conn). */
#include "cli.h"
#include "hf_holds.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
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

/* ---- hf ls / hf rm (issue 22.4) ------------------------------------------
 * `hubctl [--socket PATH] hf ls|rm ...` go to hf_holds.c with their own
 * options (cli_parse does not know them), --socket handed on. The `hf`
 * subcommand's own dispatch (hf download) is to take these two over. */
static int hf_holds_dispatch(int argc, char **argv, int *rc)
{
    const char *sock = NULL;
    int i = 1;
    if (i + 1 < argc && str_eq(argv[i], "--socket"))
        sock = argv[i + 1], i += 2;
    if (i + 1 >= argc || !str_eq(argv[i], "hf") ||
        !(str_eq(argv[i + 1], "ls") || str_eq(argv[i + 1], "rm")))
        return 0;
    char **v = xcalloc((size_t)argc + 3, sizeof *v);
    int n = 0;
    v[n++] = argv[i + 1];
    if (sock)
        v[n++] = "--socket", v[n++] = (char *)sock;
    for (int k = i + 2; k < argc; k++)
        v[n++] = argv[k];
    *rc = str_eq(argv[i + 1], "ls") ? hf_ls_main(n, v) : hf_rm_main(n, v);
    free(v);
    return 1;
}

int main(int argc, char **argv)
{
    /* A daemon that dies mid-write must be an error return, not a signal. */
    struct sigaction sa = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &sa, NULL);

    int rc;
    if (hf_holds_dispatch(argc, argv, &rc))
        return finish_stdout(rc);
    cli_t c;
    rc = cli_parse(argc, argv, &c);
    if (rc == CLI_RUN)
        rc = cli_dispatch(&c);
    cli_free(&c);
    return finish_stdout(rc);
}
