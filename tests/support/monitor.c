#include "monitor.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A command the MONITOR connection sees last: sent by monitor_stop on a
 * second connection, after everything the test sent before. */
#define MONITOR_END "emq-test-monitor-end"

static void keep(struct monitor *m, const char *s)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        char **v = realloc(m->lines, cap * sizeof(*v));
        if (v == NULL)
            abort(); /* a test helper: no way to go on honestly */
        m->lines = v;
        m->cap = cap;
    }
    m->lines[m->n] = strdup(s);
    if (m->lines[m->n] == NULL)
        abort();
    m->n++;
}

static void *monitor_main(void *arg)
{
    struct monitor *m = arg;
    redisReply *r;
    while (redisGetReply(m->rc, (void **)&r) == REDIS_OK) {
        const char *s = r->type == REDIS_REPLY_STATUS ? r->str : "";
        int end = strstr(s, MONITOR_END) != NULL;
        /* "<time> [<db> <addr>] ..." where addr is "lua" inside a script. */
        if (!end && strstr(s, " lua]") == NULL && strchr(s, '[') != NULL)
            keep(m, s);
        freeReplyObject(r);
        if (end)
            break;
    }
    return NULL;
}

int monitor_start(struct monitor *m, const struct redis_server *rs)
{
    memset(m, 0, sizeof(*m));
    m->rs = rs;
    m->rc = redis_server_connect(rs);
    if (m->rc == NULL)
        return -1;
    redisReply *r = redisCommand(m->rc, "MONITOR");
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (!ok || pthread_create(&m->thread, NULL, monitor_main, m) != 0) {
        redisFree(m->rc);
        m->rc = NULL;
        return -1;
    }
    return 0;
}

void monitor_stop(struct monitor *m)
{
    if (m->rc == NULL)
        return;
    redisContext *rc = redis_server_connect(m->rs);
    if (rc != NULL) {
        freeReplyObject(redisCommand(rc, "ECHO %s", MONITOR_END));
        redisFree(rc);
    } else {
        shutdown(m->rc->fd, SHUT_RDWR); /* ends the thread's read */
    }
    pthread_join(m->thread, NULL);
    redisFree(m->rc);
    m->rc = NULL;
}

void monitor_free(struct monitor *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->lines[i]);
    free(m->lines);
    m->lines = NULL;
    m->n = m->cap = 0;
}
