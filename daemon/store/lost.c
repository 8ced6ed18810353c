/* lost: leases the daemon asked for and never delivered, given back.
 *
 * A call that leases jobs (a claim, a stream's pump, an enqueue handed off
 * to a parked consumer) can run at Redis and lose its reply: the
 * connection drops, or the deadline passes while Redis is stalled. Its
 * jobs are then active, held by nobody, and would wait for their lease to
 * run out, with an attempt spent: a job allowed one attempt would go dead
 * without ever being delivered (PROTOCOL.md 6.2 promises it cannot).
 *
 * So every leasing call carries a tag, unique to this queue in this
 * process (a random 64-bit start, counted up), which the script writes as
 * the row's lease_by. When such a call ends without a reply the daemon
 * could read, its tag is kept here with the pool's loss count. Once that
 * loss is fenced (pool_fenced: the lost connection's commands cannot run
 * any more), recover.lua walks the queue's leases with ZSCAN and gives
 * back, attempt returned, every active row whose lease_by is one of the
 * tags: exactly the leases those calls took, and only while no one has
 * taken the job since (a later lease writes its own lease_by).
 *
 * The tags live in the daemon's memory: a daemon that dies leaves its
 * lost leases to expire as before. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <uv.h>

#include "jobs.h"
#include "log.h"
#include "store_internal.h"

/* At most this many lost calls are remembered per queue; beyond it the
 * oldest is forgotten (its leases expire as they would have). A pipeline
 * of claims far deeper than this is lost only with a connection. */
#define LOST_MAX 4096

/* ZSCAN COUNT per recovery call: a bound on the call's work. */
#define RECOVER_COUNT 256

uint64_t store_tag_seed(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
        seed = uv_hrtime() ^ ((uint64_t)uv_os_getpid() << 32);
    return seed;
}

size_t store_tag_text(uint64_t tag, char out[STORE_TAG_TEXT])
{
    return (size_t)snprintf(out, STORE_TAG_TEXT, "%016" PRIx64, tag);
}

/* Say, at most every 10 s across queues, that lost calls were forgotten. */
static void lost_overflow_log(const struct store_queue *sq)
{
    static uint64_t last_ms, forgotten;
    uint64_t now = uv_hrtime() / 1000000;
    forgotten++;
    if (last_ms != 0 && now - last_ms < 10000)
        return;
    log_event(LOG_WARN, "too many leasing calls lost: the oldest ones' leases will expire instead",
              "queue_prefix=%.*s forgotten=%llu", (int)sq->keys.prefix_len, sq->keys.prefix,
              (unsigned long long)forgotten);
    last_ms = now;
    forgotten = 0;
}

void store_lost_add(struct store_queue *sq, uint64_t tag)
{
    if (sq->nlost == sq->lost_cap) {
        if (sq->lost_cap >= LOST_MAX) {
            lost_overflow_log(sq);
            memmove(sq->lost, sq->lost + 1, (sq->nlost - 1) * sizeof(*sq->lost));
            sq->nlost--;
        } else {
            size_t cap = sq->lost_cap ? 2 * sq->lost_cap : 8;
            struct store_lost *v = realloc(sq->lost, cap * sizeof(*v));
            if (v == NULL) {
                log_event(LOG_WARN, "out of memory: a lost call's leases will expire instead",
                          "queue_prefix=%.*s", (int)sq->keys.prefix_len, sq->keys.prefix);
                return;
            }
            sq->lost = v;
            sq->lost_cap = cap;
        }
    }
    sq->lost[sq->nlost++] = (struct store_lost){tag, pool_losses(sq->pool)};
    if (sq->on_lost != NULL)
        sq->on_lost(sq->on_lost_priv);
}

bool store_lost_pending(const struct store_queue *sq)
{
    return sq->nlost > 0;
}

bool store_recover_due(const struct store_queue *sq)
{
    if (sq->nlost == 0 || sq->recovering || !pool_up(sq->pool))
        return false;
    /* The list is in loss order: the newest entry has the highest epoch. */
    return pool_fenced(sq->pool, sq->lost[sq->nlost - 1].epoch);
}

/* One recovery: the tags it took, where the scan is, what it gave back. */
struct recovery {
    struct store_queue *sq;
    store_recover_cb *cb;
    void *priv;
    char cursor[24];
    uint64_t given;
    size_t n;
    struct store_lost tags[];
};

static int recovery_send(struct recovery *rc);

/* recover answers {next cursor, leases given back}. */
struct recovered {
    const char *cursor;
    size_t cursor_len;
    long long given;
};

static int recovered_parse(const redisReply *r, void *out)
{
    struct recovered *o = out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len == 0 ||
        r->element[0]->len >= 24 || !store_int(r->element[1], &o->given) || o->given < 0)
        return STORE_SHAPE;
    o->cursor = r->element[0]->str;
    o->cursor_len = r->element[0]->len;
    return 0;
}

/* End rc: with an error, its tags go back to the queue's list (their
 * leases may still be there), to be tried at the next pass. */
static void recovery_end(struct recovery *rc, const struct store_status *st)
{
    struct store_queue *sq = rc->sq;
    if (st->code != 0) {
        for (size_t i = 0; i < rc->n; i++)
            store_lost_add(sq, rc->tags[i].tag);
    }
    sq->recovering = false;
    rc->cb(rc->priv, st, rc->given);
    free(rc);
}

static void recover_decode(const struct store_call *c, const struct store_status *st,
                           const redisReply *r)
{
    struct recovery *rc = c->priv;
    struct store_status s = *st;
    struct recovered o;
    if (!store_parsed(c, &s, r, recovered_parse, &o)) {
        recovery_end(rc, &s);
        return;
    }
    rc->given += (uint64_t)o.given;
    memcpy(rc->cursor, o.cursor, o.cursor_len);
    rc->cursor[o.cursor_len] = '\0';
    if (strcmp(rc->cursor, "0") == 0) {
        recovery_end(rc, &store_ok);
        return;
    }
    int err = recovery_send(rc);
    if (err != 0) {
        struct store_status fail = {WIRE_EUNAVAILABLE, "the backend is unavailable"};
        recovery_end(rc, &fail);
    }
}

static int recovery_send(struct recovery *rc)
{
    size_t argc = 2 + rc->n;
    const char **argv = malloc(argc * sizeof(*argv));
    size_t *lens = malloc(argc * sizeof(*lens));
    char *text = malloc(rc->n * STORE_TAG_TEXT);
    char count[24];
    int err = -ENOMEM;
    if (argv == NULL || lens == NULL || text == NULL)
        goto out;
    argv[0] = rc->cursor;
    lens[0] = strlen(rc->cursor);
    argv[1] = store_num(count, RECOVER_COUNT);
    lens[1] = strlen(count);
    for (size_t i = 0; i < rc->n; i++) {
        char *t = text + i * STORE_TAG_TEXT;
        lens[2 + i] = store_tag_text(rc->tags[i].tag, t);
        argv[2 + i] = t;
    }
    err = store_send(rc->sq, SCRIPT_RECOVER, (int)argc, argv, lens, recover_decode, NULL, rc, 0);
out:
    free(argv);
    free(lens);
    free(text);
    return err;
}

int store_recover(struct store_queue *sq, store_recover_cb *cb, void *priv)
{
    if (!store_recover_due(sq))
        return -EAGAIN;
    struct recovery *rc = malloc(sizeof(*rc) + sq->nlost * sizeof(rc->tags[0]));
    if (rc == NULL)
        return -ENOMEM;
    *rc = (struct recovery){.sq = sq, .cb = cb, .priv = priv, .cursor = "0", .n = sq->nlost};
    memcpy(rc->tags, sq->lost, sq->nlost * sizeof(rc->tags[0]));
    int err = recovery_send(rc);
    if (err != 0) {
        free(rc);
        return err;
    }
    /* The tags are the recovery's now; a call lost meanwhile starts a new
     * list, for the next one. */
    sq->nlost = 0;
    sq->recovering = true;
    return 0;
}
