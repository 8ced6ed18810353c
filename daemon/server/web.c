/* web: the dashboard's files (web/), embedded in emqd at build time
 * (scripts/embed_files.py) and served from memory: GET / is index.html.
 * The page talks only to /api (api.c); the headers keep it from being
 * framed by another site or from loading anything but its own files. */
#include <string.h>

#include "api.h"
#include "http.h"
#include "web_assets.h"

#define WEB_HEADERS                                                                                \
    "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"                               \
    "X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"                                    \
    "Content-Security-Policy: default-src 'self'; img-src 'self' data:; "                          \
    "frame-ancestors 'none'; form-action 'none'; base-uri 'none'\r\n"

void web_serve(const struct server *s, struct http_conn *c, const char *method, const char *path)
{
    static const char hint[] = "emqd: the dashboard is at /, metrics at /metrics\n";
    const char *why;
    if (strcmp(path, "/") == 0)
        path = "/index.html";
    for (size_t i = 0; i < web_nassets; i++) {
        const struct web_asset *f = &web_assets[i];
        if (strcmp(f->path, path) != 0)
            continue;
        if (strcmp(method, "GET") != 0) {
            http_respond(c, 405, "text/plain", "GET only\n", 9);
            return;
        }
        if (!api_open(s, &why)) {
            http_respond(c, 403, "text/plain", why, strlen(why));
            return;
        }
        http_respond_with(c, 200, f->type, WEB_HEADERS, (const char *)f->data, f->length);
        return;
    }
    http_respond(c, 404, "text/plain", hint, sizeof(hint) - 1);
}
