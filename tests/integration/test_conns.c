/* conns: what a connection holds between its requests. Every connection
 * reads into one buffer of the daemon's (daemon/server/client.c), and
 * keeps a buffer of its own only for a line still arriving and for
 * output not yet written: a partial line must survive the reads of other
 * connections through that buffer, a line longer than one read must
 * arrive whole, and many idle connections must cost the daemon little
 * memory, and go back to work as before. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture.h"

static void conns_setup(void)
{
    emqd_rss_shows_live_memory();
    fx_setup();
}

TestSuite(conns, .init = conns_setup, .fini = fx_teardown, .timeout = 240);

static long long metric(const char *series)
{
    return emqd_metric(&fx_emqd, series);
}

/* The start of an enqueue line to queue whose payload is a string of n
 * copies of ch, without its end ("\"}\n"). */
static char *enqueue_start(const char *queue, char ch, size_t n, size_t *len)
{
    char *s = malloc(n + 128);
    cr_assert_not_null(s);
    int o = snprintf(
        s, 128, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENg\",\"payload\":\"", queue);
    memset(s + o, ch, n);
    *len = (size_t)o + n;
    return s;
}

/* Lines through the shared read buffer from another connection: n
 * enqueues to queue "other" sent in one write (filling whole reads),
 * answered in order. */
static void other_traffic(struct tc_conn *b, int n)
{
    size_t cap = (size_t)n * 400, len = 0;
    char *batch = malloc(cap), pad[300];
    cr_assert_not_null(batch);
    memset(pad, 'b', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 1; i <= n; i++)
        len += (size_t)snprintf(batch + len, cap - len,
                                "{\"op\":\"enqueue\",\"queue\":\"other\",\"group\":\"TENg\","
                                "\"payload\":\"%s\",\"ref\":%d}\n",
                                pad, i);
    cr_assert_eq(tc_send(b, batch, len), 0);
    for (int i = 1; i <= n; i++) {
        json_t *r = tc_read(b, wait_deadline_ms(0));
        assert_ok(r);
        cr_assert_eq(jint(r, "ref"), i, "replies in order");
        json_decref(r);
    }
    free(batch);
}

/* The one job of queue has a payload of exactly n copies of ch. */
static void assert_payload(struct tc_conn *c, const char *queue, char ch, size_t n)
{
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":2}", queue);
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1, "one job in %s", queue);
    const char *p = json_string_value(json_object_get(json_array_get(jobs, 0), "payload"));
    cr_assert_not_null(p);
    cr_assert_eq(strlen(p), n, "payload of %zu bytes, want %zu", strlen(p), n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(p[i], ch, "byte %zu of the payload is '%c', want '%c'", i, p[i], ch);
    json_decref(r);
}

/* Send head of a line on a, wait until the daemon holds it (it counts a
 * partial line in emqd_buffered_bytes), let another connection's reads
 * go through the shared buffer, then send the end: the line arrives as
 * sent. */
static void split_line(size_t payload, size_t first)
{
    struct tc_conn *a = fx_conn(), *b = fx_conn();
    size_t len;
    char *line = enqueue_start("split", 'a', payload, &len);
    cr_assert_lt(first, len);
    cr_assert_eq(tc_send(a, line, first), 0);
    await(metric("emqd_buffered_bytes") >= (long long)first,
          "emqd to read the first %zu bytes of the line", first);
    other_traffic(b, 400); /* about 150 KB: several full reads */
    cr_assert_eq(tc_send(a, line + first, len - first), 0);
    cr_assert_eq(tc_send(a, "\"}\n", 3), 0);
    json_t *r = tc_read(a, wait_deadline_ms(0));
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "verdict"), "enqueued");
    json_decref(r);
    assert_payload(a, "split", 'a', payload);
    cr_assert_eq(fx_stat(b, "other", "pending"), 400);
    free(line);
    tc_close(a);
    tc_close(b);
}

/* A short partial line is copied out of the shared buffer after its
 * read; the other connection's reads then overwrite that buffer. */
Test(conns, a_partial_line_survives_other_connections_reads)
{
    split_line(3000, 1500);
}

/* A partial line longer than one read (64 KiB) grows in the connection's
 * own buffer, across reads, while the other connection's reads go
 * through the shared one. */
Test(conns, a_line_longer_than_one_read)
{
    split_line(300000, 200000);
}

/* A connection to the daemon without the test client's 1 MiB buffer. */
static int raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)fx_emqd.port)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s",
                 strerror(errno));
    return fd;
}

/* Read from fd until want replies (lines) have come; their text goes to
 * buf (NUL-terminated). */
static void raw_replies(int fd, int want, char *buf, size_t cap)
{
    size_t len = 0;
    int lines = 0;
    while (lines < want) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        cr_assert_eq(poll(&p, 1, wait_deadline_ms(0)), 1, "no reply within the deadline");
        cr_assert_lt(len + 1, cap);
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        cr_assert_gt(n, 0, "connection closed");
        for (ssize_t i = 0; i < n; i++)
            lines += buf[len + (size_t)i] == '\n';
        len += (size_t)n;
    }
    buf[len] = '\0';
}

/* One ping and its answer: the connection has read and written, so any
 * buffer it would keep, it has. */
static void raw_ping(int fd)
{
    static const char ping[] = "{\"op\":\"ping\"}\n";
    char buf[256];
    cr_assert_eq(send(fd, ping, sizeof(ping) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(ping) - 1);
    raw_replies(fd, 1, buf, sizeof(buf));
    cr_assert(strstr(buf, "\"ok\":true") != NULL, "ping answered: %s", buf);
}

#define IDLE 2000
#define IDLE_MAX                                                                                   \
    6144 /* bytes per idle connection: a read buffer's page and an output page before */

/* Connections that have been answered and sit idle hold no buffers: the
 * daemon grows by little more than its struct per connection (before:
 * a 64 KiB read buffer and a 4 KiB output buffer each, a page or more of
 * each resident). Then each goes back to work: pipelined requests,
 * answered in order. */
Test(conns, idle_connections_hold_no_buffers_and_go_back_to_work)
{
    static int fds[IDLE];
    /* Warm up what grows once (the loop's tables, the allocator's
     * arenas, under ASan its quarantine) with connections of their own. */
    for (int i = 0; i < 200; i++) {
        int fd = raw_connect();
        raw_ping(fd);
        close(fd);
    }
    struct tc_conn *c = fx_conn();
    other_traffic(c, 2000);
    long rss0 = emqd_rss_kb(&fx_emqd);
    cr_assert_gt(rss0, 0);
    for (int i = 0; i < IDLE; i++) {
        fds[i] = raw_connect();
        raw_ping(fds[i]);
    }
    long rss1 = emqd_rss_kb(&fx_emqd);
    double per = (double)(rss1 - rss0) * 1024.0 / IDLE;
    cr_log_info("emqd VmRSS %ld -> %ld KiB with %d idle connections: %.0f bytes each", rss0, rss1,
                IDLE, per);
    cr_assert_lt(per, IDLE_MAX, "%.0f bytes of emqd per idle connection (%ld -> %ld KiB)", per,
                 rss0, rss1);

    /* Back to work: every 50th connection pipelines a burst. */
    static char batch[64 * 128], buf[64 * 256];
    for (int i = 0; i < IDLE; i += 50) {
        size_t len = 0;
        for (int k = 1; k <= 64; k++)
            len += (size_t)snprintf(batch + len, sizeof(batch) - len,
                                    "{\"op\":\"enqueue\",\"queue\":\"back\",\"group\":\"TEN%d\","
                                    "\"payload\":%d,\"ref\":%d}\n",
                                    i, k, k);
        cr_assert_eq(send(fds[i], batch, len, MSG_NOSIGNAL), (ssize_t)len);
        raw_replies(fds[i], 64, buf, sizeof(buf));
        char *line = buf;
        for (int k = 1; k <= 64; k++) {
            char *nl = strchr(line, '\n');
            cr_assert_not_null(nl);
            *nl = '\0';
            json_t *r = json_loads(line, 0, NULL);
            assert_ok(r);
            cr_assert_eq(jint(r, "ref"), k, "connection %d: reply %d out of order: %s", i, k, line);
            json_decref(r);
            line = nl + 1;
        }
    }
    cr_assert_eq(fx_stat(c, "back", "pending"), (IDLE / 50) * 64);
    for (int i = 0; i < IDLE; i++)
        close(fds[i]);
    tc_close(c);
}
