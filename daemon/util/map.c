/* map: string-keyed hash table (see map.h). FNV-1a; grows at load 1. */
#include "map.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *key, size_t klen)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < klen; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ULL;
    }
    return h;
}

void map_init(struct map *m)
{
    memset(m, 0, sizeof(*m));
}

void map_deinit(struct map *m)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (struct map_entry *e = m->buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            free(e);
        }
    }
    free(m->buckets);
    map_init(m);
}

static struct map_entry **slot(const struct map *m, const char *key, size_t klen)
{
    struct map_entry **p = &m->buckets[hash(key, klen) & (m->nbuckets - 1)];
    for (; *p != NULL; p = &(*p)->next)
        if ((*p)->klen == klen && memcmp((*p)->key, key, klen) == 0)
            break;
    return p;
}

void *map_get(const struct map *m, const char *key, size_t klen)
{
    if (m->count == 0)
        return NULL;
    struct map_entry *e = *slot(m, key, klen);
    return e != NULL ? e->value : NULL;
}

static int grow(struct map *m)
{
    size_t n = m->nbuckets ? m->nbuckets * 2 : 16;
    struct map_entry **b = calloc(n, sizeof(*b));
    if (b == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (struct map_entry *e = m->buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            struct map_entry **head = &b[hash(e->key, e->klen) & (n - 1)];
            e->next = *head;
            *head = e;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
    return 0;
}

int map_put(struct map *m, const char *key, size_t klen, void *value)
{
    if (m->count >= m->nbuckets && grow(m) < 0)
        return -ENOMEM;
    struct map_entry **p = slot(m, key, klen);
    if (*p != NULL) {
        (*p)->value = value;
        return 0;
    }
    struct map_entry *e = malloc(sizeof(*e) + klen + 1);
    if (e == NULL)
        return -ENOMEM;
    e->next = NULL;
    e->value = value;
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    *p = e;
    m->count++;
    return 0;
}

void *map_del(struct map *m, const char *key, size_t klen)
{
    if (m->count == 0)
        return NULL;
    struct map_entry **p = slot(m, key, klen);
    struct map_entry *e = *p;
    if (e == NULL)
        return NULL;
    void *v = e->value;
    *p = e->next;
    free(e);
    m->count--;
    return v;
}

struct map_entry *map_first(const struct map *m, size_t *bucket)
{
    for (*bucket = 0; *bucket < m->nbuckets; (*bucket)++)
        if (m->buckets[*bucket] != NULL)
            return m->buckets[*bucket];
    return NULL;
}

struct map_entry *map_next(const struct map *m, size_t *bucket, struct map_entry *e)
{
    if (e->next != NULL)
        return e->next;
    for ((*bucket)++; *bucket < m->nbuckets; (*bucket)++)
        if (m->buckets[*bucket] != NULL)
            return m->buckets[*bucket];
    return NULL;
}
