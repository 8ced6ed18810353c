/* addr: see addr.h. */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static int refuse(char *why, size_t cap, const char *what)
{
    if (why != NULL)
        snprintf(why, cap, "%s", what);
    return -EINVAL;
}

int addr_parse(const char *spec, struct sockaddr_storage *sa, char *why, size_t cap)
{
    char host[64];
    const char *colon = strrchr(spec, ':');
    if (colon == NULL)
        return refuse(why, cap, "no ':PORT'");
    size_t hlen = (size_t)(colon - spec), plen = strlen(colon + 1);
    if (hlen == 0)
        return refuse(why, cap, "no host before ':PORT'");
    if (plen == 0 || plen > 5 || strspn(colon + 1, "0123456789") != plen)
        return refuse(why, cap, "the port is not a number");
    unsigned port = 0;
    for (const char *p = colon + 1; *p; p++)
        port = port * 10 + (unsigned)(*p - '0');
    if (port < 1 || port > 65535)
        return refuse(why, cap, "the port is not in 1..65535");
    const char *h = spec;
    if (spec[0] == '[') { /* [::1]:7711 */
        if (hlen < 3 || spec[hlen - 1] != ']')
            return refuse(why, cap, "an IPv6 address without its closing ']'");
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof(host))
        return refuse(why, cap, "the host is too long");
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    if (spec[0] != '[' && strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");

    memset(sa, 0, sizeof(*sa));
    if (spec[0] == '[') {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
        if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
            return refuse(why, cap, "not an IPv6 address");
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        return 0;
    }
    struct sockaddr_in *in4 = (struct sockaddr_in *)sa;
    if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
        return refuse(why, cap,
                      "the host must be an IPv4 address, [IPv6] or localhost; names are not "
                      "resolved");
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t)port);
    return 0;
}

bool addr_loopback(const char *spec)
{
    struct sockaddr_storage sa;
    if (spec == NULL)
        return true; /* no TCP listener at all */
    if (addr_parse(spec, &sa, NULL, 0) != 0)
        return false;
    if (sa.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&sa)->sin_addr.s_addr) >> 24) == 127;
    return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&sa)->sin6_addr);
}

const char *addr_peer(const uv_tcp_t *tcp, char *buf, size_t cap)
{
    struct sockaddr_storage sa;
    int len = sizeof(sa);
    char ip[48] = "?";
    int port = 0;
    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&sa, &len) == 0) {
        if (sa.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&sa, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
        } else {
            uv_ip4_name((struct sockaddr_in *)&sa, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
        }
    }
    snprintf(buf, cap, "%s:%d", ip, port);
    return buf;
}
