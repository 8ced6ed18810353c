/* perm: what a connection's token allows (perm.h). */
#include "perm.h"

#include <stdarg.h>
#include <stdio.h>

#include "client.h"
#include "cmd.h"
#include "log.h"
#include "req.h"

enum tokens_role perm_role(const struct client *c)
{
    return c->authed || server_auth_required(c->srv) ? c->role : TOKENS_ADMIN;
}

/* One refusal: counted, logged (at most one line a second, with the count
 * of those not logged since, so a client cannot flood the log), answered
 * with why (which names only what the client sent and its own token). */
__attribute__((format(printf, 2, 3))) static void deny(struct req *r, const char *fmt, ...)
{
    struct client *c = r->c;
    struct server *s = c->srv;
    char why[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    size_t op = cmd_index(r->cmd);
    unsigned role = (unsigned)perm_role(c) <= TOKENS_ADMIN ? (unsigned)perm_role(c) : 0;
    if (op < SERVER_OPS_MAX)
        s->denied.n[role][op]++;
    uint64_t now = uv_now(s->loop);
    if (s->denied.logged_at == 0 || now - s->denied.logged_at >= 1000) {
        char q[400];
        log_event(LOG_WARN, "request refused: outside its token's rights",
                  "client=%s token=%s role=%s op=%s unlogged=%llu why=%s", c->addr,
                  c->tok != NULL ? c->tok->name : "-", tokens_role_name(perm_role(c)), r->cmd->name,
                  (unsigned long long)s->denied.unlogged, log_quote(why, q, sizeof(q)));
        s->denied.logged_at = now;
        s->denied.unlogged = 0;
    } else {
        s->denied.unlogged++;
    }
    req_error(r, WIRE_EPERM, "%s", why);
}

bool perm_op(struct req *r)
{
    const struct cmd *cmd = r->cmd;
    const struct client *c = r->c;
    if (cmd->flags & CMD_NOAUTH)
        return true;
    enum tokens_role role = perm_role(c);
    if (c->tok == NULL && role < cmd_role(cmd)) {
        /* Only a connection whose line a reload removed has no rights. */
        deny(r, "this connection's token was revoked: \"%s\" refused", cmd->name);
        return false;
    }
    if (role < cmd_role(cmd)) {
        deny(r, "the %s token \"%s\" may not use \"%s\" (%s's)", tokens_role_name(role),
             c->tok->name, cmd->name, tokens_role_name(cmd_role(cmd)));
        return false;
    }
    /* An op that names no queue reaches every queue (or none): a token held
     * to patterns may not use it. */
    if (!(cmd->flags & CMD_QUEUE) && c->tok != NULL && c->tok->npatterns > 0) {
        deny(r, "the token \"%s\" is held to queue patterns: \"%s\" needs one that is not",
             c->tok->name, cmd->name);
        return false;
    }
    return true;
}

bool perm_queue(struct req *r)
{
    const struct client *c = r->c;
    if (!(r->cmd->flags & CMD_QUEUE) || c->tok == NULL)
        return true;
    size_t len = 0;
    const char *q = request_string(r->root, "queue", &len);
    if (q != NULL && tokens_queue_allowed(c->tok, q, len))
        return true;
    /* The name is a checked queue name (request_check ran): it can be
     * quoted as it is. */
    deny(r, "the token \"%s\" may not use queue \"%.*s\"", c->tok->name, (int)len, q ? q : "");
    return false;
}

void perm_set_tokens(struct server *s, struct tokens *t)
{
    size_t kept = 0, closed = 0;
    struct client *next;
    for (struct client *c = s->clients; c != NULL; c = next) {
        next = c->next;
        if (c->tok == NULL)
            continue;
        const struct token *now = tokens_find(t, c->tok->name, c->tok->hash);
        if (now != NULL) {
            c->tok = now;
            c->role = now->role;
            kept++;
            continue;
        }
        log_event(LOG_INFO, "token gone from the tokens file: closing its connection",
                  "client=%s token=%s", c->addr, c->tok->name);
        /* No rights from here on (lines already read are refused EPERM),
         * and nothing dangles into the old table. */
        c->tok = NULL;
        c->role = 0;
        client_shutdown(c);
        closed++;
    }
    tokens_free(s->tokens);
    s->tokens = t;
    log_event(LOG_INFO, "tokens reloaded", "tokens=%zu connections_kept=%zu connections_closed=%zu",
              t != NULL ? t->n : 0, kept, closed);
}
