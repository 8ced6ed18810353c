/* emqctl: the real binary ($EMQCTL), run with fork/exec against the real
 * emqd and a real redis-server. State is set up over the protocol (tc_*),
 * then every command's human output, --json output and exit status are
 * checked against it. stdin, stdout and stderr are files, so emqctl never
 * sees a terminal here (as in a script). */
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <utmp.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../integration/fixture.h"
#include "tokens.h"

TestSuite(emqctl, .init = fx_setup, .fini = fx_teardown, .timeout = 60);
TestSuite(emqctl_usage, .timeout = 30);

/* Every command, for the help and man page checks. */
static const char *const commands[] = {
    "ping",   "stats",    "groups",  "depth",  "limit",   "weight", "rate",   "pause",
    "resume", "reassign", "drain",   "reap",   "job",     "peek",   "remove", "dead",
    "check",  "queues",   "clients", "forget", "enqueue", "top",    "token",  "help",
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* One finished emqctl run: exit status (-1 if it did not exit), output. */
struct run {
    int status;
    char *out;
    char *err;
};

static char *slurp_fd(int fd)
{
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    char *buf = calloc(1, (size_t)st.st_size + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    return buf;
}

static int temp_fd(const char *content)
{
    char path[] = "/tmp/emqctl-test-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0, "mkstemp");
    unlink(path);
    if (content != NULL) {
        cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        lseek(fd, 0, SEEK_SET);
    }
    return fd;
}

/* Run $EMQCTL with args (NULL-terminated), stdin from the text in (or
 * /dev/null), extra environment env ("K=V" or NULL), and, when port > 0,
 * "--addr 127.0.0.1:PORT" first. */
static struct run run_ctl(const char *in, const char *env, int port, const char *const *args)
{
    const char *bin = getenv("EMQCTL");
    cr_assert_not_null(bin, "EMQCTL is not set");
    int fin = in != NULL ? temp_fd(in) : open("/dev/null", O_RDONLY);
    int fout = temp_fd(NULL), ferr = temp_fd(NULL);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    if (port > 0) {
        argv[n++] = "--addr";
        argv[n++] = addr;
    }
    for (; *args != NULL && n < 63; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork");
    if (pid == 0) {
        dup2(fin, 0);
        dup2(fout, 1);
        dup2(ferr, 2);
        unsetenv("EMQ_ADDR");
        unsetenv("EMQ_TOKEN");
        if (env != NULL)
            putenv((char *)env);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(fin);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    struct run r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp_fd(fout), slurp_fd(ferr)};
    /* Under ASan/UBSan, any report from emqctl (or libemq in it) fails. */
    cr_assert(strstr(r.err, "runtime error:") == NULL && strstr(r.err, "Sanitizer") == NULL,
              "sanitizer report from emqctl %s:\n%s", argv[port > 0 ? 3 : 1], r.err);
    return r;
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* emqctl against the fixture's daemon, no stdin. */
#define CTL(...) run_ctl(NULL, NULL, fx_emqd.port, (const char *const[]){__VA_ARGS__, NULL})
/* The same with stdin text. */
#define CTL_IN(in, ...) run_ctl((in), NULL, fx_emqd.port, (const char *const[]){__VA_ARGS__, NULL})

#define assert_exit(r, code)                                                                       \
    cr_assert_eq((r).status, (code), "exit %d, want %d\nstdout: %s\nstderr: %s", (r).status,       \
                 (code), (r).out, (r).err)

#define assert_has(hay, needle)                                                                    \
    cr_assert(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (hay))

/* Call over the protocol, assert ok, return the reply (caller frees). */
#define OK(c, ...)                                                                                 \
    ({                                                                                             \
        json_t *ok_ = tc_call((c), __VA_ARGS__);                                                   \
        assert_ok(ok_);                                                                            \
        ok_;                                                                                       \
    })

static void enqueue(struct tc_conn *c, const char *job, const char *group)
{
    json_decref(OK(c,
                   "{\"op\":\"enqueue\",\"queue\":\"q\",\"job\":\"%s\",\"group\":\"%s\","
                   "\"payload\":{\"j\":\"%s\"}}",
                   job, group, job));
}

static long long depth(struct tc_conn *c, const char *group)
{
    json_t *r = OK(c, "{\"op\":\"depth\",\"queue\":\"q\",\"group\":\"%s\"}", group);
    long long d = jint(r, "depth");
    json_decref(r);
    return d;
}

/* Parse the n-th line (0-based) of out as JSON; asserts it is an object. */
static json_t *json_line(const char *out, int n)
{
    const char *p = out;
    for (int i = 0; i < n; i++) {
        p = strchr(p, '\n');
        cr_assert_not_null(p, "no line %d in:\n%s", n, out);
        p++;
    }
    const char *end = strchr(p, '\n');
    json_error_t e;
    json_t *v = json_loadb(p, end ? (size_t)(end - p) : strlen(p), 0, &e);
    cr_assert(json_is_object(v), "line %d is not a JSON object (%s):\n%s", n, e.text, out);
    return v;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The line of out that starts with prefix, copied into buf; asserts one. */
static const char *line_with(const char *out, const char *prefix, char *buf, size_t size)
{
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            const char *end = strchr(p, '\n');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            snprintf(buf, size, "%.*s", (int)len, p);
            return buf;
        }
    }
    cr_assert_fail("no line starting with \"%s\" in:\n%s", prefix, out);
    return NULL;
}

Test(emqctl_usage, help_for_the_program_and_every_command)
{
    struct run r = run_ctl(NULL, NULL, 0, (const char *const[]){"--help", NULL});
    assert_exit(r, 0);
    assert_has(r.out, "usage: emqctl");
    cr_assert_str_empty(r.err);
    for (size_t i = 0; i < NCOMMANDS; i++)
        assert_has(r.out, commands[i]);
    run_free(&r);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        char want[64];
        snprintf(want, sizeof(want), "usage: emqctl [global options] %s", commands[i]);
        r = run_ctl(NULL, NULL, 0, (const char *const[]){commands[i], "--help", NULL});
        assert_exit(r, 0);
        assert_has(r.out, want);
        run_free(&r);
    }
    /* -h works before the command too, and wins over a bad line. */
    r = run_ctl(NULL, NULL, 0, (const char *const[]){"-h", "drain", "q", NULL});
    assert_exit(r, 0);
    assert_has(r.out, "usage: emqctl [global options] drain QUEUE [GROUP]");
    assert_has(r.out, "--yes");
    run_free(&r);
}

Test(emqctl_usage, bad_lines_exit_2_with_usage_on_stderr_and_no_network)
{
    /* Port 1 has no listener: an exit 2 here proves nothing was sent. */
    static const char *const bad[][6] = {
        {NULL},
        {"frobnicate", NULL},
        {"stats", NULL},
        {"stats", "q", "extra", NULL},
        {"limit", "q", "TENa", "many", NULL},
        {"limit", "q", "TENa", "-3", NULL},
        {"weight", "q", "TENa", "1001", NULL},
        {"weight", "q", "TENa", "-1", NULL},
        {"weight", "q", "TENa", "heavy", NULL},
        {"weight", "q", "TENa", NULL},
        {"rate", "q", "TENa", "5", NULL},
        {"rate", "q", "TENa", "0/100", NULL},
        {"rate", "q", "TENa", "5/0", NULL},
        {"rate", "q", "TENa", "/100", NULL},
        {"rate", "q", "TENa", "5/100/3", NULL},
        {"groups", "q", "--limit", "abc", NULL},
        {"groups", "q", "--limit", NULL},
        {"drain", "q", "TENa", "--limit", "5"},
        {"ping", "--bogus", NULL},
        {"enqueue", "q", "{not json", NULL},
        {"enqueue", "q", "--delay-ms", "-1", "1"},
        {"dead", "q", "explode", NULL},
        {"top", "q", "--interval", "0", NULL},
        {"token", "new", "n", "boss", NULL},
        {"token", "new", "n", NULL},
        {"token", "make", "n", "worker", NULL},
        {"token", "new", "n", "worker", "q{1}", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct run r = run_ctl(NULL, NULL, 1, bad[i]);
        assert_exit(r, 2);
        assert_has(r.err, "emqctl: ");
        assert_has(r.err, "usage: emqctl");
        cr_assert_str_empty(r.out, "case %zu printed to stdout: %s", i, r.out);
        run_free(&r);
    }
}

Test(emqctl_usage, connection_refused_is_exit_1_with_a_message)
{
    int port = test_free_port();
    struct run r = run_ctl(NULL, NULL, port, (const char *const[]){"ping", NULL});
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EIO: ");
    assert_has(r.err, "refused");
    cr_assert_str_empty(r.out);
    run_free(&r);
}

Test(emqctl_usage, version_prints_name_and_version_on_stdout)
{
    static const char *const lines[][3] = {{"--version", NULL}, {"stats", "--version", NULL}};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        struct run r = run_ctl(NULL, NULL, 1, lines[i]);
        assert_exit(r, 0);
        cr_assert_str_eq(r.out, "emqctl " EMQ_VERSION "\n");
        cr_assert_str_empty(r.err);
        run_free(&r);
    }
}

Test(emqctl_usage, help_command_prints_what_help_prints)
{
    static const char *const pairs[][2][3] = {
        {{"help", NULL}, {"--help", NULL}},
        {{"help", "drain", NULL}, {"drain", "--help", NULL}},
        {{"help", "enqueue", NULL}, {"enqueue", "-h", NULL}},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        struct run cmd = run_ctl(NULL, NULL, 1, pairs[i][0]);
        struct run opt = run_ctl(NULL, NULL, 1, pairs[i][1]);
        assert_exit(cmd, 0);
        assert_exit(opt, 0);
        cr_assert_str_eq(cmd.out, opt.out, "help %s", pairs[i][0][1] ? pairs[i][0][1] : "");
        cr_assert_str_empty(cmd.err);
        run_free(&cmd);
        run_free(&opt);
    }
}

/* A usage error is the error, one usage line and a pointer to the help:
 * nothing that would scroll the error off the screen. */
Test(emqctl_usage, usage_errors_are_three_lines_on_stderr)
{
#define PROGRAM_USAGE                                                                              \
    "usage: emqctl [--addr HOST:PORT | --socket PATH] [--token T] [--json] COMMAND ...\n"
    static const struct {
        const char *args[5];
        const char *err;
    } cases[] = {
        {{NULL}, "emqctl: no command given\n" PROGRAM_USAGE "try 'emqctl --help'\n"},
        {{"frobnicate", NULL},
         "emqctl: unknown command \"frobnicate\"\n" PROGRAM_USAGE "try 'emqctl --help'\n"},
        {{"help", "frobnicate", NULL},
         "emqctl: unknown command \"frobnicate\"\n" PROGRAM_USAGE "try 'emqctl --help'\n"},
        {{"--addr", "nowhere", "ping", NULL},
         "emqctl: bad --addr \"nowhere\": expected HOST:PORT\n" PROGRAM_USAGE
         "try 'emqctl --help'\n"},
        {{"stats", NULL},
         "emqctl: stats: missing arguments\n"
         "usage: emqctl [global options] stats QUEUE\n"
         "try 'emqctl stats --help'\n"},
        {{"groups", "q", "--bogus", NULL},
         "emqctl: groups: unknown option \"--bogus\"\n"
         "usage: emqctl [global options] groups QUEUE [options]\n"
         "try 'emqctl groups --help'\n"},
        {{"ping", "--limit", "3", NULL},
         "emqctl: ping: option --limit does not apply here\n"
         "usage: emqctl [global options] ping\n"
         "try 'emqctl ping --help'\n"},
    };
#undef PROGRAM_USAGE
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct run r = run_ctl(NULL, NULL, 1, cases[i].args);
        assert_exit(r, 2);
        cr_assert_str_eq(r.err, cases[i].err, "case %zu", i);
        cr_assert_str_empty(r.out, "case %zu printed to stdout: %s", i, r.out);
        run_free(&r);
    }
}

/* A bad $EMQ_ADDR is a usage error for a command that would use it, not for
 * the help that the error points to, nor when --addr overrides it. */
Test(emqctl_usage, a_bad_emq_addr_fails_only_what_would_use_it)
{
    struct run r = run_ctl(NULL, "EMQ_ADDR=nowhere", 0, (const char *const[]){"ping", NULL});
    assert_exit(r, 2);
    cr_assert_str_eq(r.err, "emqctl: bad EMQ_ADDR \"nowhere\": expected HOST:PORT\n"
                            "usage: emqctl [--addr HOST:PORT | --socket PATH] [--token T] [--json] "
                            "COMMAND ...\ntry 'emqctl --help'\n");
    run_free(&r);
    static const char *const fine[][2] = {{"--help", NULL}, {"--version", NULL}, {"help", NULL}};
    for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
        r = run_ctl(NULL, "EMQ_ADDR=nowhere", 0, fine[i]);
        assert_exit(r, 0);
        cr_assert_str_empty(r.err);
        run_free(&r);
    }
    /* --addr wins: port 1 has no listener, so this is a connection error. */
    r = run_ctl(NULL, "EMQ_ADDR=nowhere", 1, (const char *const[]){"ping", NULL});
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EIO: cannot talk to emqd at 127.0.0.1:1");
    run_free(&r);
}

Test(emqctl_usage, man_page_renders_without_warnings)
{
    if (access("/usr/bin/groff", X_OK) != 0)
        cr_skip_test("groff is not installed");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "groff -man -Tutf8 -ww -z %s/client/emqctl.1 2>&1",
             getenv("EMQ_SOURCE_ROOT"));
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "groff failed: %s", out);
    cr_assert_eq(n, 0, "groff warnings:\n%s", out);
    /* Every command has its own subsection. */
    snprintf(cmd, sizeof(cmd), "%s/client/emqctl.1", getenv("EMQ_SOURCE_ROOT"));
    FILE *f = fopen(cmd, "r");
    cr_assert_not_null(f);
    static char man[65536];
    man[fread(man, 1, sizeof(man) - 1, f)] = '\0';
    fclose(f);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        char want[64];
        snprintf(want, sizeof(want), "\n.SS \"%s", commands[i]);
        assert_has(man, want);
    }
    assert_has(man, "EMQ_ADDR");
    assert_has(man, "EMQ_TOKEN");
    assert_has(man, "NO_COLOR");
}

Test(emqctl, ping_and_stats_human_and_json)
{
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < 1234; i += 617) {
        /* 1,234 jobs in TENa by two batches, 2 in TENb, 1 flat. */
        json_t *jobs = json_array();
        for (int k = 0; k < 617; k++)
            json_array_append_new(jobs, json_pack("{s:i}", "payload", i + k));
        char *js = json_dumps(jobs, JSON_COMPACT);
        json_decref(
            OK(c, "{\"op\":\"enqueue_many\",\"queue\":\"q\",\"group\":\"TENa\",\"jobs\":%s}", js));
        free(js);
        json_decref(jobs);
    }
    enqueue(c, "JOBb1", "TENb");
    enqueue(c, "JOBb2", "TENb");
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1}"));
    json_decref(OK(c, "{\"op\":\"pause\",\"queue\":\"q\",\"group\":\"TENb\"}"));

    struct run r = CTL("ping");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "pong\n");
    run_free(&r);

    char line[256];
    r = CTL("stats", "q");
    assert_exit(r, 0);
    cr_assert_str_eq(line_with(r.out, "pending", line, sizeof(line)), "pending  1,237");
    cr_assert_str_eq(line_with(r.out, "groups", line, sizeof(line)), "groups   2");
    cr_assert_str_eq(line_with(r.out, "paused", line, sizeof(line)), "paused   1");
    cr_assert_str_eq(line_with(r.out, "flat", line, sizeof(line)), "flat     1");
    cr_assert_str_empty(r.err);
    run_free(&r);

    r = CTL("--json", "stats", "q");
    assert_exit(r, 0);
    cr_assert_eq(count_lines(r.out), 1);
    json_t *s = json_line(r.out, 0);
    cr_assert(json_is_true(json_object_get(s, "ok")));
    cr_assert_eq(jint(s, "pending"), 1237);
    cr_assert_eq(jint(s, "groups"), 2);
    cr_assert_eq(jint(s, "ring"), 1, "TENb is paused");
    json_decref(s);
    run_free(&r);
    tc_close(c);
}

Test(emqctl, groups_table_shows_depth_active_limit_weight_paused)
{
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof(id), "JOBa%d", i);
        enqueue(c, id, "TENalpha");
    }
    enqueue(c, "JOBb0", "TENb");
    json_decref(OK(
        c, "{\"op\":\"rate\",\"queue\":\"q\",\"group\":\"TENalpha\",\"max\":1,\"per_ms\":60000}"));
    json_decref(OK(c, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":2}"));
    json_decref(OK(c, "{\"op\":\"limit\",\"queue\":\"q\",\"group\":\"TENalpha\",\"max\":7}"));
    json_decref(OK(c, "{\"op\":\"pause\",\"queue\":\"q\",\"group\":\"TENb\"}"));
    json_decref(OK(c, "{\"op\":\"weight\",\"queue\":\"q\",\"group\":\"TENalpha\",\"weight\":12}"));

    struct run r = CTL("groups", "q");
    assert_exit(r, 0);
    char line[256];
    cr_assert_str_eq(line_with(r.out, "GROUP", line, sizeof(line)),
                     "GROUP     DEPTH  ACTIVE  LIMIT  WEIGHT            RATE  CAP  PAUSED");
    cr_assert_str_eq(line_with(r.out, "TENalpha", line, sizeof(line)),
                     "TENalpha      2       1      7      12  1/60000ms held    -  no");
    cr_assert_str_eq(line_with(r.out, "TENb ", line, sizeof(line)),
                     "TENb          0       1      -       1               -    -  yes");
    cr_assert_eq(count_lines(r.out), 3);
    run_free(&r);

    r = CTL("groups", "q", "--json");
    assert_exit(r, 0);
    json_t *page = json_line(r.out, 0);
    json_t *list = json_object_get(page, "groups");
    cr_assert_eq(json_array_size(list), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *g = json_array_get(list, i);
        if (strcmp(jstr(g, "group"), "TENalpha") == 0) {
            cr_assert_eq(jint(g, "limit"), 7);
            cr_assert_eq(jint(g, "weight"), 12);
            cr_assert_eq(jint(g, "depth"), 2);
        } else {
            cr_assert_str_eq(jstr(g, "group"), "TENb");
            cr_assert(json_is_true(json_object_get(g, "paused")));
            cr_assert(json_is_null(json_object_get(g, "limit")));
        }
    }
    cr_assert_str_eq(jstr(page, "cursor"), "0");
    json_decref(page);
    run_free(&r);

    r = CTL("groups", "empty");
    assert_exit(r, 0);
    assert_has(r.out, "\n(no groups)\n");
    run_free(&r);
    tc_close(c);
}

Test(emqctl, groups_pages_through_250_groups)
{
    struct tc_conn *c = fx_conn();
    json_t *jobs = json_array();
    for (int i = 0; i < 250; i++) {
        char g[16];
        snprintf(g, sizeof(g), "TENg%03d", i);
        json_array_append_new(jobs, json_pack("{s:s, s:i}", "group", g, "payload", i));
    }
    char *js = json_dumps(jobs, JSON_COMPACT);
    json_t *er = OK(c, "{\"op\":\"enqueue_many\",\"queue\":\"q\",\"jobs\":%s}", js);
    free(js);
    json_decref(jobs);
    json_decref(er);

    struct run r = CTL("groups", "q");
    assert_exit(r, 0);
    cr_assert_eq(count_lines(r.out), 251, "a header and 250 rows");
    for (int i = 0; i < 250; i += 37) {
        char want[32];
        snprintf(want, sizeof(want), "\nTENg%03d ", i);
        assert_has(r.out, want);
    }
    run_free(&r);

    /* --json: one line per page; the pages add up to every group once. */
    r = CTL("groups", "q", "--json", "--page-size", "60");
    assert_exit(r, 0);
    int pages = count_lines(r.out);
    cr_assert(pages >= 3, "250 groups in pages of 60 took %d pages", pages);
    size_t total = 0;
    for (int p = 0; p < pages; p++) {
        json_t *page = json_line(r.out, p);
        total += json_array_size(json_object_get(page, "groups"));
        cr_assert_eq(strcmp(jstr(page, "cursor"), "0") == 0, p == pages - 1,
                     "only the last page ends the scan");
        json_decref(page);
    }
    cr_assert_eq(total, 250);
    run_free(&r);

    r = CTL("groups", "q", "--limit", "10");
    assert_exit(r, 0);
    cr_assert_eq(count_lines(r.out), 11, "a header and 10 rows:\n%s", r.out);
    run_free(&r);
    tc_close(c);
}

/* queues: the registry's table with each queue's totals, paged; --json
 * prints each page's reply as it came. */
Test(emqctl, queues_table_and_json_pages)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "JOBq1", "TENa");
    enqueue(c, "JOBq2", "TENb");
    json_decref(OK(c, "{\"op\":\"pause\",\"queue\":\"q\",\"group\":\"TENb\"}"));
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"other\",\"delay_ms\":600000,"
                      "\"payload\":1}"));

    struct run r = CTL("queues");
    assert_exit(r, 0);
    char line[256];
    cr_assert_str_eq(line_with(r.out, "QUEUE", line, sizeof(line)),
                     "QUEUE  PENDING  ACTIVE  DELAYED  DEAD  GROUPS  PAUSED");
    cr_assert_str_eq(line_with(r.out, "q ", line, sizeof(line)),
                     "q            2       0        0     0       2       1");
    cr_assert_str_eq(line_with(r.out, "other", line, sizeof(line)),
                     "other        0       0        1     0       0       0");
    cr_assert_eq(count_lines(r.out), 3);
    run_free(&r);

    r = CTL("queues", "--json", "--page-size", "1");
    assert_exit(r, 0);
    int pages = count_lines(r.out);
    size_t total = 0;
    for (int p = 0; p < pages; p++) {
        json_t *page = json_line(r.out, p);
        total += json_array_size(json_object_get(page, "queues"));
        cr_assert_eq(strcmp(jstr(page, "cursor"), "0") == 0, p == pages - 1);
        json_decref(page);
    }
    cr_assert_eq(total, 2);
    run_free(&r);

    r = CTL("queues", "--limit", "1");
    assert_exit(r, 0);
    cr_assert_eq(count_lines(r.out), 2, "a header and 1 row:\n%s", r.out);
    run_free(&r);
    tc_close(c);
}

/* clients: the daemon's connections, a worker's name, streams and leases;
 * with its id, the jobs it holds (never a token); an unknown id exits 1. */
Test(emqctl, clients_table_and_one_connection)
{
    struct tc_conn *w = fx_conn(), *c = fx_conn();
    json_decref(OK(w, "{\"op\":\"hello\",\"protocol\":1,\"name\":\"worker-9\"}"));
    enqueue(c, "JOBh1", "TENa");
    json_t *cl = OK(w, "{\"op\":\"claim\",\"queue\":\"q\",\"lease_ms\":600000}");
    const char *token = jstr(json_array_get(json_object_get(cl, "jobs"), 0), "lease");
    cr_assert(token[0] != '\0');
    json_decref(OK(w, "{\"op\":\"stream\",\"queue\":\"q\",\"credit\":5,\"flat\":true}"));

    struct run r = CTL("clients");
    assert_exit(r, 0);
    char line[512];
    assert_has(line_with(r.out, "ID", line, sizeof(line)), "ADDR");
    assert_has(r.out, "worker-9");
    assert_has(r.out, "q+flat:5/0");
    run_free(&r);

    r = CTL("--json", "clients");
    assert_exit(r, 0);
    json_t *page = json_line(r.out, 0);
    json_t *rows = json_object_get(page, "clients");
    long long wid = -1;
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (strcmp(jstr(json_array_get(rows, i), "name"), "worker-9") == 0)
            wid = jint(json_array_get(rows, i), "id");
    cr_assert_gt(wid, 0);
    json_decref(page);
    run_free(&r);

    char id[24];
    snprintf(id, sizeof(id), "%lld", wid);
    r = CTL("clients", id);
    assert_exit(r, 0);
    assert_has(r.out, "name     worker-9\n");
    assert_has(r.out, "leases   1\n");
    assert_has(line_with(r.out, "q ", line, sizeof(line)), "JOBh1  TENa");
    char leased[64];
    snprintf(leased, sizeof(leased), " %s\n", token);
    cr_assert_null(strstr(r.out, leased), "the token is shown:\n%s", r.out);
    run_free(&r);

    r = CTL("clients", "999999");
    assert_exit(r, 1);
    assert_has(r.err, "ENOTFOUND");
    run_free(&r);
    r = CTL("clients", "x");
    assert_exit(r, 2);
    run_free(&r);
    json_decref(cl);
    tc_close(w);
    tc_close(c);
}

/* forget asks first (refused without a terminal or --yes), is ESTATE
 * (exit 1) on a queue with a job, and forgets an empty one. */
Test(emqctl, forget_refuses_without_yes_then_forgets)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"mial\",\"job\":\"JOBm\",\"payload\":1}"));
    struct run r = CTL("forget", "mial");
    assert_exit(r, 2);
    run_free(&r);
    r = CTL("--yes", "forget", "mial");
    assert_exit(r, 1);
    assert_has(r.err, "ESTATE");
    run_free(&r);
    json_decref(OK(c, "{\"op\":\"remove\",\"queue\":\"mial\",\"job\":\"JOBm\"}"));
    r = CTL("forget", "mial", "-y");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "forgot queue mial\n");
    run_free(&r);
    r = CTL("queues", "--json");
    assert_exit(r, 0);
    cr_assert_null(strstr(r.out, "\"mial\""), "still listed:\n%s", r.out);
    run_free(&r);
    tc_close(c);
}

Test(emqctl, levers_change_the_queue)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "JOBa1", "TENa");
    enqueue(c, "JOBa2", "TENa");
    enqueue(c, "JOBb1", "TENb");

    struct run r = CTL("depth", "q", "TENa");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "2\n");
    run_free(&r);
    r = CTL("--json", "depth", "q", "TENa");
    json_t *j = json_line(r.out, 0);
    cr_assert_eq(jint(j, "depth"), 2);
    json_decref(j);
    run_free(&r);

    r = CTL("limit", "q", "TENa", "3");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa: limit 3\n");
    run_free(&r);
    json_t *g = OK(c, "{\"op\":\"groups\",\"queue\":\"q\"}");
    char *gd = json_dumps(g, JSON_COMPACT);
    assert_has(gd, "{\"group\":\"TENa\",\"depth\":2,\"active\":0,\"limit\":3,"
                   "\"limit_from\":\"group\",\"paused\":false,\"weight\":1,\"weight_from\":null,"
                   "\"rate\":null,\"rate_from\":null,\"throttled\":false,\"delayed\":0,"
                   "\"cap\":null,\"cap_from\":null}");
    free(gd);
    json_decref(g);
    r = CTL("limit", "q", "TENa", "none");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa: no limit\n");
    run_free(&r);

    r = CTL("weight", "q", "TENa", "4");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa: weight 4\n");
    run_free(&r);
    g = OK(c, "{\"op\":\"groups\",\"queue\":\"q\"}");
    gd = json_dumps(g, JSON_COMPACT);
    assert_has(gd, "\"group\":\"TENa\",\"depth\":2,\"active\":0,\"limit\":null,"
                   "\"limit_from\":null,\"paused\":false,\"weight\":4,\"weight_from\":\"group\",");
    free(gd);
    json_decref(g);
    r = CTL("weight", "q", "TENa", "none");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa: no weight of its own\n");
    run_free(&r);
    r = CTL("rate", "q", "TENa", "10/1000");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa: rate 10 per 1000 ms\n");
    run_free(&r);
    g = OK(c, "{\"op\":\"groups\",\"queue\":\"q\"}");
    gd = json_dumps(g, JSON_COMPACT);
    assert_has(gd, "\"rate\":{\"max\":10,\"per_ms\":1000}");
    free(gd);
    json_decref(g);
    r = CTL("rate", "q", "TENa", "none");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa: no rate\n");
    run_free(&r);

    /* Without GROUP: the queue defaults, marked "(q)" in the table. */
    r = CTL("limit", "q", "7");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "queue default: limit 7\n");
    run_free(&r);
    r = CTL("rate", "q", "3/500");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "queue default: rate 3 per 500 ms\n");
    run_free(&r);
    g = OK(c, "{\"op\":\"stats\",\"queue\":\"q\"}");
    gd = json_dumps(g, JSON_COMPACT);
    assert_has(gd, "\"defaults\":{\"limit\":7,\"weight\":null,\"rate\":{\"max\":3,\"per_ms\":500},"
                   "\"cap\":null}");
    free(gd);
    json_decref(g);
    r = CTL("groups", "q");
    assert_exit(r, 0);
    assert_has(r.out, "7 (q)");
    assert_has(r.out, "3/500ms (q)");
    run_free(&r);
    r = CTL("limit", "q", "none");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "queue default: no limit\n");
    run_free(&r);
    r = CTL("rate", "q", "none");
    assert_exit(r, 0);
    run_free(&r);
    g = OK(c, "{\"op\":\"stats\",\"queue\":\"q\"}");
    gd = json_dumps(g, JSON_COMPACT);
    assert_has(gd, "\"defaults\":{\"limit\":null,\"weight\":null,\"rate\":null,\"cap\":null}");
    free(gd);
    json_decref(g);

    /* cap: a group's own, then the queue default, marked "(q)". */
    char line[256];
    r = CTL("cap", "q", "TENa", "1000");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa: cap 1,000\n");
    run_free(&r);
    r = CTL("cap", "q", "0x");
    assert_exit(r, 2);
    run_free(&r);
    r = CTL("cap", "q", "40");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "queue default: cap 40\n");
    run_free(&r);
    r = CTL("groups", "q");
    assert_exit(r, 0);
    assert_has(line_with(r.out, "TENa", line, sizeof(line)), "1,000  ");
    assert_has(r.out, "40 (q)");
    run_free(&r);
    r = CTL("cap", "q", "TENa", "none");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa: no cap of its own\n");
    run_free(&r);
    r = CTL("cap", "q", "none");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "queue default: no default cap\n");
    run_free(&r);
    r = CTL("--json", "weight", "q", "TENa", "0");
    assert_exit(r, 0);
    j = json_line(r.out, 0);
    cr_assert(json_is_true(json_object_get(j, "ok")));
    json_decref(j);
    run_free(&r);

    r = CTL("pause", "q", "TENa");
    cr_assert_str_eq(r.out, "TENa paused\n");
    run_free(&r);
    r = CTL("pause", "q", "TENa");
    cr_assert_str_eq(r.out, "TENa was already paused\n");
    run_free(&r);
    json_t *cl = OK(c, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":5}");
    cr_assert_eq(json_array_size(json_object_get(cl, "jobs")), 1, "only TENb is served");
    json_decref(cl);
    r = CTL("resume", "q", "TENa");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "TENa resumed\n");
    run_free(&r);
    r = CTL("--json", "resume", "q", "TENa");
    j = json_line(r.out, 0);
    cr_assert(json_is_false(json_object_get(j, "changed")));
    json_decref(j);
    run_free(&r);

    r = CTL("reassign", "q", "JOBa2", "TENz");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "JOBa2 moved from TENa to TENz\n");
    run_free(&r);
    cr_assert_eq(depth(c, "TENa"), 1);
    cr_assert_eq(depth(c, "TENz"), 1);

    r = CTL("reap", "q", "TENa");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "reaped 0 expired leases\n");
    run_free(&r);
    tc_close(c);
}

/* Run emqctl with the arguments; it exits status with err_has on stderr. */
#define EXPECT_CTL(status, err_has, ...)                                                           \
    do {                                                                                           \
        struct run x_ = CTL(__VA_ARGS__);                                                          \
        assert_exit(x_, (status));                                                                 \
        assert_has(x_.err, (err_has));                                                             \
        run_free(&x_);                                                                             \
    } while (0)

/* emqctl drain q [GROUP] with stdin not a terminal and no --yes: refused,
 * exit 2, nothing printed on stdout. */
static void drain_refused(const char *group)
{
    struct run r = group ? CTL("drain", "q", group) : CTL("drain", "q");
    assert_exit(r, 2);
    assert_has(r.err, "--yes");
    assert_has(r.err, "not a terminal");
    cr_assert_str_empty(r.out);
    run_free(&r);
}

/* The same with --yes: it drains and prints want. */
static void drain_yes(const char *group, const char *want)
{
    struct run r = group ? CTL("drain", "q", group, "--yes") : CTL("drain", "q", "--yes");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, want);
    run_free(&r);
}

Test(emqctl, drain_refuses_without_yes_then_drains)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "JOBs1", "TENspam");
    enqueue(c, "JOBs2", "TENspam");
    enqueue(c, "JOBs3", "TENspam");
    enqueue(c, "JOBk1", "TENkeep");

    drain_refused("TENspam");
    cr_assert_eq(depth(c, "TENspam"), 3, "a refused drain changes nothing");
    drain_yes("TENspam", "drained 3 jobs\n");
    cr_assert_eq(depth(c, "TENspam"), 0);
    cr_assert_eq(depth(c, "TENkeep"), 1, "the sibling is untouched");

    struct run r = CTL("--json", "-y", "drain", "q", "TENkeep");
    assert_exit(r, 0);
    json_t *j = json_line(r.out, 0);
    cr_assert_eq(jint(j, "drained"), 1);
    json_decref(j);
    run_free(&r);

    /* Without a group: the ungrouped jobs, asking the same way. */
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1}"));
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":2}"));
    enqueue(c, "JOBk2", "TENkeep");
    drain_refused(NULL);
    drain_yes(NULL, "drained 2 jobs\n");
    cr_assert_eq(depth(c, "TENkeep"), 1, "a group is untouched by the flat drain");
    tc_close(c);
}

/* peek lists a lane in service order (and --json prints the pages as
 * they came); remove asks first, then deletes one job. */
Test(emqctl, peek_lists_jobs_and_remove_deletes_one)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "JOBp1", "TENp");
    enqueue(c, "JOBp2", "TENp");
    enqueue(c, "JOBp3", "TENp");
    struct run r = CTL("peek", "q", "TENp", "--page-size", "2");
    assert_exit(r, 0);
    char line[256];
    cr_assert(strstr(line_with(r.out, "JOBp1", line, sizeof(line)), "TENp") != NULL);
    const char *p1 = strstr(r.out, "JOBp1"), *p3 = strstr(r.out, "JOBp3");
    cr_assert(p1 != NULL && p3 != NULL && p1 < p3, "in service order, across two pages");
    run_free(&r);
    r = CTL("--json", "peek", "q", "TENp", "--limit", "1");
    assert_exit(r, 0);
    json_t *j = json_line(r.out, 0);
    cr_assert_eq(json_array_size(json_object_get(j, "jobs")), 1);
    cr_assert_str_eq(jstr(j, "cursor"), "JOBp1");
    json_decref(j);
    run_free(&r);
    r = CTL("peek", "q", "--state", "dead");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "(no jobs)\n");
    run_free(&r);
    /* A page size past the daemon's bound of 1000 is cut to it, not sent
     * to be refused. */
    r = CTL("--json", "peek", "q", "TENp", "--page-size", "5000", "--limit", "2000");
    assert_exit(r, 0);
    j = json_line(r.out, 0);
    cr_assert_eq(json_array_size(json_object_get(j, "jobs")), 3);
    json_decref(j);
    run_free(&r);

    EXPECT_CTL(2, "--yes", "remove", "q", "JOBp2");
    cr_assert_eq(depth(c, "TENp"), 3, "a refused remove changes nothing");
    r = CTL("remove", "q", "JOBp2", "--yes");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "removed JOBp2 (was pending)\n");
    run_free(&r);
    cr_assert_eq(depth(c, "TENp"), 2);
    EXPECT_CTL(1, "emqctl: ENOJOB: ", "remove", "q", "JOBp2", "-y");
    tc_close(c);
}

Test(emqctl, job_shows_the_row_and_server_errors_exit_1)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "JOBshow", "TENa");
    struct run r = CTL("job", "q", "JOBshow");
    assert_exit(r, 0);
    char line[256];
    cr_assert_str_eq(line_with(r.out, "state", line, sizeof(line)), "state         pending");
    cr_assert_str_eq(line_with(r.out, "group", line, sizeof(line)), "group         TENa");
    cr_assert_str_eq(line_with(r.out, "payload", line, sizeof(line)),
                     "payload       {\"j\":\"JOBshow\"}");
    run_free(&r);

    r = CTL("job", "q", "JOBshow", "--json");
    assert_exit(r, 0);
    json_t *j = json_line(r.out, 0);
    json_t *row = json_object_get(j, "job");
    cr_assert_str_eq(jstr(row, "job"), "JOBshow");
    cr_assert_str_eq(jstr(row, "state"), "pending");
    cr_assert_eq(jint(row, "max_attempts"), 5);
    json_decref(j);
    run_free(&r);

    r = CTL("job", "q", "JOBnope");
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: ENOJOB: ");
    cr_assert_str_empty(r.out);
    run_free(&r);
    EXPECT_CTL(1, "emqctl: EKIND: ", "job", "q", "nope");
    EXPECT_CTL(1, "emqctl: EBRAND: ", "depth", "q", "bad group");
    /* Under --json an error reply is printed too, unchanged. */
    r = CTL("--json", "job", "q", "JOBnope");
    assert_exit(r, 1);
    j = json_line(r.out, 0);
    cr_assert_str_eq(jstr(j, "error"), "ENOJOB");
    json_decref(j);
    run_free(&r);
    tc_close(c);
}

/* Dead-letter job id with one lease: claim it and fail it with dead. */
static void make_dead(struct tc_conn *c, const char *job)
{
    enqueue(c, job, "TENd");
    json_t *cl = OK(c, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":1}");
    json_t *leased = json_array_get(json_object_get(cl, "jobs"), 0);
    cr_assert_str_eq(jstr(leased, "job"), job);
    json_decref(OK(c,
                   "{\"op\":\"fail\",\"queue\":\"q\",\"job\":\"%s\",\"lease\":\"%s\","
                   "\"error\":\"boom %s\",\"dead\":true}",
                   job, jstr(leased, "lease"), job));
    json_decref(cl);
}

Test(emqctl, dead_list_retry_purge)
{
    struct tc_conn *c = fx_conn();
    make_dead(c, "JOBd1");
    make_dead(c, "JOBd2");
    make_dead(c, "JOBd3");

    struct run r = CTL("dead", "q", "list");
    assert_exit(r, 0);
    char line[256];
    assert_has(line_with(r.out, "JOB ", line, sizeof(line)), "GROUP  ATTEMPTS  DIED");
    assert_has(line_with(r.out, "JOBd2", line, sizeof(line)), "boom JOBd2");
    assert_has(line, "TENd");
    cr_assert_eq(count_lines(r.out), 4);
    run_free(&r);

    r = CTL("dead", "q", "list", "--limit", "2", "--json");
    assert_exit(r, 0);
    json_t *j = json_line(r.out, 0);
    json_t *jobs = json_object_get(j, "jobs");
    cr_assert_eq(json_array_size(jobs), 2);
    cr_assert_str_eq(jstr(json_array_get(jobs, 0), "job"), "JOBd1", "oldest death first");
    cr_assert_eq(jint(json_array_get(jobs, 0), "attempts"), 1);
    json_decref(j);
    run_free(&r);

    r = CTL("dead", "q", "retry", "JOBd1");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "retried 1 job\n");
    run_free(&r);
    cr_assert_eq(depth(c, "TENd"), 1);

    r = CTL("dead", "q", "purge");
    assert_exit(r, 2);
    assert_has(r.err, "not a terminal");
    run_free(&r);
    r = CTL("dead", "q", "purge", "--yes");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "purged 2 jobs\n");
    run_free(&r);
    r = CTL("dead", "q", "retry", "JOBd2");
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: ENOJOB: ");
    run_free(&r);
    tc_close(c);
}

Test(emqctl, enqueue_one_job)
{
    struct tc_conn *c = fx_conn();
    struct run r = CTL("enqueue", "q", "--group", "TENe", "--job", "JOBone", "{\"n\":[1,2]}");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "JOBone enqueued\n");
    run_free(&r);
    r = CTL("enqueue", "q", "--group", "TENe", "--job", "JOBone", "{\"n\":[1,2]}");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "JOBone duplicate\n");
    run_free(&r);
    json_t *row = OK(c, "{\"op\":\"job\",\"queue\":\"q\",\"job\":\"JOBone\"}");
    char *p = json_dumps(json_object_get(json_object_get(row, "job"), "payload"), JSON_COMPACT);
    cr_assert_str_eq(p, "{\"n\":[1,2]}");
    free(p);
    json_decref(row);

    r = CTL("--json", "enqueue", "q", "--delay-ms", "600000", "--max-attempts", "2", "-7");
    assert_exit(r, 0);
    json_t *j = json_line(r.out, 0);
    cr_assert_str_eq(jstr(j, "verdict"), "enqueued");
    row = OK(c, "{\"op\":\"job\",\"queue\":\"q\",\"job\":\"%s\"}", jstr(j, "job"));
    json_t *rj = json_object_get(row, "job");
    cr_assert_str_eq(jstr(rj, "state"), "delayed");
    cr_assert_eq(jint(rj, "max_attempts"), 2);
    cr_assert_eq(json_integer_value(json_object_get(rj, "payload")), -7);
    json_decref(row);
    json_decref(j);
    run_free(&r);

    r = CTL("enqueue", "q", "--group", "nobrand", "1");
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EBRAND: ");
    run_free(&r);
    tc_close(c);
}

Test(emqctl, enqueue_from_stdin_in_batches_reports_bad_lines)
{
    struct tc_conn *c = fx_conn();
    const char *in = "{\"x\":1}\n"
                     "{\"payload\":2,\"job\":\"JOBmine\",\"group\":\"TENother\"}\n"
                     "this is not json\n"
                     "\n"
                     "{\"payload\":4,\"job\":\"mine4\"}\n"
                     "5\n"
                     "[6]\n";
    struct run r = CTL_IN(in, "enqueue", "q", "--group", "TENin", "--batch", "2");
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EARG: line 3: not JSON");
    assert_has(r.err, "emqctl: EKIND: line 5: ");
    assert_has(r.out, "JOBmine enqueued\n");
    assert_has(r.out, "4 enqueued, 0 duplicate, 2 failed\n");
    cr_assert_eq(count_lines(r.out), 5, "4 verdicts and the summary:\n%s", r.out);
    run_free(&r);
    cr_assert_eq(depth(c, "TENin"), 3, "lines 1, 6 and 7 took the --group default");
    cr_assert_eq(depth(c, "TENother"), 1);

    /* Again: all duplicates but the minted ones; --json gives one reply per
     * batch of 2 (5 items sent: 3 batches). */
    r = CTL_IN(in, "--json", "enqueue", "q", "-", "--group", "TENin", "--batch", "2");
    assert_exit(r, 1);
    cr_assert_eq(count_lines(r.out), 3, "one line per batch:\n%s", r.out);
    json_t *b0 = json_line(r.out, 0), *b2 = json_line(r.out, 2);
    json_t *res0 = json_object_get(b0, "results");
    cr_assert_eq(json_array_size(res0), 2);
    cr_assert_str_eq(jstr(json_array_get(res0, 1), "verdict"), "duplicate");
    cr_assert_eq(json_array_size(json_object_get(b2, "results")), 1);
    json_decref(b0);
    json_decref(b2);
    run_free(&r);

    /* All good lines: exit 0. */
    r = CTL_IN("1\n2\n3\n", "enqueue", "q", "--group", "TENok");
    assert_exit(r, 0);
    assert_has(r.out, "3 enqueued, 0 duplicate, 0 failed\n");
    run_free(&r);
    cr_assert_eq(depth(c, "TENok"), 3);
    tc_close(c);
}

Test(emqctl, check_reports_a_clean_queue)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "JOBc1", "TENa");
    struct run r = CTL("check", "q");
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "ok: queue q holds every invariant\n");
    run_free(&r);
    r = CTL("check", "q", "--json");
    assert_exit(r, 0);
    json_t *j = json_line(r.out, 0);
    cr_assert(json_is_array(json_object_get(j, "violations")));
    cr_assert_eq(json_array_size(json_object_get(j, "violations")), 0);
    json_decref(j);
    run_free(&r);
    r = CTL("check", "bad queue!");
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EQUEUE: ");
    run_free(&r);
    tc_close(c);
}

Test(emqctl, top_prints_snapshots_when_not_a_terminal)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "JOBt1", "TENsmall");
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof(id), "JOBbig%d", i);
        enqueue(c, id, "TENbig");
    }
    json_decref(OK(c, "{\"op\":\"weight\",\"queue\":\"q\",\"group\":\"TENbig\",\"weight\":9}"));
    /* Values from the queue defaults are marked "(q)", as groups does. */
    json_decref(OK(c, "{\"op\":\"limit\",\"queue\":\"q\",\"max\":100}"));
    json_decref(OK(c, "{\"op\":\"cap\",\"queue\":\"q\",\"max_pending\":50}"));
    json_decref(OK(c, "{\"op\":\"cap\",\"queue\":\"q\",\"group\":\"TENsmall\",\"max_pending\":7}"));
    struct run r = CTL("top", "q", "--iterations", "2", "--interval", "100");
    assert_exit(r, 0);
    assert_has(r.out, "WEIGHT");
    const char *one = strstr(r.out, "emqctl top q  refresh 1");
    const char *two = strstr(r.out, "emqctl top q  refresh 2");
    cr_assert(one != NULL && two != NULL && one < two, "two snapshots:\n%s", r.out);
    cr_assert_null(strstr(r.out, "refresh 3"));
    cr_assert_null(strchr(r.out, '\x1b'), "no escapes when not a terminal");
    /* Largest group first, in each snapshot; rates only in the second. */
    const char *big = strstr(two, "\nTENbig "), *small = strstr(two, "\nTENsmall ");
    cr_assert(big != NULL && small != NULL && big < small, "largest first:\n%s", two);
    char line[256];
    assert_has(line_with(big + 1, "TENbig", line, sizeof(line)),
               "100 (q)       9       -  50 (q)  no");
    assert_has(line_with(small + 1, "TENsmall", line, sizeof(line)), "       7  no");
    assert_has(two, "CAP");
    assert_has(two, "pending 5 (0/s)");
    const char *rate = strstr(one, "/s");
    cr_assert(rate != NULL && rate > two, "the first snapshot has no rates:\n%s", r.out);
    run_free(&r);

    r = CTL("--json", "top", "q", "--iterations", "2", "--interval", "100");
    assert_exit(r, 0);
    cr_assert_eq(count_lines(r.out), 2);
    for (int i = 0; i < 2; i++) {
        json_t *j = json_line(r.out, i);
        cr_assert_eq(jint(json_object_get(j, "stats"), "pending"), 5);
        cr_assert_eq(json_array_size(json_object_get(j, "groups")), 2);
        json_decref(j);
    }
    run_free(&r);
    tc_close(c);
}

Test(emqctl, token_and_environment_and_unix_socket)
{
    fx_teardown();
    char sock[64];
    snprintf(sock, sizeof(sock), "/tmp/emqctl-test-%d.sock", (int)getpid());
    const char *const extra[] = {"--token", "s3cret", "--unix", sock, NULL};
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);

    struct run r = CTL("stats", "q");
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EAUTH: ");
    run_free(&r);
    r = CTL("--token", "wrong", "stats", "q");
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EAUTH: ");
    run_free(&r);
    r = CTL("--token", "s3cret", "stats", "q");
    assert_exit(r, 0);
    assert_has(r.out, "pending  0\n");
    run_free(&r);
    r = run_ctl(NULL, "EMQ_TOKEN=s3cret", fx_emqd.port, (const char *const[]){"ping", NULL});
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "pong\n");
    run_free(&r);

    char env[64];
    snprintf(env, sizeof(env), "EMQ_ADDR=127.0.0.1:%d", fx_emqd.port);
    r = run_ctl(NULL, env, 0, (const char *const[]){"--token", "s3cret", "depth", "q", NULL});
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "0\n");
    run_free(&r);

    r = run_ctl(NULL, NULL, 0,
                (const char *const[]){"--socket", sock, "--token", "s3cret", "ping", NULL});
    assert_exit(r, 0);
    cr_assert_str_eq(r.out, "pong\n");
    run_free(&r);
    unlink(sock);
}

/* token new prints a fresh token and the tokens-file line for it (no
 * server needed); emqd given that line admits the token with its role
 * and patterns, and emqctl says clearly when the token may not do what
 * it was asked. */
Test(emqctl, token_new_prints_a_token_that_emqd_accepts)
{
    struct run r = run_ctl(NULL, NULL, 1,
                           (const char *const[]){"token", "new", "ctl-w", "worker", "tq*", NULL});
    assert_exit(r, 0);
    cr_assert_eq(count_lines(r.out), 2, "two lines: %s", r.out);
    char token[128], line[256], hash[65], want[256];
    cr_assert_eq(sscanf(r.out, "%127s", token), 1);
    line_with(r.out, "ctl-w worker ", line, sizeof(line));
    tokens_hash_hex(token, strlen(token), hash);
    snprintf(want, sizeof(want), "ctl-w worker %s tq*", hash);
    cr_assert_str_eq(line, want, "the line holds the token's SHA-256, not the token");
    cr_assert_geq(strlen(token), 64, "256 random bits: %s", token);
    run_free(&r);
    r = run_ctl(NULL, NULL, 1, (const char *const[]){"token", "new", "ctl-w", "worker", NULL});
    assert_exit(r, 0);
    cr_assert(strstr(r.out, token) == NULL, "each token is new");
    run_free(&r);
    r = run_ctl(NULL, NULL, 1,
                (const char *const[]){"--json", "token", "new", "ctl-a", "admin", NULL});
    assert_exit(r, 0);
    json_t *o = json_line(r.out, 0);
    tokens_hash_hex(jstr(o, "token"), strlen(jstr(o, "token")), hash);
    cr_assert(strstr(jstr(o, "line"), hash) != NULL);
    cr_assert_str_eq(jstr(o, "role"), "admin");
    json_decref(o);
    run_free(&r);

    fx_teardown();
    char path[32], file[300], tok[160];
    snprintf(file, sizeof(file), "%s\n", line);
    emqd_write_temp(path, file);
    const char *const extra[] = {"--tokens-file", path, NULL};
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    snprintf(tok, sizeof(tok), "EMQ_TOKEN=%s", token);
    r = run_ctl(NULL, tok, fx_emqd.port, (const char *const[]){"stats", "tq1", NULL});
    assert_exit(r, 0);
    assert_has(r.out, "pending  0\n");
    run_free(&r);
    r = run_ctl(NULL, tok, fx_emqd.port, (const char *const[]){"drain", "tq1", "--yes", NULL});
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EPERM: ");
    assert_has(r.err, "\"drain\"");
    assert_has(r.err, "may not do this: its role or queue patterns");
    run_free(&r);
    r = run_ctl(NULL, tok, fx_emqd.port, (const char *const[]){"stats", "other", NULL});
    assert_exit(r, 1);
    assert_has(r.err, "emqctl: EPERM: ");
    assert_has(r.err, "\"other\"");
    run_free(&r);
    unlink(path);
}

Test(emqctl, enqueue_from_stdin_keeps_requests_under_the_line_limit)
{
    /* 300 items of ~5 KB: one --batch of 1000 would be a 1.5 MB line, over
     * emqd's 1 MiB limit; emqctl sends them in several requests. */
    size_t size = 300 * 5100 + 1;
    char *in = malloc(size), *p = in;
    cr_assert_not_null(in);
    for (int i = 0; i < 300; i++)
        p += sprintf(p, "{\"pad\":\"%04d%04990d\"}\n", i, 0);
    struct run r = CTL_IN(in, "--json", "enqueue", "q", "--group", "TENbig");
    free(in);
    assert_exit(r, 0);
    int lines = count_lines(r.out);
    cr_assert(lines >= 3, "%d requests", lines);
    size_t items = 0;
    for (int i = 0; i < lines; i++) {
        json_t *b = json_line(r.out, i);
        cr_assert(json_is_true(json_object_get(b, "ok")));
        items += json_array_size(json_object_get(b, "results"));
        json_decref(b);
    }
    cr_assert_eq(items, 300);
    run_free(&r);
    struct tc_conn *c = fx_conn();
    cr_assert_eq(depth(c, "TENbig"), 300);
    tc_close(c);
}

/* Read from the pty master into buf (appending) until needle shows up or
 * the deadline passes. True if needle was seen. */
static bool pty_read_until(int master, char *buf, size_t size, size_t *len, const char *needle)
{
    struct wait w;
    wait_begin(&w, 0);
    while (!wait_expired(&w)) {
        if (strstr(buf, needle) != NULL)
            return true;
        struct pollfd p = {.fd = master, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(master, buf + *len, size - 1 - *len);
        if (n <= 0)
            return false; /* EIO: every slave side is closed */
        *len += (size_t)n;
        buf[*len] = '\0';
    }
    return false;
}

Test(emqctl, top_on_a_terminal_redraws_and_q_restores_the_terminal)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "JOBtty", "TENtty");
    tc_close(c);
    int master, slave;
    cr_assert_eq(openpty(&master, &slave, NULL, NULL, NULL), 0);
    struct termios before;
    cr_assert_eq(tcgetattr(slave, &before), 0);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", fx_emqd.port);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(master);
        login_tty(slave);
        unsetenv("NO_COLOR");
        const char *bin = getenv("EMQCTL");
        execl(bin, bin, "--addr", addr, "top", "q", "--interval", "100", (char *)NULL);
        _exit(127);
    }
    static char out[1 << 16];
    size_t len = 0;
    out[0] = '\0';
    cr_assert(pty_read_until(master, out, sizeof(out), &len, "refresh 2"), "no redraw:\n%s", out);
    cr_assert_eq(write(master, "q", 1), 1);
    /* The parent keeps the slave open (to read its modes after), so the
     * end is the restore sequence, not EOF. */
    cr_assert(pty_read_until(master, out, sizeof(out), &len, "\x1b[?1049l"),
              "the screen was not given back:\n%s", out);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "q ends top with 0, status %d", st);
    assert_has(out, "\x1b[?1049h");          /* alternate screen */
    assert_has(out, "\x1b[1mGROUP");         /* colour on a terminal */
    assert_has(out, "TENtty ");              /* the group row */
    assert_has(out, "\x1b[?25h\x1b[?1049l"); /* cursor and screen given back */
    struct termios after;
    cr_assert_eq(tcgetattr(slave, &after), 0);
    cr_assert_eq(after.c_lflag & (ICANON | ECHO), before.c_lflag & (ICANON | ECHO),
                 "the terminal modes are restored");
    close(slave);
    close(master);
}
