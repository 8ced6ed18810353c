/* The budget of bytes held for all clients together (max-buffered,
 * daemon/server/budget.h): past it every connection's reads pause, and
 * what cannot drain while they do (partial lines) is refused, so that many
 * connections cannot make the daemon hold memory without bound, nor stop
 * it. Nothing acknowledged is lost, replies keep their order, and each
 * test ends with check clean and a clean exit (under ASan, no leak). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fixture.h"

static void budget_setup(void)
{
    emqd_rss_shows_live_memory();
}

TestSuite(budget, .init = budget_setup, .fini = fx_teardown, .timeout = 240);

#define BUDGET   (4u << 20)
#define READ_MAX (64u << 10) /* what one read of the daemon takes at most */

/* A connection fed without blocking: data[off..len) is still to go. */
struct feed {
    struct tc_conn *c;
    char *data;
    size_t len, off;
};

/* Send what the socket takes now; true once all of it is sent. */
static bool feed_pump(struct feed *f)
{
    while (f->off < f->len) {
        ssize_t n = send(f->c->fd, f->data + f->off, f->len - f->off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            cr_assert(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR, "send failed: %s",
                      strerror(errno));
            return false;
        }
        f->off += (size_t)n;
    }
    return true;
}

/* The start of an enqueue line whose payload is a string of n copies of
 * ch, without its end ("}\n"): a partial line of about n bytes. */
static char *partial_enqueue(const char *queue, const char *group, char ch, size_t n, size_t *len)
{
    char *s = malloc(n + 256);
    cr_assert_not_null(s);
    int o = snprintf(s, 256, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"%s\",\"payload\":\"",
                     queue, group);
    memset(s + o, ch, n);
    *len = (size_t)o + n;
    return s;
}

/* Once all of a partial_enqueue line is sent: its end is to go next. */
static void feed_end_line(struct feed *f)
{
    static const char end[] = "\"}\n";
    f->data = realloc(f->data, f->len + sizeof(end));
    cr_assert_not_null(f->data);
    memcpy(f->data + f->len, end, sizeof(end));
    f->off = f->len;
    f->len += sizeof(end) - 1;
}

static long long metric(const char *series)
{
    return emqd_metric(&fx_emqd, series);
}

/* Every job of queue claimed, one at a time (a reply of several large
 * jobs would not fit the test client's line buffer), and completed;
 * returns how many there were. */
static long long claim_all(struct tc_conn *c, const char *queue)
{
    long long n = 0;
    for (;;) {
        json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"%s\"}", queue);
        json_t *jobs = claim_jobs(r);
        size_t got = json_array_size(jobs);
        for (size_t i = 0; i < got; i++) {
            json_t *j = json_array_get(jobs, i);
            json_t *done =
                tc_call(c, "{\"op\":\"complete\",\"queue\":\"%s\",\"job\":\"%s\",\"lease\":\"%s\"}",
                        queue, jstr(j, "job"), jstr(j, "lease"));
            assert_ok(done);
            json_decref(done);
        }
        json_decref(r);
        if (got == 0)
            return n;
        n += (long long)got;
    }
}

#define HOGS      64
#define HOG_BYTES 700000
#define GOOD      100000

/* Many connections each send most of a large line and no newline. Before
 * the budget, the daemon held them all (400 such connections: 395 MiB).
 * Now it stops reading at max-buffered, and since lines that never end
 * would hold the pause for ever, the largest partial lines are refused
 * (ELIMIT, in their place) until it can read again: a new connection is
 * served, a smaller line completed later is executed, and every job
 * acknowledged is there. */
Test(budget, partial_lines_past_max_buffered_are_refused_not_held)
{
    const char *const extra[] = {"--max-buffered", "4194304", "--max-payload", "1048576", NULL};
    fx_start(extra);
    struct tc_conn *p = fx_conn();
    for (int i = 0; i < 5; i++) {
        json_t *r = tc_call(p,
                            "{\"op\":\"enqueue\",\"queue\":\"bud\",\"group\":\"TENp\","
                            "\"payload\":%d}",
                            i);
        assert_ok(r);
        json_decref(r);
    }
    long rss0 = emqd_rss_kb(&fx_emqd), rss_peak = rss0;
    cr_assert_gt(rss0, 0);

    /* A client with a smaller line, read before the others come. */
    struct feed good = {.c = fx_conn()};
    good.data = partial_enqueue("bud", "TENg", 'g', GOOD, &good.len);
    await(feed_pump(&good), "the good client's partial line to be sent");
    await(metric("emqd_buffered_bytes") >= GOOD, "emqd to read the good client's partial line");

    struct feed hogs[HOGS];
    for (int i = 0; i < HOGS; i++) {
        hogs[i] = (struct feed){.c = fx_conn()};
        hogs[i].data = partial_enqueue("bud", "TENh", 'x', HOG_BYTES, &hogs[i].len);
    }
    /* Feed them until the daemon has paused its reads and then shed a
     * line: it answers that hog ELIMIT. Meanwhile what it holds stays
     * within the budget and one read. */
    bool refused[HOGS] = {0};
    int nrefused = 0;
    long long gauge_peak = 0;
    struct wait w;
    wait_begin(&w, 0);
    while (nrefused == 0) {
        for (int i = 0; i < HOGS; i++) {
            feed_pump(&hogs[i]);
            json_t *r = refused[i] ? NULL : tc_read(hogs[i].c, 1); /* a poll, not a wait */
            if (r != NULL) {
                assert_err(r, "ELIMIT");
                cr_assert_null(json_object_get(r, "ref"), "a refused line has no ref");
                refused[i] = true;
                nrefused++;
                json_decref(r);
            }
        }
        long long g = metric("emqd_buffered_bytes");
        gauge_peak = g > gauge_peak ? g : gauge_peak;
        long rss = emqd_rss_kb(&fx_emqd);
        rss_peak = rss > rss_peak ? rss : rss_peak;
        if (nrefused == 0 && !wait_again(&w))
            wait_failed(&w, "a hog's partial line to be refused with ELIMIT");
    }
    cr_assert_geq(metric("emqd_buffered_pauses_total"), 1, "reads were paused");
    cr_assert_geq(metric("emqd_buffered_shed_total{what=\"line\"}"), 1);

    /* The daemon reads again: a new connection is answered. */
    struct tc_conn *late = fx_conn();
    json_t *pong = tc_call(late, "{\"op\":\"ping\"}");
    assert_ok(pong);
    json_decref(pong);

    /* Every hog finishes its line. A refused one's rest is dropped up to
     * its newline and it may go on; the others' jobs are enqueued (or
     * refused in their turn, as the pressure lasts). */
    for (int i = 0; i < HOGS; i++)
        await(feed_pump(&hogs[i]), "hog %d's line to be sent", i);
    for (int i = 0; i < HOGS; i++) {
        feed_end_line(&hogs[i]);
        await(feed_pump(&hogs[i]), "the end of hog %d's line to be sent", i);
    }
    long long enqueued = 5;
    for (int i = 0; i < HOGS; i++) {
        if (refused[i])
            continue;
        json_t *r = tc_read(hogs[i].c, wait_deadline_ms(0));
        cr_assert_not_null(r, "hog %d got no answer", i);
        if (tc_ok(r))
            enqueued++;
        else
            assert_err(r, "ELIMIT");
        json_decref(r);
    }
    /* A hog whose line was refused sends its next one normally. */
    for (int i = 0; i < HOGS; i++) {
        json_t *r = tc_call(hogs[i].c, "{\"op\":\"enqueue\",\"queue\":\"bud\",\"group\":\"TENh\","
                                       "\"payload\":\"after\"}");
        assert_ok(r);
        enqueued++;
        json_decref(r);
    }

    /* The smaller line, completed now, is executed. */
    feed_end_line(&good);
    await(feed_pump(&good), "the end of the good client's line to be sent");
    json_t *r = tc_read(good.c, wait_deadline_ms(0));
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "verdict"), "enqueued");
    json_decref(r);
    enqueued++;

    /* 44.8 MB of partial lines were sent; what may stay is the budget and
     * a read, the frame buffers' spare room, and under ASan its
     * quarantine (8 MiB) and shadow. */
    long grown = rss_peak - rss0;
    cr_assert_lt(grown, 24 * 1024, "emqd grew by %ld KiB under %d x %d bytes of partial lines",
                 grown, HOGS, HOG_BYTES);
    cr_assert_leq(gauge_peak, BUDGET + 2 * READ_MAX, "emqd held %lld bytes with max-buffered at %u",
                  gauge_peak, BUDGET);
    cr_assert_eq(fx_stat(p, "bud", "pending"), enqueued, "every acknowledged job is there");
    cr_assert_eq(claim_all(p, "bud"), enqueued);
    assert_check_clean(p, "bud");
    for (int i = 0; i < HOGS; i++) {
        tc_close(hogs[i].c);
        free(hogs[i].data);
    }
    free(good.data);
    tc_close(good.c);
    tc_close(late);
    tc_close(p);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

#define PRODUCERS 4
#define PAYLOAD   1000

/* A producer pipelining enqueues: the lines it has sent whole, and the
 * one it is in the middle of. */
struct producer {
    struct feed f;
    long long sent; /* complete lines */
    char line[PAYLOAD + 256];
};

static void producer_next(struct producer *pr)
{
    int n = snprintf(pr->line, sizeof(pr->line),
                     "{\"op\":\"enqueue\",\"queue\":\"stall\",\"group\":\"TENs\",\"ref\":%lld,"
                     "\"payload\":\"%0*d\"}\n",
                     pr->sent, PAYLOAD, 0);
    pr->f.data = pr->line;
    pr->f.len = (size_t)n;
    pr->f.off = 0;
}

/* Send lines until the socket is full. */
static void producer_pump(struct producer *pr)
{
    while (feed_pump(&pr->f)) {
        pr->sent++;
        producer_next(pr);
    }
}

/* Feed every producer, note the gauge's peak; returns how many
 * connections have their reads paused. */
static long long stall_pump(struct producer *prs, long long *gauge_peak)
{
    for (int i = 0; i < PRODUCERS; i++)
        producer_pump(&prs[i]);
    long long g = metric("emqd_buffered_bytes");
    *gauge_peak = g > *gauge_peak ? g : *gauge_peak;
    return metric("emqd_reads_paused");
}

/* Redis stalls (SIGSTOP) while producers pipeline enqueues as fast as the
 * daemon reads them. Each request in flight holds its parsed form and its
 * command (twice: the pool's copy and hiredis's); before the budget that
 * was max-inflight x producers x a few KB, and more with more producers.
 * Now the daemon pauses at max-buffered and, the backend being the one
 * that holds, sheds nothing: once Redis goes on, every request is
 * answered, in order, and every acknowledged job is in the store. */
Test(budget, a_stalled_backend_holds_the_daemon_to_max_buffered)
{
    const char *const extra[] = {"--max-buffered", "4194304", "--redis-timeout-ms", "600000", NULL};
    fx_start(extra);
    struct tc_conn *p = fx_conn();
    json_decref(tc_call(p, "{\"op\":\"depth\",\"queue\":\"stall\"}"));
    long rss0 = emqd_rss_kb(&fx_emqd);
    cr_assert_gt(rss0, 0);

    static struct producer prs[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        prs[i] = (struct producer){.f.c = fx_conn()};
        producer_next(&prs[i]);
    }
    cr_assert_eq(kill(fx_redis.pid, SIGSTOP), 0);
    /* Until the daemon has paused every producer's reads (the others'
     * too: each idle connection is held as well). */
    long long gauge_peak = 0;
    await(stall_pump(prs, &gauge_peak) >= PRODUCERS + 1, "emqd to pause every connection's reads");
    long rss = emqd_rss_kb(&fx_emqd);
    for (int i = 0; i < 3; i++) {
        long long g = metric("emqd_buffered_bytes");
        gauge_peak = g > gauge_peak ? g : gauge_peak;
    }
    cr_assert_leq(gauge_peak, BUDGET + 2 * READ_MAX, "emqd held %lld bytes with max-buffered at %u",
                  gauge_peak, BUDGET);
    /* Unbounded, 4 x 4096 requests of ~3.8 KB would be 62 MB; bounded,
     * the budget and what malloc (and ASan: quarantine, shadow) keep. */
    cr_assert_lt(rss - rss0, 32 * 1024, "emqd grew by %ld KiB with Redis stopped", rss - rss0);

    cr_assert_eq(kill(fx_redis.pid, SIGCONT), 0);
    long long acked = 0;
    for (int i = 0; i < PRODUCERS; i++) {
        struct producer *pr = &prs[i];
        if (pr->f.off > 0) { /* the line it was in the middle of */
            await(feed_pump(&pr->f), "producer %d's last line to be sent", i);
            pr->sent++;
        }
        for (long long k = 0; k < pr->sent; k++) {
            json_t *r = tc_read(pr->f.c, wait_deadline_ms(0));
            cr_assert_not_null(r, "producer %d: reply %lld of %lld never came", i, k, pr->sent);
            assert_ok(r);
            cr_assert_eq(jint(r, "ref"), k, "producer %d: replies out of order", i);
            acked++;
            json_decref(r);
        }
    }
    cr_assert_gt(acked, 0);
    cr_assert_eq(metric("emqd_buffered_shed_total{what=\"connection\"}"), 0);
    cr_assert_eq(metric("emqd_buffered_shed_total{what=\"line\"}"), 0);
    cr_assert_eq(fx_stat(p, "stall", "pending"), acked, "every acknowledged enqueue is stored");
    assert_check_clean(p, "stall");
    for (int i = 0; i < PRODUCERS; i++)
        tc_close(prs[i].f.c);
    tc_close(p);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* A client that takes a large claim and never reads holds output that no
 * pause can drain, and with it every other connection's reads. Once a
 * whole second passes with reads paused, the total not falling and the
 * backend answering, the daemon closes the connection holding the most;
 * its jobs go back, and the others are read again. */
Test(budget, a_client_that_never_reads_cannot_keep_reads_paused)
{
    const char *const extra[] = {"--max-buffered", "4194304", NULL};
    fx_start(extra);
    struct tc_conn *p = fx_conn();
    for (int i = 0; i < 12; i++) {
        size_t len;
        char *line = partial_enqueue("sink", "TENa", 'z', 500000, &len);
        memcpy(line + len, "\"}", 3);
        json_t *r = tc_call(p, "%s", line);
        assert_ok(r);
        json_decref(r);
        free(line);
    }
    struct tc_conn *w = fx_conn();
    int small = 4096;
    setsockopt(w->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    cr_assert_eq(tc_send_line(w, "{\"op\":\"claim\",\"queue\":\"sink\",\"count\":12,"
                                 "\"lease_ms\":3600000}"),
                 0);
    await(metric("emqd_buffered_shed_total{what=\"connection\"}") >= 1,
          "emqd to close the connection that does not read its 6 MB reply");
    struct tc_conn *late = fx_conn();
    json_t *pong = tc_call(late, "{\"op\":\"ping\"}");
    assert_ok(pong);
    json_decref(pong);
    /* Its tiny receive window drains what it was sent slowly: that it was
     * closed shows as its leases coming back, not as an end of file. */
    await(fx_stat(p, "sink", "active") == 0, "the closed connection's leases to be released");
    cr_assert_eq(fx_stat(p, "sink", "pending"), 12);
    assert_check_clean(p, "sink");
    tc_close(late);
    tc_close(w);
    tc_close(p);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}
