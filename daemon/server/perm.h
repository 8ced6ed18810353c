/* perm: what a connection's token allows (PROTOCOL.md 7). A token from the
 * tokens file has a role (tokens.h) and maybe queue patterns; the token
 * setting, and no authentication at all, mean admin on every queue. Each
 * op's row declares the least role that may run it (cmd.h). A request
 * outside its connection's rights is answered EPERM before it reaches the
 * backend or names a queue to the engine, counted by role and op, and
 * logged with the token's name at most once a second. */
#ifndef EMQ_PERM_H
#define EMQ_PERM_H

#include <stdbool.h>
#include <stdint.h>

#include "server.h"

struct client;
struct req;

/* The role c acts with: its own once it has said hello; admin while it
 * has not and the daemon needs no hello (a reload dropped every token),
 * as such a connection could do everything before. */
enum tokens_role perm_role(const struct client *c);

/* May r's connection run r's op at all? False: r is answered EPERM.
 * Session ops (CMD_NOAUTH) are every role's. */
bool perm_op(struct req *r);

/* May r's connection name r's queue (its arguments checked)? False: r is
 * answered EPERM. */
bool perm_queue(struct req *r);

/* Tokens: the server's table becomes t (owned; NULL: no tokens file). Each
 * connection authenticated by a token of the old table is checked again,
 * by name and hash: still there, it has the new line's role and patterns
 * from its next request; gone or changed, it is shut down (replies owed
 * are written, its leases released). The old table is freed. */
void perm_set_tokens(struct server *s, struct tokens *t);

#endif
