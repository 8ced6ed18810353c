/* enqueue_many (lua/enqueue_many.lua): several items in one call, each
 * exactly as its own enqueue would be: a verdict per item in order, its
 * own duplicate check, nothing written for a refused item and no rollback
 * of the others. The equivalence test runs one random sequence of items
 * through single enqueues on one queue and through enqueue_many calls of
 * random sizes on another, and finds the same state and the same service
 * order. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes_fixture.h"

TestSuite(enqueue_many, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

#define ITEM_ARGS 5

static redisReply *many(const struct keys *k, int nitems, const char *const *args)
{
    redisReply *r = lanes_callv(fx_conn, k, SCRIPT_ENQUEUE_MANY, ITEM_ARGS * nitems, args);
    cr_assert_not_null(r, "connection error: %s", fx_conn->errstr);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "enqueue_many: %s", r->str ? r->str : "not an array");
    cr_assert_eq(r->elements, (size_t)nitems, "one verdict per item");
    return r;
}

static void expect_code(const redisReply *e, const char *code)
{
    cr_assert_eq(e->type, REDIS_REPLY_ERROR, "an error verdict, got type %d", e->type);
    cr_assert(strncmp(e->str, code, strlen(code)) == 0 && e->str[strlen(code)] == ' ',
              "want %s, got %s", code, e->str);
}

static long long key_int(const char *cmd, const char *key)
{
    redisReply *r = redisCommand(fx_conn, "%s %s", cmd, key);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

LANE_TEST(enqueue_many, one_verdict_per_item_in_order_and_refusals_write_nothing)
{
    const char *args[] = {
        "JOBa1", "TENa", "{\"n\":1}", "0",     "0", /* enqueued */
        "JOBa1", "TENa", "{\"n\":2}", "0",     "0", /* the same id again in this call: duplicate */
        "XOBa2", "TENa", "{}",        "0",     "0", /* EKIND */
        "JOBa3", "bad",  "{}",        "0",     "0", /* EBRAND */
        "JOBa4", "TENa", "{}",        "-1",    "0", /* EARG */
        "JOBa5", "TENa", "{}",        "0",     "x", /* EARG */
        "JOBa6", "",     "{\"f\":1}", "0",     "3", /* flat */
        "JOBa7", "TENb", "{}",        "60000", "0", /* delayed */
        "JOBa8", "TENb", "{\"n\":3}", "0",     "0", /* enqueued, after every refusal */
    };
    redisReply *r = many(&fx_q, 9, args);
    cr_assert_eq(r->element[0]->integer, 1);
    cr_assert_eq(r->element[1]->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(r->element[1]->integer, 0, "a duplicate within the call changes nothing");
    expect_code(r->element[2], "EKIND");
    expect_code(r->element[3], "EBRAND");
    expect_code(r->element[4], "EARG");
    expect_code(r->element[5], "EARG");
    for (int i = 6; i < 9; i++)
        cr_assert_eq(r->element[i]->integer, 1, "item %d", i);
    freeReplyObject(r);

    char v[64];
    fx_row("JOBa1", "payload", v, sizeof(v));
    cr_assert_str_eq(v, "{\"n\":1}", "the first item's row stands");
    const char *refused[] = {"XOBa2", "JOBa3", "JOBa4", "JOBa5"};
    for (size_t i = 0; i < 4; i++) {
        char k[160];
        snprintf(k, sizeof(k), "%sjob:%s", fx_q.prefix, refused[i]);
        cr_assert_eq(key_int("EXISTS", k), 0, "%s was refused: no row", refused[i]);
    }
    fx_row("JOBa6", "max_attempts", v, sizeof(v));
    cr_assert_str_eq(v, "3");
    fx_row("JOBa7", "state", v, sizeof(v));
    cr_assert_str_eq(v, "delayed");
    cr_assert_eq(key_int("ZCARD", fx_q.names[KEY_DELAYED]), 1);
    cr_assert_eq(key_int("ZCARD", fx_q.names[KEY_PENDING]), 1, "the flat item");
    char ring[256];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa,TENb", "lanes join the ring in item order");

    /* Served as if each item had been enqueued on its own. */
    struct leased l[8];
    size_t n = fx_claim(8, 60000, l, NULL);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(l[0].job, "JOBa1");
    cr_assert_str_eq(l[1].job, "JOBa8");
    char st[32];
    for (size_t i = 0; i < n; i++) {
        fx_complete(l[i].job, l[i].lease, st, sizeof(st));
        cr_assert_str_eq(st, "completed");
    }
    n = fx_claim_flat(8, 60000, l);
    cr_assert_eq(n, 1);
    fx_complete(l[0].job, l[0].lease, st, sizeof(st));
    redisReply *rm = lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOBa7", NULL);
    freeReplyObject(rm);
}

/* A lane at its cap refuses the items that would go past it, within one
 * call: {-1, cap, from} for each, nothing written for them, and the
 * items of other lanes and the duplicates around them answered as usual. */
LANE_TEST(enqueue_many, a_full_lane_refuses_its_items_within_a_call)
{
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENc", "2", NULL), 1);
    const char *args[] = {
        "JOBc1", "TENc", "{}", "0",     "0", /* 1 of 2 */
        "JOBc2", "TENc", "{}", "60000", "0", /* 2 of 2: delayed jobs count too */
        "JOBc3", "TENc", "{}", "0",     "0", /* refused */
        "JOBc1", "TENc", "{}", "0",     "0", /* a duplicate: not refused, writes nothing */
        "JOBc4", "TENd", "{}", "0",     "0", /* another lane */
    };
    redisReply *r = many(&fx_q, 5, args);
    cr_assert_eq(r->element[0]->integer, 1);
    cr_assert_eq(r->element[1]->integer, 1);
    const redisReply *full = r->element[2];
    cr_assert_eq(full->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(full->elements, 3);
    cr_assert_eq(full->element[0]->integer, -1);
    cr_assert_eq(full->element[1]->integer, 2);
    cr_assert_str_eq(full->element[2]->str, "group");
    cr_assert_eq(r->element[3]->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(r->element[3]->integer, 0);
    cr_assert_eq(r->element[4]->integer, 1);
    freeReplyObject(r);
    char k[160];
    snprintf(k, sizeof(k), "%sjob:JOBc3", fx_q.prefix);
    cr_assert_eq(key_int("EXISTS", k), 0, "a refused item writes no row");
    freeReplyObject(lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOBc2", NULL));
}

LANE_TEST(enqueue_many, a_malformed_call_is_refused_whole)
{
    const char *args[] = {"JOBb1", "TENa", "{}", "0"}; /* four arguments: not whole items */
    redisReply *r = lanes_callv(fx_conn, &fx_q, SCRIPT_ENQUEUE_MANY, 4, args);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ERROR);
    cr_assert(strncmp(r->str, "EARG", 4) == 0, "%s", r->str);
    freeReplyObject(r);
    char k[160];
    snprintf(k, sizeof(k), "%sjob:JOBb1", fx_q.prefix);
    cr_assert_eq(key_int("EXISTS", k), 0);
}

/* ---- equivalence with single enqueues ---------------------------------- */

#define ITEMS  400
#define GROUPS 12

struct spec {
    char job[16], group[16], payload[24], delay[8], max[8];
};

/* Dump queue k as text: the ring, every lane, the flat set, the delayed
 * members (not their due times: they depend on when each call ran), the
 * group registry, and each row's fields but created_ms. */
static void dump(const struct keys *k, const struct spec *items, char *out, size_t cap)
{
    size_t at = 0;
#define PUT(...) at += (size_t)snprintf(out + at, at < cap ? cap - at : 0, __VA_ARGS__)
    redisReply *r = redisCommand(fx_conn, "LRANGE %s 0 -1", k->names[KEY_RING]);
    PUT("ring:");
    for (size_t i = 0; i < r->elements; i++)
        PUT("%s,", r->element[i]->str);
    freeReplyObject(r);
    for (int g = 0; g < GROUPS; g++) {
        r = redisCommand(fx_conn, "ZRANGE %sg:TEN%02d:pending 0 -1", k->prefix, g);
        PUT("\nlane %d:", g);
        for (size_t i = 0; i < r->elements; i++)
            PUT("%s,", r->element[i]->str);
        freeReplyObject(r);
    }
    const enum key_id sets[] = {KEY_PENDING, KEY_DELAYED};
    for (size_t s = 0; s < 2; s++) {
        /* Sorted by name: due times, and so their order, differ. */
        r = redisCommand(fx_conn, "SORT %s ALPHA", k->names[sets[s]]);
        PUT("\n%s:", keys_suffix[sets[s]]);
        for (size_t i = 0; i < r->elements; i++)
            PUT("%s,", r->element[i]->str);
        freeReplyObject(r);
    }
    r = redisCommand(fx_conn, "SORT %s ALPHA", k->names[KEY_GROUPS]);
    PUT("\ngroups:");
    for (size_t i = 0; i < r->elements; i++)
        PUT("%s,", r->element[i]->str);
    freeReplyObject(r);
    for (int i = 0; i < ITEMS; i++) {
        r = redisCommand(fx_conn, "HMGET %sjob:%s state group payload attempts max_attempts",
                         k->prefix, items[i].job);
        PUT("\n%s:", items[i].job);
        for (size_t f = 0; f < r->elements; f++)
            PUT("%s|", r->element[f]->str ? r->element[f]->str : "-");
        freeReplyObject(r);
    }
#undef PUT
    cr_assert_lt(at, cap, "dump buffer too small");
}

Test(enqueue_many, a_batch_means_what_its_items_enqueued_one_by_one_mean)
{
    struct keys single, batched;
    cr_assert_eq(keys_init(&single, "eqs", 3), 0);
    cr_assert_eq(keys_init(&batched, "eqb", 3), 0);
    /* Seeds 1-3 and 7 with a ceiling (a queue with a lane setting), 4-6
     * and 8 without (the path of a queue with none); a paused group in
     * both. In seeds 1-6 one item in eight repeats an earlier id, so most
     * calls meet a row an earlier call wrote (each item asks HSETNX); in
     * 7-8 one in sixty, so most calls meet none (one EXISTS, then a
     * duplicate is one of the call's own items). */
    for (unsigned seed = 1; seed <= 8; seed++) {
        srand(seed);
        static struct spec items[ITEMS];
        int repeat = seed <= 6 ? 8 : 60;
        for (int i = 0; i < ITEMS; i++) {
            struct spec *s = &items[i];
            /* One item in `repeat` repeats an earlier id: a duplicate. */
            int id = i > 0 && rand() % repeat == 0 ? rand() % i : i;
            snprintf(s->job, sizeof(s->job), "JOB%u_%03d", seed, id);
            int g = rand() % (GROUPS + 1);
            if (g == GROUPS)
                s->group[0] = '\0';
            else
                snprintf(s->group, sizeof(s->group), "TEN%02d", g);
            snprintf(s->payload, sizeof(s->payload), "{\"i\":%d}", i);
            snprintf(s->delay, sizeof(s->delay), "%d", rand() % 10 == 0 ? 600000 : 0);
            snprintf(s->max, sizeof(s->max), "%d", rand() % 4);
        }
        /* A paused group and a ceiling, as a queue in use would have. */
        const struct keys *both[] = {&single, &batched};
        for (int q = 0; q < 2; q++) {
            freeReplyObject(lanes_call(fx_conn, both[q], SCRIPT_PAUSE, "TEN03", NULL));
            if (seed <= 3 || seed == 7)
                freeReplyObject(lanes_call(fx_conn, both[q], SCRIPT_LIMIT, "TEN04", "1", NULL));
        }
        long long verdict_single[ITEMS], verdict_batched[ITEMS];
        for (int i = 0; i < ITEMS; i++) {
            const struct spec *s = &items[i];
            redisReply *r = lanes_call(fx_conn, &single, SCRIPT_ENQUEUE, s->job, s->group,
                                       s->payload, s->delay, s->max, NULL);
            cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
            verdict_single[i] = r->integer;
            freeReplyObject(r);
        }
        for (int i = 0; i < ITEMS;) {
            int k = 1 + rand() % 64;
            if (k > ITEMS - i)
                k = ITEMS - i;
            const char *args[64 * ITEM_ARGS];
            for (int j = 0; j < k; j++) {
                const struct spec *s = &items[i + j];
                const char *f[] = {s->job, s->group, s->payload, s->delay, s->max};
                memcpy(args + ITEM_ARGS * j, f, sizeof(f));
            }
            redisReply *r = many(&batched, k, args);
            for (int j = 0; j < k; j++) {
                cr_assert_eq(r->element[j]->type, REDIS_REPLY_INTEGER);
                verdict_batched[i + j] = r->element[j]->integer;
            }
            freeReplyObject(r);
            i += k;
        }
        for (int i = 0; i < ITEMS; i++)
            cr_assert_eq(verdict_single[i], verdict_batched[i], "seed %u item %d", seed, i);
        static char a[1 << 16], b[1 << 16];
        dump(&single, items, a, sizeof(a));
        dump(&batched, items, b, sizeof(b));
        cr_assert_str_eq(a, b, "seed %u: the states differ", seed);

        /* And the same service order from there. */
        size_t n;
        do {
            redisReply *ra = lanes_call(fx_conn, &single, SCRIPT_CLAIM, "7", "60000", NULL);
            redisReply *rb = lanes_call(fx_conn, &batched, SCRIPT_CLAIM, "7", "60000", NULL);
            cr_assert(ra && rb && ra->type == REDIS_REPLY_ARRAY && rb->type == REDIS_REPLY_ARRAY);
            cr_assert_eq(ra->elements, rb->elements, "seed %u: claims of different sizes", seed);
            for (size_t e = 1; e < ra->elements; e += 5)
                cr_assert_str_eq(ra->element[e]->str, rb->element[e]->str, "seed %u", seed);
            n = (ra->elements - 1) / 5;
            freeReplyObject(ra);
            freeReplyObject(rb);
        } while (n > 0);
        fx_assert_invariants(&single);
        fx_assert_invariants(&batched);
        freeReplyObject(redisCommand(fx_conn, "FLUSHALL"));
    }
}

/* The lanes a call has put a job in are non-empty for the rest of it
 * (nothing in enqueue_many takes a job out), so only each lane's first
 * job asks ZCARD whether it made the lane non-empty (lib.lua:to_backlog):
 * 12 items over two lanes and the flat set, three ZCARDs. The lanes join
 * the ring once each, in the order their first items came, and a second
 * call to lanes already non-empty moves no ring place (the invariant
 * check after the test covers the rest). */
LANE_TEST(enqueue_many, only_a_lanes_first_item_in_a_call_counts_the_lane)
{
    const char *args[12 * ITEM_ARGS];
    char ids[12][16];
    const char *groups[] = {"TENb", "TENa", ""};
    for (int i = 0; i < 12; i++) {
        snprintf(ids[i], sizeof(ids[i]), "JOBz%02d", i);
        const char *item[ITEM_ARGS] = {ids[i], groups[i % 3], "{}", "0", "0"};
        memcpy(&args[i * ITEM_ARGS], item, sizeof(item));
    }
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    redisReply *r = many(&fx_q, 12, args);
    for (size_t i = 0; i < 12; i++)
        cr_assert_eq(r->element[i]->integer, 1, "item %zu enqueued", i);
    freeReplyObject(r);
    cr_assert_eq(fx_calls_of("zcard"), 3, "one ZCARD per lane, not per item");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb,TENa");
    for (int g = 0; g < 3; g++) {
        redisReply *z =
            g < 2 ? redisCommand(fx_conn, "ZRANGE %sg:%s:pending 0 -1", fx_q.prefix, groups[g])
                  : redisCommand(fx_conn, "ZRANGE %s 0 -1", fx_q.names[KEY_PENDING]);
        cr_assert_eq(z->elements, 4, "lane %d holds its 4 items", g);
        for (int i = 0; i < 4; i++)
            cr_assert_str_eq(z->element[i]->str, ids[g + 3 * i]);
        freeReplyObject(z);
    }
    /* A second call to lanes already non-empty changes no ring place. */
    for (int i = 0; i < 12; i++)
        ids[i][3] = 'y';
    freeReplyObject(many(&fx_q, 12, args));
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb,TENa");
}

/* The duplicate check of a call is one EXISTS over its items' rows. When
 * none exists, no item asks HSETNX: each row is one HSET, and a repeated id
 * within the call is still a duplicate of the first. When one exists,
 * every item asks on its own, and only that one is a duplicate. */
LANE_TEST(enqueue_many, one_exists_checks_a_call_whose_rows_are_all_new)
{
    const char *fresh[] = {
        "JOBf1", "TENa", "{\"n\":1}", "0",     "0", /* new */
        "JOBf2", "",     "{}",        "0",     "0", /* new, flat */
        "JOBf1", "TENa", "{\"n\":2}", "0",     "0", /* a repeat within the call */
        "JOBf3", "TENb", "{}",        "60000", "0", /* new, delayed */
    };
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    redisReply *r = many(&fx_q, 4, fresh);
    long long want[] = {1, 1, 0, 1};
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(r->element[i]->integer, want[i], "item %zu", i);
    freeReplyObject(r);
    /* One for the rows, and the once-per-call read of whether glimit and
     * paused exist, one EXISTS of both (lib.lua: memos). */
    cr_assert_eq(fx_calls_of("exists"), 2, "one EXISTS for the call's rows");
    cr_assert_eq(fx_calls_of("hsetnx"), 0, "no HSETNX when no row existed");
    cr_assert_eq(fx_calls_of("hset"), 3, "one HSET per row written");
    char v[64];
    fx_row("JOBf1", "payload", v, sizeof(v));
    cr_assert_str_eq(v, "{\"n\":1}", "the first item's row stands");
    fx_row("JOBf1", "state", v, sizeof(v));
    cr_assert_str_eq(v, "pending");
    fx_row("JOBf3", "state", v, sizeof(v));
    cr_assert_str_eq(v, "delayed");
    fx_row("JOBf2", "attempts", v, sizeof(v));
    cr_assert_str_eq(v, "", "no attempts field before a first lease (read as 0)");

    const char *again[] = {
        "JOBf4", "TENa", "{}",        "0", "0", /* new */
        "JOBf2", "",     "{\"x\":1}", "0", "0", /* its row exists: a duplicate */
        "JOBf5", "TENb", "{}",        "0", "0", /* new */
    };
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    r = many(&fx_q, 3, again);
    cr_assert_eq(r->element[0]->integer, 1);
    cr_assert_eq(r->element[1]->integer, 0, "a row of an earlier call is a duplicate");
    cr_assert_eq(r->element[2]->integer, 1);
    freeReplyObject(r);
    cr_assert_eq(fx_calls_of("hsetnx"), 3, "a row existed: each item asks on its own");
    fx_row("JOBf2", "payload", v, sizeof(v));
    cr_assert_str_eq(v, "{}", "the duplicate changed nothing");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa,TENb");
    freeReplyObject(lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOBf3", NULL));
}
