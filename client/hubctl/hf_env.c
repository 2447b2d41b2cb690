/* hf_env: what the Hub's clients read from the user's environment, read as
 * huggingface_hub reads it (hf_env.h). */
#include "hf_env.h"

#include "util.h"

#include <ctype.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPO_ID_MAX 96      /* huggingface_hub's validate_repo_id */
#define TOKEN_FILE_MAX 4096 /* a token file longer than this is not a token */

/* One part of a repo id: [A-Za-z0-9_.-]+, not starting or ending with '-'
 * or '.'. */
static int repo_part_ok(const char *s, size_t n)
{
    if (n == 0 || strchr("-.", s[0]) || strchr("-.", s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
            return 0;
    return 1;
}

int hf_repo_id_ok(const char *repo)
{
    size_t n = strlen(repo);
    const char *slash = strchr(repo, '/');
    if (n == 0 || n > REPO_ID_MAX || strstr(repo, "--") || strstr(repo, ".."))
        return 0;
    if (n > 4 && strcmp(repo + n - 4, ".git") == 0)
        return 0;
    if (!slash)
        return repo_part_ok(repo, n);
    return !strchr(slash + 1, '/') && repo_part_ok(repo, (size_t)(slash - repo)) &&
           repo_part_ok(slash + 1, n - (size_t)(slash - repo) - 1);
}

/* $HOME, else the password database's home: what expanduser reads. */
static const char *home_dir(void)
{
    const char *h = getenv("HOME");
    if (h && *h)
        return h;
    struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir ? pw->pw_dir : "/";
}

/* "~/x" as huggingface_hub's os.path.expanduser reads it. Malloc'd. */
static char *expand_home(const char *p)
{
    if (p[0] != '~' || (p[1] && p[1] != '/'))
        return xstrdup(p);
    const char *h = home_dir();
    char *out = xrealloc(NULL, strlen(h) + strlen(p));
    sprintf(out, "%s%s", h, p + 1);
    return out;
}

/* $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface,
 * then tail appended ("/hub", "/token"). Malloc'd. */
static char *hf_home_join(const char *tail)
{
    char buf[PATH_MAX];
    const char *home = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME");
    if (home && *home)
        snprintf(buf, sizeof buf, "%s%s", home, tail);
    else if (xdg && *xdg)
        snprintf(buf, sizeof buf, "%s/huggingface%s", xdg, tail);
    else
        snprintf(buf, sizeof buf, "~/.cache/huggingface%s", tail);
    return expand_home(buf);
}

/* The token in s, stripped of surrounding white space; NULL when empty.
 * Malloc'd. */
static char *strip_token(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0)
        return NULL;
    char *t = xrealloc(NULL, n + 1);
    memcpy(t, s, n);
    t[n] = '\0';
    return t;
}

/* A token file's content, or NULL when it is missing, unreadable or empty
 * (the Hub's clients then go on without one). */
static char *read_token_file(const char *path)
{
    char buf[TOKEN_FILE_MAX + 1];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, TOKEN_FILE_MAX, f);
    fclose(f);
    buf[n] = '\0';
    return strip_token(buf);
}

char *hf_find_token(const char *given)
{
    const char *env = getenv("HF_TOKEN"), *path = getenv("HF_TOKEN_PATH");
    if (given)
        return strip_token(given);
    if (env && *env)
        return strip_token(env);
    char *file = path && *path ? expand_home(path) : hf_home_join("/token");
    char *tok = read_token_file(file);
    free(file);
    return tok;
}

char *hf_absolute(const char *dir)
{
    char cwd[PATH_MAX];
    if (dir[0] == '/' || !getcwd(cwd, sizeof cwd))
        return xstrdup(dir);
    char *out = xrealloc(NULL, strlen(cwd) + strlen(dir) + 2);
    sprintf(out, "%s/%s", cwd, strcmp(dir, ".") == 0 ? "" : dir);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    return out;
}

char *hf_find_cache_dir(const char *given)
{
    const char *env = getenv("HF_HUB_CACHE");
    char *dir = given ? expand_home(given) : env && *env ? expand_home(env) : hf_home_join("/hub");
    char *abs = hf_absolute(dir);
    free(dir);
    return abs;
}
