/* hf_repo: HFREPO's pure parts (hf_repo.h). */
#include "hf_repo.h"
#include "proto.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int id_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.';
}

/* One part of a repo id: n bytes of s. */
static int part_ok(const char *s, size_t n)
{
    if (n == 0 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!id_char(s[i]))
            return 0;
        if (i && (s[i] == '-' || s[i] == '.') && s[i - 1] == s[i])
            return 0; /* "--" or ".." */
    }
    return 1;
}

int hf_repo_id_ok(const char *repo)
{
    size_t n = strlen(repo);
    if (n == 0 || n > HF_REPO_ID_MAX)
        return 0;
    const char *slash = strchr(repo, '/');
    if (!slash)
        return part_ok(repo, n);
    return part_ok(repo, (size_t)(slash - repo)) && part_ok(slash + 1, strlen(slash + 1));
}

const char *hf_repo_prefix(const char *type)
{
    if (strcmp(type, "model") == 0)
        return "";
    if (strcmp(type, "dataset") == 0)
        return "datasets/";
    if (strcmp(type, "space") == 0)
        return "spaces/";
    return NULL;
}

char *hf_repo_api_url(const char *upstream, const char *type, const char *repo, const char *rev)
{
    size_t n = strlen(rev);
    char *enc = malloc(3 * n + 1);
    if (!enc)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)rev[i];
        if (id_char((char)ch) || ch == '~')
            enc[k++] = (char)ch;
        else
            k += (size_t)sprintf(enc + k, "%%%02X", ch);
    }
    enc[k] = '\0';
    char *out = NULL;
    if (asprintf(&out, "%s/api/%ss/%s/revision/%s?blobs=true", upstream, type, repo, enc) < 0)
        out = NULL;
    free(enc);
    return out;
}

static int hex_ok(const char *s, size_t len)
{
    if (!s || strlen(s) != len)
        return 0;
    return strspn(s, "0123456789abcdef") == len;
}

/* One sibling's line into f: 0, or -EINVAL with *why, -ENOMEM. */
static int sibling_line(json_t *sib, FILE *f, uint64_t *size, const char **why)
{
    const char *path = json_string_value(json_object_get(sib, "rfilename"));
    const char *blob = json_string_value(json_object_get(sib, "blobId"));
    json_t *jsize = json_object_get(sib, "size");
    json_t *lfs = json_object_get(sib, "lfs");
    const char *sha =
        json_is_object(lfs) ? json_string_value(json_object_get(lfs, "sha256")) : NULL;
    if (!jsize && json_is_object(lfs))
        jsize = json_object_get(lfs, "size");
    if (!path || !*path || !hex_ok(blob, 40) || !json_is_integer(jsize) ||
        json_integer_value(jsize) < 0 || (sha && !hex_ok(sha, 64))) {
        *why = "a file of the Hub's answer has no rfilename, blobId or size";
        return -EINVAL;
    }
    *size = (uint64_t)json_integer_value(jsize);
    char buf[PROTO_MAX_LINE];
    proto_writer_t w;
    proto_begin(&w, buf, sizeof buf, "");
    proto_add(&w, "path", path);
    proto_add_u64(&w, "size", *size);
    proto_add(&w, "blob", blob);
    if (sha)
        proto_add(&w, "sha256", sha);
    int len = proto_end(&w);
    if (len < 2) {
        *why = "a file's path is too long for a protocol line";
        return -EINVAL;
    }
    /* proto_begin's verb is empty: the line starts with the first field's space. */
    return fwrite(buf + 1, 1, (size_t)len - 1, f) == (size_t)len - 1 ? 0 : -ENOMEM;
}

int hf_repo_listing(const char *json, size_t n, hf_listing_t *out)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_loadb(json, n, 0, &jerr);
    if (!root) {
        out->error = "the Hub's answer is not JSON";
        return -EINVAL;
    }
    const char *sha = json_string_value(json_object_get(root, "sha"));
    json_t *sibs = json_object_get(root, "siblings");
    if (!hex_ok(sha, 40) || !json_is_array(sibs)) {
        json_decref(root);
        out->error = "the Hub's answer has no sha (40 hex digits) or no siblings";
        return -EINVAL;
    }
    memcpy(out->commit, sha, 41);
    const char *id = json_string_value(json_object_get(root, "id"));
    if (id && hf_repo_id_ok(id))
        snprintf(out->id, sizeof out->id, "%s", id);
    FILE *f = open_memstream(&out->lines, &out->lines_len);
    if (!f) {
        json_decref(root);
        return -ENOMEM;
    }
    int rc = 0;
    size_t i;
    json_t *sib;
    json_array_foreach(sibs, i, sib)
    {
        uint64_t size = 0;
        if ((rc = sibling_line(sib, f, &size, &out->error)))
            break;
        out->files++;
        out->size += size;
    }
    json_decref(root);
    if (fclose(f) && !rc)
        rc = -ENOMEM;
    if (rc) {
        free(out->lines);
        out->lines = NULL;
        out->lines_len = 0;
    }
    return rc;
}

void hf_listing_free(hf_listing_t *l)
{
    free(l->lines);
    l->lines = NULL;
    l->lines_len = 0;
}
