/* keys: the store layout of one queue (see keys.h). */
#include "keys.h"

#include <string.h>

const char *const keys_suffix[KEY__COUNT] = {
    [KEY_RING] = "ring",       [KEY_GLIMIT] = "glimit",   [KEY_PAUSED] = "paused",
    [KEY_ACTIVE] = "active",   [KEY_DELAYED] = "delayed", [KEY_DEAD] = "dead",
    [KEY_PENDING] = "pending", [KEY_WAKE] = "wake",       [KEY_SEQ] = "seq",
    [KEY_GROUPS] = "groups",
};

/* prefix + suffix into out (KEYS_PREFIX_MAX + KEYS_NAME_MAX bytes); its
 * length. */
static size_t key_build(char *out, const struct keys *k, const char *suffix)
{
    size_t slen = strlen(suffix);
    memcpy(out, k->prefix, k->prefix_len);
    memcpy(out + k->prefix_len, suffix, slen + 1);
    return k->prefix_len + slen;
}

int keys_init(struct keys *k, const char *queue, size_t len)
{
    if (!brand_queue_valid(queue, len))
        return KEYS_EQUEUE;
    /* The queue name is the hash tag: every key of the queue lives in one
     * cluster slot, so one script may touch them all. */
    memcpy(k->prefix, "emq:{", 5);
    memcpy(k->prefix + 5, queue, len);
    memcpy(k->prefix + 5 + len, "}:", 3);
    k->prefix_len = len + 7;
    for (int i = 0; i < KEY__COUNT; i++)
        k->lens[i] = key_build(k->names[i], k, keys_suffix[i]);
    k->guard_len = key_build(k->guard, k, "guard");
    return 0;
}
