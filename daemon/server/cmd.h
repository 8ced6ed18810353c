/* cmd: the command tables' shared parts. The tables live with their
 * handlers (cmd.c: the session; cmd_jobs.c: producing and consuming work;
 * cmd_admin.c: the per-tenant levers and reads); cmd_lookup searches them
 * all. Each row names an op, its argument spec (checked by the client
 * layer before the handler runs, so handlers see only valid arguments) and
 * its handler, which answers with req_ok / req_error exactly once. */
#ifndef EMQ_CMD_H
#define EMQ_CMD_H

#include "server.h"

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
extern const struct cmd cmd_session[], cmd_jobs[], cmd_admin[];

/* A string argument of the request, "" when absent. */
const char *cmd_str(const struct req *r, const char *name);
/* Decimal text of v into buf, for script arguments. */
void cmd_num(char *buf, size_t cap, long long v);
/* Run a lane script of the request's queue with r as the callback's priv;
 * answers EUNAVAILABLE itself when the pool refuses the call. */
void cmd_script(struct req *r, enum script_id id, int argc, const char **argv, pool_reply_cb *cb);
/* The reply is an error or the backend was unavailable: answer r from it
 * and return true. */
bool cmd_failed(struct req *r, int status, redisReply *reply);

#endif
