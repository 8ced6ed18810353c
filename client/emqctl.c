/* emqctl.c: the admin CLI's front: the option table, argument parsing and
 * checking (before anything reaches the network), help, connecting on
 * first use, the one way errors are reported, and main. The commands live
 * in emqctl_cmd.c, emqctl_enqueue.c and emqctl_top.c. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emqctl.h"

#define DAY_MS 86400000LL

/* One option: its long name, an optional short letter, whether it takes a
 * value, and for numeric ones the bounds checked here. id < 0 marks the
 * global options, accepted anywhere on the line. */
struct ctl_optdef {
    const char *name;
    char letter;
    int id;
    bool value;
    bool numeric;
    long long min, max;
};

enum {
    G_ADDR = -1,
    G_SOCKET = -2,
    G_TOKEN = -3,
    G_JSON = -4,
    G_HELP = -5,
    G_VERSION = -6,
    G_TLS = -7,
    G_CA = -8,
    G_CERT = -9,
    G_KEY = -10,
};

static const struct ctl_optdef ctl_optdefs[] = {
    {"addr", 0, G_ADDR, true, false, 0, 0},
    {"socket", 0, G_SOCKET, true, false, 0, 0},
    {"token", 0, G_TOKEN, true, false, 0, 0},
    {"json", 0, G_JSON, false, false, 0, 0},
    {"tls", 0, G_TLS, false, false, 0, 0},
    {"ca", 0, G_CA, true, false, 0, 0},
    {"cert", 0, G_CERT, true, false, 0, 0},
    {"key", 0, G_KEY, true, false, 0, 0},
    {"help", 'h', G_HELP, false, false, 0, 0},
    {"version", 0, G_VERSION, false, false, 0, 0},
    {"limit", 0, CTL_O_LIMIT, true, true, 1, LLONG_MAX},
    {"yes", 'y', CTL_O_YES, false, false, 0, 0},
    {"group", 0, CTL_O_GROUP, true, false, 0, 0},
    {"job", 0, CTL_O_JOB, true, false, 0, 0},
    {"delay-ms", 0, CTL_O_DELAY, true, true, 0, 365 * DAY_MS},
    {"max-attempts", 0, CTL_O_ATTEMPTS, true, true, 0, 1000000},
    {"batch", 0, CTL_O_BATCH, true, true, 1, 10000},
    {"interval", 0, CTL_O_INTERVAL, true, true, 50, 3600000},
    {"iterations", 0, CTL_O_ITERATIONS, true, true, 1, LLONG_MAX},
    {"page-size", 0, CTL_O_PAGE, true, true, 1, 10000},
    {"state", 0, CTL_O_STATE, true, false, 0, 0},
};

/* The option help lines, indexed like enum ctl_opt. */
static const char *const ctl_opthelp[CTL_O_COUNT_] = {
    [CTL_O_LIMIT] = "--limit N          stop after N rows",
    [CTL_O_YES] = "-y, --yes          do not ask for confirmation",
    [CTL_O_GROUP] = "--group G          the job's group (tenant); default: ungrouped",
    [CTL_O_JOB] = "--job ID           the job id (JOB...); default: minted by the server",
    [CTL_O_DELAY] = "--delay-ms N       start delayed by N ms",
    [CTL_O_ATTEMPTS] = "--max-attempts N   leases before dead-lettering (0: unlimited)",
    [CTL_O_BATCH] = "--batch N          stdin lines per enqueue_many request (default 1000)",
    [CTL_O_INTERVAL] = "--interval MS      refresh every MS milliseconds (default 1000)",
    [CTL_O_ITERATIONS] = "--iterations N     stop after N refreshes",
    [CTL_O_PAGE] = "--page-size N      rows asked for per page (default 100)",
    [CTL_O_STATE] = "--state S          pending (default), active, delayed or dead",
};

static const char ctl_global_help[] =
    "Global options (anywhere on the line):\n"
    "  --addr HOST:PORT   the server (default $EMQ_ADDR, else 127.0.0.1:7711)\n"
    "  --socket PATH      connect to a unix socket instead\n"
    "  --token T          authenticate with T (default $EMQ_TOKEN)\n"
    "  --tls              speak TLS (also: --addr tls://HOST:PORT)\n"
    "  --ca FILE          verify the server against FILE's CAs (implies --tls)\n"
    "  --cert FILE        present FILE's client certificate (implies --tls)\n"
    "  --key FILE         the client certificate's key (default: in --cert's file)\n"
    "  --json             print the server's replies, one JSON object per line\n"
    "  -h, --help         show help (also after a command)\n"
    "  --version          print \"emqctl VERSION\" and exit\n";

static const char ctl_program_synopsis[] =
    "usage: emqctl [--addr HOST:PORT | --socket PATH] [--token T] [--json] COMMAND ...\n";

static int ctl_run_help(struct ctl *ctl);

/* `emqctl help [COMMAND]`: the same text as --help, for those who type it
 * as a command. */
static const struct ctl_cmd ctl_help_cmd = {
    "help", "[COMMAND]", "show this help, or a command's", NULL, 0, 1, 0, false, ctl_run_help,
};

/* Every command, in help order. */
static const struct ctl_cmd *ctl_find(const char *name)
{
    for (const struct ctl_cmd *c = ctl_cmd_table; c->name != NULL; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    for (const struct ctl_cmd *c = ctl_view_table; c->name != NULL; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    if (strcmp(name, ctl_enqueue_cmd.name) == 0)
        return &ctl_enqueue_cmd;
    if (strcmp(name, ctl_top_cmd.name) == 0)
        return &ctl_top_cmd;
    if (strcmp(name, ctl_token_cmd.name) == 0)
        return &ctl_token_cmd;
    if (strcmp(name, ctl_help_cmd.name) == 0)
        return &ctl_help_cmd;
    return NULL;
}

static void ctl_help_line(FILE *out, const struct ctl_cmd *c)
{
    char head[64];
    snprintf(head, sizeof(head), "%s %s", c->name, c->synopsis);
    fprintf(out, "  %-36s %s\n", head, c->summary);
}

static void ctl_program_usage(FILE *out)
{
    fputs(ctl_program_synopsis, out);
    fputs("\nAdmin CLI for the emqd job queue.\n\nCommands:\n", out);
    for (const struct ctl_cmd *c = ctl_cmd_table; c->name != NULL; c++)
        ctl_help_line(out, c);
    for (const struct ctl_cmd *c = ctl_view_table; c->name != NULL; c++)
        ctl_help_line(out, c);
    ctl_help_line(out, &ctl_enqueue_cmd);
    ctl_help_line(out, &ctl_top_cmd);
    ctl_help_line(out, &ctl_token_cmd);
    ctl_help_line(out, &ctl_help_cmd);
    fprintf(out,
            "\n%s\nRun `emqctl COMMAND --help` for a command's options. "
            "Exit status: 0 ok, 1 server or connection error, 2 usage.\n",
            ctl_global_help);
}

/* The one-line synopsis of a command, as the first line of its help and
 * under a usage error. */
static void ctl_cmd_synopsis(FILE *out, const struct ctl_cmd *c)
{
    fprintf(out, "usage: emqctl [global options] %s", c->name);
    if (c->synopsis[0] != '\0')
        fprintf(out, " %s", c->synopsis);
    if (c->opts != 0 && strstr(c->synopsis, "[options]") == NULL)
        fputs(" [options]", out);
    fputc('\n', out);
}

static void ctl_cmd_usage(FILE *out, const struct ctl_cmd *c)
{
    ctl_cmd_synopsis(out, c);
    fprintf(out, "\n%s\n", c->summary);
    if (c->details != NULL)
        fprintf(out, "\n%s", c->details);
    if (c->opts != 0) {
        fputs("\nOptions:\n", out);
        for (int i = 0; i < CTL_O_COUNT_; i++)
            if (c->opts & CTL_F(i))
                fprintf(out, "  %s\n", ctl_opthelp[i]);
    }
    fprintf(out, "\n%s", ctl_global_help);
}

void ctl_error(const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emqctl: %s: ", code);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int ctl_usage_error(const struct ctl *ctl, const char *fmt, ...)
{
    const struct ctl_cmd *c = ctl != NULL ? ctl->cmd : NULL;
    va_list ap;
    va_start(ap, fmt);
    fputs("emqctl: ", stderr);
    if (c != NULL)
        fprintf(stderr, "%s: ", c->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    /* Three lines at most, so the error stays on the screen: the full help
     * is one command away. */
    if (c != NULL) {
        ctl_cmd_synopsis(stderr, c);
        fprintf(stderr, "try 'emqctl %s --help'\n", c->name);
    } else {
        fputs(ctl_program_synopsis, stderr);
        fputs("try 'emqctl --help'\n", stderr);
    }
    return CTL_EXIT_USAGE;
}

static int ctl_run_help(struct ctl *ctl)
{
    if (ctl->npos == 0) {
        ctl_program_usage(stdout);
        return CTL_EXIT_OK;
    }
    const struct ctl_cmd *c = ctl_find(ctl->pos[0]);
    if (c == NULL) /* the error of `emqctl nope`, not help's own */
        return ctl_usage_error(NULL, "unknown command \"%s\"", ctl->pos[0]);
    ctl_cmd_usage(stdout, c);
    return CTL_EXIT_OK;
}

int ctl_parse_int(const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

static const struct ctl_optdef *ctl_optdef_find(const char *name, size_t len, char letter)
{
    for (size_t i = 0; i < sizeof(ctl_optdefs) / sizeof(ctl_optdefs[0]); i++) {
        const struct ctl_optdef *d = &ctl_optdefs[i];
        if (letter != 0 ? d->letter == letter
                        : strlen(d->name) == len && !memcmp(d->name, name, len))
            return d;
    }
    return NULL;
}

/* The long name of a per-command option. */
static const char *ctl_optname(int id)
{
    for (size_t i = 0; i < sizeof(ctl_optdefs) / sizeof(ctl_optdefs[0]); i++)
        if (ctl_optdefs[i].id == id)
            return ctl_optdefs[i].name;
    return "?";
}

/* What the command line asks for besides a command: help or the version. */
struct ctl_info {
    bool help, version;
};

/* Record one option's value; -h/--help and --version are noted in *info. */
static int ctl_set_opt(struct ctl *ctl, const struct ctl_optdef *d, const char *val,
                       struct ctl_info *info)
{
    switch (d->id) {
    case G_ADDR:
        ctl->opts.unix_path = NULL;
        ctl->opts.host = NULL;
        ctl->opts.port = 0;
        if (emq_parse_addr(&ctl->opts, val) != EMQ_OK)
            return ctl_usage_error(ctl, "bad --addr \"%s\": expected HOST:PORT", val);
        return 0;
    case G_TLS:
        ctl->opts.tls = true;
        return 0;
    case G_CA:
        ctl->opts.tls = true;
        ctl->opts.tls_ca = val;
        return 0;
    case G_CERT:
        ctl->opts.tls = true;
        ctl->opts.tls_cert = val;
        return 0;
    case G_KEY:
        ctl->opts.tls_key = val;
        return 0;
    case G_SOCKET:
        ctl->opts.unix_path = val;
        return 0;
    case G_TOKEN:
        ctl->opts.token = val;
        return 0;
    case G_JSON:
        ctl->json = true;
        return 0;
    case G_HELP:
        info->help = true;
        return 0;
    case G_VERSION:
        info->version = true;
        return 0;
    }
    if (d->numeric && ctl_parse_int(val, d->min, d->max, &ctl->num[d->id]) != 0)
        return ctl_usage_error(ctl, "--%s wants an integer in %lld..%lld, not \"%s\"", d->name,
                               d->min, d->max, val);
    ctl->opt[d->id] = val;
    return 0;
}

/* Is arg an option (rather than a positional such as "-" or the JSON "-1")? */
static bool ctl_is_option(const char *arg)
{
    return arg[0] == '-' && arg[1] != '\0' && !(arg[1] >= '0' && arg[1] <= '9');
}

/* One option at argv[*i] (its value may be the next argument). */
static int ctl_parse_opt(struct ctl *ctl, int argc, char **argv, int *i, struct ctl_info *info)
{
    const char *arg = argv[*i], *val = NULL;
    const struct ctl_optdef *d;
    if (arg[1] != '-') {
        d = arg[2] == '\0' ? ctl_optdef_find(NULL, 0, arg[1]) : NULL;
    } else {
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
        d = ctl_optdef_find(name, len, 0);
        val = eq != NULL ? eq + 1 : NULL;
    }
    if (d == NULL)
        return ctl_usage_error(ctl, "unknown option \"%s\"", arg);
    if (!d->value && val != NULL)
        return ctl_usage_error(ctl, "--%s takes no value", d->name);
    if (d->value && val == NULL) {
        if (*i + 1 >= argc)
            return ctl_usage_error(ctl, "--%s needs a value", d->name);
        val = argv[++*i];
    }
    return ctl_set_opt(ctl, d, val != NULL ? val : "", info);
}

/* Parse the whole line: options anywhere, the first positional names the
 * command. Returns 0, CTL_EXIT_USAGE, or -1 when help or the version was
 * printed. */
static int ctl_parse(struct ctl *ctl, int argc, char **argv)
{
    struct ctl_info info = {0};
    bool dashdash = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!dashdash && strcmp(arg, "--") == 0) {
            dashdash = true;
        } else if (!dashdash && ctl_is_option(arg)) {
            int rc = ctl_parse_opt(ctl, argc, argv, &i, &info);
            if (rc != 0)
                return rc;
        } else if (ctl->cmd == NULL) {
            ctl->cmd = ctl_find(arg);
            if (ctl->cmd == NULL)
                return ctl_usage_error(ctl, "unknown command \"%s\"", arg);
        } else if (ctl->npos == CTL_MAX_POS) {
            return ctl_usage_error(ctl, "too many arguments");
        } else {
            ctl->pos[ctl->npos++] = arg;
        }
    }
    if (info.help) {
        if (ctl->cmd != NULL)
            ctl_cmd_usage(stdout, ctl->cmd);
        else
            ctl_program_usage(stdout);
        return -1;
    }
    if (info.version) {
        puts("emqctl " EMQ_VERSION);
        return -1;
    }
    if (ctl->cmd == NULL)
        return ctl_usage_error(ctl, "no command given");
    for (int o = 0; o < CTL_O_COUNT_; o++)
        if (ctl->opt[o] != NULL && !(ctl->cmd->opts & CTL_F(o)))
            return ctl_usage_error(ctl, "option --%s does not apply here", ctl_optname(o));
    if (ctl->npos < ctl->cmd->min_pos)
        return ctl_usage_error(ctl, "missing arguments");
    if (ctl->npos > ctl->cmd->max_pos)
        return ctl_usage_error(ctl, "too many arguments");
    return 0;
}

/* The environment's defaults, overridden by the command line. Returns an
 * EMQ_ADDR that does not parse, or NULL: it is an error only for a command
 * that would use it (not for help, nor with --addr or --socket). */
static const char *ctl_defaults(struct ctl *ctl)
{
    const char *addr = getenv("EMQ_ADDR"), *token = getenv("EMQ_TOKEN"), *bad = NULL;
    if (addr != NULL && addr[0] != '\0' && emq_parse_addr(&ctl->opts, addr) != EMQ_OK)
        bad = addr; /* emq_parse_addr changed nothing */
    if (token != NULL && token[0] != '\0')
        ctl->opts.token = token;
    const char *nc = getenv("NO_COLOR");
    ctl->color = isatty(STDOUT_FILENO) && (nc == NULL || nc[0] == '\0');
    ctl->opts.name = "emqctl";
    return bad;
}

static int ctl_connect(struct ctl *ctl)
{
    if (ctl->conn != NULL)
        return 0;
    ctl->opts.timeout_ms = ctl->cmd->slow ? -1 : 30000;
    int rc = emq_connect(&ctl->conn, &ctl->opts);
    if (rc == EMQ_OK)
        return 0;
    char where[300];
    emq_format_addr(&ctl->opts, where, sizeof(where));
    const char *msg = ctl->conn != NULL ? emq_errmsg(ctl->conn) : "";
    size_t clen = strlen(emq_code_name(rc));
    if (strncmp(msg, emq_code_name(rc), clen) == 0 && strncmp(msg + clen, ": ", 2) == 0)
        msg += clen + 2; /* the code is printed once, in front */
    ctl_error(emq_code_name(rc), "cannot talk to emqd at %s%s%s", where, msg[0] ? ": " : "", msg);
    emq_close(ctl->conn);
    ctl->conn = NULL;
    return CTL_EXIT_FAIL;
}

/* Print a reply as one compact line (the server's key order is kept),
 * without the "ref" that libemq put on the request: it is the library's
 * bookkeeping, not something the user asked for. */
static void ctl_print_reply(const json_t *reply)
{
    json_t *shown = json_copy((json_t *)reply);
    if (shown != NULL)
        json_object_del(shown, "ref");
    char *line = json_dumps(shown != NULL ? shown : reply, JSON_COMPACT);
    json_decref(shown);
    if (line != NULL)
        puts(line);
    free(line);
    fflush(stdout);
}

/* The request/reply round trip; print: under --json, print the reply,
 * an error reply included. */
static int ctl_call_mode(struct ctl *ctl, json_t *request, json_t **reply, bool print)
{
    *reply = NULL;
    int rc = ctl_connect(ctl);
    if (rc != 0)
        return rc;
    rc = emq_request(ctl->conn, request, reply);
    if (print && ctl->json && *reply != NULL)
        ctl_print_reply(*reply);
    if (rc == EMQ_OK)
        return 0;
    /* A server error is reported with the server's own code and message
     * (also a code this library does not know); a library one with its. */
    const char *code = json_string_value(json_object_get(*reply, "error"));
    const char *msg = json_string_value(json_object_get(*reply, "message"));
    if (code != NULL && strcmp(code, "EPERM") == 0)
        ctl_error(code,
                  "%s (the token emqctl used, --token or $EMQ_TOKEN, may not do this: its role "
                  "or queue patterns in emqd's tokens-file do not allow it)",
                  msg != NULL ? msg : "");
    else if (code != NULL)
        ctl_error(code, "%s", msg != NULL ? msg : "");
    else
        ctl_error(emq_code_name(rc), "%s", emq_errmsg(ctl->conn));
    json_decref(*reply);
    *reply = NULL;
    return CTL_EXIT_FAIL;
}

int ctl_call_quiet(struct ctl *ctl, json_t *request, json_t **reply)
{
    return ctl_call_mode(ctl, request, reply, false);
}

int ctl_call(struct ctl *ctl, json_t *request, json_t **reply)
{
    return ctl_call_mode(ctl, request, reply, true);
}

json_t *ctl_req(const char *op, const char *queue)
{
    json_t *r = json_object();
    json_object_set_new(r, "op", json_string(op));
    if (queue != NULL)
        json_object_set_new(r, "queue", json_string(queue));
    return r;
}

int ctl_confirm(const struct ctl *ctl, const char *question)
{
    if (ctl->opt[CTL_O_YES] != NULL)
        return 0;
    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr,
                "emqctl: %s: refusing without --yes: stdin is not a terminal, so "
                "there is no one to confirm\n",
                ctl->cmd->name);
        return CTL_EXIT_USAGE;
    }
    fprintf(stderr, "%s [y/N] ", question);
    fflush(stderr);
    char line[16];
    if (fgets(line, sizeof(line), stdin) != NULL && (line[0] == 'y' || line[0] == 'Y'))
        return 0;
    fputs("emqctl: not confirmed; nothing done\n", stderr);
    return CTL_EXIT_FAIL;
}

int main(int argc, char **argv)
{
    struct ctl ctl = {0};
    const char *bad_addr = ctl_defaults(&ctl);
    int rc = ctl_parse(&ctl, argc, argv);
    if (rc == 0 && bad_addr != NULL && ctl.cmd != &ctl_help_cmd && ctl.opts.unix_path == NULL &&
        ctl.opts.port == 0)
        rc = ctl_usage_error(NULL, "bad EMQ_ADDR \"%s\": expected HOST:PORT", bad_addr);
    if (rc < 0)
        return CTL_EXIT_OK;
    if (rc == 0)
        rc = ctl.cmd->run(&ctl);
    emq_close(ctl.conn);
    if (fflush(stdout) != 0 && rc == 0)
        rc = CTL_EXIT_FAIL;
    return rc;
}
