/* The example worker ($EMQ_WORKER) as a real process against the real
 * emqd and redis-server: it completes and fails jobs as their payloads
 * say, heartbeats long jobs, reconnects across a daemon restart, and on
 * SIGTERM releases what it holds and exits 0. Also the README's
 * "First jobs" path with the real emqctl ($EMQCTL). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../integration/fixture.h"
#include "emq.h"

/* One worker process and its stdout. */
struct wproc {
    pid_t pid;
    int out;
    size_t len;
    char buf[8192];
};

static struct wproc wk;
/* Set before worker_start: the worker's stderr goes into the stdout pipe
 * too, in the order written, for the lines it writes there. */
static bool wk_stderr_too;

static void worker_teardown(void)
{
    if (wk.pid > 0) {
        kill(wk.pid, SIGKILL);
        waitpid(wk.pid, NULL, 0);
        wk.pid = 0;
    }
    if (wk.out > 0)
        close(wk.out);
    fx_teardown();
}

/* Under UBSan, a runtime error in the library fails the test instead of
 * only printing. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1";
}

TestSuite(worker, .init = fx_setup, .fini = worker_teardown, .timeout = 60);

/* Start $EMQ_WORKER --addr 127.0.0.1:port with more arguments (NULL-ended). */
static void worker_start(const char *const *args)
{
    const char *bin = getenv("EMQ_WORKER");
    cr_assert_not_null(bin, "EMQ_WORKER is not set");
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", fx_emqd.port);
    const char *argv[16] = {bin, "--addr", addr};
    int n = 3;
    for (; *args != NULL && n < 15; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    wk = (struct wproc){.pid = fork(), .out = p[0]};
    cr_assert_geq(wk.pid, 0);
    if (wk.pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], STDOUT_FILENO);
        if (wk_stderr_too)
            dup2(p[1], STDERR_FILENO);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
}

/* The worker's next stdout line (without '\n') within timeout_ms; NULL if
 * none came. The returned string lives until the next call. */
static const char *worker_line(int timeout_ms)
{
    static char line[sizeof(wk.buf)];
    long long end = wait_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(wk.buf, '\n', wk.len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - wk.buf);
            memcpy(line, wk.buf, n);
            line[n] = '\0';
            memmove(wk.buf, nl + 1, wk.len - n - 1);
            wk.len -= n + 1;
            return line;
        }
        long long left = end - wait_now_ms();
        struct pollfd pfd = {.fd = wk.out, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return NULL;
        ssize_t r = read(wk.out, wk.buf + wk.len, sizeof(wk.buf) - wk.len - 1);
        if (r <= 0)
            return NULL;
        wk.len += (size_t)r;
    }
}

/* Read lines until one equals want; asserts it comes. */
static void expect_line(const char *want)
{
    const char *l;
    while ((l = worker_line(wait_deadline_ms(0))) != NULL)
        if (strcmp(l, want) == 0)
            return;
    cr_assert_fail("the worker never printed \"%s\"", want);
}

/* Read worker lines until each of want[0..n) has appeared, in any order
 * (the grouped and the flat stream are served independently). */
static void expect_lines(const char *const *want, size_t n)
{
    bool seen[8] = {false};
    size_t left = n;
    const char *l;
    cr_assert(n <= 8);
    while (left > 0 && (l = worker_line(wait_deadline_ms(0))) != NULL)
        for (size_t i = 0; i < n; i++)
            if (!seen[i] && strcmp(l, want[i]) == 0) {
                seen[i] = true;
                left--;
            }
    for (size_t i = 0; i < n; i++)
        cr_assert(seen[i], "the worker never printed \"%s\"", want[i]);
}

/* SIGTERM the worker and reap it; its exit status (-1 if it hung). */
static int worker_term(void)
{
    int st;
    kill(wk.pid, SIGTERM);
    if (!wait_for(test_reaped(&wk.pid, &st)))
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static struct emq *lib_conn(void)
{
    struct emq_options o = {.port = fx_emqd.port};
    struct emq *c = NULL;
    int rc = emq_connect(&c, &o);
    cr_assert_eq(rc, EMQ_OK, "emq_connect: %s", emq_errmsg(c));
    return c;
}

/* Enqueue payload (JSON text) to queue "w" as job id in group (NULL: flat). */
static void put(struct emq *c, const char *id, const char *group, const char *payload,
                int max_attempts)
{
    json_t *p = json_loads(payload, 0, NULL);
    cr_assert_not_null(p);
    struct emq_enqueue_opts o = {.job = id, .group = group, .max_attempts = max_attempts};
    int rc = emq_enqueue(c, "w", p, &o, NULL);
    cr_assert_eq(rc, EMQ_OK, "enqueue %s: %s", id, emq_errmsg(c));
    json_decref(p);
}

/* The number of active jobs of queue "w". */
static long long active_of(struct emq *c)
{
    struct emq_stats s = {0};
    cr_assert_eq(emq_stats(c, "w", &s), EMQ_OK, "stats: %s", emq_errmsg(c));
    return s.active;
}

/* A job row's state and attempts. */
static const char *row_state(struct emq *c, const char *id, long long *attempts)
{
    static char state[32];
    json_t *row;
    int rc = emq_job_row(c, "w", id, &row);
    cr_assert_eq(rc, EMQ_OK, "job %s: %s", id, emq_errmsg(c));
    snprintf(state, sizeof(state), "%s", jstr(row, "state"));
    if (attempts != NULL)
        *attempts = jint(row, "attempts");
    json_decref(row);
    return state;
}

Test(worker, completes_jobs_and_fails_the_ones_that_ask)
{
    worker_start((const char *const[]){"--credit", "2", "w", NULL});
    struct emq *c = lib_conn();
    put(c, "JOBw1", "TENa", "{\"to\":\"a@b.c\"}", 0);
    put(c, "JOBw2", NULL, "[1,2,3]", 0);
    put(c, "JOBw3", "TENb", "{\"sleep_ms\":30}", 0);
    put(c, "JOBbad", "TENa", "{\"fail\":true}", 1);
    /* Lines come in processing order, which mixes the two streams. */
    int seen = 0;
    for (const char *l; seen < 4 && (l = worker_line(wait_deadline_ms(0))) != NULL;) {
        cr_assert(strcmp(l, "done JOBw1 group TENa attempt 1") == 0 ||
                      strcmp(l, "done JOBw2 group - attempt 1") == 0 ||
                      strcmp(l, "done JOBw3 group TENb attempt 1") == 0 ||
                      strcmp(l, "failed JOBbad group TENa attempt 1 state dead") == 0,
                  "unexpected line: %s", l);
        seen++;
    }
    cr_assert_eq(seen, 4);
    cr_assert_str_eq(row_state(c, "JOBw1", NULL), "completed");
    cr_assert_str_eq(row_state(c, "JOBw2", NULL), "completed");
    cr_assert_str_eq(row_state(c, "JOBw3", NULL), "completed");
    cr_assert_str_eq(row_state(c, "JOBbad", NULL), "dead");
    json_t *row;
    cr_assert_eq(emq_job_row(c, "w", "JOBbad", &row), EMQ_OK);
    cr_assert_str_eq(jstr(row, "error"), "payload asked to fail");
    json_decref(row);
    cr_assert_eq(worker_term(), 0);
    emq_close(c);
}

Test(worker, heartbeats_a_job_longer_than_its_lease)
{
    /* Work for two and a half leases: the worker extends each lease when
     * half of it is gone, half a lease (500 ms) before the daemon would
     * reap it. */
    worker_start((const char *const[]){"--lease-ms", "1000", "w", NULL});
    struct emq *c = lib_conn();
    put(c, "JOBlong", "TENa", "{\"sleep_ms\":2500}", 0);
    expect_line("done JOBlong group TENa attempt 1");
    long long attempts = -1;
    cr_assert_str_eq(row_state(c, "JOBlong", &attempts), "completed");
    cr_assert_eq(attempts, 1, "the lease was never reaped and re-leased");
    cr_assert_eq(worker_term(), 0);
    emq_close(c);
}

Test(worker, reconnects_after_the_daemon_restarts)
{
    worker_start((const char *const[]){"w", NULL});
    struct emq *c = lib_conn();
    put(c, "JOBr1", "TENa", "{}", 0);
    expect_line("done JOBr1 group TENa attempt 1");
    emq_close(c);

    emqd_kill(&fx_emqd);
    cr_assert_eq(emqd_restart(&fx_emqd, fx_redis.port, NULL), 0, "restart on %d", fx_emqd.port);
    c = lib_conn();
    put(c, "JOBr2", "TENa", "{}", 0);
    put(c, "JOBr3", NULL, "{}", 0);
    expect_lines(
        (const char *const[]){"done JOBr2 group TENa attempt 1", "done JOBr3 group - attempt 1"},
        2);
    cr_assert_str_eq(row_state(c, "JOBr2", NULL), "completed");
    cr_assert_str_eq(row_state(c, "JOBr3", NULL), "completed");
    cr_assert_eq(worker_term(), 0);
    emq_close(c);
}

Test(worker, says_where_it_streams_from_when_it_connects_and_reconnects)
{
    wk_stderr_too = true;
    worker_start((const char *const[]){"--credit", "2", "w", NULL});
    char want[128];
    snprintf(want, sizeof(want),
             "emq-worker: connected to 127.0.0.1:%d, streaming queue w (credit 2)", fx_emqd.port);
    expect_line(want);
    emqd_kill(&fx_emqd);
    cr_assert_eq(emqd_restart(&fx_emqd, fx_redis.port, NULL), 0, "restart on %d", fx_emqd.port);
    snprintf(want, sizeof(want),
             "emq-worker: reconnected to 127.0.0.1:%d, streaming queue w (credit 2)", fx_emqd.port);
    expect_line(want);
    cr_assert_eq(worker_term(), 0);
}

Test(worker, sigterm_releases_held_jobs_and_exits_0)
{
    worker_start((const char *const[]){"--credit", "3", "w", NULL});
    struct emq *c = lib_conn();
    put(c, "JOBh1", "TENa", "{\"sleep_ms\":60000}", 0);
    put(c, "JOBh2", "TENa", "{}", 0);
    put(c, "JOBh3", "TENa", "{}", 0);
    /* Wait until all three are leased to the worker: it works on JOBh1,
     * the other two wait in its connection. */
    await(active_of(c) == 3, "the worker to hold all three jobs");
    cr_assert_eq(worker_term(), 0, "a clean exit");
    int released = 0;
    for (const char *l; (l = worker_line(wait_deadline_ms(0))) != NULL;) /* to its EOF */
        if (strncmp(l, "released JOBh", 13) == 0)
            released++;
    cr_assert_eq(released, 3);
    for (int i = 1; i <= 3; i++) {
        char id[16];
        long long attempts = -1;
        snprintf(id, sizeof(id), "JOBh%d", i);
        cr_assert_str_eq(row_state(c, id, &attempts), "pending", "%s", id);
        cr_assert_eq(attempts, 0, "%s: a stop gives the attempt back (%lld)", id, attempts);
    }
    json_t *row;
    cr_assert_eq(emq_job_row(c, "w", "JOBh1", &row), EMQ_OK);
    cr_assert_str_eq(jstr(row, "error"), "worker shutting down");
    json_decref(row);
    emq_close(c);
}

/* ---- The command line --------------------------------------------------- */

TestSuite(worker_cli, .timeout = 30);

/* One shell command line's run: exit status (-1 if it did not exit),
 * stdout and stderr. */
struct cli_run {
    int status;
    char out[16384], err[4096]; /* the man page rendered fits in out */
};

/* The file dir/name into buf (cut to size), then removed. */
static void take_file(const char *dir, const char *name, char *buf, size_t size)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    buf[fread(buf, 1, size - 1, f)] = '\0';
    fclose(f);
    unlink(path);
}

/* Run `sh -c cmd` with stdin from /dev/null, stdout and stderr to files. */
static void cli_run(const char *cmd, struct cli_run *r)
{
    char dir[] = "/tmp/emq-cli-XXXXXX", line[2048];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(line, sizeof(line), "(%s) </dev/null >%s/out 2>%s/err", cmd, dir, dir);
    int st = system(line);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    take_file(dir, "out", r->out, sizeof(r->out));
    take_file(dir, "err", r->err, sizeof(r->err));
    rmdir(dir);
}

/* $EMQ_WORKER with args (shell words), no daemon. */
static void worker_cli(const char *args, struct cli_run *r)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "\"$EMQ_WORKER\" %s", args);
    cli_run(cmd, r);
}

Test(worker_cli, version_prints_name_and_version_on_stdout)
{
    static struct cli_run r;
    worker_cli("--version", &r);
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "emq-worker " EMQ_VERSION "\n");
    cr_assert_str_empty(r.err);
}

Test(worker_cli, help_goes_to_stdout_with_exit_0)
{
    static const char *const asks[] = {"--help", "-h", "--credit 2 --help"};
    static struct cli_run r;
    for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
        worker_cli(asks[i], &r);
        cr_assert_eq(r.status, 0, "%s: exit %d, stderr: %s", asks[i], r.status, r.err);
        cr_assert(strncmp(r.out, "usage: emq-worker [options] QUEUE\n", 34) == 0, "%s", r.out);
        cr_assert(strstr(r.out, "--lease-ms N") != NULL && strstr(r.out, "Exit status") != NULL,
                  "%s", r.out);
        cr_assert_str_empty(r.err, "%s", asks[i]);
    }
}

/* A usage error is the error, the synopsis and a pointer to the help on
 * stderr, exit 2, before anything is connected to. */
Test(worker_cli, usage_errors_are_three_lines_on_stderr_with_exit_2)
{
    static const char *const cases[][2] = {
        {"", "no QUEUE given"},
        {"mail extra", "unexpected argument \"extra\""},
        {"--bogus mail", "unknown option \"--bogus\""},
        {"-x mail", "unknown option \"-x\""},
        {"mail --credit", "--credit needs a value"},
        {"--credit 0 mail", "--credit wants an integer in 1..86400000, not \"0\""},
        {"--lease-ms=soon mail", "--lease-ms wants an integer in 1..86400000, not \"soon\""},
        {"--addr nowhere mail", "bad --addr \"nowhere\": expected HOST:PORT"},
    };
    static struct cli_run r;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[256];
        snprintf(want, sizeof(want),
                 "emq-worker: %s\nusage: emq-worker [options] QUEUE\ntry 'emq-worker --help'\n",
                 cases[i][1]);
        worker_cli(cases[i][0], &r);
        cr_assert_eq(r.status, 2, "\"%s\": exit %d", cases[i][0], r.status);
        cr_assert_str_eq(r.err, want, "\"%s\"", cases[i][0]);
        cr_assert_str_empty(r.out, "\"%s\"", cases[i][0]);
    }
}

/* A bad $EMQ_ADDR is a usage error for a run that would use it, not for
 * --help or --version. */
Test(worker_cli, a_bad_emq_addr_fails_only_what_would_use_it)
{
    static struct cli_run r;
    cli_run("EMQ_ADDR=nowhere \"$EMQ_WORKER\" mail", &r);
    cr_assert_eq(r.status, 2, "exit %d, stderr: %s", r.status, r.err);
    cr_assert_str_eq(r.err, "emq-worker: bad EMQ_ADDR \"nowhere\": expected HOST:PORT\n"
                            "usage: emq-worker [options] QUEUE\ntry 'emq-worker --help'\n");
    static const char *const fine[] = {"--version", "--help"};
    for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "EMQ_ADDR=nowhere \"$EMQ_WORKER\" %s", fine[i]);
        cli_run(cmd, &r);
        cr_assert_eq(r.status, 0, "%s: exit %d, stderr: %s", fine[i], r.status, r.err);
    }
}

/* $EMQ_ADDR and $EMQ_TOKEN stand in for --addr and --token, as for emqctl. */
Test(worker, takes_emq_addr_and_emq_token_from_the_environment)
{
    emqd_kill(&fx_emqd);
    cr_assert_eq(
        emqd_start(&fx_emqd, fx_redis.port, (const char *const[]){"--token", "s3cret", NULL}), 0);
    /* A wrong token is an error reconnecting cannot fix: the worker exits 1
     * at once. Only the test's daemon asks for a token, so EAUTH shows
     * where the worker went: to $EMQ_ADDR, or to --addr over a bad one. */
    char cmds[2][256];
    snprintf(cmds[0], sizeof(cmds[0]),
             "EMQ_ADDR=127.0.0.1:%d EMQ_TOKEN=wrong timeout 60 \"$EMQ_WORKER\" w", fx_emqd.port);
    snprintf(cmds[1], sizeof(cmds[1]),
             "EMQ_ADDR=nowhere EMQ_TOKEN=wrong timeout 60 \"$EMQ_WORKER\" --addr 127.0.0.1:%d w",
             fx_emqd.port);
    for (size_t i = 0; i < 2; i++) {
        static struct cli_run r;
        cli_run(cmds[i], &r);
        cr_assert_eq(r.status, 1, "%s: exit %d, stderr: %s", cmds[i], r.status, r.err);
        cr_assert(strstr(r.err, "EAUTH") != NULL, "%s: stderr: %s", cmds[i], r.err);
    }
    /* The right token, from the environment, is let in. */
    setenv("EMQ_TOKEN", "s3cret", 1);
    wk_stderr_too = true;
    worker_start((const char *const[]){"w", NULL});
    char want[128];
    snprintf(want, sizeof(want),
             "emq-worker: connected to 127.0.0.1:%d, streaming queue w (credit 1)", fx_emqd.port);
    expect_line(want);
    cr_assert_eq(worker_term(), 0);
}

/* The man page renders cleanly and documents every option --help lists. */
Test(worker_cli, man_page_renders_and_documents_every_option)
{
    if (access("/usr/bin/groff", X_OK) != 0)
        cr_skip_test("groff is not installed");
    static struct cli_run r, help;
    cli_run("groff -man -Tutf8 -ww -z \"$EMQ_SOURCE_ROOT/client/emq-worker.1\"", &r);
    cr_assert_eq(r.status, 0, "groff failed: %s", r.err);
    cr_assert_str_empty(r.err, "groff warnings:\n%s", r.err);
    cli_run("groff -man -Tascii -P-cbou \"$EMQ_SOURCE_ROOT/client/emq-worker.1\"", &r);
    cr_assert_eq(r.status, 0, "groff failed: %s", r.err);
    worker_cli("--help", &help);
    int options = 0;
    for (const char *p = strstr(help.out, "\n  -"); p != NULL; p = strstr(p + 1, "\n  -")) {
        /* The option as --help heads it ("--credit N"), a man page tag. */
        const char *head = p + 3, *end = strstr(head, "  ");
        cr_assert_not_null(end, "an option line without its help: %s", head);
        char want[64];
        snprintf(want, sizeof(want), "\n       %.*s\n", (int)(end - head), head);
        cr_assert(strstr(r.out, want) != NULL, "emq-worker.1 has no entry for %s", want + 8);
        options++;
    }
    cr_assert_geq(options, 7, "--help lists %d options:\n%s", options, help.out);
    cr_assert(strstr(r.out, "\nEXIT STATUS\n") != NULL);
}

/* `meson install` puts emq-worker in bin/ and its page in man1/, and the
 * installed binary runs. */
Test(worker_cli, meson_install_installs_the_worker_and_its_man_page, .timeout = 120)
{
    cr_assert(getenv("MESON") != NULL && getenv("EMQ_BUILD_ROOT") != NULL);
    static struct cli_run r;
    cli_run("set -e; d=$(mktemp -d /tmp/emq-install-XXXXXX); trap 'rm -rf \"$d\"' EXIT; "
            "\"$MESON\" install -C \"$EMQ_BUILD_ROOT\" --no-rebuild --quiet --destdir \"$d\" >&2; "
            "cd \"$d\"; find . -path '*/share/man/man1/emq-worker.1' | grep -q .; "
            "w=$(find . -path '*/bin/emq-worker'); lib=$(find . -name libemq.so | head -1); "
            "LD_LIBRARY_PATH=$(dirname \"$lib\") \"$w\" --version",
            &r);
    cr_assert_eq(r.status, 0, "install or run failed (%d):\n%s", r.status, r.err);
    cr_assert_str_eq(r.out, "emq-worker " EMQ_VERSION "\n");
}

/* ---- The README, run as written ---------------------------------------- */

TestSuite(readme, .init = fx_setup, .fini = worker_teardown, .timeout = 120);

/* Run a shell command; its first output line into out. Asserts exit 0. */
static void run_sh(const char *cmd, char *out, size_t size)
{
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    out[0] = '\0';
    if (fgets(out, (int)size, f) != NULL)
        out[strcspn(out, "\n")] = '\0';
    char rest[256];
    while (fgets(rest, sizeof(rest), f) != NULL)
        ;
    int st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "failed (%d): %s", st, cmd);
}

/* "First jobs": the worker, then `emqctl enqueue mail --group TENacme
 * '{"to":"a@b.c"}'`; only --addr is added (the test daemon's port). */
Test(readme, first_jobs_worker_and_emqctl)
{
    worker_start((const char *const[]){"mail", NULL});
    char cmd[512], out[256], want[300];
    snprintf(cmd, sizeof(cmd),
             "\"$EMQCTL\" --addr 127.0.0.1:%d enqueue mail --group TENacme '{\"to\":\"a@b.c\"}'",
             fx_emqd.port);
    run_sh(cmd, out, sizeof(out));
    char id[EMQ_ID_SIZE] = "", verdict[32] = "";
    cr_assert_eq(sscanf(out, "%67s %31s", id, verdict), 2, "emqctl printed \"%s\"", out);
    cr_assert(strncmp(id, "JOB", 3) == 0, "emqctl printed \"%s\"", out);
    cr_assert_str_eq(verdict, "enqueued");
    snprintf(want, sizeof(want), "done %s group TENacme attempt 1", id);
    expect_line(want);
    struct emq *c = lib_conn();
    enum emq_state st = EMQ_STATE_UNKNOWN;
    cr_assert_eq(emq_job_state(c, "mail", id, &st), EMQ_OK);
    cr_assert_eq(st, EMQ_STATE_COMPLETED);
    emq_close(c);
    cr_assert_eq(worker_term(), 0);
}

/* The C example of "Writing a client in C", cut from the README, built
 * with `pkg-config --cflags --libs libemq` against a staged
 * `meson install --destdir` of this build, and run against the daemon. */
Test(readme, c_example_builds_with_pkg_config_and_runs)
{
    const char *root = getenv("EMQ_SOURCE_ROOT");
    cr_assert(root != NULL && getenv("MESON") != NULL && getenv("EMQ_BUILD_ROOT") != NULL);
    char path[512];
    snprintf(path, sizeof(path), "%s/README.md", root);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char readme[65536];
    size_t n = fread(readme, 1, sizeof(readme) - 1, f);
    fclose(f);
    readme[n] = '\0';
    char *sec = strstr(readme, "## Writing a client in C");
    cr_assert_not_null(sec);
    char *start = strstr(sec, "```c\n"), *end = start ? strstr(start + 5, "```") : NULL;
    cr_assert(start != NULL && end != NULL, "no C example in the README");
    start += 5;

    char dir[] = "/tmp/emq-readme-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/app.c", dir);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fwrite(start, 1, (size_t)(end - start), f);
    fclose(f);

    const char *san = getenv("EMQ_SANITIZE");
    char sanflag[64] = "";
    if (san != NULL && *san != '\0' && strcmp(san, "none") != 0)
        snprintf(sanflag, sizeof(sanflag), "-fsanitize=%s", san);
    char cmd[2048], out[512];
    snprintf(cmd, sizeof(cmd),
             "set -e; cd %s; "
             "\"$MESON\" install -C \"$EMQ_BUILD_ROOT\" --no-rebuild --quiet --destdir %s/stage "
             ">install.log 2>&1; "
             "pc=$(find stage -name libemq.pc); lib=$(find %s/stage -name libemq.so); "
             "export PKG_CONFIG_SYSROOT_DIR=%s/stage PKG_CONFIG_PATH=$(dirname \"$pc\"); "
             "cc -std=c11 -Wall -Wextra -Werror %s -o app app.c "
             "$(pkg-config --cflags --libs libemq) 2>cc.log; "
             "LD_LIBRARY_PATH=$(dirname \"$lib\") ./app 127.0.0.1:%d",
             dir, dir, dir, dir, sanflag, fx_emqd.port);
    run_sh(cmd, out, sizeof(out));
    char id[EMQ_ID_SIZE] = "", payload[128] = "";
    cr_assert_eq(sscanf(out, "got %67s %127s", id, payload), 2, "the example printed \"%s\"", out);
    cr_assert_str_eq(payload, "{\"to\":\"a@b.c\"}");
    struct emq *c = lib_conn();
    enum emq_state st = EMQ_STATE_UNKNOWN;
    cr_assert_eq(emq_job_state(c, "mail", id, &st), EMQ_OK);
    cr_assert_eq(st, EMQ_STATE_COMPLETED, "the example completed %s", id);
    emq_close(c);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
