#include "cli.h"

#include "admin.h"
#include "autostart.h"
#include "doctor.h"
#include "fetch.h"
#include "fleet.h"
#include "help.h"
#include "hf_cli.h"
#include "listing.h"
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static const char usage_text[] =
    "Usage:\n"
    "  hubctl [--socket PATH] fetch [--sha256 HEX] [-H 'Name: value']... [-o DEST] [-q] [--json]\n"
    "                                [-i FILE] [--progress] [--refresh] [URL...]\n"

    "  hubctl [--socket PATH] hf download REPO [FILE...] [--repo-type model|dataset|space]\n"
    "                                [--revision R] [--include GLOB]... [--exclude GLOB]...\n"
    "                                [--cache-dir DIR | --local-dir DIR | --warm]\n"
    "                                [--token T] [--max-workers N] [--force-download]\n"
    "                                [--dry-run] [--format F | --json | --json-files] [-q]\n"
    "                                [--progress]\n"
    "  hubctl [--socket PATH] hf ls [--all | --uid N] [--json]\n"
    "  hubctl [--socket PATH] hf rm REPO [--repo-type T] [--revision R] [--cache-dir DIR]\n"
    "  hubctl [--socket PATH] status [--json]\n"
    "  hubctl [--socket PATH] stats [--json | --prometheus]\n"
    "  hubctl [--socket PATH] ls [--json]\n"
    "  hubctl [--socket PATH] cancel JOB|URL [--json]\n"
    "  hubctl [--socket PATH] rm URL|SHA256 [--force] [--json]\n"
    "  hubctl [--socket PATH] pin|unpin URL|SHA256 [--json]\n"
    "  hubctl [--socket PATH] gc [--max-size SIZE] [--json]\n"
    "  hubctl [--socket PATH] verify [--json]\n"
    "  hubctl [--socket PATH] fleet status [--json]\n"
    "  hubctl start | stop\n"
    "  hubctl [--socket PATH] doctor\n"
    "  hubctl help [COMMAND]   (or hubctl COMMAND --help)\n"
    "  hubctl --version\n"
    "\n"
    "Client of hubd, the shared download cache.\n"
    "\n"
    "Commands:\n"
    "  fetch     download each URL through the cache (once, however many ask) and\n"
    "            print the path of each file, one per line, in argument order\n"
    "  hf        hf download: a Hugging Face repo (or FILEs of it) through the\n"
    "            cache into the HF cache, as `hf download` does; print the\n"
    "            snapshot folder (a FILE's path when one is named); --local-dir:\n"
    "            plain files there; --warm: into hubd's cache only; --dry-run:\n"
    "            what would be fetched, nothing is. The token:\n"
    "            --token, else $HF_TOKEN, else $HF_TOKEN_PATH, else $HF_HOME/token;\n"
    "            hf ls: the repos hubd keeps for your HF cache; hf rm: a repo out\n"
    "            of your HF cache, and hubd's hold on it released\n"
    "  status    list the running download jobs\n"
    "  stats     print the daemon's counters (--prometheus: text exposition)\n"
    "  ls        list the cached entries\n"
    "  cancel    stop a download (a job number from status, or its URL) for\n"
    "            everyone waiting on it: yours alone (an admin: any)\n"
    "  rm        remove a URL's entry (its blob too when no other entry names\n"
    "            it), or a blob by SHA-256 with every entry naming it; a blob\n"
    "            users' HF caches hold needs --force (rm names them)\n"
    "  pin       keep a blob (by URL or SHA-256) from eviction; unpin undoes it\n"
    "  gc        evict least recently used blobs down to --max-size, or to the\n"
    "            configured max_cache_size (held and pinned blobs stay)\n"
    "  verify    re-hash every blob; bad ones are quarantined and listed\n"
    "  fleet     fleet status: the cluster swarm as this node sees it: its\n"
    "            files, the peers connected, bytes up and down\n"
    "  start     start a per-user hubd unless one runs; print its socket\n"
    "  stop      stop the per-user hubd\n"
    "  doctor    say why you can (or cannot) use hubd (--socket, $HUBD_SOCKET,\n"
    "            else the system one), and what to do\n"
    "  help      a command's usage and options (as COMMAND --help)\n"
    "rm, pin, unpin, gc, verify and fleet status need root or the daemon's\n"
    "admin group.\n"
    "\n"
    "Options:\n"
    "  --socket PATH  daemon socket (default: $HUBD_SOCKET, else the system\n"
    "                 daemon's /run/hubd/hubd.sock when it answers, else a\n"
    "                 per-user daemon's $XDG_RUNTIME_DIR/hubd.sock (or\n"
    "                 /tmp/hubd-UID/hubd.sock), started when none answers)\n"
    "  -H, --header 'Name: value' | @FILE\n"
    "                 a request header for the origin (repeatable), e.g. a token;\n"
    "                 @FILE (@- for stdin) reads one per line and keeps a token\n"
    "                 out of the process list; headers go to the first origin\n"
    "                 only, and a file fetched with headers is served only to\n"
    "                 requests with the same ones\n"
    "  --sha256 HEX   expected SHA-256 of the file (a single URL only); a cached\n"
    "                 blob with this digest is served without any network\n"
    "  -o DEST        copy the file to DEST and print DEST; if DEST is a directory\n"
    "                 (required with several URLs) the name is the URL's last\n"
    "                 path segment; -o - writes the file to stdout\n"
    "  -i FILE        fetch the URLs in FILE too (-i -: stdin), one per line,\n"
    "                 each optionally followed by sha256=HEX; blank lines and\n"
    "                 lines starting with # are skipped\n"
    "  -q             no progress and no informational messages\n"
    "  --json         print one JSON object per URL (fetch), or JSON output\n"
    "  --progress     show progress even when stderr is not a terminal\n"
    "  --refresh      ask the origin whether a cached URL changed (304: the\n"
    "                 cached file; else the new one is downloaded)\n"
    "  -h, --help     show this help (after a command: that command's)\n"
    "  --version      show the version\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  a download failed\n"
    "  2  usage error\n"
    "  3  hubd unreachable, or it closed the connection before answering\n"
    "  4  verification failed (SHA-256 mismatch; verify found a bad blob)\n"
    "With several URLs the worst applies: 3, then 4, then 1.\n";

/* ---- options ------------------------------------------------------------ */

/* Matches argv[*i] against an option with a value: "--name VALUE" and
 * "--name=VALUE", or "-o VALUE" and "-oVALUE" for a short one. Returns 0 if
 * it is another option, 1 with *value set (NULL when missing). */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    int is_long = name[1] == '-';
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '\0')
        *value = *i + 1 < argc ? argv[++*i] : NULL;
    else if (is_long && a[n] == '=')
        *value = a + n + 1;
    else if (!is_long)
        *value = a + n;
    else
        return 0;
    return 1;
}

static void add_header(cli_t *c, const char *h)
{
    c->headers = xrealloc(c->headers, (c->nheaders + 1) * sizeof *c->headers);
    c->headers[c->nheaders++] = xstrdup(h);
}

/* -H @FILE (or @- for stdin): one "Name: value" per line, blank lines and
 * lines starting with '#' skipped. */
static int read_header_file(cli_t *c, const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f)
        return usage_error("-H @%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = CLI_RUN;
    while (rc == CLI_RUN && (n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        if (!strchr(line, ':'))
            rc = usage_error("-H @%s: a line is not 'Name: value'", path);
        else
            add_header(c, line);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    return rc;
}

/* Handles the option at argv[*i]. Returns CLI_RUN to go on, or an exit code
 * (help and version end the program successfully, here). */
static void whole_usage(void)
{
    fputs(usage_text, stdout);
}

/* --help after a command: that command's usage ("hf download"'s after
 * "hf download", "fleet status"'s after "fleet status"), else the whole
 * program's. */
static int cli_help(const cli_t *c)
{
    char name[64];
    int sub = c->command && (str_eq(c->command, "hf") || str_eq(c->command, "fleet")) && c->nargs;
    snprintf(name, sizeof name, "%s%s%s", c->command ? c->command : "", sub ? " " : "",
             sub ? c->args[0] : "");
    if (!c->command || help_print(name) != 0)
        whole_usage();
    return EXIT_OK;
}

static int cli_option(cli_t *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v = NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
        return cli_help(c);
    if (strcmp(a, "--version") == 0) {
        puts("hubctl " HUBCTL_VERSION);
        return EXIT_OK;
    }
    int *flag = strcmp(a, "-q") == 0                  ? &c->quiet
                : strcmp(a, "--json") == 0            ? &c->json
                : strcmp(a, "--progress") == 0        ? &c->progress
                : strcmp(a, "--refresh") == 0         ? &c->refresh
                : strcmp(a, "--prometheus") == 0      ? &c->prometheus
                : strcmp(a, "--quiet") == 0           ? &c->quiet
                : strcmp(a, "--warm") == 0            ? &c->warm
                : strcmp(a, "--force") == 0           ? &c->force
                : strcmp(a, "--force-download") == 0  ? &c->force_download
                : strcmp(a, "--resume-download") == 0 ? &c->resume_download
                : strcmp(a, "--dry-run") == 0         ? &c->dry_run
                : strcmp(a, "--json-files") == 0      ? &c->json_files
                                                      : NULL;
    if (flag) {
        *flag = 1;
        return CLI_RUN;
    }
    if (opt_value(argc, argv, i, "-H", &v) || opt_value(argc, argv, i, "--header", &v)) {
        if (v && v[0] == '@') /* from a file: a token on the command line is in ps */
            return read_header_file(c, v + 1);
        if (!v || !strchr(v, ':'))
            return usage_error("-H needs 'Name: value' or @FILE");
        add_header(c, v);
        return CLI_RUN;
    }
    if (opt_value(argc, argv, i, "--include", &v) || opt_value(argc, argv, i, "--exclude", &v)) {
        int inc = a[2] == 'i';
        if (!v || !*v)
            return usage_error("option '%s' needs a value", inc ? "--include" : "--exclude");
        const char ***list = inc ? &c->include : &c->exclude;
        size_t *n = inc ? &c->ninclude : &c->nexclude;
        *list = xrealloc(*list, (*n + 1) * sizeof **list);
        (*list)[(*n)++] = v;
        return CLI_RUN;
    }
    const char **slot = opt_value(argc, argv, i, "--socket", &v)        ? &c->socket
                        : opt_value(argc, argv, i, "--repo-type", &v)   ? &c->repo_type
                        : opt_value(argc, argv, i, "--revision", &v)    ? &c->revision
                        : opt_value(argc, argv, i, "--cache-dir", &v)   ? &c->cache_dir
                        : opt_value(argc, argv, i, "--local-dir", &v)   ? &c->local_dir
                        : opt_value(argc, argv, i, "--token", &v)       ? &c->token
                        : opt_value(argc, argv, i, "--sha256", &v)      ? &c->sha256
                        : opt_value(argc, argv, i, "-o", &v)            ? &c->dest
                        : opt_value(argc, argv, i, "-i", &v)            ? &c->input
                        : opt_value(argc, argv, i, "--max-size", &v)    ? &c->max_size
                        : opt_value(argc, argv, i, "--max-workers", &v) ? &c->max_workers
                        : opt_value(argc, argv, i, "--format", &v)      ? &c->format
                        : opt_value(argc, argv, i, "--local-dir-use-symlinks", &v)
                            ? &c->use_symlinks
                            : NULL;
    if (!slot)
        return usage_error("unknown option '%s'", a);
    if (!v || !*v)
        return usage_error("option '%s' needs a value", a);
    *slot = v;
    return CLI_RUN;
}

int cli_parse(int argc, char **argv, cli_t *c)
{
    memset(c, 0, sizeof *c);
    c->args = xcalloc((size_t)argc, sizeof *c->args);
    c->headers = NULL;
    int only_operands = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_operands && strcmp(a, "--") == 0) {
            only_operands = 1;
        } else if (!only_operands && a[0] == '-' && a[1] != '\0') {
            int rc = cli_option(c, argc, argv, &i);
            if (rc != CLI_RUN)
                return rc;
        } else if (!c->command) {
            c->command = a;
            if (str_eq(a, "hf") && i + 1 < argc &&
                (str_eq(argv[i + 1], "ls") || str_eq(argv[i + 1], "rm"))) {
                c->hf_argv = argv + i + 1; /* theirs to parse (hf_holds.c) */
                c->hf_argc = argc - i - 1;
                c->args[c->nargs++] = argv[i + 1];
                break;
            }
        } else {
            c->args[c->nargs++] = a;
        }
    }
    if (!c->command)
        return usage_error("no command given");
    /* hf's --format json and --format quiet are its --json and -q: one
     * flag each for the code that reads them (hf_format.h checks the rest) */
    if (str_eq(c->format, "json"))
        c->json = 1;
    if (str_eq(c->format, "quiet"))
        c->quiet = 1;
    return CLI_RUN;
}

void cli_free(cli_t *c)
{
    free(c->args);
    free(c->include);
    free(c->exclude);
    for (size_t i = 0; i < c->nheaders; i++)
        free(c->headers[i]);
    free(c->headers);
}

/* ---- commands ----------------------------------------------------------- */

static int cmd_cancel(const cli_t *c)
{
    return admin_run(c, "CANCEL");
}

static int cmd_rm(const cli_t *c)
{
    return admin_run(c, "RM");
}

static int cmd_pin(const cli_t *c)
{
    return admin_run(c, "PIN");
}

static int cmd_unpin(const cli_t *c)
{
    return admin_run(c, "UNPIN");
}

static int cmd_gc(const cli_t *c)
{
    return admin_run(c, "GC");
}

static int cmd_verify(const cli_t *c)
{
    return admin_run(c, "VERIFY");
}

/* The per-user daemon: `hubctl start` prints the socket it answers on. */
static int cmd_start(const cli_t *c)
{
    char sock[PATH_MAX];
    int rc = autostart_start(c->quiet, sock, sizeof sock);
    if (rc < 0)
        return EXIT_UNREACHABLE;
    puts(sock);
    return EXIT_OK;
}

static int cmd_stop(const cli_t *c)
{
    return autostart_stop(c->quiet) < 0 ? EXIT_FAILED : EXIT_OK;
}

static int cmd_doctor(const cli_t *c)
{
    return doctor_run(c->socket);
}

static int cmd_help(const cli_t *c)
{
    return help_run(c->args, (int)c->nargs, whole_usage);
}

static const struct {
    const char *name;
    int (*run)(const cli_t *c);
    int takes_urls;      /* fetch, hf: operands and options of its own, checked there */
    const char *one_arg; /* exactly one operand: what to say when not; NULL: none */
} commands[] = {
    {"fetch", fetch_run, 1, NULL},       /* URL...: download through the cache */
    {"hf", hf_run, 1, NULL},             /* download REPO: into the HF cache */
    {"status", listing_status, 0, NULL}, /* the running jobs */
    {"stats", listing_stats, 0, NULL},   /* the daemon's counters */
    {"ls", listing_ls, 0, NULL},         /* the cached entries */
    {"cancel", cmd_cancel, 0, "cancel takes one job number or URL"}, /* stop a download */
    {"rm", cmd_rm, 0, "rm takes one URL or SHA256"},                 /* forget an entry or a blob */
    {"pin", cmd_pin, 0, "pin takes one URL or SHA256"},              /* keep from eviction */
    {"unpin", cmd_unpin, 0, "unpin takes one URL or SHA256"},        /* evictable again */
    {"gc", cmd_gc, 0, NULL},                                         /* evict down to --max-size */
    {"verify", cmd_verify, 0, NULL},                                 /* re-hash every blob */
    {"fleet", fleet_run, 0, "fleet takes a subcommand: status"},     /* the cluster swarm */
    {"start", cmd_start, 0, NULL},                                   /* start the per-user daemon */
    {"stop", cmd_stop, 0, NULL},                                     /* stop it */
    {"doctor", cmd_doctor, 0, NULL}, /* why the daemon is (not) usable */
    {"help", cmd_help, 1, NULL},     /* [COMMAND [SUB]]: its usage */
};

int cli_dispatch(const cli_t *c)
{
    for (size_t i = 0; i < ARRAY_LEN(commands); i++) {
        if (strcmp(c->command, commands[i].name) != 0)
            continue;
        if (!str_eq(c->command, "hf") && hf_options_given(c))
            return usage_error("--repo-type, --revision, --include, --exclude, --cache-dir, "
                               "--local-dir, --token, --warm, --dry-run, --format and "
                               "--json-files are options of hf download");
        if (c->force && !str_eq(c->command, "rm"))
            return usage_error("--force is an option of rm");
        if (commands[i].takes_urls)
            return commands[i].run(c);
        if (commands[i].one_arg && c->nargs != 1)
            return usage_error("%s", commands[i].one_arg);
        if (!commands[i].one_arg && c->nargs)
            return usage_error("%s takes no arguments ('%s')", c->command, c->args[0]);
        if (c->sha256 || c->dest || c->progress || c->nheaders || c->refresh || c->input)
            return usage_error(
                "--sha256, -o, -i, -H, --progress and --refresh are options of fetch");
        if (c->prometheus && !str_eq(c->command, "stats"))
            return usage_error("--prometheus is an option of stats");
        return commands[i].run(c);
    }
    return usage_error("unknown command '%s'", c->command);
}
