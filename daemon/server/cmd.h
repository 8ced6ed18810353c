/* cmd: the command tables. The tables live with their handlers (cmd.c:
 * the session; cmd_jobs.c: producing and consuming work; cmd_admin.c: the
 * per-tenant levers and reads; cmd_view.c: the daemon-wide views;
 * cmd_throughput.c: what the daemon itself saw);
 * cmd_lookup searches them all. Each row
 * names an op, its argument spec (checked before the handler runs, so
 * handlers see only valid arguments) and its handler, which finishes the
 * request exactly once (req.h). */
#ifndef EMQ_CMD_H
#define EMQ_CMD_H

#include <stdbool.h>
#include <stddef.h>

#include "request.h"
#include "tokens.h"

struct req;
struct server;

struct cmd {
    const char *name;
    const struct arg_spec *spec;
    void (*run)(struct req *r);
    unsigned flags;
    /* The op's own checks beyond its spec (NULL: none), run before the
     * request touches its queue: true lets it run; false means it has
     * answered the request with the error. Nothing a check refuses
     * reaches the backend or registers a queue (PROTOCOL.md 2.1). */
    bool (*check)(struct req *r);
};
enum {
    CMD_NOAUTH = 1u << 0, /* allowed before hello when a token is set */
    CMD_QUEUE = 1u << 1,  /* has a required "queue" argument */
    CMD_WORK = 1u << 2,   /* hands out work: refused once the daemon is stopping */
    /* runs in several backend calls: the connection's later lines wait
     * for its reply, so that they take effect after all of it */
    CMD_BARRIER = 1u << 3,
    /* reads the queue only: it does not put an unknown queue in use */
    CMD_READ = 1u << 4,
    /* The least role that may run the op (PROTOCOL.md 7, tokens.h): every
     * row has exactly one of these (test_cmd), so an op declares who may
     * use it where it is declared, and a row that forgets fails the unit
     * test rather than being open to all. An op without CMD_QUEUE that is
     * not a session op (CMD_NOAUTH) must be CMD_ADMIN: a token limited to
     * queue patterns could not be held to them. */
    CMD_PRODUCER = 1u << 5,
    CMD_WORKER = 1u << 6,
    CMD_ADMIN = 1u << 7,
    CMD_ROLES = CMD_PRODUCER | CMD_WORKER | CMD_ADMIN,
};

/* The role cmd's row declares (TOKENS_PRODUCER...), or 0 when it declares
 * none or more than one. */
enum tokens_role cmd_role(const struct cmd *cmd);

/* The command named name (len bytes), or NULL. */
const struct cmd *cmd_lookup(const char *name, size_t len);
/* The i-th command over all tables, or NULL past the last. */
const struct cmd *cmd_at(size_t i);
/* cmd's index in cmd_at's order, SIZE_MAX for NULL (or no row). */
size_t cmd_index(const struct cmd *cmd);

#define DAY_MS (24LL * 3600 * 1000)

#define Q                                                                                          \
    {                                                                                              \
        "queue", ARG_STRING, ARG_REQUIRED | ARG_QUEUE, 0, 0                                        \
    }
#define JOB                                                                                        \
    {                                                                                              \
        "job", ARG_STRING, ARG_REQUIRED | ARG_JOB, 0, 0                                            \
    }
#define GROUP                                                                                      \
    {                                                                                              \
        "group", ARG_STRING, ARG_REQUIRED | ARG_GROUP, 0, 0                                        \
    }
#define LEASE                                                                                      \
    {                                                                                              \
        "lease", ARG_STRING, ARG_REQUIRED, 1, 23                                                   \
    }
#define END                                                                                        \
    {                                                                                              \
        NULL, ARG__END, 0, 0, 0                                                                    \
    }

/* Each table ends with a row whose name is NULL. */
extern const struct cmd cmd_session[], cmd_jobs[], cmd_admin[], cmd_view[], cmd_throughput[];

/* Take the history sample of every queue in use (cmd_throughput.c; the server
 * calls it every QUEUE_HISTORY_MS). */
void cmd_throughput_sample(struct server *s);

/* True when tok (len bytes; NULL: none given) is the token want (NULL: no
 * token setting: false), compared in a time that does not depend on where
 * they differ (hello, and the dashboard's /api). */
bool cmd_token_ok(const char *want, const char *tok, size_t len);

/* A string argument of the request, "" when absent. */
const char *cmd_str(const struct req *r, const char *name);
/* The check of an optional "cursor" of a set scan (groups, queues): all
 * decimal digits, as the backend's SSCAN cursors are; else it answers
 * EARG. A cmd check (struct cmd). */
bool cmd_check_cursor(struct req *r);

#endif
