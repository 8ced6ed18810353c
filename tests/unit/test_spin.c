/* util/spin: a touch starts a spell of polling that ends by itself a budget
 * after the last touch, on a real libuv loop. No test here times anything:
 * each runs the loop until the spell ends (Criterion's timeout is the
 * deadline) and checks lower bounds the spell keeps by construction. */
#include <criterion/criterion.h>
#include <uv.h>

#include "spin.h"

/* A referenced handle that keeps the loop turning until the spell is over
 * (the spin's own handle is unreferenced: it never keeps a loop alive). A
 * prepare handle: it runs after the idle handles, so it sees a spell that
 * ended on this turn before the poll would block for want of work. */
struct watch {
    uv_prepare_t h;
    int turns;      /* loop turns seen while the spell was on */
    int touch_more; /* touch again on each of this many turns */
    int zero_at;    /* on this turn, set the budget to 0 (0 = never) */
    uint64_t last_touch_ns;
};

static void watch_cb(uv_prepare_t *h)
{
    struct watch *w = h->data;
    if (!spin_active()) {
        uv_prepare_stop(h);
        return;
    }
    w->turns++;
    if (w->turns <= w->touch_more) {
        w->last_touch_ns = uv_hrtime(); /* at or before the touch's own clock read */
        spin_touch();
    }
    if (w->zero_at != 0 && w->turns == w->zero_at)
        spin_set_budget(0);
}

static void run_until_idle(uv_loop_t *loop, struct watch *w)
{
    uv_prepare_init(loop, &w->h);
    w->h.data = w;
    uv_prepare_start(&w->h, watch_cb);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&w->h, NULL);
}

/* A loop with the spin set up on it, and the spin's totals before. */
struct rig {
    uv_loop_t loop;
    struct spin_stats base;
};

static void begin(struct rig *r, uint64_t budget_us)
{
    uv_loop_init(&r->loop);
    spin_get_stats(&r->base);
    spin_init(&r->loop, budget_us);
}

/* The spin's totals since begin(). */
static struct spin_stats since(const struct rig *r)
{
    struct spin_stats st;
    spin_get_stats(&st);
    st.spins -= r->base.spins;
    st.ns -= r->base.ns;
    return st;
}

static void finish(struct rig *r)
{
    spin_close();
    uv_run(&r->loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&r->loop), 0, "every handle closed");
}

Test(spin, a_touch_polls_until_the_budget_has_passed_then_stops, .timeout = 60)
{
    struct rig r;
    /* Budgets here are long beside a loop turn, so that a loaded machine
     * that stalls the test between turns does not end a spell early. */
    begin(&r, 200 * 1000);
    cr_assert_not(spin_active(), "no spell before any work");
    uint64_t t0 = uv_hrtime();
    spin_touch();
    cr_assert(spin_active(), "a touch starts a spell");
    struct watch w = {0};
    run_until_idle(&r.loop, &w);
    uint64_t t1 = uv_hrtime();

    cr_assert_not(spin_active(), "the spell ended by itself");
    cr_assert_geq(w.turns, 1, "the loop kept turning");
    struct spin_stats st = since(&r);
    cr_assert_eq(st.spins, 1, "one spell");
    cr_assert_geq(st.ns, 200 * 1000 * 1000, "it lasted at least the budget");
    cr_assert_leq(st.ns, t1 - t0, "and is counted within the time it ran");
    finish(&r);
}

Test(spin, touches_during_a_spell_extend_it, .timeout = 60)
{
    struct rig r;
    begin(&r, 1000 * 1000);
    spin_touch();
    uint64_t t0 = uv_hrtime(); /* at or after the spell began */
    struct watch w = {.touch_more = 50};
    run_until_idle(&r.loop, &w);

    cr_assert_geq(w.turns, 51, "every touch was followed by more polling");
    struct spin_stats st = since(&r);
    cr_assert_eq(st.spins, 1, "touches within a spell start no new one");
    cr_assert_geq(st.ns, w.last_touch_ns - t0 + 1000ULL * 1000 * 1000,
                  "it lasted the budget past the last touch");
    finish(&r);
}

Test(spin, a_budget_of_0_never_polls, .timeout = 60)
{
    struct rig r;
    begin(&r, 0);
    spin_touch();
    cr_assert_not(spin_active(), "spin-us 0: the loop sleeps at once");
    cr_assert_eq(since(&r).spins, 0);
    finish(&r);
}

Test(spin, a_budget_set_to_0_ends_a_spell, .timeout = 60)
{
    struct rig r;
    /* An hour: the loop below returns only because the reload ended it. */
    begin(&r, 3600ULL * 1000 * 1000);
    spin_touch();
    struct watch w = {.zero_at = 3};
    run_until_idle(&r.loop, &w);
    cr_assert_not(spin_active(), "ended at the first turn after the budget went to 0");
    cr_assert_eq(w.turns, 3);
    finish(&r);
}

Test(spin, closing_during_a_spell_ends_it_and_frees_the_loop, .timeout = 60)
{
    struct rig r;
    begin(&r, 3600ULL * 1000 * 1000);
    spin_touch();
    uv_run(&r.loop, UV_RUN_NOWAIT);
    cr_assert(spin_active());
    finish(&r);
    cr_assert_not(spin_active());
    cr_assert_gt(since(&r).ns, 0, "the spell's time is counted when it is cut short");
    spin_touch(); /* after close: ignored, not a use of a closed handle */
    cr_assert_not(spin_active());
}
