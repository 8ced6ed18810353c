/* tokens: the tokens file (the tokens-file setting). Each line names one
 * client credential: "NAME ROLE HASH [PATTERN...]", HASH being the hex
 * SHA-256 of the token the client presents in hello. The daemon keeps
 * hashes only, so the file discloses no token. Util knows no wire: the
 * server maps a role to the ops it allows (daemon/server/cmd.h). */
#ifndef EMQ_TOKENS_H
#define EMQ_TOKENS_H

#include <stdbool.h>
#include <stddef.h>

#define TOKENS_NAME_MAX     64    /* bytes of a name */
#define TOKENS_PATTERN_MAX  64    /* bytes of one queue-name pattern, as a queue name */
#define TOKENS_PATTERNS_MAX 32    /* patterns on one line */
#define TOKENS_MAX          10000 /* lines naming a token, in one file */
#define TOKENS_HASH_LEN     32    /* SHA-256 */

/* What a token may do, least first: each role may do what the ones before
 * it may. 0 is no role (a command-table row that forgot to say). */
enum tokens_role {
    TOKENS_PRODUCER = 1, /* enqueue, and read the depth and stats of its queues */
    TOKENS_WORKER,       /* a producer's ops, and consume: claim, stream, settle */
    TOKENS_ADMIN,        /* every op */
};

/* One line of the file. */
struct token {
    char name[TOKENS_NAME_MAX + 1];
    enum tokens_role role;
    unsigned char hash[TOKENS_HASH_LEN];
    char **patterns; /* the queues it may name; npatterns 0: every queue */
    size_t npatterns;
};

/* A whole file, as loaded: replaced whole at a reload, never edited. */
struct tokens {
    struct token *v;
    size_t n;
};

/* Read path into a new table at *out. On an error nothing is kept and
 * err says "PATH:LINE: why" (-EINVAL) or "PATH: why" when the file cannot
 * be read (-errno). Duplicate names or hashes are errors: a connection is
 * known by its token's name. */
int tokens_load(const char *path, struct tokens **out, char *err, size_t errlen);

/* Free t (NULL is fine); returns NULL. */
struct tokens *tokens_free(struct tokens *t);

/* The entry whose hash is SHA-256(token), or NULL. Every entry is compared,
 * each in constant time, so the time taken says nothing about which entry
 * matched or how much of a hash did. */
const struct token *tokens_match(const struct tokens *t, const char *token, size_t len);

/* The entry called name with the given hash, or NULL (a reload keeps a
 * connection's rights only if its token is still there, unchanged). */
const struct token *tokens_find(const struct tokens *t, const char *name,
                                const unsigned char hash[TOKENS_HASH_LEN]);

/* True if tk may name queue (len bytes): it has no patterns, or one of them
 * matches the whole name. */
bool tokens_queue_allowed(const struct token *tk, const char *queue, size_t len);

/* True if the glob pattern matches all of s (len bytes): '*' matches any
 * run of bytes, the empty one included; every other byte matches itself. */
bool tokens_glob(const char *pattern, const char *s, size_t len);

/* "producer", "worker", "admin" ("none" for 0). */
const char *tokens_role_name(enum tokens_role r);

/* The role called s, or 0. */
enum tokens_role tokens_role_parse(const char *s);

/* Why line (one line of the file, no newline) would be refused on its
 * own, or NULL: what emqctl token new checks before printing a line. */
const char *tokens_check_line(const char *line);

/* SHA-256 of data as 64 lower-case hex digits and a NUL, into out. */
void tokens_hash_hex(const char *data, size_t len, char out[2 * TOKENS_HASH_LEN + 1]);

#endif
