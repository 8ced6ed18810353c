/* map: a small string-keyed hash table (chained, power-of-two buckets) for
 * the daemon's registries: queues by name, leases held by a connection.
 * Keys are copied in; values are borrowed pointers the caller owns. */
#ifndef EMQ_MAP_H
#define EMQ_MAP_H

#include <stddef.h>

struct map_entry {
    struct map_entry *next;
    void *value;
    size_t klen;
    char key[]; /* klen bytes, NUL-terminated */
};

struct map {
    struct map_entry **buckets;
    size_t nbuckets; /* a power of two, or 0 before the first insert */
    size_t count;
};

void map_init(struct map *m);
/* Frees the entries (not the values they point to). */
void map_deinit(struct map *m);
void *map_get(const struct map *m, const char *key, size_t klen);
/* Insert or replace. Returns 0 or -ENOMEM. */
int map_put(struct map *m, const char *key, size_t klen, void *value);
/* Remove; returns the value it held, or NULL. */
void *map_del(struct map *m, const char *key, size_t klen);

/* Iterate: for (e = map_first(m, &i); e; e = map_next(m, &i, e)). Entries
 * must not be added or removed while iterating. */
struct map_entry *map_first(const struct map *m, size_t *bucket);
struct map_entry *map_next(const struct map *m, size_t *bucket, struct map_entry *e);

#endif
