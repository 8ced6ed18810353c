/* keys: the store layout of one queue: the ten fixed keys, in the order
 * lua/lib.lua builds them from the prefix "emq:{q}:" (ARGV[1] of every
 * lane script, which builds every key it touches from it; a unit test
 * keeps the two in step), for the daemon's plain commands and its wake
 * subscription. A script call declares no key, but on a Redis Cluster
 * the ten and the guard (below), by which Redis decides whether the call
 * may run while the queue's slot migrates (pool.c:pool_script). */
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

/* The key names of one queue, built once and reused for every call.
 * guard, "emq:{q}:guard", is a key nothing ever writes: declared by every
 * script call on a cluster, it makes Redis refuse the call (TRYAGAIN)
 * before the script runs while the queue's slot is being migrated, when
 * the script could otherwise meet some of the keys it computes already
 * gone (docs/ARCHITECTURE.md 7.3, "Resharding in batches"). */
struct keys {
    char prefix[KEYS_PREFIX_MAX + 1];
    size_t prefix_len;
    char names[KEY__COUNT][KEYS_PREFIX_MAX + KEYS_NAME_MAX];
    size_t lens[KEY__COUNT];
    char guard[KEYS_PREFIX_MAX + KEYS_NAME_MAX];
    size_t guard_len;
};

/* The suffix of each key after the prefix ("ring", "glimit", ...). */
extern const char *const keys_suffix[KEY__COUNT];

/* Build the keys of queue (len bytes). Returns 0, or KEYS_EQUEUE when the
 * name is not a valid queue name (nothing is built then). */
int keys_init(struct keys *k, const char *queue, size_t len);

#endif
