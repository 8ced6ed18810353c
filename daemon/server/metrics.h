/* metrics: the Prometheus endpoint (GET /metrics, text exposition format
 * 0.0.4) on the daemon's loop. Counters come from the daemon's own
 * accounting; queue and group gauges are read from Redis through the pool
 * at each scrape, asynchronously and bounded (one stats call and one
 * group page per queue), so a scrape never blocks the loop. */
#ifndef EMQ_METRICS_H
#define EMQ_METRICS_H

struct server;
struct metrics;

/* Serve /metrics on addr (IP:PORT). 0, or a negative libuv error (logged). */
int metrics_new(struct server *s, const char *addr, struct metrics **out);

/* Stop serving (a scrape in flight finishes into the void). Returns NULL. */
struct metrics *metrics_free(struct metrics *m);

#endif
