/* hf_format: hf download's stdout in huggingface_hub's shapes. */
#include "hf_format.h"

#include "json.h"
#include "util.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SIZE_TEXT 32 /* "999.9Z" and then some */

/* --format's values, as hf names them (its OutputFormat). */
static const struct {
    const char *name;
    hf_format_t fmt;
} formats[] = {
    {"auto", HF_FMT_AUTO}, {"human", HF_FMT_HUMAN}, {"agent", HF_FMT_AGENT},
    {"json", HF_FMT_JSON}, {"quiet", HF_FMT_QUIET},
};

int hf_format_pick(const cli_t *c, hf_format_t *fmt)
{
    *fmt = c->json ? HF_FMT_JSON : c->quiet ? HF_FMT_QUIET : HF_FMT_AUTO;
    if (c->format) {
        size_t i = 0;
        while (i < ARRAY_LEN(formats) && !str_eq(c->format, formats[i].name))
            i++;
        if (i == ARRAY_LEN(formats))
            return usage_error("--format is auto, human, agent, json or quiet, not '%s'",
                               c->format);
        /* human or agent with --json or -q: two shapes (hf refuses them too) */
        if ((formats[i].fmt == HF_FMT_HUMAN || formats[i].fmt == HF_FMT_AGENT) &&
            (c->json || c->quiet))
            return usage_error("--format %s and %s ask for two shapes: give one", c->format,
                               c->json ? "--json" : "-q");
        if (formats[i].fmt != HF_FMT_AUTO && formats[i].fmt != HF_FMT_QUIET)
            *fmt = formats[i].fmt;
    }
    if (c->json_files && (c->json || (c->format && !str_eq(c->format, "quiet"))))
        return usage_error("--json-files prints an object per file: not with --json or "
                           "--format (one object with the path)");
    if (c->json_files) /* -q then only quiets stderr */
        *fmt = HF_FMT_AUTO;
    if (c->warm && !c->dry_run &&
        (*fmt == HF_FMT_JSON || *fmt == HF_FMT_HUMAN || *fmt == HF_FMT_AGENT))
        return usage_error("--warm places no files, so there is no path to print: "
                           "--json-files lists what hubd now holds");
    return 0;
}

/* Does the locale write UTF-8 (for hf's check mark; "[OK]" otherwise, as
 * hf falls back when stdout cannot encode it)? */
static int utf8_locale(void)
{
    const char *v = getenv("LC_ALL");
    if (!v || !*v)
        v = getenv("LC_CTYPE");
    if (!v || !*v)
        v = getenv("LANG");
    return v && (strcasestr(v, "utf-8") || strcasestr(v, "utf8"));
}

void hf_format_result(hf_format_t fmt, const char *path)
{
    switch (fmt) {
    case HF_FMT_HUMAN:
        printf("%s Downloaded\n  path: %s\n", utf8_locale() ? "\u2713" : "[OK]", path);
        break;
    case HF_FMT_AGENT:
        printf("path=%s\n", path);
        break;
    case HF_FMT_JSON:
        fputs("{\"path\": ", stdout);
        json_str(stdout, path);
        fputs("}\n", stdout);
        break;
    case HF_FMT_AUTO:
    case HF_FMT_QUIET:
        printf("%s\n", path);
        break;
    }
}

/* ---- dry runs ----------------------------------------------------------- */

void hf_dry_add(hf_dry_t *d, const char *filename, uint64_t size, int cached, int will_download,
                const char *local_path)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 16;
        d->files = xrealloc(d->files, d->cap * sizeof *d->files);
    }
    d->files[d->n++] = (hf_dry_file_t){.filename = xstrdup(filename),
                                       .size = size,
                                       .cached = cached,
                                       .will_download = will_download,
                                       .local_path = xstrdup(local_path)};
}

void hf_dry_free(hf_dry_t *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->files[i].filename);
        free(d->files[i].local_path);
    }
    free(d->files);
    free(d->commit);
    memset(d, 0, sizeof *d);
}

/* huggingface_hub's _format_size: powers of 1000, one decimal ("22.0",
 * "300.0K"), so that a script reads the same text from either. */
static const char *format_size(uint64_t n, char *buf, size_t cap)
{
    static const char *const units[] = {"", "K", "M", "G", "T", "P", "E", "Z"};
    double v = (double)n;
    for (size_t i = 0; i < ARRAY_LEN(units); i++, v /= 1000.0)
        if (v < 1000.0) {
            snprintf(buf, cap, "%.1f%s", v, units[i]);
            return buf;
        }
    snprintf(buf, cap, "%.1fY", v);
    return buf;
}

/* What SIZE says of f: its size when it would be fetched, else "-". */
static const char *size_cell(const hf_dry_file_t *f, char *buf, size_t cap)
{
    return f->will_download ? format_size(f->size, buf, cap) : "-";
}

static int by_name(const void *a, const void *b)
{
    const hf_dry_file_t *const *x = a, *const *y = b;
    return strcmp((*x)->filename, (*y)->filename);
}

/* s on one line, as hf's tables write a cell: runs of white space made one
 * space, none at either end. Written (then padded to pad) when out, else
 * only measured; its width is returned. */
static size_t cell(const char *s, size_t pad, int out)
{
    size_t w = 0;
    int space = 0;
    for (; *s; s++) {
        if (isspace((unsigned char)*s)) {
            space = w > 0;
            continue;
        }
        if (space && out)
            putchar(' ');
        if (out)
            putchar(*s);
        w += 1 + (size_t)space;
        space = 0;
    }
    for (size_t i = w; out && i < pad; i++)
        putchar(' ');
    return w;
}

static size_t put_cell(const char *s, size_t pad)
{
    return cell(s, pad, 1);
}

static size_t cell_width(const char *s)
{
    return cell(s, 0, 0);
}

/* hf's human table (its tabulate): headers, a rule of dashes, the rows,
 * each column padded to its widest cell, one space between. */
static void human_table(const hf_dry_file_t *const *rows, size_t n)
{
    static const char *const head[] = {"FILE", "SIZE", "CACHED"};
    size_t width[3] = {4, 4, 6};
    char buf[SIZE_TEXT];
    for (size_t i = 0; i < n; i++) {
        size_t w = cell_width(rows[i]->filename);
        width[0] = w > width[0] ? w : width[0];
        w = strlen(size_cell(rows[i], buf, sizeof buf));
        width[1] = w > width[1] ? w : width[1];
    }
    for (size_t k = 0; k < 3; k++) {
        put_cell(head[k], k < 2 ? width[k] + 1 : 0);
    }
    putchar('\n');
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < width[k]; i++)
            putchar('-');
        putchar(k < 2 ? ' ' : '\n');
    }
    for (size_t i = 0; i < n; i++) {
        put_cell(rows[i]->filename, width[0] + 1);
        put_cell(size_cell(rows[i], buf, sizeof buf), width[1] + 1);
        puts(rows[i]->cached ? "yes" : "no");
    }
}

/* One huggingface_hub DryRunFileInfo per line (--json-files). */
static void dry_json_files(const hf_dry_t *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const hf_dry_file_t *f = &d->files[i];
        fputs("{\"filename\":", stdout);
        json_str(stdout, f->filename);
        printf(",\"file_size\":%" PRIu64 ",\"is_cached\":%s,\"will_download\":%s", f->size,
               f->cached ? "true" : "false", f->will_download ? "true" : "false");
        fputs(",\"local_path\":", stdout);
        json_str(stdout, f->local_path);
        fputs(",\"commit_hash\":", stdout);
        if (d->commit)
            json_str(stdout, d->commit);
        else
            fputs("null", stdout);
        fputs("}\n", stdout);
    }
}

void hf_dry_print(const hf_dry_t *d, hf_format_t fmt, int json_files)
{
    char buf[SIZE_TEXT];
    if (json_files) {
        dry_json_files(d);
        return;
    }
    const hf_dry_file_t **rows = xcalloc(d->n ? d->n : 1, sizeof *rows);
    uint64_t bytes = 0;
    size_t fetched = 0;
    for (size_t i = 0; i < d->n; i++) {
        rows[i] = &d->files[i];
        if (d->files[i].will_download)
            fetched++, bytes += d->files[i].size;
    }
    qsort(rows, d->n, sizeof *rows, by_name);
    if (fmt != HF_FMT_JSON && fmt != HF_FMT_QUIET)
        printf("[dry-run] Will download %zu files (out of %zu) totalling %s.\n", fetched, d->n,
               format_size(bytes, buf, sizeof buf));
    if (d->n == 0 && fmt != HF_FMT_QUIET) /* hf's empty table */
        puts(fmt == HF_FMT_JSON ? "[]" : "No results found.");
    else if (fmt == HF_FMT_JSON) {
        putchar('[');
        for (size_t i = 0; i < d->n; i++) {
            fputs(i ? ", {\"file\": " : "{\"file\": ", stdout);
            json_str(stdout, rows[i]->filename);
            fputs(", \"size\": ", stdout);
            json_str(stdout, size_cell(rows[i], buf, sizeof buf));
            putchar('}');
        }
        puts("]");
    } else if (fmt == HF_FMT_QUIET) {
        for (size_t i = 0; i < d->n; i++)
            puts(rows[i]->filename);
    } else if (fmt == HF_FMT_AGENT) {
        puts("file\tsize");
        for (size_t i = 0; i < d->n; i++) {
            put_cell(rows[i]->filename, 0);
            printf("\t%s\n", size_cell(rows[i], buf, sizeof buf));
        }
    } else {
        human_table(rows, d->n);
    }
    free(rows);
}
