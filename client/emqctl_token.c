/* emqctl_token.c: `emqctl token new NAME ROLE [PATTERN...]`, a fresh
 * random token and the tokens-file line that admits it (README: roles).
 * It talks to no server: the token goes to the client that will use it,
 * the line into emqd's tokens-file, and a SIGHUP makes it count. The line
 * is checked by the daemon's own parser (daemon/util/tokens.c), so what
 * this prints is what emqd accepts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "emqctl.h"
#include "tokens.h"

#define TOKEN_BYTES 32 /* 256 random bits */

/* n random bytes from the kernel (getrandom: /dev/urandom's pool, blocking
 * only before it is first seeded). 0 or -errno. */
static int random_bytes(unsigned char *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno != EINTR)
            return -errno;
        if (r > 0)
            got += (size_t)r;
    }
    return 0;
}

static int cmd_token(struct ctl *ctl)
{
    if (strcmp(ctl->pos[0], "new") != 0)
        return ctl_usage_error(ctl, "unknown subcommand \"%s\" (only: new)", ctl->pos[0]);
    /* The line is split at blanks: an argument holding one would shift the
     * fields and be refused for the wrong reason. */
    for (int i = 1; i < ctl->npos; i++)
        if (strpbrk(ctl->pos[i], " \t\r\n") != NULL)
            return ctl_usage_error(ctl, "\"%s\": a name, role or pattern has no blanks",
                                   ctl->pos[i]);
    unsigned char raw[TOKEN_BYTES];
    if (random_bytes(raw, sizeof(raw)) != 0) {
        ctl_error("ERANDOM", "cannot read random bytes: %s", strerror(errno));
        return CTL_EXIT_FAIL;
    }
    /* "emq_" and hex: no character a shell, a config file or hello's JSON
     * would treat specially, and recognisable where it should not be. */
    char token[4 + 2 * TOKEN_BYTES + 1] = "emq_";
    for (size_t i = 0; i < TOKEN_BYTES; i++)
        snprintf(token + 4 + 2 * i, 3, "%02x", raw[i]);
    char hash[2 * TOKENS_HASH_LEN + 1], line[4096];
    tokens_hash_hex(token, strlen(token), hash);
    int n = snprintf(line, sizeof(line), "%s %s %s", ctl->pos[1], ctl->pos[2], hash);
    for (int i = 3; i < ctl->npos && n > 0 && (size_t)n < sizeof(line); i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s", ctl->pos[i]);
    const char *why = (size_t)n >= sizeof(line) ? "line too long" : tokens_check_line(line);
    if (why != NULL)
        return ctl_usage_error(ctl, "%s", why);
    if (ctl->json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "name", ctl->pos[1], "role", ctl->pos[2],
                              "token", token, "line", line);
        char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (text == NULL)
            return CTL_EXIT_FAIL;
        puts(text);
        free(text);
    } else {
        printf("%s\n%s\n", token, line);
    }
    if (!ctl->json)
        fputs("# first line: the token, for the client (hello's \"token\"); second: append it to\n"
              "# emqd's tokens-file, then SIGHUP emqd. The token is not stored anywhere.\n",
              stderr);
    return CTL_EXIT_OK;
}

const struct ctl_cmd ctl_token_cmd = {
    "token",
    "new NAME ROLE [PATTERN...]",
    "make a token for emqd's tokens-file: prints the token, then its line",
    "ROLE is producer, worker or admin; each PATTERN limits the token to the\n"
    "queues whose whole name it matches ('*' matches any run of characters).\n"
    "Prints two lines on stdout: the token (256 random bits) and the line for\n"
    "emqd's tokens-file, which holds only the token's SHA-256. Under --json, one\n"
    "object with name, role, token and line. Needs no server.\n",
    3,
    CTL_MAX_POS,
    0,
    false,
    cmd_token,
};
