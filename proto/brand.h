/* brand: the id rules. Every name that becomes part of a Redis key passes
 * through here first, so nothing malformed ever reaches a key. */
#ifndef EMQ_BRAND_H
#define EMQ_BRAND_H

#include <stdbool.h>
#include <stddef.h>

#define BRAND_BODY_MAX  64 /* longest body after the three-letter brand */
#define BRAND_ID_MAX    (3 + BRAND_BODY_MAX)
#define BRAND_QUEUE_MAX 64

/* A group id: three upper-case ASCII letters (the brand, e.g. "TEN") then
 * 1-64 of [0-9A-Za-z_-]. Example: "TENacme-42". */
bool brand_group_valid(const char *s, size_t len);

/* A job id: "JOB" then 1-64 of [0-9A-Za-z_-]. */
bool brand_job_valid(const char *s, size_t len);

/* True when s starts with the "JOB" kind: an id that fails this is EKIND,
 * one that passes it but fails brand_job_valid() is malformed (EARG). */
bool brand_job_kind(const char *s, size_t len);

/* A queue name: 1-64 of [A-Za-z0-9_.-]. No braces, colons or spaces, so a
 * name can neither break out of its {hash tag} nor forge another key. */
bool brand_queue_valid(const char *s, size_t len);

#endif
