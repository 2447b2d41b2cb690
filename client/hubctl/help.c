/* help: one row per command, its usage and what its options do. */
#include "help.h"

#include "cli.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name; /* as typed: "fetch", "hf download" */
    const char *text; /* the usage and the options, ending in a newline */
} helps[] = {
    {"fetch",
     "Usage: hubctl [--socket PATH] fetch [--sha256 HEX] [-H 'Name: value']... [-o DEST]\n"
     "                                    [-i FILE] [-q] [--json] [--progress] [--refresh]\n"
     "                                    [URL...]\n"
     "Download each URL through hubd's cache (once, however many ask) and print the\n"
     "path of each file, one per line, in argument order.\n"
     "  --sha256 HEX   expected SHA-256 (a single URL); a cached blob with it is\n"
     "                 served without any network\n"
     "  -H, --header 'Name: value' | @FILE\n"
     "                 a request header for the origin (repeatable), e.g. a token;\n"
     "                 @FILE (@- for stdin) reads one per line; a file fetched with\n"
     "                 headers is served only to requests with the same ones\n"
     "  -o DEST        copy the file to DEST (a directory with several URLs; -o -:\n"
     "                 stdout) and print DEST\n"
     "  -i FILE        the URLs in FILE too (-i -: stdin), one per line, each\n"
     "                 optionally followed by sha256=HEX\n"
     "  -q             no progress and no informational messages\n"
     "  --json         one JSON object per URL\n"
     "  --progress     progress even when stderr is not a terminal\n"
     "  --refresh      ask the origin whether a cached URL changed\n"
     "Exit status: 0 done, 1 a download failed, 2 usage, 3 hubd unreachable,\n"
     "4 SHA-256 mismatch.\n"},
    {"hf", "Usage: hubctl [--socket PATH] hf download|ls|rm ...\n"
           "Hugging Face repos through hubd's cache. `hubctl hf SUB --help` for each:\n"
           "  download  a repo (or files of it) into your HF cache, as `hf download`\n"
           "  ls        the repos hubd keeps for your HF cache (its holds)\n"
           "  rm        a repo out of your HF cache, and hubd's hold on it released\n"},
    {"hf download",
     "Usage: hubctl [--socket PATH] hf download REPO [FILE...] [--repo-type model|dataset|space]\n"
     "           [--revision R] [--include GLOB]... [--exclude GLOB]...\n"
     "           [--cache-dir DIR | --local-dir DIR | --warm] [--token T] [--max-workers N]\n"
     "           [--force-download] [--dry-run] [--format F | --json | --json-files] [-q]\n"
     "           [--progress]\n"
     "Download a Hugging Face repo (or the FILEs named) through hubd's cache into\n"
     "the HF cache, as `hf download` does, and print the snapshot folder (a FILE's\n"
     "path when one is named).\n"
     "  --repo-type T    model (default), dataset or space\n"
     "  --revision R     a branch, tag, commit or refs/pr/N (default main)\n"
     "  --include GLOB, --exclude GLOB\n"
     "                   the repo's files to take, or to leave (repeatable)\n"
     "  --cache-dir DIR  the HF cache (default $HF_HUB_CACHE, else $HF_HOME/hub)\n"
     "  --local-dir DIR  plain files in DIR instead of the HF cache\n"
     "  --warm           into hubd's cache only\n"
     "  --token T        the Hub token (default $HF_TOKEN, else $HF_TOKEN_PATH,\n"
     "                   else $HF_HOME/token)\n"
     "  --max-workers N  files asked for at once (1 to 32, default 8)\n"
     "  --force-download fetch and place every file again\n"
     "  --dry-run        list the files, their size and whether they are cached\n"
     "                   (a table; --json: hf's [{\"file\", \"size\"}]): nothing fetched\n"
     "  --format F       hf's shapes: auto (the path), human, agent, json, quiet\n"
     "  --json           {\"path\": ...}, as hf's (--format json)\n"
     "  --json-files     one JSON object per file instead (a dry run: DryRunFileInfo)\n"
     "  -q, --quiet      the path alone: no progress, no notes (--format quiet)\n"
     "  --progress       progress even when stderr is not a terminal\n"
     "  --local-dir-use-symlinks V, --resume-download\n"
     "                   deprecated in hf: accepted with a warning, ignored\n"
     "HF_ENDPOINT: hubd asks one Hub (its hf_upstream); another is said once.\n"},
    {"hf ls", "Usage: hubctl [--socket PATH] hf ls [--all | --uid N] [--json]\n"
              "The repos hubd keeps for HF caches (holds: blobs your HF cache links to,\n"
              "kept from eviction), one line per user and repo@revision.\n"
              "  --all      every user's (root, hubd's user and the admin group only)\n"
              "  --uid N    user N's (yours, or an admin's look at another's)\n"
              "  --json     a JSON array: uid, user, label, files, size\n"},
    {"hf rm",
     "Usage: hubctl [--socket PATH] hf rm REPO [--repo-type T] [--revision R] [--cache-dir DIR]\n"
     "Remove a repo (or one revision of it) from your HF cache, as `hf cache rm`\n"
     "does, and release hubd's holds of the blob links removed.\n"
     "  --repo-type T    model (default), dataset or space\n"
     "  --revision R     only this revision's snapshot (and its refs)\n"
     "  --cache-dir DIR  the HF cache (default as hf download's)\n"},
    {"status", "Usage: hubctl [--socket PATH] status [--json]\n"
               "The running download jobs: state, progress, rate, connections, waiters,\n"
               "the users waiting (admins and those involved), source and URL.\n"},
    {"stats", "Usage: hubctl [--socket PATH] stats [--json | --prometheus]\n"
              "The daemon's counters; --prometheus: Prometheus text exposition.\n"},
    {"ls", "Usage: hubctl [--socket PATH] ls [--json]\n"
           "The cached entries, most recently used first. CRED: `-` for a file fetched\n"
           "without credentials (shared with everyone); else it is kept apart for the\n"
           "request headers (a token) it was fetched with, and CRED tells them apart\n"
           "(a short tag; `other` for credentials not yours); --json: \"cred\".\n"},
    {"cancel", "Usage: hubctl [--socket PATH] cancel JOB|URL [--json]\n"
               "Stop a download (a job number from status, or its URL) for everyone waiting\n"
               "on it: yours alone (an admin: any).\n"},
    {"rm", "Usage: hubctl [--socket PATH] rm URL|SHA256 [--force] [--json]\n"
           "Remove a URL's entry (its blob too when no other entry names it), or a blob\n"
           "by SHA-256 with every entry naming it. Root or the admin group.\n"
           "  --force  remove a blob even when users' HF caches link to it (it is held;\n"
           "           without --force rm names those users and removes nothing): their\n"
           "           links then dangle and the file is downloaded again when asked\n"},
    {"pin", "Usage: hubctl [--socket PATH] pin URL|SHA256 [--json]\n"
            "Keep a blob from eviction (unpin undoes it). Root or the admin group.\n"},
    {"unpin", "Usage: hubctl [--socket PATH] unpin URL|SHA256 [--json]\n"
              "Let a pinned blob be evicted again. Root or the admin group.\n"},
    {"gc", "Usage: hubctl [--socket PATH] gc [--max-size SIZE] [--json]\n"
           "Evict least recently used blobs down to SIZE (bytes, or with K, M, G, T), or\n"
           "to the configured max_cache_size, after any eviction already running, and say\n"
           "the cache's size then. Pinned blobs and blobs held by users' HF caches stay:\n"
           "above its target, gc says what each kept (`hubctl hf ls --all` lists the\n"
           "holds). Root or the admin group.\n"},
    {"verify", "Usage: hubctl [--socket PATH] verify [--json]\n"
               "Re-hash every blob; bad ones are quarantined and listed (exit 4). Root or the\n"
               "admin group.\n"},
    {"fleet", "Usage: hubctl [--socket PATH] fleet status [--json]\n"
              "The cluster swarm (hubd.conf's fleet_* keys) as this node sees it.\n"
              "`hubctl fleet status --help` for its details.\n"},
    {"fleet status", "Usage: hubctl [--socket PATH] fleet status [--json]\n"
                     "The cluster swarm (hubd.conf's fleet_* keys) as this node sees it: its\n"
                     "totals (bytes up and down, files from the swarm and from the origin,\n"
                     "bad pieces), then each file in the swarm (its state: asking, preparing,\n"
                     "swarming, swarmed, fetching, making or seeding; size, bytes done, up and\n"
                     "down, peers) and each peer connected now (bytes up and down, files).\n"
                     "Root or the admin group. A hubd without fleet_* settings says so (exit 1).\n"
                     "  --json   one object: node, files (with the full SHA-256 and, once\n"
                     "           known, the info-hashes: info_hash_v1 for a tracker's\n"
                     "           whitelist), peers\n"},
    {"start", "Usage: hubctl start [-q]\n"
              "Start a per-user hubd unless one runs, and print its socket.\n"},
    {"stop", "Usage: hubctl stop [-q]\n"
             "Stop the per-user hubd.\n"},
    {"doctor", "Usage: hubctl [--socket PATH] doctor\n"
               "Say why you can (or cannot) use hubd, and what to do: the socket file and\n"
               "who it admits, your groups, whether hubd answers. The socket checked is\n"
               "--socket, else $HUBD_SOCKET, else the system hubd's.\n"},
    {"help", "Usage: hubctl help [COMMAND [SUBCOMMAND]]\n"
             "The usage of hubctl, or of one command (as `hubctl COMMAND --help`).\n"},
};

int help_print(const char *cmd)
{
    for (size_t i = 0; i < ARRAY_LEN(helps); i++)
        if (str_eq(helps[i].name, cmd)) {
            fputs(helps[i].text, stdout);
            return 0;
        }
    return -1;
}

int help_run(const char *const *words, int nwords, void (*whole)(void))
{
    char name[64];
    if (nwords == 0) {
        whole();
        return EXIT_OK;
    }
    if (nwords > 2)
        return usage_error("help takes a command (and an hf subcommand)");
    snprintf(name, sizeof name, "%s%s%s", words[0], nwords > 1 ? " " : "",
             nwords > 1 ? words[1] : "");
    if (help_print(name) == 0)
        return EXIT_OK;
    return usage_error("no help for '%s': not a command", name);
}
