/* spin: poll a little after work before sleeping (spin.h says why). */
#include "spin.h"

#include <sched.h>

static uv_idle_t idle;
static bool ready;          /* spin_init ran and spin_close has not */
static uint64_t budget_ns;  /* 0 = off */
static uint64_t last_ns;    /* the last spin_touch */
static uint64_t started_ns; /* when the current spell began */
static struct spin_stats totals;

static void end_spell(uint64_t now)
{
    uv_idle_stop(&idle);
    totals.ns += now - started_ns;
}

/* Every loop turn while a spell is on: the poll before it did not block. */
static void idle_cb(uv_idle_t *h)
{
    (void)h;
    uint64_t now = uv_hrtime();
    if (budget_ns == 0 || now - last_ns > budget_ns) {
        end_spell(now);
        return;
    }
    /* Let a task the kernel queued on this CPU run now (spin.h). */
    sched_yield();
}

void spin_init(uv_loop_t *loop, uint64_t budget_us)
{
    uv_idle_init(loop, &idle);
    uv_unref((uv_handle_t *)&idle);
    ready = true;
    spin_set_budget(budget_us);
}

void spin_set_budget(uint64_t budget_us)
{
    budget_ns = budget_us * 1000;
}

void spin_touch(void)
{
    if (budget_ns == 0 || !ready)
        return;
    last_ns = uv_hrtime();
    if (!uv_is_active((uv_handle_t *)&idle)) {
        started_ns = last_ns;
        totals.spins++;
        uv_idle_start(&idle, idle_cb);
    }
}

bool spin_active(void)
{
    return ready && uv_is_active((uv_handle_t *)&idle);
}

void spin_get_stats(struct spin_stats *out)
{
    *out = totals;
    if (spin_active())
        out->ns += uv_hrtime() - started_ns;
}

void spin_close(void)
{
    if (!ready)
        return;
    if (spin_active())
        end_spell(uv_hrtime());
    ready = false;
    uv_close((uv_handle_t *)&idle, NULL);
}
