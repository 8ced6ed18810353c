/* The embedded script table and the key layout it is called with. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "keys.h"
#include "lua_scripts.h"

/* Script id's part of the library: from its register_function to the
 * next one (or the end), a copy the caller frees. */
static char *section(enum script_id id)
{
    char want[128];
    snprintf(want, sizeof(want), "redis.register_function{function_name = '%s',",
             script_table[id].function);
    const char *at = strstr(lua_library, want);
    cr_assert_not_null(at, "%s: not registered in the library", script_table[id].name);
    cr_assert_null(strstr(at + 1, want), "%s: registered twice", script_table[id].name);
    const char *end = strstr(at + 1, "redis.register_function{");
    size_t len = end != NULL ? (size_t)(end - at) : strlen(at);
    char *out = malloc(len + 1);
    cr_assert_not_null(out);
    memcpy(out, at, len);
    out[len] = '\0';
    return out;
}

/* The library is named emq_<12 hex digits> (its version), says so in its
 * header line, and holds lib.lua's begin() that every function runs first. */
Test(scripts, the_library_is_versioned_and_whole)
{
    cr_assert_eq(strlen(lua_library), lua_library_len);
    cr_assert_eq(strlen(lua_library_name), 16);
    cr_assert_eq(strncmp(lua_library_name, "emq_", 4), 0);
    cr_assert_eq(strspn(lua_library_name + 4, "0123456789abcdef"), 12);
    char head[64];
    snprintf(head, sizeof(head), "#!lua name=%s\n", lua_library_name);
    cr_assert_eq(strncmp(lua_library, head, strlen(head)), 0, "the header line");
    cr_assert_not_null(strstr(lua_library, "local function begin(argv)"));
}

Test(scripts, table_is_complete_and_well_formed)
{
    for (int i = 0; i < SCRIPT__COUNT; i++) {
        const struct script *s = &script_table[i];
        cr_assert_not_null(s->name, "script %d has no entry", i);
        char fn[128];
        snprintf(fn, sizeof(fn), "%s_%s", lua_library_name, s->name);
        cr_assert_str_eq(s->function, fn, "%s: its function's name", s->name);
        cr_assert_eq(strlen(s->function), s->function_len, "%s: function_len", s->name);
        char *text = section(i);
        cr_assert_not_null(strstr(text, "begin(ARGV)\n"), "%s: does not begin()", s->name);
        cr_assert_not_null(strstr(text, "-- KEYS:"), "%s: no KEYS contract", s->name);
        cr_assert_not_null(strstr(text, "-- Returns"), "%s: no return contract", s->name);
        free(text);
        /* The fallback (an EVAL script of its own): whole, and it too
         * starts the call with begin(). */
        cr_assert_eq(strlen(s->source), s->length, "%s: length", s->name);
        cr_assert_eq(strlen(s->sha1), 40, "%s: sha1", s->name);
        cr_assert_eq(strspn(s->sha1, "0123456789abcdef"), 40, "%s: sha1 is hex", s->name);
        cr_assert_not_null(strstr(s->source, "\nbegin(ARGV)\n"), "%s: fallback without begin()",
                           s->name);
        for (int k = 0; k < i; k++)
            cr_assert_str_neq(s->name, script_table[k].name);
    }
    cr_assert_str_eq(script_table[SCRIPT_ENQUEUE].name, "enqueue");
    cr_assert_str_eq(script_table[SCRIPT_CLAIM].name, "claim");
}

/* A script the table says only reads is registered with Redis' no-writes
 * flag, so Redis refuses any write it tries (replica-acks skips WAIT
 * after it); every other script may write and has no such flag. The reads
 * are the ones the admin ops make, and the job path's scripts all write.
 * The moves that free memory or only move what exists run out of memory
 * (allow-oom); enqueue, which adds jobs, does not. */
Test(scripts, reads_are_shipped_no_writes_and_writes_are_not)
{
    int reads = 0;
    for (int i = 0; i < SCRIPT__COUNT; i++) {
        const struct script *s = &script_table[i];
        char *text = section(i);
        bool ro = strstr(text, "flags = {'no-writes'}") != NULL;
        bool oom = strstr(text, "flags = {'allow-oom'}") != NULL;
        free(text);
        cr_assert_eq(ro, !s->writes, "%s: writes=%d but no-writes flag=%d", s->name, s->writes, ro);
        /* The fallback carries the same flags, as its shebang. */
        cr_assert_eq(strncmp(s->source, "#!lua flags=no-writes\n", 22) == 0, ro,
                     "%s: fallback's no-writes", s->name);
        cr_assert_eq(strncmp(s->source, "#!lua flags=allow-oom\n", 22) == 0, oom,
                     "%s: fallback's allow-oom", s->name);
        reads += !s->writes;
    }
    cr_assert_eq(reads, 5, "check, depth, job, peek, stats");
    cr_assert(!script_table[SCRIPT_DEPTH].writes);
    cr_assert(!script_table[SCRIPT_STATS].writes);
    cr_assert(script_table[SCRIPT_ENQUEUE].writes);
    cr_assert(script_table[SCRIPT_CLAIM].writes);
    cr_assert(script_table[SCRIPT_GROUPS].writes, "groups drops idle groups as it passes");
    char *enq = section(SCRIPT_ENQUEUE), *claim = section(SCRIPT_CLAIM);
    cr_assert_not_null(strstr(enq, "flags = {},"), "enqueue: refused out of memory");
    cr_assert_not_null(strstr(claim, "flags = {'allow-oom'},"), "claim: runs out of memory");
    free(enq);
    free(claim);
}

/* lua/lib.lua builds the queue's ten fixed keys from the prefix, one
 * "K_<NAME> = pfx .. '<suffix>'" each (begin()), in the order of keys.h, and
 * documents them in that order ("--   1 ring"): keys.c must name the same
 * keys (the daemon subscribes to the wake channel and reads some of them
 * with plain commands by those names). */
Test(scripts, key_order_matches_lib_lua)
{
    char path[512];
    const char *root = getenv("EMQ_SOURCE_ROOT");
    cr_assert_not_null(root, "EMQ_SOURCE_ROOT is not set");
    snprintf(path, sizeof(path), "%s/lua/lib.lua", root);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    char line[256];
    int documented = 0, built = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        int idx;
        char name[32], var[40], suffix[40];
        if (sscanf(line, "-- %d %31s", &idx, name) == 2 && idx >= 1 && idx <= KEY__COUNT) {
            cr_assert_str_eq(keys_suffix[idx - 1], name, "key %d", idx);
            documented++;
        } else if (sscanf(line, " K_%39s = pfx .. '%39[^']'", var, suffix) == 2 &&
                   built < KEY__COUNT) {
            cr_assert_str_eq(keys_suffix[built], suffix, "K_%s is key %d", var, built + 1);
            char upper[40];
            size_t i = 0;
            for (; suffix[i] != '\0' && i + 1 < sizeof(upper); i++)
                upper[i] =
                    (char)(suffix[i] >= 'a' && suffix[i] <= 'z' ? suffix[i] - 32 : suffix[i]);
            upper[i] = '\0';
            cr_assert_str_eq(var, upper, "K_%s builds '%s'", var, suffix);
            built++;
        }
    }
    fclose(f);
    cr_assert_eq(documented, KEY__COUNT);
    cr_assert_eq(built, KEY__COUNT);
}

Test(scripts, keys_carry_the_queue_hash_tag)
{
    struct keys k;
    cr_assert_eq(keys_init(&k, "orders", 6), 0);
    cr_assert_str_eq(k.prefix, "emq:{orders}:");
    cr_assert_eq(k.prefix_len, 13);
    cr_assert_str_eq(k.names[KEY_RING], "emq:{orders}:ring");
    cr_assert_eq(k.lens[KEY_GROUPS], strlen("emq:{orders}:groups"));
    cr_assert_eq(keys_init(&k, "bad}name", 8), KEYS_EQUEUE);
    cr_assert_eq(keys_init(&k, "", 0), KEYS_EQUEUE);
}

/* The check's step table (daemon/store/check.c) names a step that
 * lua/check.lua has, for every step. */
Test(scripts, every_check_step_is_one_the_script_knows)
{
    char *src = section(SCRIPT_CHECK);
    for (int i = 0; i < STORE_CHECK__COUNT; i++) {
        char want[64];
        cr_assert_not_null(store_check_steps[i], "step %d has no name", i);
        snprintf(want, sizeof(want), "step == '%s'", store_check_steps[i]);
        cr_assert_not_null(strstr(src, want), "check.lua has no step %s", store_check_steps[i]);
        for (int k = 0; k < i; k++)
            cr_assert_str_neq(store_check_steps[i], store_check_steps[k]);
    }
    free(src);
}
