/* cmd: the session ops (hello, ping, quit), the helpers every handler
 * shares, and the lookup over all command tables (cmd.h). */
#include "cmd.h"

#include <stdio.h>
#include <string.h>

#include "client.h"
#include "log.h"
#include "req.h"
#include "server.h"

const char *cmd_str(const struct req *r, const char *name)
{
    const char *s = request_string(r->root, name, NULL);
    return s != NULL ? s : "";
}

bool cmd_token_ok(const char *want, const char *tok, size_t len)
{
    /* Constant time in the token's length: no early exit on a mismatch. */
    size_t wl = strlen(want);
    unsigned diff = (unsigned)(len ^ wl);
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < len && tok ? tok[i] : 0);
    return tok != NULL && diff == 0;
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

static void cmd_hello(struct req *r)
{
    struct client *c = r->c;
    const char *want = c->srv->cfg->token;
    if (want != NULL) {
        size_t len = 0;
        const char *tok = request_string(r->root, "token", &len);
        if (!cmd_token_ok(want, tok, len)) {
            if (++c->auth_failures >= 3) {
                log_event(LOG_WARN, "failed hellos: disconnecting",
                          "client=%s op=hello code=EAUTH failures=%d", c->addr, c->auth_failures);
                c->quit = true;
            }
            req_error(r, WIRE_EAUTH, "bad or missing token");
            return;
        }
        client_set_authed(c);
    }
    size_t nlen;
    const char *name = request_string(r->root, "name", &nlen);
    if (name != NULL) { /* at most 128 bytes, by the spec */
        memcpy(c->name, name, nlen);
        c->name[nlen] = '\0';
        c->named = true;
    }
    req_ok(r,
           json_pack("{s:s, s:s, s:i}", "server", "emqd", "version", EMQ_VERSION, "protocol", 1));
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
    {"hello", hello_spec, cmd_hello, CMD_NOAUTH},
    {"ping", none_spec, cmd_ping, CMD_NOAUTH},
    {"quit", none_spec, cmd_quit, CMD_NOAUTH},
    {NULL, NULL, NULL, 0},
};

static const struct cmd *const tables[] = {cmd_session, cmd_jobs, cmd_admin, cmd_view, cmd_rates};

const struct cmd *cmd_at(size_t i)
{
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
        for (const struct cmd *c = tables[t]; c->name != NULL; c++)
            if (i-- == 0)
                return c;
    return NULL;
}

const struct cmd *cmd_lookup(const char *name, size_t len)
{
    const struct cmd *c;
    for (size_t i = 0; (c = cmd_at(i)) != NULL; i++)
        if (strlen(c->name) == len && memcmp(c->name, name, len) == 0)
            return c;
    return NULL;
}
