/* cmd: the session ops (hello, ping, quit), the helpers every handler
 * shares, and the lookup over all command tables (cmd.h). */
#include "cmd.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "log.h"
#include "perm.h"
#include "req.h"
#include "server.h"

const char *cmd_str(const struct req *r, const char *name)
{
    const char *s = request_string(r->root, name, NULL);
    return s != NULL ? s : "";
}

bool cmd_token_ok(const char *want, const char *tok, size_t len)
{
    if (want == NULL || tok == NULL)
        return false;
    /* Constant time in the setting's length: no early exit on a mismatch. */
    size_t wl = strlen(want);
    unsigned diff = (unsigned)(len ^ wl);
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < len ? tok[i] : 0);
    return diff == 0;
}

bool cmd_check_cursor(struct req *r)
{
    const char *cursor = request_string(r->root, "cursor", NULL);
    if (cursor != NULL && (cursor[0] == '\0' || cursor[strspn(cursor, "0123456789")] != '\0')) {
        req_error(r, WIRE_EARG, "argument \"cursor\" must be a cursor from a previous reply");
        return false;
    }
    return true;
}

/* --- hello, ping, quit ------------------------------------------------- */

static const struct arg_spec hello_spec[] = {
    {"protocol", ARG_INT, ARG_REQUIRED, 1, 1},
    {"token", ARG_STRING, 0, 0, 4096},
    {"name", ARG_STRING, 0, 0, 128},
    END,
};

/* A failed hello: counted on the connection (the third closes it) and
 * for its address (backoff.h). */
static void hello_failed(struct req *r, const char *addr, const char *why, uint64_t wait_ms)
{
    struct client *c = r->c;
    if (++c->auth_failures >= 3) {
        log_event(LOG_WARN, "failed hellos: disconnecting",
                  "client=%s op=hello code=EAUTH failures=%d", c->addr, c->auth_failures);
        c->quit = true;
    }
    if (wait_ms > 0) {
        req_error(r, WIRE_EAUTH, "%s: try again in %llu ms", why, (unsigned long long)wait_ms);
        return;
    }
    backoff_failed(&c->srv->backoff, addr, uv_now(c->srv->loop), c->srv->cfg->auth_backoff_ms);
    req_error(r, WIRE_EAUTH, "%s", why);
}

/* Authenticate c by hello's token: the token setting (admin) or a line of
 * the tokens file (its role and patterns). False: r is answered EAUTH. */
static bool hello_auth(struct req *r)
{
    struct client *c = r->c;
    struct server *s = c->srv;
    char buf[64];
    const char *addr = backoff_key(c->addr, c->unix_socket, buf, sizeof(buf));
    /* In an address's backoff window the token is not even looked at: a
     * guess made then says nothing, right or wrong. */
    uint64_t wait = backoff_wait(&s->backoff, addr, uv_now(s->loop));
    if (wait > 0) {
        hello_failed(r, addr, "too many failed hellos from this address", wait);
        return false;
    }
    size_t len = 0;
    const char *tok = request_string(r->root, "token", &len);
    bool admin = cmd_token_ok(s->cfg->token, tok, len);
    const struct token *line = tok != NULL ? tokens_match(s->tokens, tok, len) : NULL;
    if (!admin && line == NULL) {
        hello_failed(r, addr, "bad or missing token", 0);
        return false;
    }
    backoff_passed(&s->backoff, addr);
    client_set_authed(c);
    /* The last hello that succeeds decides: a connection may change its
     * token, and so its rights. */
    c->tok = admin ? NULL : line;
    c->role = admin ? TOKENS_ADMIN : line->role;
    return true;
}

static void cmd_hello(struct req *r)
{
    struct client *c = r->c;
    if (server_auth_required(c->srv) && !hello_auth(r))
        return;
    size_t nlen;
    const char *name = request_string(r->root, "name", &nlen);
    if (name != NULL) { /* at most 128 bytes, by the spec */
        memcpy(c->name, name, nlen);
        c->name[nlen] = '\0';
        c->named = true;
    }
    req_ok(r, json_pack("{s:s, s:s, s:i, s:s}", "server", "emqd", "version", EMQ_VERSION,
                        "protocol", 1, "role", tokens_role_name(perm_role(c))));
}

static void cmd_ping(struct req *r)
{
    req_ok(r, NULL);
}

static void cmd_quit(struct req *r)
{
    r->c->quit = true;
    req_ok(r, NULL);
}

/* --- the tables ------------------------------------------------------- */

static const struct arg_spec none_spec[] = {END};

/* The session ops: allowed before hello. */
const struct cmd cmd_session[] = {
    {"hello", hello_spec, cmd_hello, CMD_NOAUTH | CMD_PRODUCER},
    {"ping", none_spec, cmd_ping, CMD_NOAUTH | CMD_PRODUCER},
    {"quit", none_spec, cmd_quit, CMD_NOAUTH | CMD_PRODUCER},
    {NULL, NULL, NULL, 0},
};

static const struct cmd *const tables[] = {cmd_session, cmd_jobs, cmd_admin, cmd_view,
                                           cmd_throughput};

const struct cmd *cmd_at(size_t i)
{
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
        for (const struct cmd *c = tables[t]; c->name != NULL; c++)
            if (i-- == 0)
                return c;
    return NULL;
}

size_t cmd_index(const struct cmd *cmd)
{
    const struct cmd *k;
    for (size_t i = 0; cmd != NULL && (k = cmd_at(i)) != NULL; i++)
        if (k == cmd)
            return i;
    return SIZE_MAX;
}

enum tokens_role cmd_role(const struct cmd *cmd)
{
    switch (cmd->flags & CMD_ROLES) {
    case CMD_PRODUCER:
        return TOKENS_PRODUCER;
    case CMD_WORKER:
        return TOKENS_WORKER;
    case CMD_ADMIN:
        return TOKENS_ADMIN;
    default:
        return 0;
    }
}

const struct cmd *cmd_lookup(const char *name, size_t len)
{
    const struct cmd *c;
    for (size_t i = 0; (c = cmd_at(i)) != NULL; i++)
        if (strlen(c->name) == len && memcmp(c->name, name, len) == 0)
            return c;
    return NULL;
}
