/* scrape: reading emqd's metrics endpoint in integration tests. One GET
 * over loopback (http_get, the name test_operate.c always called it by),
 * the body of the answer, one sample's value, and the exposition checked
 * by promtool (when it is installed). */
#ifndef EMQ_TEST_INTEGRATION_SCRAPE_H
#define EMQ_TEST_INTEGRATION_SCRAPE_H

#include <arpa/inet.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* GET path from 127.0.0.1:port; the whole response (head and body) into
 * buf, NUL-terminated. Its length. */
static inline size_t http_get(int port, const char *path, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "metrics port");
    static char req[16384];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    size_t len = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (len + 1 < cap && poll(&pfd, 1, 5000) == 1) {
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(fd);
    return len;
}

/* The body of a response read by http_get. */
static inline char *scrape_body(char *resp)
{
    char *b = strstr(resp, "\r\n\r\n");
    cr_assert_not_null(b, "no end of the head in: %.200s", resp);
    return b + 4;
}

/* The value of the sample named exactly series (name and labels, as
 * emqd writes them), or NAN when the body has no such line. */
static inline double scrape_value(const char *body, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = body; *p != '\0';) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        const char *nl = strchr(p, '\n');
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return NAN;
}

/* Check body with `promtool check metrics` (format and lint); a warning
 * when promtool is not installed. */
static inline void scrape_promtool(const char *body)
{
    if (access("/usr/bin/promtool", X_OK) != 0) {
        cr_log_warn("promtool not installed: exposition format not validated");
        return;
    }
    char path[] = "/tmp/emq-scrape-XXXXXX", cmd[128], out[4096];
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    unlink(path);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "promtool: %s", out);
}

#endif
