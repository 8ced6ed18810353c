/* keys: the store layout of one queue (see keys.h). */
#include "keys.h"

#include <string.h>

const char *const keys_suffix[KEY__COUNT] = {
    [KEY_RING] = "ring",       [KEY_GLIMIT] = "glimit",   [KEY_PAUSED] = "paused",
    [KEY_ACTIVE] = "active",   [KEY_DELAYED] = "delayed", [KEY_DEAD] = "dead",
    [KEY_PENDING] = "pending", [KEY_WAKE] = "wake",       [KEY_SEQ] = "seq",
    [KEY_GROUPS] = "groups",
};

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
    for (int i = 0; i < KEY__COUNT; i++) {
        size_t slen = strlen(keys_suffix[i]);
        memcpy(k->names[i], k->prefix, k->prefix_len);
        memcpy(k->names[i] + k->prefix_len, keys_suffix[i], slen + 1);
        k->lens[i] = k->prefix_len + slen;
    }
    return 0;
}
