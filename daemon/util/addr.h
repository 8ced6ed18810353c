/* addr: the HOST:PORT form of emqd's own listeners (listen, metrics),
 * parsed once, strictly, for both the settings check and the bind. */
#ifndef EMQ_ADDR_H
#define EMQ_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include <uv.h>

/* Parse "IPV4:PORT", "[IPV6]:PORT" or "localhost:PORT" (= 127.0.0.1) into
 * sa. The port is 1..65535, digits only. Host names other than localhost
 * are refused rather than resolved: a listener binds at start-up, and a
 * name that resolves to something else later would be a surprise.
 * Returns 0, or -EINVAL with a phrase saying what is wrong in why (cap
 * bytes; why may be NULL). */
int addr_parse(const char *spec, struct sockaddr_storage *sa, char *why, size_t cap);

/* True if spec parses to a loopback address (127.0.0.0/8 or ::1). */
bool addr_loopback(const char *spec);

/* A connected TCP handle's peer as "IP:PORT" in buf (cap bytes; "?:0"
 * when the socket cannot say): the form connections are named by in log
 * lines and backoff keys. Returns buf. */
const char *addr_peer(const uv_tcp_t *tcp, char *buf, size_t cap);

#endif
