/* consumer: a connection's parked claims and streams, as the core's
 * waiters (waiter.h). A stream takes a job by pushing it at once; a
 * parked claim gathers jobs and is answered after the first round that
 * gave it any, or when its wait_ms runs out. */
#ifndef EMQ_CONSUMER_H
#define EMQ_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "reply.h"
#include "waiter.h"

struct client;
struct queue;
struct req;

struct consumer {
    struct waiter w;        /* first: the core hands back &w */
    struct consumer *cnext; /* in the client's list */
    struct client *c;
    bool stream;
    /* a parked claim */
    struct req *req;
    struct outbuf jobs; /* leased jobs gathered so far, encoded, comma-joined */
    size_t njobs, want;
    uv_timer_t timer;
    bool timer_on;
    /* a stream */
    size_t credit, outstanding;
};

/* Set the client's stream on q of kind flat (made if new) to credit and
 * lease_ms. Returns the stream to park once the request's reply is out
 * (req->park), or NULL when it has no credit left (it is unparked then).
 * -ENOMEM through *err. */
struct consumer *consumer_stream(struct client *c, struct queue *q, bool flat, size_t credit,
                                 uint64_t lease_ms, int *err);
/* Park a claim that found nothing until work comes or wait_ms passes. */
int consumer_wait_claim(struct req *r, size_t count, uint64_t lease_ms, bool flat,
                        uint64_t wait_ms);
/* A stream's credit changed (a lease was settled or forgotten): park it
 * again if it has room. */
void consumer_credit(struct consumer *s);
/* The client stops (shutdown): answer its parked claims with what they
 * have and stop its streams. */
void consumer_stop_all(struct client *c);
/* The client closed: free its consumers; parked claims finish without a
 * reply. */
void consumer_close_all(struct client *c);

#endif
