/* api: see api.h. A call goes through the gate (method, cross-site
 * checks, token, media type, op), becomes one request line, waits for a
 * slot (API_RUNNING_MAX), runs on a detached client of its own and is
 * answered with that client's reply line. Reads are keyed by their line:
 * a read whose twin is running waits for the twin's reply, and a reply
 * is kept for http-cache-ms. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "backoff.h"
#include "client.h"
#include "cmd.h"
#include "errors.h"
#include "http.h"
#include "log.h"
#include "req.h"
#include "server.h"

#define API_CACHE_MAX   64         /* read replies kept (or being fetched) */
#define API_CACHE_BYTES (8u << 20) /* bytes of kept replies, together */
#define API_CACHE_ONE   (1u << 20) /* a longer reply is shared, not kept */
#define API_OP_MAX      32         /* bytes of an op name in a path */
#define API_HEADERS     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"

/* The ops offered over HTTP. read: it changes nothing, so identical ones
 * may share a reply. dead is not one (its retry and purge change
 * things); the page lists dead jobs with peek. */
static const struct api_op {
    const char *name;
    bool read;
} api_ops[] = {
    {"stats", true},  {"depth", true},   {"groups", true},  {"job", true},        {"peek", true},
    {"check", true},  {"queues", true},  {"clients", true}, {"throughput", true}, {"dead", false},
    {"pause", false}, {"resume", false}, {"limit", false},  {"drain", false},     {"remove", false},
};

struct api_call;

/* One kept read reply, or (pending) one being fetched, with the calls
 * that wait for it. */
struct api_entry {
    struct api_entry *next;
    char *key; /* the request line */
    size_t klen;
    char *reply; /* NULL while pending */
    size_t reply_len;
    uint64_t expires; /* uv_now() */
    bool pending;
    struct api_call *waiters;
};

/* One HTTP request being served. Holds a reference to its connection. */
struct api_call {
    struct api *api;
    struct http_conn *conn;
    struct api_call *next; /* in the waiting line, or an entry's waiters */
    char *line;            /* the request line (owned) */
    size_t len;
    struct api_entry *entry; /* the read it fetches for, or NULL */
    struct client *c;        /* while it runs */
    char *bearer;            /* the token it carried (owned), NULL when none */
    size_t bearer_len;
};

struct api {
    struct server *srv;
    struct api_call *wait_head, *wait_tail; /* calls waiting for a slot */
    int running;
    struct api_entry *entries;
    size_t nentries, bytes;
    size_t calls;   /* calls alive (the memory waits for the last) */
    bool closing;   /* api_free ran */
    uv_idle_t kick; /* starts waiting calls outside the reply path */
    bool kick_open;
};

static void kick_closed_cb(uv_handle_t *h)
{
    free(h->data);
}

static void api_release(struct api *a)
{
    if (a->closing && a->calls == 0) {
        while (a->entries != NULL) {
            struct api_entry *e = a->entries;
            a->entries = e->next;
            free(e->key);
            free(e->reply);
            free(e);
        }
        uv_close((uv_handle_t *)&a->kick, kick_closed_cb);
    }
}

struct api *api_new(struct server *s)
{
    struct api *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->srv = s;
    uv_idle_init(s->loop, &a->kick);
    a->kick.data = a;
    return a;
}

static void call_drop(struct api_call *k);
static void entry_unlink(struct api *a, struct api_entry *e);

struct api *api_free(struct api *a)
{
    if (a == NULL)
        return NULL;
    a->closing = true;
    /* Calls still waiting for a slot go now, with the twins waiting for
     * their reply (their connections are closing too); those running
     * finish into the void, and the memory goes with the last. */
    while (a->wait_head != NULL) {
        struct api_call *k = a->wait_head;
        a->wait_head = k->next;
        if (k->entry != NULL) {
            for (struct api_call *w = k->entry->waiters, *n; w != NULL; w = n) {
                n = w->next;
                call_drop(w);
            }
            k->entry->waiters = NULL;
            entry_unlink(a, k->entry);
        }
        call_drop(k);
    }
    a->wait_tail = NULL;
    api_release(a);
    return NULL;
}

/* --- answers --------------------------------------------------------------- */

static void respond_json(struct http_conn *c, int status, const char *body, size_t len)
{
    http_respond_with(c, status, "application/json", API_HEADERS, body, len);
}

/* Answer with a protocol error line ({"ok":false,"error","message"}) and
 * an HTTP status saying which gate refused it. */
static void refuse(struct http_conn *c, int status, enum wire_error code, const char *msg)
{
    json_t *o =
        json_pack("{s:b, s:s, s:s}", "ok", 0, "error", wire_error_name(code), "message", msg);
    char *body = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (body == NULL) {
        http_respond(c, 503, "text/plain", "out of memory\n", 14);
        return;
    }
    size_t n = strlen(body);
    body[n] = '\n'; /* a reply line, as the protocol's: its NUL is not sent */
    respond_json(c, status, body, n + 1);
    free(body);
}

/* Free k (the API's memory waits for its last call: call_free). */
static void call_drop(struct api_call *k)
{
    http_conn_unref(k->conn);
    free(k->line);
    free(k->bearer);
    k->api->calls--;
    free(k);
}

static void call_free(struct api_call *k)
{
    struct api *a = k->api;
    call_drop(k);
    api_release(a);
}

static void entry_unlink(struct api *a, struct api_entry *e)
{
    for (struct api_entry **p = &a->entries; *p != NULL; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    a->nentries--;
    a->bytes -= e->reply_len;
    free(e->key);
    free(e->reply);
    free(e);
}

/* Forget the kept replies that have run out. */
static void prune(struct api *a, uint64_t now)
{
    struct api_entry *e = a->entries, *next;
    for (; e != NULL; e = next) {
        next = e->next;
        if (!e->pending && e->expires <= now)
            entry_unlink(a, e);
    }
}

/* --- running --------------------------------------------------------------- */

static void call_start(struct api_call *k);
static bool api_auth(const struct server *s, const char *tok, size_t len, enum tokens_role *role,
                     const struct token **line);

static void kick_cb(uv_idle_t *h)
{
    struct api *a = h->data;
    uv_idle_stop(h);
    while (a->wait_head != NULL && a->running < API_RUNNING_MAX) {
        struct api_call *k = a->wait_head;
        a->wait_head = k->next;
        if (a->wait_head == NULL)
            a->wait_tail = NULL;
        k->next = NULL;
        call_start(k);
    }
}

/* The reply line of k's request (the detached client's output). */
static void sink_cb(void *priv, const char *data, size_t len)
{
    struct api_call *k = priv;
    struct api *a = k->api;
    struct api_entry *e = k->entry;

    respond_json(k->conn, 200, data, len);
    if (e != NULL) {
        uint64_t ttl = a->srv->cfg->http_cache_ms;
        struct api_call *w = e->waiters;
        e->waiters = NULL;
        e->pending = false;
        while (w != NULL) {
            struct api_call *next = w->next;
            respond_json(w->conn, 200, data, len);
            call_free(w);
            w = next;
        }
        /* Kept only within the bounds; else it was shared with the
         * calls that waited for it, and goes. */
        if (ttl > 0 && len <= API_CACHE_ONE && a->bytes + len <= API_CACHE_BYTES &&
            (e->reply = malloc(len)) != NULL) {
            memcpy(e->reply, data, len);
            e->reply_len = len;
            a->bytes += len;
            e->expires = uv_now(a->srv->loop) + ttl;
        } else {
            entry_unlink(a, e);
        }
    }
    struct client *c = k->c;
    k->c = NULL;
    a->running--;
    if (a->wait_head != NULL && !a->closing)
        uv_idle_start(&a->kick, kick_cb);
    call_free(k);
    client_close(c, "answered");
}

/* k cannot run: answer it (and the twins waiting on it) with body. */
static void call_abort(struct api_call *k, int status, const char *body)
{
    struct api *a = k->api;
    if (k->entry != NULL) {
        k->entry->pending = false;
        for (struct api_call *w = k->entry->waiters, *n; w != NULL; w = n) {
            n = w->next;
            respond_json(w->conn, status, body, strlen(body));
            call_free(w);
        }
        k->entry->waiters = NULL;
        entry_unlink(a, k->entry);
    }
    respond_json(k->conn, status, body, strlen(body));
    call_free(k);
}

static void call_start(struct api_call *k)
{
    struct api *a = k->api;
    enum tokens_role role;
    const struct token *line;
    /* Judged again now: the tokens file may have been reloaded while k
     * waited, and the line it matched freed. */
    if (!api_auth(a->srv, k->bearer, k->bearer_len, &role, &line)) {
        call_abort(k, 401,
                   "{\"ok\":false,\"error\":\"EAUTH\",\"message\":\"bad or missing token\"}\n");
        return;
    }
    k->c = client_new_detached(a->srv, "http", role, line, sink_cb, k);
    if (k->c == NULL) {
        call_abort(k, 200,
                   "{\"ok\":false,\"error\":\"EINTERNAL\",\"message\":\"out of memory\"}\n");
        return;
    }
    a->running++;
    /* The line runs as a connection's would; its reply reaches sink_cb
     * at the end of this loop turn at the earliest. */
    req_run_line(k->c, k->line, k->len);
}

/* Queue k behind the calls already waiting, or start it. */
static void call_submit(struct api_call *k)
{
    struct api *a = k->api;
    if (a->running < API_RUNNING_MAX && a->wait_head == NULL) {
        call_start(k);
        return;
    }
    if (a->wait_tail != NULL)
        a->wait_tail->next = k;
    else
        a->wait_head = k;
    a->wait_tail = k;
}

/* --- the gate -------------------------------------------------------------- */

bool api_open(const struct server *s, const char **why)
{
    const struct config *cfg = s->cfg;
    if (server_auth_required(s) || cfg->allow_insecure || config_loopback(cfg->metrics))
        return true;
    *why = "the dashboard is served beyond loopback only with a token (or allow-insecure)";
    return false;
}

/* A browser names the page that sent a request (Origin, Sec-Fetch-Site):
 * only the dashboard's own origin may use the API. A request that names
 * neither is not from a browser's page (curl, a script), which a
 * forging site cannot make on a victim's behalf. */
static bool same_origin(const struct http_conn *c)
{
    size_t olen, hlen;
    const char *site = http_header(c, HTTP_H_SEC_FETCH_SITE, NULL);
    const char *origin = http_header(c, HTTP_H_ORIGIN, &olen);
    const char *host = http_header(c, HTTP_H_HOST, &hlen);
    if (site != NULL && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0)
        return false;
    if (origin == NULL)
        return true;
    if (host == NULL)
        return false;
    for (size_t i = 0; i < 2; i++) {
        const char *scheme = i == 0 ? "http://" : "https://";
        size_t sl = strlen(scheme);
        if (olen == sl + hlen && strncasecmp(origin, scheme, sl) == 0 &&
            strncasecmp(origin + sl, host, hlen) == 0)
            return true;
    }
    return false;
}

/* Without a token, the Host a browser sends must name loopback (an IP of
 * 127.0.0.0/8, [::1], or localhost): a page of another site whose name
 * it has pointed at 127.0.0.1 (DNS rebinding) is same-origin with the
 * dashboard by its own lights, and only its Host gives it away. */
static bool host_loopback(const struct http_conn *c)
{
    size_t len;
    const char *host = http_header(c, HTTP_H_HOST, &len);
    if (host == NULL)
        return false;
    char name[64];
    if (len >= sizeof(name))
        return false;
    memcpy(name, host, len);
    name[len] = '\0';
    /* Take the port off: "[::1]:9711", "127.0.0.1:9711", "localhost". */
    char *end = name[0] == '[' ? strchr(name, ']') : strrchr(name, ':');
    if (name[0] == '[') {
        if (end == NULL || (end[1] != '\0' && end[1] != ':'))
            return false;
        end[1] = '\0';
    } else if (end != NULL) {
        *end = '\0';
    }
    if (strcasecmp(name, "localhost") == 0 || strcmp(name, "[::1]") == 0)
        return true;
    unsigned a, b, cc, d;
    char tail;
    return sscanf(name, "%u.%u.%u.%u%c", &a, &b, &cc, &d, &tail) == 4 && a == 127 && b < 256 &&
           cc < 256 && d < 256;
}

/* The token of an Authorization: Bearer header (its length in *len), or
 * NULL. */
static const char *bearer(const struct http_conn *c, size_t *len)
{
    const char *h = http_header(c, HTTP_H_AUTHORIZATION, len);
    if (h == NULL || *len < 7 || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    *len -= 7;
    return h + 7;
}

/* What the token tok (len bytes; NULL: none) may do, as hello would
 * judge it: anything without authentication, admin for the token
 * setting's, a tokens-file line's role and patterns. False: nothing. */
static bool api_auth(const struct server *s, const char *tok, size_t len, enum tokens_role *role,
                     const struct token **line)
{
    *role = TOKENS_ADMIN;
    *line = NULL;
    if (!server_auth_required(s) || cmd_token_ok(s->cfg->token, tok, len))
        return true;
    *line = tok != NULL && s->tokens != NULL ? tokens_match(s->tokens, tok, len) : NULL;
    if (*line == NULL)
        return false;
    *role = (*line)->role;
    return true;
}

static bool body_is_json(const struct http_conn *c)
{
    static const char want[] = "application/json";
    size_t len;
    const char *t = http_header(c, HTTP_H_CONTENT_TYPE, &len);
    size_t n = sizeof(want) - 1;
    return t != NULL && len >= n && strncasecmp(t, want, n) == 0 &&
           (t[n] == '\0' || t[n] == ';' || t[n] == ' ');
}

static const struct api_op *op_find(const char *name)
{
    for (size_t i = 0; i < sizeof(api_ops) / sizeof(api_ops[0]); i++)
        if (strcmp(api_ops[i].name, name) == 0)
            return &api_ops[i];
    return NULL;
}

/* The request line for op with the body's arguments: the body's object
 * with "op" put first, its bytes otherwise untouched, so that every parse
 * rule of the protocol (duplicate keys, depth, UTF-8, an "op" of its own)
 * applies to them as sent. An empty body is "{}". NULL (*bad set) when
 * the body is not an object; NULL out of memory. */
static char *make_line(const char *op, const char *body, size_t blen, size_t *len, bool *bad)
{
    size_t i = 0;
    *bad = false;
    while (i < blen && strchr(" \t\r\n", body[i]) != NULL && body[i] != '\0')
        i++;
    if (i == blen) {
        body = "{}";
        blen = 2;
        i = 0;
    }
    if (body[i] != '{') {
        *bad = true;
        return NULL;
    }
    i++;
    size_t j = i;
    while (j < blen && strchr(" \t\r\n", body[j]) != NULL && body[j] != '\0')
        j++;
    bool empty = j < blen && body[j] == '}';
    size_t head = strlen(op) + 10; /* {"op":"",  */
    char *line = malloc(head + (blen - i) + 1);
    if (line == NULL)
        return NULL;
    int n = snprintf(line, head + 1, "{\"op\":\"%s\"%s", op, empty ? "" : ",");
    memcpy(line + n, body + i, blen - i);
    *len = (size_t)n + (blen - i);
    line[*len] = '\0';
    return line;
}

/* Check the op's name in the path: 1-32 bytes of a-z and _. */
static bool op_name_ok(const char *op)
{
    size_t n = strlen(op);
    if (n == 0 || n > API_OP_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((op[i] >= 'a' && op[i] <= 'z') || op[i] == '_'))
            return false;
    return true;
}

/* The checks before a request becomes a line, in the order of
 * proto/HTTP.md section 4. The op offered, or NULL when c was refused
 * (answered here). */
static const struct api_op *gate(struct server *s, struct http_conn *c, const char *method,
                                 const char *op)
{
    const char *why;
    char msg[128];

    if (strcmp(method, "POST") != 0) {
        refuse(c, 405, WIRE_EPROTO, "the API takes POST only");
        return NULL;
    }
    if (!api_open(s, &why)) {
        refuse(c, 403, WIRE_EAUTH, why);
        return NULL;
    }
    /* Cross-site checks first, then the token: a forged request learns
     * nothing, and a page of another site cannot send the custom header
     * without a CORS preflight, which emqd never grants. */
    if (!same_origin(c)) {
        refuse(c, 403, WIRE_EAUTH, "cross-site request refused");
        return NULL;
    }
    if (!server_auth_required(s) && !s->cfg->allow_insecure && !host_loopback(c)) {
        refuse(c, 403, WIRE_EAUTH, "without a token, the Host must be a loopback address");
        return NULL;
    }
    if (http_header(c, HTTP_H_EMQ_REQUEST, NULL) == NULL) {
        refuse(c, 403, WIRE_EAUTH, "the X-Emq-Request header is required");
        return NULL;
    }
    size_t tlen = 0;
    const char *tok = bearer(c, &tlen);
    enum tokens_role role;
    const struct token *line;
    /* Failed tokens count against the peer's address as failed hellos
     * do (backoff.h): guessing through the page costs the same time as
     * guessing through the protocol, and shares its windows. */
    char peer[64], kb[64];
    const char *addr = NULL; /* counted only where a token is needed */
    uint64_t now = uv_now(s->loop);
    if (server_auth_required(s)) {
        addr = backoff_key(http_peer(c, peer, sizeof(peer)), false, kb, sizeof(kb));
        uint64_t wait = backoff_wait(&s->backoff, addr, now);
        if (wait > 0) {
            snprintf(msg, sizeof(msg),
                     "too many failed token checks from this address: try again in %llu ms",
                     (unsigned long long)wait);
            refuse(c, 401, WIRE_EAUTH, msg);
            return NULL;
        }
    }
    if (!api_auth(s, tok, tlen, &role, &line)) { /* only when a token is needed: addr is set */
        log_event(LOG_INFO, "dashboard request refused: bad or missing token", "op=%.32s peer=%s",
                  op, addr);
        backoff_failed(&s->backoff, addr, now, s->cfg->auth_backoff_ms);
        refuse(c, 401, WIRE_EAUTH, "bad or missing token (Authorization: Bearer ...)");
        return NULL;
    }
    if (addr != NULL)
        backoff_passed(&s->backoff, addr);
    if (!body_is_json(c)) {
        refuse(c, 415, WIRE_EPROTO, "the body must be Content-Type: application/json");
        return NULL;
    }
    const struct api_op *o = op_name_ok(op) ? op_find(op) : NULL;
    if (o == NULL) {
        if (op_name_ok(op))
            snprintf(msg, sizeof(msg), "op \"%s\" is not available over HTTP", op);
        else
            snprintf(msg, sizeof(msg), "no such op");
        refuse(c, 404, WIRE_EUNKNOWN, msg);
        return NULL;
    }
    if (s->stopping) {
        refuse(c, 503, WIRE_EUNAVAILABLE, "the daemon is shutting down");
        return NULL;
    }
    return o;
}

/* A read: answer k from a kept reply, or let it wait for its running
 * twin (true: k is taken care of); else give it an entry to fill, when
 * there is room (false: run it). */
static bool shared(struct api *a, struct api_call *k)
{
    prune(a, uv_now(a->srv->loop));
    struct api_entry *e = a->entries;
    while (e != NULL && !(e->klen == k->len && memcmp(e->key, k->line, k->len) == 0))
        e = e->next;
    if (e != NULL && !e->pending) {
        respond_json(k->conn, 200, e->reply, e->reply_len);
        call_free(k);
        return true;
    }
    if (e != NULL) {
        k->next = e->waiters; /* its twin's reply answers it */
        e->waiters = k;
        return true;
    }
    if (a->nentries >= API_CACHE_MAX || (e = calloc(1, sizeof(*e))) == NULL)
        return false;
    if ((e->key = malloc(k->len)) == NULL) {
        free(e);
        return false;
    }
    memcpy(e->key, k->line, k->len);
    e->klen = k->len;
    e->pending = true;
    e->next = a->entries;
    a->entries = e;
    a->nentries++;
    k->entry = e;
    return false;
}

void api_handle(struct api *a, struct http_conn *c, const char *method, const char *op)
{
    const struct api_op *o = gate(a->srv, c, method, op);
    if (o == NULL)
        return;
    size_t blen, len = 0;
    bool bad;
    const char *body = http_body(c, &blen);
    char *line = make_line(o->name, body, blen, &len, &bad);
    if (line == NULL) {
        refuse(c, bad ? 400 : 503, bad ? WIRE_EPROTO : WIRE_EINTERNAL,
               bad ? "the body must be a JSON object of the op's arguments" : "out of memory");
        return;
    }
    struct api_call *k = calloc(1, sizeof(*k));
    if (k == NULL) {
        free(line);
        refuse(c, 503, WIRE_EINTERNAL, "out of memory");
        return;
    }
    size_t tlen = 0;
    const char *tok = bearer(c, &tlen);
    if (tok != NULL && (k->bearer = malloc(tlen + 1)) != NULL) {
        memcpy(k->bearer, tok, tlen);
        k->bearer[tlen] = '\0';
        k->bearer_len = tlen;
    }
    k->api = a;
    k->conn = c;
    k->line = line;
    k->len = len;
    http_conn_ref(c);
    a->calls++;
    if (o->read && shared(a, k))
        return;
    call_submit(k);
}
