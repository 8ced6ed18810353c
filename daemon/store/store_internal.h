/* store_internal: what the typed calls (store.c, jobs.c, admin.c) share:
 * one in-flight call, and sending it. Not for use outside store/. */
#ifndef EMQ_STORE_INTERNAL_H
#define EMQ_STORE_INTERNAL_H

#include <hiredis/hiredis.h>

#include "check.h"
#include "store.h"

struct store_call;

/* Turns the reply of a call into its typed result and runs the caller's
 * callback exactly once. With st->code set, reply is NULL: pass the error
 * on. Otherwise reply is the script's non-error reply; a shape the script
 * never returns goes to store_unexpected. */
typedef void store_decode_fn(const struct store_call *c, const struct store_status *st,
                             const redisReply *reply);

struct store_call {
    const char *name; /* the script's, or a plain command's word: for log lines */
    store_decode_fn *decode;
    void (*cb)(void); /* the caller's typed callback, cast back by decode */
    void *priv;
    size_t n; /* what a call expects back (pairs sent), for decode */
    /* A leasing call's tag (lost.c), 0 for any other call: if its reply
     * is lost or cannot be read, the leases it took are recorded as lost
     * in sq, to be given back (store_recover). */
    uint64_t tag;
    struct store_queue *sq;
};

/* Send script id for sq with ARGV argv[0..argc) (lens NULL: strlen; the
 * prefix ARGV[1] is added by the pool). 0 or a negative errno as the
 * calls promise (store.h). */
int store_send(struct store_queue *sq, enum script_id id, int argc, const char **argv,
               const size_t *lens, store_decode_fn *decode, void (*cb)(void), void *priv, size_t n);

/* As store_send, for a call that leases jobs: one more ARGV after
 * argv[0..argc) (at most STORE_ARGS_MAX) is the call's tag, which the
 * script records as lease_by on each row it leases (lost.c). */
#define STORE_ARGS_MAX 8
int store_send_leasing(struct store_queue *sq, enum script_id id, int argc, const char **argv,
                       const size_t *lens, store_decode_fn *decode, void (*cb)(void), void *priv,
                       size_t n);

/* Record tag's leases as lost (lost.c). */
void store_lost_add(struct store_queue *sq, uint64_t tag);

/* A random start for a queue's tags, and a tag as the text the scripts
 * see: 16 hex digits and a NUL in STORE_TAG_TEXT bytes; returns 16. */
#define STORE_TAG_TEXT 17
uint64_t store_tag_seed(void);
size_t store_tag_text(uint64_t tag, char out[STORE_TAG_TEXT]);

/* Send the plain command argv[0..argc) (argv[0] a literal: it names the
 * call in log lines) on route rt (NULL: none): the queue registry's
 * commands, which touch no queue's keys. 0 or a negative errno, as
 * store_send. */
int store_send_command(struct pool *p, struct pool_route *rt, int argc, const char **argv,
                       const size_t *lens, store_decode_fn *decode, void (*cb)(void), void *priv);

/* The reply had a shape the script never returns: log it, and fill *st
 * with WIRE_EINTERNAL for the callback. */
void store_unexpected(const struct store_call *c, const redisReply *reply, struct store_status *st);

/* A successful status (code 0, message ""), and the one for a result
 * that could not be built. */
extern const struct store_status store_ok, store_oom;

/* A decoder's parser: fill out from a non-error reply. 0, STORE_SHAPE (a
 * shape the script never returns) or -ENOMEM. */
enum { STORE_SHAPE = 1 };
typedef int store_parse_fn(const redisReply *reply, void *out);

/* For a decoder: when the call ended well (*s code 0), parse its reply
 * into out; true when out is valid for the callback. Otherwise *s says
 * why (the call's own failure, store_unexpected, or store_oom). */
bool store_parsed(const struct store_call *c, struct store_status *s, const redisReply *reply,
                  store_parse_fn *parse, void *out);

/* A job's row as HGETALL returns it, into a struct store_row (admin.h;
 * out), its fields array allocated (free it). A store_parse_fn. */
int store_row_parse(const redisReply *reply, void *out);

/* A typed callback as store_call keeps it. */
#define STORE_CB(f) ((void (*)(void))(f))

/* Decimal text of v into buf (24 bytes suffice). Returns buf. */
const char *store_num(char buf[24], long long v);

/* An integer reply's value; a string reply of digits too. False when the
 * element is neither. */
bool store_int(const redisReply *r, long long *out);

/* --- the check's steps (lua/check.lua; check.c runs them) ----------------- */

typedef void store_check_page_cb(void *priv, const struct store_status *st,
                                 const struct store_check_page *page);

/* Send one step of the check, as call says. */
int store_check_step(struct store_queue *sq, const struct store_check_call *call,
                     store_check_page_cb *cb, void *priv);

#endif
