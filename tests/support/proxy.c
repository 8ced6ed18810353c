/* proxy: see proxy.h. One thread polls every socket; the test's thread
 * changes the mode under the lock and wakes it through a pipe. Writes are
 * blocking: on loopback, to a Redis or a daemon that reads, they finish. */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROXY_PAIRS_MAX 256

/* One client connection and its Redis side. */
struct proxy_pair {
    struct proxy_pair *next;
    int cfd, sfd;  /* -1 once closed */
    bool holding;  /* keeping its requests (PROXY_HOLD) */
    bool released; /* its kept requests and the marker were sent */
    char *held;    /* the kept requests */
    size_t held_len;
};

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int connect_target(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void pair_close(struct proxy_pair *pr)
{
    if (pr->cfd >= 0)
        close(pr->cfd);
    if (pr->sfd >= 0)
        close(pr->sfd);
    pr->cfd = pr->sfd = -1;
}

static void pair_accept(struct proxy *p)
{
    int cfd = accept(p->listen_fd, NULL, NULL);
    if (cfd < 0)
        return;
    int sfd = connect_target(p->target_port);
    struct proxy_pair *pr = sfd >= 0 ? calloc(1, sizeof(*pr)) : NULL;
    if (pr == NULL) {
        close(cfd);
        if (sfd >= 0)
            close(sfd);
        return;
    }
    pr->cfd = cfd;
    pr->sfd = sfd;
    pr->next = p->pairs;
    p->pairs = pr;
    p->accepted++;
}

/* Bytes from the client: on to Redis, or kept. */
static void from_client(struct proxy *p, struct proxy_pair *pr)
{
    char buf[65536];
    ssize_t n = read(pr->cfd, buf, sizeof(buf));
    if (n <= 0) {
        if (pr->holding) { /* the Redis side stays, with what it has not been sent */
            close(pr->cfd);
            pr->cfd = -1;
        } else {
            pair_close(pr);
        }
        return;
    }
    if (pr->holding) {
        char *h = realloc(pr->held, pr->held_len + (size_t)n);
        if (h == NULL)
            return;
        memcpy(h + pr->held_len, buf, (size_t)n);
        pr->held = h;
        pr->held_len += (size_t)n;
        p->held += (size_t)n;
        return;
    }
    if (write_all(pr->sfd, buf, (size_t)n) != 0)
        pair_close(pr);
}

/* Bytes from Redis: on to the client, or dropped (PROXY_CUT), or, for a
 * released connection, counted. */
static void from_server(struct proxy *p, struct proxy_pair *pr)
{
    char buf[65536];
    ssize_t n = read(pr->sfd, buf, sizeof(buf));
    if (n <= 0) {
        if (pr->released || pr->holding)
            p->released_closed++;
        pair_close(pr);
        return;
    }
    if (pr->released) {
        p->released_answered++;
        pair_close(pr);
    } else if (p->mode == PROXY_CUT) {
        p->cut++;
        pair_close(pr);
    } else if (pr->cfd >= 0 && write_all(pr->cfd, buf, (size_t)n) != 0) {
        pair_close(pr);
    }
}

/* Free the pairs whose sockets are both closed. */
static void pairs_reap(struct proxy *p)
{
    for (struct proxy_pair **at = &p->pairs; *at != NULL;) {
        struct proxy_pair *pr = *at;
        if (pr->cfd < 0 && pr->sfd < 0) {
            *at = pr->next;
            free(pr->held);
            free(pr);
        } else {
            at = &pr->next;
        }
    }
}

static void *proxy_main(void *arg)
{
    struct proxy *p = arg;
    struct pollfd fds[2 + 2 * PROXY_PAIRS_MAX];
    struct proxy_pair *who[2 + 2 * PROXY_PAIRS_MAX];

    for (;;) {
        pthread_mutex_lock(&p->lock);
        if (p->stop) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        nfds_t n = 0;
        fds[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        for (struct proxy_pair *pr = p->pairs; pr != NULL && n + 2 <= 2 + 2 * PROXY_PAIRS_MAX;
             pr = pr->next) {
            if (pr->cfd >= 0) {
                who[n] = pr;
                fds[n++] = (struct pollfd){.fd = pr->cfd, .events = POLLIN};
            }
            if (pr->sfd >= 0) {
                who[n] = pr;
                fds[n++] = (struct pollfd){.fd = pr->sfd, .events = POLLIN};
            }
        }
        pthread_mutex_unlock(&p->lock);
        if (poll(fds, n, -1) < 0 && errno != EINTR)
            return NULL;
        pthread_mutex_lock(&p->lock);
        if (fds[0].revents) {
            char c[64];
            (void)!read(p->wake[0], c, sizeof(c));
        }
        if (fds[1].revents & POLLIN)
            pair_accept(p);
        for (nfds_t i = 2; i < n; i++) {
            struct proxy_pair *pr = who[i];
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            /* A socket closed earlier in this pass is -1 now: skip it. */
            if (fds[i].fd == pr->cfd)
                from_client(p, pr);
            else if (fds[i].fd == pr->sfd)
                from_server(p, pr);
        }
        pairs_reap(p);
        pthread_mutex_unlock(&p->lock);
    }
}

static void proxy_wake(struct proxy *p)
{
    (void)!write(p->wake[1], "x", 1);
}

int proxy_start(struct proxy *p, int target_port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);

    memset(p, 0, sizeof(*p));
    p->target_port = target_port;
    p->mode = PROXY_PASS;
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (p->listen_fd < 0)
        return -errno;
    if (bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&sa, &len) != 0 ||
        listen(p->listen_fd, 64) != 0 || pipe(p->wake) != 0) {
        int err = -errno;
        close(p->listen_fd);
        return err;
    }
    p->port = ntohs(sa.sin_port);
    pthread_mutex_init(&p->lock, NULL);
    int err = pthread_create(&p->thread, NULL, proxy_main, p);
    if (err != 0) {
        close(p->listen_fd);
        close(p->wake[0]);
        close(p->wake[1]);
        return -err;
    }
    return 0;
}

void proxy_set_mode(struct proxy *p, enum proxy_mode mode)
{
    pthread_mutex_lock(&p->lock);
    p->mode = mode;
    if (mode == PROXY_HOLD)
        for (struct proxy_pair *pr = p->pairs; pr != NULL; pr = pr->next)
            pr->holding = true;
    pthread_mutex_unlock(&p->lock);
    proxy_wake(p);
}

void proxy_release(struct proxy *p, const char *marker, size_t marker_len)
{
    pthread_mutex_lock(&p->lock);
    p->mode = PROXY_PASS;
    for (struct proxy_pair *pr = p->pairs; pr != NULL; pr = pr->next) {
        if (!pr->holding)
            continue;
        pr->holding = false;
        pr->released = true;
        p->held -= pr->held_len;
        if (pr->sfd >= 0 && (write_all(pr->sfd, pr->held, pr->held_len) != 0 ||
                             write_all(pr->sfd, marker, marker_len) != 0)) {
            /* Redis closed it already: what it held never ran. */
            p->released_closed++;
            pair_close(pr);
        }
    }
    pthread_mutex_unlock(&p->lock);
    proxy_wake(p);
}

void proxy_counts(struct proxy *p, size_t *accepted, size_t *cut, size_t *held,
                  size_t *released_closed, size_t *released_answered)
{
    pthread_mutex_lock(&p->lock);
    if (accepted)
        *accepted = p->accepted;
    if (cut)
        *cut = p->cut;
    if (held)
        *held = p->held;
    if (released_closed)
        *released_closed = p->released_closed;
    if (released_answered)
        *released_answered = p->released_answered;
    pthread_mutex_unlock(&p->lock);
}

void proxy_stop(struct proxy *p)
{
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_mutex_unlock(&p->lock);
    proxy_wake(p);
    pthread_join(p->thread, NULL);
    for (struct proxy_pair *pr = p->pairs; pr != NULL; pr = pr->next)
        pair_close(pr);
    pairs_reap(p);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->lock);
}
