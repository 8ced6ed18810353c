/* tokens: the tokens file, its hashes, and queue-name patterns (tokens.h). */
#include "tokens.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "map.h"

static const char *const role_names[] = {"none", "producer", "worker", "admin"};

const char *tokens_role_name(enum tokens_role r)
{
    return (unsigned)r <= TOKENS_ADMIN ? role_names[r] : "none";
}

enum tokens_role tokens_role_parse(const char *s)
{
    for (int r = TOKENS_PRODUCER; r <= TOKENS_ADMIN; r++)
        if (strcmp(s, role_names[r]) == 0)
            return (enum tokens_role)r;
    return 0;
}

static void sha256(const char *data, size_t len, unsigned char out[TOKENS_HASH_LEN])
{
    unsigned int n = TOKENS_HASH_LEN;
    /* One-shot EVP digest: it fails only out of memory, and then the
     * all-zero hash below matches no line (a line's hash is 64 hex digits
     * of a real digest; all-zero is refused at load). */
    if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1)
        memset(out, 0, TOKENS_HASH_LEN);
}

void tokens_hash_hex(const char *data, size_t len, char out[2 * TOKENS_HASH_LEN + 1])
{
    unsigned char h[TOKENS_HASH_LEN];
    sha256(data, len, h);
    for (size_t i = 0; i < TOKENS_HASH_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* Constant time: every byte is compared whatever the first difference. */
static bool same_hash(const unsigned char *a, const unsigned char *b)
{
    unsigned diff = 0;
    for (size_t i = 0; i < TOKENS_HASH_LEN; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

const struct token *tokens_match(const struct tokens *t, const char *token, size_t len)
{
    unsigned char h[TOKENS_HASH_LEN];
    const struct token *found = NULL;
    if (t == NULL)
        return NULL;
    sha256(token, len, h);
    /* No early exit: which line matched must not show in the time taken. */
    for (size_t i = 0; i < t->n; i++)
        if (same_hash(t->v[i].hash, h))
            found = &t->v[i];
    return found;
}

const struct token *tokens_find(const struct tokens *t, const char *name,
                                const unsigned char hash[TOKENS_HASH_LEN])
{
    for (size_t i = 0; t != NULL && i < t->n; i++)
        if (strcmp(t->v[i].name, name) == 0)
            return same_hash(t->v[i].hash, hash) ? &t->v[i] : NULL;
    return NULL;
}

bool tokens_glob(const char *p, const char *s, size_t len)
{
    /* Greedy with one backtrack point, the last '*': on a mismatch the
     * star takes one more byte. Linear in practice, O(len * |p|) at worst. */
    const char *star = NULL;
    size_t i = 0, mark = 0;
    while (i < len) {
        if (*p == '*') {
            star = p++;
            mark = i;
        } else if (*p != '\0' && *p == s[i]) {
            p++;
            i++;
        } else if (star != NULL) {
            p = star + 1;
            i = ++mark;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

bool tokens_queue_allowed(const struct token *tk, const char *queue, size_t len)
{
    if (tk->npatterns == 0)
        return true;
    for (size_t i = 0; i < tk->npatterns; i++)
        if (tokens_glob(tk->patterns[i], queue, len))
            return true;
    return false;
}

/* --- the file ---------------------------------------------------------- */

static void token_deinit(struct token *tk)
{
    for (size_t i = 0; i < tk->npatterns; i++)
        free(tk->patterns[i]);
    free(tk->patterns);
}

struct tokens *tokens_free(struct tokens *t)
{
    if (t == NULL)
        return NULL;
    for (size_t i = 0; i < t->n; i++)
        token_deinit(&t->v[i]);
    free(t->v);
    free(t);
    return NULL;
}

/* A name, or a pattern when star is true: bytes of a queue name
 * (A-Z a-z 0-9 _ . -), and '*' in a pattern. */
static bool word_valid(const char *s, size_t max, bool star)
{
    size_t n = strlen(s);
    if (n < 1 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-' &&
            !(star && s[i] == '*'))
            return false;
    return true;
}

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = (char)tolower((unsigned char)ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

static bool parse_hash(const char *s, unsigned char out[TOKENS_HASH_LEN])
{
    unsigned any = 0;
    if (strlen(s) != 2 * TOKENS_HASH_LEN)
        return false;
    for (size_t i = 0; i < TOKENS_HASH_LEN; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
        any |= out[i];
    }
    return any != 0;
}

/* One line's fields into tk (zeroed by the caller). NULL, or why not. */
static const char *parse_line(char *line, struct token *tk)
{
    char *save = NULL, *f[3 + TOKENS_PATTERNS_MAX + 1];
    size_t n = 0;
    for (char *w = strtok_r(line, " \t", &save); w != NULL; w = strtok_r(NULL, " \t", &save)) {
        if (n == sizeof(f) / sizeof(f[0]) - 1)
            return "too many queue patterns (at most 32)";
        f[n++] = w;
    }
    if (n < 3)
        return "expected 'NAME ROLE SHA256-HEX [QUEUE-PATTERN...]'";
    if (!word_valid(f[0], TOKENS_NAME_MAX, false))
        return "the name must be 1-64 bytes of A-Z a-z 0-9 _ . -";
    snprintf(tk->name, sizeof(tk->name), "%s", f[0]);
    if ((tk->role = tokens_role_parse(f[1])) == 0)
        return "the role must be producer, worker or admin";
    if (!parse_hash(f[2], tk->hash))
        return "the hash must be 64 hex digits (SHA-256 of the token: emqctl token new)";
    if (n > 3 && (tk->patterns = calloc(n - 3, sizeof(*tk->patterns))) == NULL)
        return "out of memory";
    for (size_t i = 3; i < n; i++) {
        if (!word_valid(f[i], TOKENS_PATTERN_MAX, true))
            return "a queue pattern must be 1-64 bytes of A-Z a-z 0-9 _ . - and *";
        if ((tk->patterns[tk->npatterns] = strdup(f[i])) == NULL)
            return "out of memory";
        tk->npatterns++;
    }
    return NULL;
}

const char *tokens_check_line(const char *line)
{
    char buf[4096];
    struct token tk = {0};
    if (strlen(line) >= sizeof(buf))
        return "line too long";
    strcpy(buf, line);
    const char *why = parse_line(buf, &tk);
    token_deinit(&tk);
    return why;
}

/* The names and hashes of the lines read so far: a reload reads the file
 * on the loop, so a file of TOKENS_MAX lines must not cost n^2 compares
 * (10,000 lines took 1.8 s that way). */
struct seen {
    struct map names, hashes; /* values unused (non-NULL) */
};

/* Why tk cannot join the lines seen (a name or a hash already there), or
 * NULL; then it is seen. */
static const char *clash(struct seen *sn, const struct token *tk)
{
    static char mark;
    if (map_get(&sn->names, tk->name, strlen(tk->name)) != NULL)
        return "the name is on an earlier line";
    if (map_get(&sn->hashes, (const char *)tk->hash, TOKENS_HASH_LEN) != NULL)
        return "the hash is on an earlier line (one token, one name)";
    if (map_put(&sn->names, tk->name, strlen(tk->name), &mark) != 0 ||
        map_put(&sn->hashes, (const char *)tk->hash, TOKENS_HASH_LEN, &mark) != 0)
        return "out of memory";
    return NULL;
}

static int read_lines(FILE *f, struct tokens *t, struct seen *sn, const char *path, char *err,
                      size_t errlen)
{
    char line[4096];
    int lineno = 0;
    size_t cap = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        const char *why = NULL;
        char *nl = strchr(line, '\n');
        if (nl == NULL && !feof(f))
            why = "line too long";
        else if (nl != NULL)
            *nl = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        size_t len = strlen(s);
        while (len > 0 && isspace((unsigned char)s[len - 1]))
            s[--len] = '\0';
        if (why == NULL && (s[0] == '\0' || s[0] == '#'))
            continue;
        if (why == NULL && t->n == TOKENS_MAX)
            why = "too many tokens (at most 10000)";
        struct token tk = {0};
        if (why == NULL && (why = parse_line(s, &tk)) == NULL && (why = clash(sn, &tk)) == NULL) {
            struct token *v = t->n < cap ? t->v : realloc(t->v, (cap = 2 * cap + 16) * sizeof(*v));
            if (v == NULL) {
                why = "out of memory";
            } else {
                t->v = v;
                t->v[t->n++] = tk;
                continue;
            }
        }
        token_deinit(&tk);
        snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
        return -EINVAL;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        return -EIO;
    }
    return 0;
}

int tokens_load(const char *path, struct tokens **out, char *err, size_t errlen)
{
    struct tokens *t = calloc(1, sizeof(*t));
    FILE *f = fopen(path, "r");
    int rc;
    if (t == NULL || f == NULL) {
        rc = t == NULL ? -ENOMEM : -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        if (f != NULL)
            fclose(f);
        free(t);
        return rc;
    }
    struct seen sn;
    map_init(&sn.names);
    map_init(&sn.hashes);
    rc = read_lines(f, t, &sn, path, err, errlen);
    map_deinit(&sn.names);
    map_deinit(&sn.hashes);
    fclose(f);
    if (rc != 0) {
        tokens_free(t);
        return rc;
    }
    *out = t;
    return 0;
}
