/* emq_view: libemq's daemon-wide views (queues, clients), forget, and the
 * paging the views share with groups (see emq.h). */
#include "emq_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int emq_scan_page(struct emq *c, json_t *req, const char *cursor, int count, const char *key,
                  json_t **reply, json_t **arr, char next[33])
{
    if (req != NULL && cursor != NULL)
        json_object_set_new(req, "cursor", json_string(cursor));
    if (req != NULL && count != 0)
        json_object_set_new(req, "count", json_integer(count));
    *reply = NULL;
    int rc = emq_call(c, req, reply, 0);
    *arr = json_object_get(*reply, key);
    const char *cur = json_string_value(json_object_get(*reply, "cursor"));
    if (rc == EMQ_OK && (!json_is_array(*arr) || cur == NULL || strlen(cur) > 32))
        rc = emq_seterr(c, EMQ_EBADREPLY, "%s reply without %s and cursor", key, key);
    if (rc == EMQ_OK)
        snprintf(next, 33, "%s", cur);
    return rc;
}

/* A page of a daemon-wide view: op's reply array (op is also its key). */
static int view_page(struct emq *c, const char *op, const char *cursor, int count, json_t **out,
                     char next[33])
{
    json_t *req = out != NULL && next != NULL ? json_pack("{s:s}", "op", op) : NULL;
    json_t *reply, *arr;
    int rc = emq_scan_page(c, req, cursor, count, op, &reply, &arr, next);
    if (rc == EMQ_OK)
        *out = json_incref(arr);
    json_decref(reply);
    return rc;
}

int emq_queues(struct emq *c, const char *cursor, int count, json_t **queues, char next[33])
{
    return view_page(c, "queues", cursor, count, queues, next);
}

int emq_clients(struct emq *c, const char *cursor, int count, json_t **clients, char next[33])
{
    return view_page(c, "clients", cursor, count, clients, next);
}

int emq_forget(struct emq *c, const char *queue)
{
    json_t *req = queue != NULL ? json_pack("{s:s, s:s}", "op", "forget", "queue", queue) : NULL;
    return emq_call(c, req, NULL, 0);
}

int emq_client(struct emq *c, long long id, json_t **client)
{
    json_t *req = client != NULL && id > 0
                      ? json_pack("{s:s, s:I}", "op", "clients", "id", (json_int_t)id)
                      : NULL;
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    json_t *row = json_object_get(reply, "client");
    if (rc == EMQ_OK && !json_is_object(row))
        rc = emq_seterr(c, EMQ_EBADREPLY, "clients reply without client");
    if (rc == EMQ_OK)
        *client = json_incref(row);
    json_decref(reply);
    return rc;
}
