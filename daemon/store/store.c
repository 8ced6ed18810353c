/* store: a queue's keys and route, and the machinery every typed call
 * shares (store_internal.h): one in-flight call per request, the mapping
 * of a pool reply to a store_status, and the log line for a reply of a
 * shape no script returns. */
#include "store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_internal.h"

const struct store_status store_ok = {0, ""};
const struct store_status store_oom = {WIRE_EINTERNAL, "out of memory"};

int store_queue_init(struct store_queue *sq, struct pool *p, const char *name, size_t len)
{
    int rc = keys_init(&sq->keys, name, len);
    if (rc != 0)
        return rc;
    sq->pool = p;
    pool_route_init(&sq->route, name, len); /* the hash tag of "emq:{q}:" */
    sq->tag_next = store_tag_seed();
    sq->lost = NULL;
    sq->nlost = sq->lost_cap = 0;
    sq->recovering = false;
    sq->on_lost = NULL;
    sq->on_lost_priv = NULL;
    return 0;
}

void store_queue_on_lost(struct store_queue *sq, void (*cb)(void *priv), void *priv)
{
    sq->on_lost = cb;
    sq->on_lost_priv = priv;
}

void store_queue_deinit(struct store_queue *sq)
{
    free(sq->lost);
    sq->lost = NULL;
    sq->nlost = sq->lost_cap = 0;
}

const char *store_outcome_state(enum store_outcome o)
{
    switch (o) {
    case STORE_COMPLETED:
        return "completed";
    case STORE_PENDING:
        return "pending";
    case STORE_DELAYED:
        return "delayed";
    case STORE_DEAD:
        return "dead";
    case STORE_ELEASE:
    case STORE_ENOJOB:
        break;
    }
    return NULL;
}

const char *store_num(char buf[24], long long v)
{
    /* By hand: a script call formats a few of these (deadlines, counts,
     * lease times), and snprintf's format machinery cost ~700
     * instructions each, a few per job. At most 20 characters and a NUL. */
    char digits[20];
    size_t n = 0, at = 0;
    unsigned long long u = (unsigned long long)v;
    if (v < 0) {
        buf[at++] = '-';
        u = 0ULL - u; /* LLONG_MIN's magnitude too */
    }
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    while (n > 0)
        buf[at++] = digits[--n];
    buf[at] = '\0';
    return buf;
}

bool store_int(const redisReply *r, long long *out)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->len < 21 &&
        strspn(r->str, "-0123456789") == r->len) {
        *out = strtoll(r->str, NULL, 10);
        return true;
    }
    return false;
}

void store_unexpected(const struct store_call *c, const redisReply *reply, struct store_status *st)
{
    if (c->tag != 0) /* what it leased cannot be read: give it back */
        store_lost_add(c->sq, c->tag);
    log_event(LOG_ERROR, "unexpected backend reply", "call=%s type=%d elements=%zu", c->name,
              reply ? reply->type : -1,
              reply && reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0);
    *st = (struct store_status){WIRE_EINTERNAL, "unexpected backend reply"};
}

/* Log a backend error, at most once a second per kind (a backend out of
 * memory refuses every enqueue of every client): the line says how many
 * were not logged since the last one. */
static void backend_error_log(enum log_level level, const char *msg, const struct store_call *c,
                              const char *error)
{
    static struct {
        uint64_t last_ms, skipped;
    } kinds[2]; /* [0] errors, [1] out of memory */
    size_t k = level == LOG_WARN;
    uint64_t now = uv_hrtime() / 1000000;
    if (kinds[k].last_ms != 0 && now - kinds[k].last_ms < 1000) {
        kinds[k].skipped++;
        return;
    }
    char q[600];
    log_event(level, msg, "call=%s error=%s not_logged=%llu", c->name,
              log_quote(error, q, sizeof(q)), (unsigned long long)kinds[k].skipped);
    kinds[k].last_ms = now;
    kinds[k].skipped = 0;
}

bool store_parsed(const struct store_call *c, struct store_status *s, const redisReply *reply,
                  store_parse_fn *parse, void *out)
{
    if (s->code != 0)
        return false;
    int rc = parse(reply, out);
    if (rc == STORE_SHAPE)
        store_unexpected(c, reply, s);
    else if (rc != 0)
        *s = store_oom;
    if (rc != 0 && rc != STORE_SHAPE && c->tag != 0) /* store_unexpected records a shape */
        store_lost_add(c->sq, c->tag);
    return rc == 0;
}

/* The refusals of a Redis Cluster that mean "not now, not here": the
 * call did not run. */
static bool store_cluster_busy(const char *str, size_t w)
{
    static const char *const words[] = {"TRYAGAIN", "CLUSTERDOWN", "MOVED", "ASK"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strlen(words[i]) == w && memcmp(str, words[i], w) == 0)
            return true;
    return false;
}

static void reply_cb(void *priv, int status, redisReply *reply)
{
    struct store_call *c = priv;
    struct store_status st = store_ok;
    if (status != 0 || reply == NULL) {
        st = (struct store_status){WIRE_EUNAVAILABLE,
                                   "the backend is not connected or did not answer in time; retry"};
        reply = NULL;
    } else if (reply->type == REDIS_REPLY_ERROR) {
        /* Lane scripts fail with "ECODE message"; anything else (Redis's
         * own ERR, OOM, BUSY...) is not the caller's doing. */
        size_t w = strcspn(reply->str, " ");
        st.code = wire_error_lookup(reply->str, w);
        st.message = reply->str[w] ? reply->str + w + 1 : reply->str;
        if (store_cluster_busy(reply->str, w)) {
            /* A cluster resharding (TRYAGAIN: the slot's keys are half
             * moved), down (CLUSTERDOWN) or redirecting past the pool's
             * limit: the call did not run; the client may retry. */
            st = (struct store_status){WIRE_EUNAVAILABLE,
                                       "the backend cluster is moving or lost this queue's slot; "
                                       "retry"};
            backend_error_log(LOG_WARN, "backend cluster refused a call", c, reply->str);
        } else if (w == 7 && memcmp(reply->str, "LOADING", 7) == 0) {
            /* A Redis restarted (or a replica resyncing) refuses every
             * command until its data is loaded: the call did not run, as
             * when the backend is not connected, so the client retries. */
            st = (struct store_status){WIRE_EUNAVAILABLE,
                                       "the backend is loading its data after a restart; retry"};
            backend_error_log(LOG_WARN, "backend loading its data: refusing calls", c, reply->str);
        } else if (w == 3 && memcmp(reply->str, "OOM", 3) == 0) {
            /* Only what adds jobs is refused: the moves that drain carry
             * allow-oom (scripts/embed_lua.py). */
            st = (struct store_status){WIRE_EFULL, "the backend is out of memory: complete, drain "
                                                   "or purge jobs, or give Redis more memory"};
            backend_error_log(LOG_WARN, "backend out of memory: refusing what adds jobs", c,
                              reply->str);
        } else if (st.code == WIRE_EINTERNAL) {
            /* Redis's text (a script's SHA and line, say) is for the log,
             * not for clients. */
            st.message = "backend error (the daemon's log has it)";
            backend_error_log(LOG_ERROR, "backend error", c, reply->str);
        }
        reply = NULL;
    }
    /* A leasing call that was written and did not answer may have leased
     * anyway (and may yet: pool_fenced); one never written did not (so
     * Redis being down for long does not pile up tags); one that failed
     * inside Redis (a script error
     * that is not a lane script's own code, which it returns before
     * leasing) may have leased part of its batch. Either way the leases
     * are given back later (lost.c); when there were none, that finds
     * nothing. */
    if (c->tag != 0 && status != POOL_ENOTSENT &&
        (st.code == WIRE_EUNAVAILABLE || st.code == WIRE_EINTERNAL))
        store_lost_add(c->sq, c->tag);
    c->decode(c, &st, reply);
    free(c);
}

int store_send(struct store_queue *sq, enum script_id id, int argc, const char **argv,
               const size_t *lens, store_decode_fn *decode, void (*cb)(void), void *priv, size_t n)
{
    struct store_call *c = malloc(sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    *c = (struct store_call){
        .name = script_table[id].name, .decode = decode, .cb = cb, .priv = priv, .n = n, .sq = sq};
    int rc = pool_script(sq->pool, &sq->route, id, &sq->keys, argc, argv, lens, reply_cb, c);
    if (rc != 0)
        free(c);
    return rc;
}

int store_send_leasing(struct store_queue *sq, enum script_id id, int argc, const char **argv,
                       const size_t *lens, store_decode_fn *decode, void (*cb)(void), void *priv,
                       size_t n)
{
    const char *args[STORE_ARGS_MAX + 1];
    size_t arg_lens[STORE_ARGS_MAX + 1];
    char tag[STORE_TAG_TEXT];
    if (argc < 0 || argc > STORE_ARGS_MAX)
        return -EINVAL;
    for (int i = 0; i < argc; i++) {
        args[i] = argv[i];
        arg_lens[i] = lens != NULL ? lens[i] : strlen(argv[i]);
    }
    uint64_t t = sq->tag_next++;
    if (t == 0) /* 0 means "no tag" */
        t = sq->tag_next++;
    args[argc] = tag;
    arg_lens[argc] = store_tag_text(t, tag);
    struct store_call *c = malloc(sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    *c = (struct store_call){.name = script_table[id].name,
                             .decode = decode,
                             .cb = cb,
                             .priv = priv,
                             .n = n,
                             .tag = t,
                             .sq = sq};
    int rc =
        pool_script(sq->pool, &sq->route, id, &sq->keys, argc + 1, args, arg_lens, reply_cb, c);
    if (rc != 0)
        free(c);
    return rc;
}

int store_send_command(struct pool *p, struct pool_route *rt, int argc, const char **argv,
                       const size_t *lens, store_decode_fn *decode, void (*cb)(void), void *priv)
{
    struct store_call *c = malloc(sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    *c = (struct store_call){.name = argv[0], .decode = decode, .cb = cb, .priv = priv};
    int rc = pool_command(p, rt, argc, argv, lens, reply_cb, c);
    if (rc != 0)
        free(c);
    return rc;
}
