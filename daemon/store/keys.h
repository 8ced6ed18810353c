/* keys: the store layout of one queue. Every lane script takes the same
 * ten KEYS in this order (lua/lib.lua names them) and ARGV[1] = the
 * prefix "emq:{q}:" from which per-job and per-lane keys are built. */
#ifndef EMQ_KEYS_H
#define EMQ_KEYS_H

#include <stddef.h>

#include "brand.h"

enum key_id {
    KEY_RING,
    KEY_GLIMIT,
    KEY_PAUSED,
    KEY_ACTIVE,
    KEY_DELAYED,
    KEY_DEAD,
    KEY_PENDING,
    KEY_WAKE,
    KEY_SEQ,
    KEY_GROUPS,
    KEY__COUNT
};

/* Expected conditions returned by keys_init(). */
enum { KEYS_EQUEUE = 1 };

#define KEYS_PREFIX_MAX (sizeof("emq:{}:") - 1 + BRAND_QUEUE_MAX)
#define KEYS_NAME_MAX   16

/* The key names of one queue, built once and reused for every call. */
struct keys {
    char prefix[KEYS_PREFIX_MAX + 1];
    size_t prefix_len;
    char names[KEY__COUNT][KEYS_PREFIX_MAX + KEYS_NAME_MAX];
    size_t lens[KEY__COUNT];
};

/* The suffix of each key after the prefix ("ring", "glimit", ...). */
extern const char *const keys_suffix[KEY__COUNT];

/* Build the keys of queue (len bytes). Returns 0, or KEYS_EQUEUE when the
 * name is not a valid queue name (nothing is built then). */
int keys_init(struct keys *k, const char *queue, size_t len);

#endif
