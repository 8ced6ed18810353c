/* emq_addr: emq_parse_addr, the "HOST:PORT" / "[V6]:PORT" / "PORT" /
 * "tls://HOST:PORT" / "unix:PATH" syntax every libemq program accepts, and emq_format_addr,
 * its inverse for messages (see emq.h). */
#include "emq_int.h"

#include <stdio.h>
#include <string.h>

/* Parse a decimal port 1..65535 spanning [s, end). */
static int parse_port(const char *s, const char *end)
{
    int port = 0;
    if (s == end || end - s > 5)
        return -1;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        port = port * 10 + (*s - '0');
    }
    return port >= 1 && port <= 65535 ? port : -1;
}

int emq_parse_addr(struct emq_options *opts, const char *addr)
{
    if (opts == NULL || addr == NULL || *addr == '\0')
        return EMQ_EUSAGE;
    if (strncmp(addr, "tls://", 6) == 0) {
        /* TLS is TCP: a unix path or a bare port (which keeps a host that
         * may not be known yet) would be ambiguous. */
        if (addr[6] == '\0' || addr[6] == '/' || strncmp(addr + 6, "unix:", 5) == 0 ||
            strrchr(addr + 6, ':') == NULL)
            return EMQ_EUSAGE;
        int rc = emq_parse_addr(opts, addr + 6);
        if (rc == EMQ_OK)
            opts->tls = true;
        return rc;
    }
    if (strncmp(addr, "unix:", 5) == 0 || addr[0] == '/') {
        const char *path = addr[0] == '/' ? addr : addr + 5;
        if (*path == '\0')
            return EMQ_EUSAGE;
        opts->unix_path = path;
        return EMQ_OK;
    }
    const char *colon = strrchr(addr, ':'), *host = addr, *host_end;
    int port;
    if (colon == NULL) { /* "PORT" */
        port = parse_port(addr, addr + strlen(addr));
        if (port < 0)
            return EMQ_EUSAGE;
        opts->port = port;
        opts->unix_path = NULL;
        return EMQ_OK;
    }
    port = parse_port(colon + 1, colon + strlen(colon));
    host_end = colon;
    if (addr[0] == '[') { /* "[V6]:PORT" */
        if (colon[-1] != ']')
            return EMQ_EUSAGE;
        host = addr + 1;
        host_end = colon - 1;
    } else if (memchr(addr, ':', (size_t)(colon - addr)) != NULL) {
        return EMQ_EUSAGE; /* a bare IPv6 literal needs brackets */
    }
    size_t n = (size_t)(host_end - host);
    if (port < 0 || n == 0 || n >= sizeof(opts->host_buf) || memchr(host, ']', n) != NULL ||
        memchr(host, '[', n) != NULL)
        return EMQ_EUSAGE;
    memcpy(opts->host_buf, host, n);
    opts->host_buf[n] = '\0';
    opts->host = opts->host_buf;
    opts->port = port;
    opts->unix_path = NULL;
    return EMQ_OK;
}

const char *emq_format_addr(const struct emq_options *opts, char *buf, size_t size)
{
    const char *host = opts->host != NULL ? opts->host : EMQ_DEFAULT_HOST;
    int port = opts->port > 0 ? opts->port : EMQ_DEFAULT_PORT;
    if (opts->unix_path != NULL)
        snprintf(buf, size, "%s%s", opts->unix_path[0] == '/' ? "" : "unix:", opts->unix_path);
    else if (strchr(host, ':') != NULL) /* an IPv6 literal */
        snprintf(buf, size, "%s[%s]:%d", opts->tls ? "tls://" : "", host, port);
    else
        snprintf(buf, size, "%s%s:%d", opts->tls ? "tls://" : "", host, port);
    return buf;
}
