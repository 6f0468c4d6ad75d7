/* simba_cli.c -- the `simba` command-line tool: guard a job across hosts like
   `flock -n`, `consul lock` or `etcdctl lock`, on any simba backend.

       simba run [options] URL NAME... -- command [args...]
       simba elect [options] URL NAME -- command [args...]
       simba status [--json] URL NAME...
       simba delete URL NAME
       simba set-capacity URL NAME N
       simba init-server URL

   It uses only simba's public API (this file is also the proof that the API
   is enough): one poll loop that watches simba's fds and a signal self-pipe,
   fork/exec of the command into its own process group, SIGTERM to that
   group at once when the lock is LOST and SIGKILL after --kill-after.
   Every option is one row of options[] (the parser, --help and
   tests/cli_docs.sh read it); `simba --help` and docs/cli.md (and
   simba.1) document everything. */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#define SIMBA_REDIS_IMPLEMENTATION
#define SIMBA_MYSQL_IMPLEMENTATION
#define SIMBA_ZK_IMPLEMENTATION
#define SIMBA_PG_IMPLEMENTATION
#define SIMBA_SQLITE_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#ifndef SIMBA_CLI_NO_REDIS
#include "simba_redis.h"
#endif
#ifndef SIMBA_CLI_NO_MYSQL
#include "simba_mysql.h"
#endif
#ifndef SIMBA_CLI_NO_ZK
#include "simba_zk.h"
#endif
#ifndef SIMBA_CLI_NO_PG
#include "simba_pg.h"
#endif
#ifndef SIMBA_CLI_NO_SQLITE
#include "simba_sqlite.h"
#endif
#define SIMBA_URL_IMPLEMENTATION
#include "simba_url.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* Exit codes of simba itself. Anything else is the command's own status
   (128 + N when a signal N killed it), as with `timeout` and `flock`. */
enum {
    EXIT_BUSY = 75,        /* --try found it held, or --wait ran out (EX_TEMPFAIL) */
    EXIT_USAGE = 64,       /* bad options, URL or name (EX_USAGE) */
    EXIT_CONNECT = 69,     /* cannot connect within --connect-timeout (EX_UNAVAILABLE) */
    EXIT_AUTH = 77,        /* the server refused our credentials (EX_NOPERM) */
    EXIT_LOST = 79,        /* the lock was lost while the command ran; it was killed */
    EXIT_ERROR = 70,       /* any other failure (server error, out of memory) (EX_SOFTWARE) */
    EXIT_NOEXEC = 126,     /* the command exists but cannot be run */
    EXIT_NOTFOUND = 127    /* the command was not found */
};

/* `simba --help` after the synopsis of every command. */
static const char *usage_about =
    "Distributed locks for shell scripts and cron jobs: `run` holds NAME while\n"
    "the command runs, in its own process group; if the lock is lost the\n"
    "command gets SIGTERM at once and SIGKILL after --kill-after.\n"
    "\n"
    "URL: redis://[user[:password]@]host[:port][/db][?...], redis+unix:///socket,\n"
    "     redis+sentinel://[user[:password]@]s1:port,s2:port/mastername[?...],\n"
    "     redis+cluster://host:port[,host:port...][?...] (Redis Cluster seeds),\n"
    "     mysql://user[:password]@host[:port]/database[?...],\n"
    "     postgres://[user[:password]@]host[:port][,host:port...]/database[?...]\n"
    "     (postgresql:// too; libpq's URI: sslmode, target_session_attrs, ...),\n"
    "     zk://host:port[,host:port...][/chroot][?...],\n"
    "     sqlite:///path/to/locks.db (processes of this machine, no server),\n"
    "     mem: (this process only).\n"
    "     Query parameters tenant, client_id, ttl, transition for every scheme;\n"
    "     password_env=VAR or password_file=PATH keep passwords out of `ps`.\n"
    "     The URL may be \"-\": then it is taken from $SIMBA_URL.\n"
    "\n"
    "exit codes: the command's own status (128+N when signal N killed it), or\n"
    "  64 bad usage or URL   69 cannot connect   70 other error   75 busy\n"
    "  (--try, --wait ran out, restart grace)   77 authentication refused\n"
    "  79 lock lost\n"
    "  126 command not runnable   127 command not found\n"
    "  status: 0 held, 1 free, 2 no such resource (see `simba status --help`)\n";

/* ---- options ---- */
typedef struct opts {
    const char *cmd;
    const char *url;
    const char *names[SIMBA_MAX_RESOURCES];
    int nnames;
    char **argv;                  /* the command */
    int wait_ms, permits, capacity, shared, exclusive, once, json, quiet, verbose;
    const char *key, *tenant, *client_id;
    int ttl_ms, transition_ms, kill_after_ms, connect_timeout_ms, hold_at_least_ms;
    int setcap, create;
    int tried, waited;            /* --try, --wait given */
} opts;

static opts o;

/* The commands: what `simba --help` lists and `simba COMMAND --help` says
   before the options that command takes. */
typedef struct cli_command {
    const char *name;
    const char *synopsis;         /* after "simba " */
    const char *about;            /* lines, each ending in '\n' */
} cli_command;

static const cli_command commands[] = {
    {"run", "run [options] URL NAME... -- command [args...]",
     "Acquire NAME (several NAMEs: all or nothing), run the command in its own\n"
     "process group while holding, release when it exits, exit with its status.\n"
     "The job is the whole group: NAME is held until every process the command\n"
     "started in it has ended too, and on LOST the group is killed.\n"
     "The command gets SIMBA_FENCE, SIMBA_FENCES, SIMBA_NAME, SIMBA_CLIENT_ID.\n"
     "Ctrl-Z (SIGTSTP) stops the command too. A simba that is stopped with\n"
     "SIGSTOP or frozen (a paused VM) cannot stop the command in time: where\n"
     "that matters, the command must check SIMBA_FENCE against the resource it\n"
     "protects (refuse writes with an older fence).\n"},
    {"elect", "elect [options] URL NAME -- command [args...]",
     "Leader election: run the command while this process is the leader of\n"
     "NAME. On LOST the command is killed (SIGTERM, then SIGKILL after\n"
     "--kill-after) and simba contends again and reruns it when it leads again.\n"
     "When the command exits by itself, simba steps down and exits with its status.\n"},
    {"status", "status [--json] [options] URL NAME...",
     "Print each resource's capacity, holders and waiters in queue order, with\n"
     "the server's restart grace if one runs. The counts, in entries (one per\n"
     "request of a client) or permits:\n"
     "  held     the entries granted now; in parentheses the permits they use\n"
     "           (an exclusive one uses the whole capacity)\n"
     "  waiting  the entries not granted (yet)\n"
     "  queued   every entry in the queue: held + waiting\n"
     "Per entry: client id, session, fence, permits, and by the SERVER's clock\n"
     "(no client clock involved): held for (since the grant), renewed ... ago\n"
     "(the owner's last keepalive), expires in (when the server drops it unless\n"
     "renewed). A live owner renews every ttl/3, less than a third of its lease\n"
     "(ttl + transition = renewed ago + expires in); one not renewed for longer\n"
     "than that plus 1 s is marked NOT RENEWING: crashed, frozen or cut off, its\n"
     "entries go when it expires. A time the backend cannot know is left out\n"
     "(ZooKeeper: all three; a session opened by an older simba: renewed).\n"
     "--json: one JSON object per resource and line: {\"name\", \"exists\",\n"
     "\"state\" (\"held\", \"free\" or \"absent\"), \"capacity\", \"queued\", \"held\",\n"
     "\"held_permits\", \"waiting\", \"grace_ms\" (0: no restart grace),\n"
     "\"holders\": [{\"client\", \"session\", \"fence\", \"permits\", \"exclusive\",\n"
     "\"held_ms\", \"renewed_ago_ms\", \"expires_in_ms\", \"renewing\"}],\n"
     "\"waiters\": [same fields, fence 0, held_ms null]}; null: not known. A NAME\n"
     "that is not UTF-8: its odd bytes as U+FFFD, its bytes in hex in \"name_hex\".\n"
     "exit codes: 0 held (every NAME has a holder), 1 free (a NAME exists and\n"
     "nobody holds it), 2 absent (a NAME does not exist); with several NAMEs the\n"
     "highest. Failures: 64, 69, 70, 77 as for run (see `simba --help`).\n"},
    {"delete", "delete [options] URL NAME",
     "Remove the resource and every entry in it; its holders lose it (LOST).\n"},
    {"set-capacity", "set-capacity [--create] [options] URL NAME N",
     "Change the resource's capacity to N (1 or more). A NAME that does not\n"
     "exist is refused (exit 70), so a typo creates nothing; --create makes it.\n"},
    {"init-server", "init-server [options] URL",
     "End the restart grace of a brand-new Redis server (redis://, redis+unix://,\n"
     "redis+cluster://; the URL's tenant or --tenant). A server that lost its\n"
     "data (fresh start, restart, fail-over) grants nothing for one lease\n"
     "(ttl + transition) because a holder from before may still run; run this\n"
     "only when no client of the tenant can hold a lock, e.g. before any started.\n"
     "Other backends have nothing to init: it exits 64 for them.\n"},
};
#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))
#define ALL_COMMANDS "run elect status delete set-capacity init-server"

/* How the parser reads an option's value (the same checks for every option). */
typedef enum {
    OPT_FLAG,       /* no value: *dest = 1 */
    OPT_COUNT,      /* no value, may repeat: ++*dest */
    OPT_DURATION,   /* 500ms, 1.5s, 10s, 2m, 1h: *dest in ms */
    OPT_NUMBER,     /* an integer >= 1 */
    OPT_TEXT,       /* any word: *dest points into argv */
    OPT_HELP,       /* print the help and exit 0 */
    OPT_VERSION     /* `simba --version` only */
} opt_kind;

/* Every option simba takes, once. The parser reads this table, `simba
   COMMAND --help` prints the rows of that command, and `simba
   --list-options` prints the names for tests/cli_docs.sh, which checks that
   docs/simba.1 and docs/cli.md document each. An option given to a command
   not in its `cmds` is refused (the command would ignore it, and the user
   would believe it applied). */
typedef struct cli_option {
    const char *name, *alias;     /* "--wait", "-w" (alias NULL when none) */
    opt_kind kind;
    const char *value;            /* the value's name in the help, NULL for none */
    const char *cmds;             /* the commands that take it; "" = `simba OPTION` only */
    void *dest;                   /* int * or, for OPT_TEXT, const char ** */
    const char *help;             /* lines separated by '\n', none at the end */
} cli_option;

static const cli_option options[] = {
    {"--help", "-h", OPT_HELP, NULL, ALL_COMMANDS, NULL, "this text"},
    {"--wait", "-w", OPT_DURATION, "DURATION", "run", &o.wait_ms,
     "give up after DURATION (500ms, 1.5s, 10s, 2m, 1h): exit 75\n"
     "(default: wait forever)"},
    {"--try", "-n", OPT_FLAG, NULL, "run", &o.tried,
     "do not wait: exit 75 at once if held (not with --wait)"},
    {"--permits", NULL, OPT_NUMBER, "N", "run", &o.permits,
     "take N permits of a semaphore (default 1); without\n"
     "--capacity, NAME must exist with a capacity >= N"},
    {"--capacity", NULL, OPT_NUMBER, "C", "run", &o.capacity,
     "the resource's capacity when this request creates it\n"
     "(default 1, a mutex; 1000 with --shared/--exclusive)"},
    {"--shared", NULL, OPT_FLAG, NULL, "run", &o.shared,
     "a reader of a read/write lock (1 permit)"},
    {"--exclusive", NULL, OPT_FLAG, NULL, "run", &o.exclusive,
     "the writer of a read/write lock (all permits)"},
    {"--key", NULL, OPT_TEXT, "KEY", "run", &o.key,
     "idempotency key: the same key is the same request"},
    {"--hold-at-least", NULL, OPT_DURATION, "DURATION", "run", &o.hold_at_least_ms,
     "after the command ends, keep holding until DURATION\n"
     "after the grant, then release: with --try, a job run\n"
     "by cron on several hosts runs once per schedule even\n"
     "when it is quicker than the clock skew"},
    {"--ttl", NULL, OPT_DURATION, "DURATION", "run elect", &o.ttl_ms,
     "lease (default 10s)"},
    {"--transition", NULL, OPT_DURATION, "DURATION", "run elect", &o.transition_ms,
     "transition (default 6s)"},
    {"--kill-after", NULL, OPT_DURATION, "DURATION", "run elect", &o.kill_after_ms,
     "SIGKILL this long after SIGTERM on LOST\n"
     "(default transition/2; must be below transition)"},
    {"--once", NULL, OPT_FLAG, NULL, "elect", &o.once,
     "exit 79 after a LOST instead of contending again"},
    {"--json", NULL, OPT_FLAG, NULL, "status", &o.json,
     "one JSON object per resource and line"},
    {"--create", NULL, OPT_FLAG, NULL, "set-capacity", &o.create,
     "create NAME when it does not exist"},
    {"--tenant", NULL, OPT_TEXT, "T", ALL_COMMANDS, &o.tenant, "override the URL's tenant"},
    {"--client-id", NULL, OPT_TEXT, "ID", ALL_COMMANDS, &o.client_id, "override the URL's client id"},
    {"--connect-timeout", NULL, OPT_DURATION, "DURATION", ALL_COMMANDS, &o.connect_timeout_ms,
     "exit 69 if not connected by then (default 10s)"},
    {"--quiet", "-q", OPT_FLAG, NULL, ALL_COMMANDS, &o.quiet, "no messages"},
    {"--verbose", "-v", OPT_COUNT, NULL, ALL_COMMANDS, &o.verbose,
     "say what happens on stderr (acquired, fence, released,\n"
     "owner changes); -v -v adds the library's log"},
    {"--version", NULL, OPT_VERSION, NULL, "", NULL, "print simba's version"},
};
#define NOPTIONS ((int)(sizeof options / sizeof options[0]))
static unsigned char option_given[NOPTIONS];
static char last_log[512];       /* the library's last error message: the "why" */
static int one_host;             /* the URL names one server (or one sentinel) */
/* The variables the URL takes passwords from (password_env=VAR,
   sentinel_password_env=VAR) are simba's: the job does not get them. */
static const char *const password_params[] = {"password_env", "sentinel_password_env"};
#define NPASSWORD_PARAMS ((int)(sizeof password_params / sizeof password_params[0]))
static char password_vars[NPASSWORD_PARAMS][SIMBA_URL_MAX + 1];

static void say(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static void say(const char *fmt, ...) {
    va_list ap;
    if (o.quiet) return;
    fputs("simba: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* The cause of a failure in words: the library's message when it has one
   (it names the resource, the server's reason and often the remedy), else
   the code's generic text. */
static const char *cause(int err, const char *msg) {
    return msg && msg[0] ? msg : simba_strerror(err);
}

/* Bad usage is always printed, even with --quiet. */
static int usage_error(const char *what, const char *why) {
    fprintf(stderr, "simba: %s (%s)\n", what, why);
    return EXIT_USAGE;
}

static void on_log(void *user, simba_log_level level, const char *msg) {
    (void)user;
    /* keep the reason only: our own line says what failed */
    if (strncmp(msg, "simba: ", 7) == 0) msg += 7;
    if (strncmp(msg, "cannot connect: ", 16) == 0) msg += 16;
    if (strncmp(msg, "disconnected: ", 14) == 0) msg += 14;
    if (level <= SIMBA_LOG_WARN) snprintf(last_log, sizeof last_log, "%s", msg);
    if (o.verbose > 1) fprintf(stderr, "simba: [%d] %s\n", (int)level, msg);
}

static int duration_arg(const char *opt, const char *v, int *out) {
    char why[160];
    if (!v) return usage_error(opt, "needs a duration such as 500ms, 1.5s, 10s, 2m");
    if (simba_parse_duration_ms(v, out) != SIMBA_OK) {
        snprintf(why, sizeof why, "'%.60s' is not a duration: a number and a unit, e.g. 500ms, 1.5s, 10s, 2m or 1h", v);
        return usage_error(opt, why);
    }
    return 0;
}

static int int_arg(const char *opt, const char *v, int min, int *out) {
    char *end;
    long x;
    char why[160];
    if (!v) return usage_error(opt, "needs a number");
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < min || x > 1000000000L) {
        snprintf(why, sizeof why, "'%.60s' is not a number >= %d", v, min);
        return usage_error(opt, why);
    }
    *out = (int)x;
    return 0;
}

static const cli_command *find_command(const char *name) {
    int i;
    for (i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0) return &commands[i];
    return NULL;
}

/* The row of options[] whose name or alias is arg, or -1. */
static int find_option(const char *arg) {
    int i;
    for (i = 0; i < NOPTIONS; i++)
        if (strcmp(arg, options[i].name) == 0 || (options[i].alias && strcmp(arg, options[i].alias) == 0)) return i;
    return -1;
}

static int word_in(const char *word, const char *list) {
    size_t n = strlen(word);
    const char *p;
    for (p = strstr(list, word); p; p = strstr(p + 1, word))
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

#define HELP_COLUMN 23   /* where an option's help starts in --help */

/* One row of `simba COMMAND --help`: "  --name, -a VALUE  help", the help's
   further lines under its first. */
static void print_option_help(const cli_option *opt) {
    char left[64];
    const char *h = opt->help;
    int n = snprintf(left, sizeof left, "  %s%s%s%s%s", opt->name, opt->alias ? ", " : "",
                     opt->alias ? opt->alias : "", opt->value ? " " : "", opt->value ? opt->value : "");
    if (n < HELP_COLUMN - 1) printf("%-*s", HELP_COLUMN, left);
    else printf("%s  ", left);
    for (;;) {
        const char *nl = strchr(h, '\n');
        if (!nl) { printf("%s\n", h); return; }
        printf("%.*s\n%*s", (int)(nl - h), h, HELP_COLUMN, "");
        h = nl + 1;
    }
}

static void print_command_help(const cli_command *c) {
    int i;
    printf("usage: simba %s\n%s", c->synopsis, c->about);
    for (i = 0; i < NOPTIONS; i++)
        if (word_in(c->name, options[i].cmds)) print_option_help(&options[i]);
    fputs("exit codes: see `simba --help`.\n", stdout);
}

static void print_main_help(FILE *f) {
    int i;
    for (i = 0; i < NCOMMANDS; i++) fprintf(f, "%s simba %s\n", i ? "      " : "usage:", commands[i].synopsis);
    fprintf(f, "       simba --help | COMMAND --help | --version\n\n%s", usage_about);
}

/* `simba --list-options` (for tests/cli_docs.sh): one option a line, its
   name, its alias or "-", and the commands that take it. */
static void print_option_list(void) {
    int i;
    for (i = 0; i < NOPTIONS; i++)
        printf("%s %s %s\n", options[i].name, options[i].alias ? options[i].alias : "-",
               options[i].cmds[0] ? options[i].cmds : "simba");
}

/* A duration whose 0 would otherwise stand for "not given", the default:
   given as 0 it is refused, as the URL's ttl=0s is, rather than replaced. */
static int refuse_zero(const char *name, int v) {
    if (!option_given[find_option(name)] || v != 0) return 0;
    return usage_error(name, "must be more than 0");
}

/* An option is given only to the commands it means something to (the
   others would ignore it, and the user would believe it applied), and
   never together with one that contradicts it. Returns 0 or EXIT_USAGE. */
static int check_option_use(void) {
    char why[128], *c;
    int i;
    for (i = 0; i < NOPTIONS; i++) {
        const char *cmds = options[i].cmds;
        if (!option_given[i] || word_in(o.cmd, cmds)) continue;
        snprintf(why, sizeof why, "not an option of simba %s, only of simba %s", o.cmd, cmds);
        for (c = why + strlen(why) - strlen(cmds); *c; c++) if (*c == ' ') *c = '/';
        return usage_error(options[i].name, why);
    }
    if (o.tried && o.waited) return usage_error("--try and --wait", "choose one: --try does not wait at all");
    return refuse_zero("--ttl", o.ttl_ms) || refuse_zero("--transition", o.transition_ms) ||
           refuse_zero("--connect-timeout", o.connect_timeout_ms) ? EXIT_USAGE : 0;
}

/* Reads the option argv[*i] and, when it takes one, its value argv[*i + 1]
   (then *i moves past it). Returns -1 when read, 0 after --help, else an
   exit code. */
static int read_option(int argc, char **argv, int *i) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int k = find_option(a), rc = 0;
    const cli_option *opt;
    char why[96];
    if (k < 0 || !options[k].cmds[0]) {
        snprintf(why, sizeof why, "unknown option '%.60s'", a);
        return usage_error(why, "see simba COMMAND --help");
    }
    opt = &options[k];
    option_given[k] = 1;
    switch (opt->kind) {
    case OPT_HELP: print_command_help(find_command(o.cmd)); return 0;
    case OPT_FLAG: *(int *)opt->dest = 1; return -1;
    case OPT_COUNT: ++*(int *)opt->dest; return -1;
    case OPT_DURATION: rc = duration_arg(a, v, (int *)opt->dest); break;
    case OPT_NUMBER: rc = int_arg(a, v, 1, (int *)opt->dest); break;
    case OPT_TEXT:
        snprintf(why, sizeof why, "needs a value: %s %s", opt->name, opt->value);
        if (!v) return usage_error(a, why);
        *(const char **)opt->dest = v;
        break;
    case OPT_VERSION: return usage_error(a, "only as simba --version");   /* cmds "" stops it above */
    }
    if (rc) return rc;
    ++*i;
    return -1;
}

static int too_many_names(void) {
    char why[64];
    snprintf(why, sizeof why, "at most %d NAMEs in one request", SIMBA_MAX_RESOURCES);
    return usage_error("too many arguments", why);
}

/* Parses argv after the command name. Returns -1 when all is well, else an exit code. */
static int parse_args(int argc, char **argv) {
    int i, npos = 0, rc;
    const char *pos[1 + SIMBA_MAX_RESOURCES + 1];   /* URL, the NAMEs, set-capacity's N */
    int want_cmd = strcmp(o.cmd, "run") == 0 || strcmp(o.cmd, "elect") == 0;
    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (!want_cmd) return usage_error("'--'", "only run and elect take a command");
            o.argv = argv + i + 1;
            if (!o.argv[0]) return usage_error("no command after '--'", "simba run URL NAME -- command");
            break;
        }
        if (a[0] == '-' && a[1] && strcmp(a, "-") != 0) {
            if ((rc = read_option(argc, argv, &i)) >= 0) return rc;
            continue;
        }
        if (npos >= (int)(sizeof pos / sizeof pos[0])) return too_many_names();
        pos[npos++] = a;
    }
    o.waited = option_given[find_option("--wait")];
    if (o.tried) o.wait_ms = 0;
    if (npos < 1) return usage_error("no URL", "see simba COMMAND --help");
    o.url = pos[0];
    if (strcmp(o.url, "-") == 0) {
        o.url = getenv("SIMBA_URL");
        if (!o.url || !*o.url) return usage_error("URL '-'", "SIMBA_URL is not set");
    }
    if (strcmp(o.cmd, "init-server") == 0) return npos == 1 ? -1 : usage_error("init-server", "takes only the URL");
    if (npos < 2) return usage_error("no NAME", "see simba COMMAND --help");
    if (strcmp(o.cmd, "set-capacity") == 0) {
        if (npos != 3) return usage_error("set-capacity", "needs URL NAME N");
        if ((rc = int_arg("capacity N", pos[2], 1, &o.setcap))) return rc;
        npos = 2;
    }
    if ((strcmp(o.cmd, "elect") == 0 || strcmp(o.cmd, "delete") == 0 || strcmp(o.cmd, "set-capacity") == 0) && npos != 2)
        return usage_error(o.cmd, "takes exactly one NAME");
    if (npos - 1 > SIMBA_MAX_RESOURCES) return too_many_names();
    for (i = 1; i < npos; i++) o.names[o.nnames++] = pos[i];
    if (want_cmd && !o.argv) return usage_error("no command", "put it after '--': simba run URL NAME -- command");
    if ((rc = check_option_use()) != 0) return rc;
    if (o.shared && o.exclusive) return usage_error("--shared and --exclusive", "choose one");
    if ((o.shared || o.exclusive) && o.permits) return usage_error("--permits", "not with --shared or --exclusive");
    if (o.capacity > 0 && o.permits > o.capacity) return usage_error("--permits", "more than --capacity");
    if (o.capacity == 0 && (o.shared || o.exclusive)) o.capacity = 1000;
    return -1;
}

/* ---- the client ---- */
static int connect_error_exit(int err) {
    if (err == SIMBA_EAUTH) return EXIT_AUTH;
    if (err == SIMBA_EINVAL || err == SIMBA_ENAME || err == SIMBA_ECAPACITY) return EXIT_USAGE;
    if (err == SIMBA_EDISCONNECTED || err == SIMBA_ETIMEDOUT) return EXIT_CONNECT;
    return EXIT_ERROR;
}

static simba *make_client(int *code) {
    simba_url *u = (simba_url *)calloc(1, sizeof *u);
    simba_url_error e;
    simba_desc d;
    simba *s;
    int rc, i;
    simba_error why;
    memset(&d, 0, sizeof d);
    memset(&e, 0, sizeof e);
    if (!u) {
        *code = EXIT_ERROR;
        return NULL;
    }
    d.logger.func = on_log;
    d.logger.level = o.verbose > 1 ? SIMBA_LOG_DEBUG : SIMBA_LOG_WARN;
    if ((rc = simba_url_desc(o.url, u, &d, &e)) != SIMBA_OK) {
        /* an unset password_env, an unreadable password_file: the URL is
           right, the password it names is not there */
        fprintf(stderr, "simba: %s (%s)\n", rc == SIMBA_EAUTH ? "no password" : "bad URL", e.msg);
        *code = rc == SIMBA_EAUTH ? EXIT_AUTH : EXIT_USAGE;
        simba_url_clear(u);
        free(u);
        return NULL;
    }
    for (i = 0; i < NPASSWORD_PARAMS; i++) {
        const char *var = simba_url_param(u, password_params[i]);
        if (var) snprintf(password_vars[i], sizeof password_vars[i], "%s", var);
    }
    if (o.tenant) d.tenant = o.tenant;
    if (o.client_id) d.client_id = o.client_id;
    if (o.ttl_ms) d.ttl_ms = o.ttl_ms;
    if (o.transition_ms) d.transition_ms = o.transition_ms;
    one_host = u->nhosts == 1;
    o.ttl_ms = d.ttl_ms ? d.ttl_ms : 10000;
    o.transition_ms = d.transition_ms ? d.transition_ms : 6000;
    s = simba_create(&d, &why);
    simba_url_clear(u);        /* the password must not linger in our memory */
    free(u);
    if (!s) {
        fprintf(stderr, "simba: cannot create the client: %s\n", why.message[0] ? why.message : simba_strerror(why.code));
        *code = connect_error_exit(why.code);
        return NULL;
    }
    return s;
}

/* ---- signals: a self-pipe read by the poll loop ---- */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    if (write(sig_pipe[1], &c, 1) < 0) { /* the pipe is full: a signal is pending anyway */ }
    errno = saved;
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED ((int)(sizeof forwarded / sizeof forwarded[0]))

static int setup_signals(void) {
    struct sigaction sa;
    int i;
    if (pipe(sig_pipe) != 0) return -1;
    for (i = 0; i < 2; i++) {
        fcntl(sig_pipe[i], F_SETFL, fcntl(sig_pipe[i], F_GETFL) | O_NONBLOCK);
        fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (i = 0; i < NFORWARDED; i++) sigaction(forwarded[i], &sa, NULL);
    sigaction(SIGTSTP, &sa, NULL);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A message of simba's to the terminal from the background under `stty
       tostop` would stop simba (SIGTTOU), and a stopped simba renews nothing
       while its job runs on: simba's messages are written anyway. (Caught,
       SIGTTOU would come again at every restart of the write.) */
    signal(SIGTTOU, SIG_IGN);
    return 0;
}

/* ---- the job: the command and every process it starts in its group ----
   The command runs as the leader of a new process group, and what it starts
   stays in that group unless it leaves it (setsid, setpgid). The job is the
   whole group: signals, SIGTERM and SIGKILL on LOST go to the group, and the
   job ends when the group is empty, not when the command exits, so that no
   process it left behind runs on after NAME is released or lost. The
   command's pid is its group's id; the kernel does not give that id to
   another process while a process of the group is alive. */
static pid_t child = -1;            /* the command, until reaped */
static pid_t job_group = -1;        /* its process group, until none is left in it */
static int child_status = 0, job_done = 0;
enum { GROUP_POLL_MS = 100 };       /* how often a group outliving its command is looked at */

static int job_running(void) { return job_group > 0; }

static void signal_job(int sig) {
    if (job_group > 0) kill(-job_group, sig);
}

static void set_env_num(const char *k, long long v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", v);
    setenv(k, b, 1);
}

/* fork + exec into a new process group. Returns 0, or an exit code when the
   command cannot be run (the child reports exec's errno through a CLOEXEC pipe). */
static int spawn(simba *s, simba_lock lk) {
    int ep[2], i, err = 0;
    pid_t parent = getpid();
    sigset_t all, was;
    char fences[SIMBA_MAX_RESOURCES * 24];
    size_t fl = 0;
    ssize_t n;
    fences[0] = '\0';
    for (i = 0; i < o.nnames; i++)
        fl += (size_t)snprintf(fences + fl, sizeof fences - fl, "%s%lld", i ? " " : "", (long long)simba_fence(s, lk, i));
    if (pipe(ep) != 0) return EXIT_ERROR;
    fcntl(ep[1], F_SETFD, FD_CLOEXEC);
    /* Every signal blocked across fork: the child inherits simba's
       handlers, and one run there would write into simba's signal pipe
       (simba would act on a signal it never got) and let the child live
       on to run the command. Blocked, a signal for the child waits until
       its handlers are the defaults; simba gets its own after fork. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &was);
    child = fork();
    if (child != 0) sigprocmask(SIG_SETMASK, &was, NULL);
    if (child < 0) {
        close(ep[0]);
        close(ep[1]);
        say("cannot start the command (fork: %s)", strerror(errno));
        return EXIT_ERROR;
    }
    if (child == 0) {
        struct sigaction sa;
        sigset_t none;
        close(ep[0]);
        setpgid(0, 0);
#ifdef __linux__
        /* Dies with simba (kill -9 included): a guard that is gone cannot
           kill its job when the lock is lost. Other systems have no such
           call; see docs/cli.md. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent) _exit(EXIT_ERROR);   /* simba died before prctl */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        for (i = 0; i < NFORWARDED; i++) sigaction(forwarded[i], &sa, NULL);
        sigaction(SIGCHLD, &sa, NULL);
        sigaction(SIGPIPE, &sa, NULL);
        sigaction(SIGTSTP, &sa, NULL);
        sigaction(SIGTTOU, &sa, NULL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        set_env_num("SIMBA_FENCE", (long long)simba_fence(s, lk, 0));
        setenv("SIMBA_FENCES", fences, 1);
        setenv("SIMBA_NAME", o.names[0], 1);
        setenv("SIMBA_CLIENT_ID", simba_client_id(s), 1);
        for (i = 0; i < NPASSWORD_PARAMS; i++)
            if (password_vars[i][0]) unsetenv(password_vars[i]);
        execvp(o.argv[0], o.argv);
        err = errno;
        if (write(ep[1], &err, sizeof err) < 0) {}
        _exit(err == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC);
    }
    setpgid(child, child);    /* both sides: whoever runs first, the group exists before any kill */
    job_group = child;
    close(ep[1]);
    do n = read(ep[0], &err, sizeof err); while (n < 0 && errno == EINTR);
    close(ep[0]);
    job_done = 0;
    if (n == (ssize_t)sizeof err) {
        int st;
        while (waitpid(child, &st, 0) < 0 && errno == EINTR) {}
        child = job_group = -1;
        say("cannot run '%s' (%s)", o.argv[0], strerror(err));
        return err == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC;
    }
    if (o.verbose) say("started '%s' (pid %d, fence %lld)", o.argv[0], (int)child, (long long)simba_fence(s, lk, 0));
    return 0;
}

/* Reaps the command (its status is the job's) and the processes of the job
   that simba adopted (see adopt_orphans), and sets job_done once no process
   is left in the command's group. Returns 1 when it reaped the command now. */
static int reap(void) {
    int st, reaped = 0;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) != 0) {
        if (p < 0 && errno == EINTR) continue;
        if (p < 0) break;                        /* ECHILD: no child left */
        if (p != child) continue;                /* an adopted process of the job */
        child_status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : EXIT_ERROR;
        child = -1;
        reaped = 1;
    }
    if (child <= 0 && job_group > 0 && kill(-job_group, 0) != 0 && errno == ESRCH) {
        job_group = -1;
        job_done = 1;
    }
    return reaped;
}

/* A process of the job whose parent exits is adopted by simba rather than
   by init (Linux), so that simba reaps it when it ends: a zombie still
   counts as a member of its process group, and an init that reaps late
   would hold the job (and NAME) open. simba has no other children. */
static void adopt_orphans(void) {
#if defined(__linux__) && defined(PR_SET_CHILD_SUBREAPER)
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
}

/* Ctrl-Z (SIGTSTP): a stopped simba renews nothing, and a job that ran on
   meanwhile would run past the lease while another host holds NAME. So the
   job's group is stopped first (SIGSTOP: it cannot ignore it), then simba
   itself, as SIGTSTP's default action would. When simba is continued, the
   job goes on only while the hold is still valid by the local clock; else it
   stays stopped until the LOST that the next tick delivers (see
   tell_lost_job). */
static int job_stopped;

static void stop_with_job(simba *s, simba_lock lk) {
    struct sigaction dfl, mine;
    if (job_running()) {
        signal_job(SIGSTOP);
        job_stopped = 1;
    }
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTSTP, &dfl, &mine);
    raise(SIGTSTP);             /* returns when simba is continued (at once in an orphaned group) */
    sigaction(SIGTSTP, &mine, NULL);
    if (job_stopped && simba_valid_ms(s, lk) > 0) {
        signal_job(SIGCONT);
        job_stopped = 0;
    }
}

/* On LOST: SIGTERM to the job's group, and a job stopped by stop_with_job
   is continued after it, so that the SIGTERM is the first thing it meets. */
static void tell_lost_job(void) {
    signal_job(SIGTERM);
    if (job_stopped) {
        signal_job(SIGCONT);
        job_stopped = 0;
    }
}

static const char *lost_reason(int why) {
    switch (why) {
    case SIMBA_LOST_EXPIRED: return "not renewed in time: the server or the network did not answer";
    case SIMBA_LOST_SESSION: return "the server ended our session";
    case SIMBA_LOST_STOLEN: return "the entry was deleted on the server";
    default: return "unknown reason";
    }
}

static int is_redis_url(const char *url) {
    return strncmp(url, "redis:", 6) == 0 || strncmp(url, "redis+", 6) == 0;
}

/* Why the request is not granted (yet): a restart grace, until when it
   lasts and how it ends. */
static void say_grace(simba *s, int waiting) {
    int64_t left = simba_grace_ms(s);
    time_t end = time(NULL) + (time_t)((left + 999) / 1000);
    struct tm tm;
    char at[32];
    strftime(at, sizeof at, "%H:%M:%S %Z", localtime_r(&end, &tm));
    say("%s '%s'%s: the server's restart grace holds back every grant until %s (%lld s from now): "
        "it lost its locks (new server, restart or fail-over) and a holder from before may still run; %s",
        waiting ? "waiting for" : "no grant of", o.names[0], waiting ? "" : " now", at, (long long)((left + 999) / 1000),
        is_redis_url(o.url) ? "on a brand-new server, `simba init-server URL` ends it at once"
                            : "it ends by itself");
}

/* Why no connection came: the library's last words, or, when it had none
   (a server that took the connection and never answered: another
   service's port), what that silence suggests. The URL is not printed:
   it may hold a password. */
static const char *no_connect_why(void) {
    static char buf[160];
    const char *end = strstr(o.url, "://");
    if (last_log[0]) return last_log;
    snprintf(buf, sizeof buf, "no answer in %d ms: is the URL's port that of a %.*s server?",
             o.connect_timeout_ms ? o.connect_timeout_ms : 10000, end ? (int)(end - o.url) : 5, end ? o.url : "simba");
    return buf;
}

/* The exit code of a request that ends without a grant, with err and msg
   the cause the library saw while it waited (0: none): busy when the server
   is there and nothing else held it back, else what did. */
static int busy_or_unreachable(simba *s, int err, const char *msg) {
    if (!simba_connected(s)) {
        say("cannot connect (%s)", err ? cause(err, msg) : no_connect_why());
        return EXIT_CONNECT;
    }
    if (err == SIMBA_EGRACE || simba_grace_ms(s) > 0) {
        say_grace(s, 0);
        return EXIT_BUSY;
    }
    if (err) {
        say("cannot acquire '%s' (%s)", o.names[0], cause(err, msg));
        return connect_error_exit(err);
    }
    if (o.verbose) say("'%s' is busy", o.names[0]);
    return EXIT_BUSY;
}

/* Inspects name: *cap is the capacity the server has stored for it (0: no
   such resource) and, when h is given, h[0..*n) its holders and waiters.
   Returns 0, or the exit code when the server did not answer. */
static int inspect_name(simba *s, const char *name, int *cap, simba_holder *h, int max, int *n) {
    simba_lock q = simba_inspect(s, name, NULL);
    simba_event ev;
    int r;
    *cap = 0;
    if (n) *n = 0;
    if (q.id == 0) return usage_error("bad request", cause(simba_last_error(s), simba_last_error_msg(s)));
    r = simba_wait(s, q, o.connect_timeout_ms ? o.connect_timeout_ms : 10000, &ev);
    if (r <= 0) {
        say("cannot connect (%s)", no_connect_why());
        return simba_connected(s) ? EXIT_ERROR : EXIT_CONNECT;
    }
    if (ev.type == SIMBA_EVENT_INFO) {
        *cap = ev.capacity;
        if (h && n && (*n = simba_holders(s, q, h, max)) > max) *n = max;
        if (n && *n < 0) *n = 0;
    } else if (ev.error != SIMBA_ENOTFOUND) {
        say("cannot inspect '%s' (%s)", name, cause(ev.error, ev.message));
        return connect_error_exit(ev.error);
    }
    return 0;
}

static int stored_capacity(simba *s, const char *name, int *cap) {
    return inspect_name(s, name, cap, NULL, 0, NULL);
}

/* A run or elect in the job of another simba (SIMBA_CLIENT_ID in the
   environment) that asks for a NAME whose permits that simba holds, with no
   room left for this request, would wait for ever: that simba gives them
   back only when its job, this run included, has ended. It is refused at
   once (exit 64). --try and --wait end by themselves and are left alone. */
static int refuse_waiting_on_own_job(simba *s) {
    const char *outer = getenv("SIMBA_CLIENT_ID");
    simba_holder h[256];
    int i, j, n, cap, rc;
    char why[SIMBA_MAX_ID + 300];
    if (!outer || !outer[0] || o.wait_ms >= 0) return 0;
    for (i = 0; i < o.nnames; i++) {
        long long theirs = 0;
        int mine;
        if ((rc = inspect_name(s, o.names[i], &cap, h, 256, &n)) != 0) return rc;
        for (j = 0; j < n; j++)
            if (h[j].granted && strcmp(h[j].client, outer) == 0) theirs += h[j].weight == 0 ? cap : h[j].weight;
        mine = o.exclusive ? cap : o.permits ? o.permits : 1;
        if (theirs == 0 || cap - theirs >= mine) continue;
        snprintf(why, sizeof why, "'%.60s' is held by the simba whose job this runs in (SIMBA_CLIENT_ID %s), which "
                 "gives it back only when this ends: it would wait for ever", o.names[i], outer);
        return usage_error("cannot wait", why);
    }
    return 0;
}

/* --permits without --capacity: what counts is the capacity each NAME has
   on the server, not the default 1 (that one only applies to a resource the
   request creates). Returns 0 when every NAME exists and has room for the
   permits, else the exit code. */
static int check_permits_fit(simba *s) {
    int i, cap, rc;
    char why[200];
    for (i = 0; i < o.nnames; i++) {
        if ((rc = stored_capacity(s, o.names[i], &cap)) != 0) return rc;
        if (cap == 0)
            snprintf(why, sizeof why, "'%.60s' does not exist: give --capacity C to create it", o.names[i]);
        else if (o.permits > cap)
            snprintf(why, sizeof why, "more than the capacity %d of '%.60s'", cap, o.names[i]);
        else continue;
        return usage_error("--permits", why);
    }
    return 0;
}

/* ---- the loop shared by run and elect ---- */
static int64_t min_deadline(int64_t now, int64_t at, int timeout) {
    int64_t t;
    if (at < 0) return timeout;
    t = at - now;
    if (t < 0) t = 0;
    return (timeout < 0 || t < timeout) ? t : timeout;
}

/* How we end once we have decided to: what we asked for or hold is given
   back first, because a request left on the server is granted to nobody
   when its turn comes and blocks NAME for its whole lease (ttl +
   transition), and a hold left there blocks it until it expires. */
enum { GIVE_BACK_MS = 5000 };   /* the server's confirmation waited for at most */

typedef struct ending {
    int code;                   /* >= 0: ending; the exit code once given back */
    int64_t deadline;           /* exit anyway then: the server expires it itself */
} ending;

/* Withdraw the request or drop the hold, then exit with code when the
   server confirms (RELEASED) or at the deadline. 1: nothing is left to
   give back (the handle has ended), exit now. */
static int give_back(simba *s, simba_lock lk, ending *e, int code) {
    if (e->code >= 0) return 0;               /* giving back already */
    e->code = code;
    e->deadline = simba_now_ms(s) + GIVE_BACK_MS;
    return simba_release(s, lk) != SIMBA_OK;
}

static int run_or_elect(void) {
    int code = -1, rc, elect = strcmp(o.cmd, "elect") == 0;
    simba *s = make_client(&code);
    simba_lock lk;
    int64_t connect_deadline, kill_at = -1, wait_deadline = -1;
    int lost = 0, exit_code = -1, grace_said = 0;
    int start_pending = 0;                        /* elect: granted, the old term's command still ends */
    int64_t granted_at = -1, linger_until = -1;   /* --hold-at-least: hold on until then */
    int64_t command_gone_at = -1;                 /* the command exited then, its group lives on */
    ending end = {-1, -1};
    if (!s) return code;
    if (o.kill_after_ms < 0) o.kill_after_ms = o.transition_ms / 2;
    if (o.kill_after_ms >= o.transition_ms) {
        simba_destroy(s);
        return usage_error("--kill-after", "must be less than transition, or the job may outlive the lock");
    }
    adopt_orphans();
    if (setup_signals() != 0) {
        simba_destroy(s);
        say("cannot set up signals (%s)", strerror(errno));
        return EXIT_ERROR;
    }
    if ((!elect && o.capacity == 0 && o.permits > 1 && (rc = check_permits_fit(s)) != 0) ||
        (rc = refuse_waiting_on_own_job(s)) != 0) {
        simba_destroy(s);
        return rc;
    }
    if (elect) {
        lk = simba_contend(s, o.names[0], NULL);
    } else {
        simba_lock_desc ld;
        memset(&ld, 0, sizeof ld);
        if (o.nnames == 1) ld.name = o.names[0];
        else {
            ld.names = o.names;
            ld.nnames = o.nnames;
        }
        /* without --capacity the NAMEs exist (check_permits_fit): the capacity
           is theirs, and this one only has to admit the permits */
        ld.capacity = o.capacity ? o.capacity : o.permits ? o.permits : 1;
        ld.permits = o.permits ? o.permits : 1;
        ld.exclusive = o.exclusive;
        /* --wait is timed here, not by the library: its TIMEOUT ends the
           handle at once and withdraws the request unseen, so nothing would
           tell us when the withdrawal is through; give_back() can wait for it */
        ld.wait_ms = o.wait_ms > 0 ? -1 : o.wait_ms;
        ld.key = o.key;
        lk = simba_acquire(s, &ld);
    }
    if (lk.id == 0) {
        char why[SIMBA_MAX_MESSAGE + 96];
        snprintf(why, sizeof why, "%s", cause(simba_last_error(s), simba_last_error_msg(s)));
        simba_destroy(s);
        return usage_error("cannot request the lock", why);
    }
    connect_deadline = simba_now_ms(s) + (o.connect_timeout_ms ? o.connect_timeout_ms : 10000);
    if (!elect && o.wait_ms > 0) wait_deadline = simba_now_ms(s) + o.wait_ms;

    while (exit_code < 0) {
        struct pollfd fds[64];
        simba_event ev[32];
        int n, k, i;
        int64_t now = simba_now_ms(s), timeout;
        fds[0].fd = sig_pipe[0];
        fds[0].events = POLLIN;
        fds[0].revents = 0;
        n = simba_pollfds(s, fds + 1, 63);
        if (n > 63) n = 63;
        timeout = simba_timeout_ms(s);
        if (!simba_connected(s)) timeout = min_deadline(now, connect_deadline, (int)timeout);
        timeout = min_deadline(now, kill_at, (int)timeout);
        timeout = min_deadline(now, wait_deadline, (int)timeout);
        timeout = min_deadline(now, end.deadline, (int)timeout);
        timeout = min_deadline(now, linger_until, (int)timeout);
        if (child <= 0 && job_running()) timeout = min_deadline(now, now + GROUP_POLL_MS, (int)timeout);
        if (poll(fds, (nfds_t)(n + 1), (int)timeout) < 0 && errno != EINTR) {
            say("poll failed (%s)", strerror(errno));
            exit_code = EXIT_ERROR;
            break;
        }
        /* the lock first: a LOST must reach the job before anything else happens */
        k = simba_tick(s, fds + 1, n, ev, 32);
        for (i = 0; i < k && exit_code < 0; i++) {
            simba_event *e = &ev[i];
            if (e->type == SIMBA_EVENT_CONNECTED) {
                connect_deadline = -1;
                if (o.verbose) say("connected (client id %s)", simba_client_id(s));
                continue;
            }
            if (e->type == SIMBA_EVENT_DISCONNECTED) {
                if (e->error == SIMBA_EAUTH && !job_running()) {
                    say("authentication refused (%s)", cause(e->error, e->message));
                    exit_code = EXIT_AUTH;
                } else if (o.tried && one_host && connect_deadline >= 0 && !job_running()) {
                    /* --try, and the one server there is did not take us: no
                       other will answer, and a try does not wait */
                    say("cannot connect (%s)", cause(e->error, e->message));
                    exit_code = connect_error_exit(e->error);
                } else if (o.verbose) say("disconnected (%s)", cause(e->error, e->message));
                continue;
            }
            if (e->type == SIMBA_EVENT_OWNER) {
                if (o.verbose) say("leader of '%s' is now %s", o.names[0], e->owner[0] ? e->owner : "(none)");
                continue;
            }
            if (e->lock.id != lk.id || e->lock.gen != lk.gen) continue;
            switch (e->type) {
            case SIMBA_EVENT_ACQUIRED:
                if (o.verbose) say("acquired '%s' (fence %lld)", o.names[0], (long long)e->fence);
                if (end.code >= 0) break;              /* ending already: the release is on its way */
                wait_deadline = -1;
                granted_at = simba_now_ms(s);
                if (job_running()) {
                    /* elect, granted again while the command of the lost term
                       is still being stopped: two of them must never run */
                    start_pending = 1;
                    if (o.verbose) say("the command of the lost term has not ended yet: starting it again then");
                    break;
                }
                if ((rc = spawn(s, lk)) != 0 && give_back(s, lk, &end, rc)) exit_code = rc;
                break;
            case SIMBA_EVENT_LOST:
                if (job_running()) {
                    say("lost '%s' (%s): SIGTERM to the command now, SIGKILL in %d ms",
                        o.names[0], lost_reason(e->error), o.kill_after_ms);
                    tell_lost_job();
                    if (kill_at < 0) kill_at = simba_now_ms(s) + o.kill_after_ms;   /* a second LOST does not defer it */
                    lost = 1;
                    start_pending = 0;
                } else {
                    say("lost '%s' (%s)", o.names[0], lost_reason(e->error));
                    if (end.code >= 0) exit_code = end.code;   /* the job had ended already */
                    else if (linger_until >= 0) exit_code = child_status;   /* ... and was done */
                    else if (!elect) exit_code = EXIT_LOST;
                }
                break;
            case SIMBA_EVENT_TIMEOUT:       /* --try: a try leaves no entry on the server */
                exit_code = busy_or_unreachable(s, e->error, e->message);
                break;
            case SIMBA_EVENT_ERROR:
                say("cannot acquire '%s' (%s)", o.names[0], cause(e->error, e->message));
                exit_code = e->error == SIMBA_EKEYBUSY ? EXIT_BUSY : connect_error_exit(e->error);
                break;
            case SIMBA_EVENT_RELEASED:
                if (o.verbose) say("released '%s'", o.names[0]);
                if (end.code >= 0) exit_code = end.code;
                else if (!job_running()) {
                    /* we did not ask: the request ended without a grant */
                    say("the request for '%s' ended without a grant (%s)", o.names[0],
                        last_log[0] ? last_log : "released by the backend");
                    exit_code = EXIT_ERROR;
                }
                break;
            default:
                break;
            }
        }
        if (exit_code >= 0) break;
        if (!grace_said && !job_running() && end.code < 0 && simba_grace_ms(s) > 0) {
            grace_said = 1;          /* once: the wait is long, but not stuck */
            say_grace(s, 1);
        }
        /* signals: forward them to the job; before it runs, give up */
        if (fds[0].revents & POLLIN) {
            unsigned char buf[64];
            ssize_t r, j;
            while ((r = read(sig_pipe[0], buf, sizeof buf)) > 0) {
                for (j = 0; j < r; j++) {
                    int sig = buf[j];
                    if (sig == SIGCHLD) continue;
                    if (sig == SIGTSTP) {
                        stop_with_job(s, lk);
                        continue;
                    }
                    if (job_running()) {
                        if (o.verbose) say("forwarding signal %d to the command", sig);
                        signal_job(sig);
                    } else if (give_back(s, lk, &end, 128 + sig)) exit_code = 128 + sig;
                }
            }
        }
        now = simba_now_ms(s);
        if (reap() && job_running() && !lost) command_gone_at = now;
        if (!job_running()) command_gone_at = -1;
        if (command_gone_at >= 0 && now >= command_gone_at + GROUP_POLL_MS) {
            say("the command exited (status %d); processes it started still run in its process group: "
                "holding '%s' until they end", child_status, o.names[0]);
            command_gone_at = -1;    /* said once */
        }
        if (job_running() && kill_at >= 0 && now >= kill_at) {
            say("the command did not stop after SIGTERM: SIGKILL");
            signal_job(SIGKILL);
            kill_at = -1;
        }
        if (job_done) {
            job_done = 0;
            kill_at = -1;
            if (lost) {
                lost = 0;
                if (elect && !o.once && start_pending) {
                    start_pending = 0;                 /* granted meanwhile: the command starts now */
                    if ((rc = spawn(s, lk)) != 0 && give_back(s, lk, &end, rc)) exit_code = rc;
                } else if (elect && !o.once) {
                    if (o.verbose) say("contending for '%s' again", o.names[0]);   /* the handle re-enters by itself */
                } else if (elect) {
                    if (give_back(s, lk, &end, EXIT_LOST)) exit_code = EXIT_LOST;   /* stop contending */
                } else exit_code = EXIT_LOST;      /* a LOST handle is finished: nothing to release */
            } else if (!elect && granted_at >= 0 && now < granted_at + o.hold_at_least_ms) {
                linger_until = granted_at + o.hold_at_least_ms;    /* --hold-at-least: keep it (renewed) */
                if (o.verbose) say("the command ended; holding '%s' for %lld ms more (--hold-at-least)", o.names[0],
                                   (long long)(linger_until - now));
            } else if (give_back(s, lk, &end, child_status)) {
                exit_code = child_status;          /* released at once: the next waiter need not wait for expiry */
            }
        }
        if (exit_code < 0 && linger_until >= 0 && now >= linger_until) {
            linger_until = -1;
            if (give_back(s, lk, &end, child_status)) exit_code = child_status;
        }
        if (exit_code < 0 && !job_running() && wait_deadline >= 0 && now >= wait_deadline) {
            wait_deadline = -1;                    /* --wait ran out: withdraw the request */
            rc = busy_or_unreachable(s, 0, NULL);
            if (give_back(s, lk, &end, rc)) exit_code = rc;
        }
        if (exit_code < 0 && end.code >= 0 && now >= end.deadline) {
            /* the server does not confirm: the entry expires there by itself */
            say("release of '%s' not confirmed; it expires on the server", o.names[0]);
            exit_code = end.code;
        }
        if (exit_code < 0 && end.code < 0 && !job_running() && connect_deadline >= 0 && !simba_connected(s) &&
            now >= connect_deadline) {
            say("cannot connect (%s)", no_connect_why());
            exit_code = EXIT_CONNECT;
        }
    }
    if (job_running()) {  /* leaving with the job still running: never leave it unguarded */
        signal_job(SIGKILL);
        while (child > 0 && waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
    }
    simba_destroy(s);
    return exit_code;
}

/* ---- status, delete, set-capacity ---- */
/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
   form, no surrogate, nothing past U+10FFFF), 0 when there is none there. */
static int utf8_len(const unsigned char *s) {
    unsigned long cp, min;
    int n, i;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) { n = 2; cp = s[0] & 0x1fu; min = 0x80; }
    else if ((s[0] & 0xf0) == 0xe0) { n = 3; cp = s[0] & 0x0fu; min = 0x800; }
    else if (s[0] >= 0xf0 && s[0] <= 0xf4) { n = 4; cp = s[0] & 0x07u; min = 0x10000; }
    else return 0;
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;   /* the NUL at the end stops it too */
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

/* A JSON string of v. JSON text is UTF-8, and names and ids are bytes:
   well-formed UTF-8 goes out as it is, a byte outside it as U+FFFD.
   Returns 1 when the string says v exactly, 0 when it replaced a byte. */
static int json_str(const char *v) {
    const unsigned char *p = (const unsigned char *)v;
    int exact = 1, n;
    putchar('"');
    while (*p) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f) printf("\\u%04x", *p);
        else if ((n = utf8_len(p)) > 0) { fwrite(p, 1, (size_t)n, stdout); p += n; continue; }
        else { printf("\\ufffd"); exact = 0; }
        p++;
    }
    putchar('"');
    return exact;
}

/* "key": "v", and "key_hex": "<its bytes in hex>" beside it when the
   string could not say v exactly. first: no ", " before it. */
static void json_field(const char *key, const char *v, int first) {
    const unsigned char *p;
    printf("%s\"%s\": ", first ? "" : ", ", key);
    if (json_str(v)) return;
    printf(", \"%s_hex\": \"", key);
    for (p = (const unsigned char *)v; *p; p++) printf("%02x", *p);
    putchar('"');
}

/* Exit codes of `simba status`: what the NAMEs are (the highest of them
   when there are several), below simba's own codes (64 and up), which it
   keeps for failures. */
enum {
    STATUS_HELD = 0,       /* someone holds it (at least one granted entry) */
    STATUS_FREE = 1,       /* it exists and nobody holds it (waiters may queue) */
    STATUS_ABSENT = 2      /* no such resource */
};

/* An owner renews its session every ttl/3 (less jitter), less than a third
   of its lease (ttl + transition = renewed_ago + expires_in: the server
   sets both from one clock). One whose last renewal is more than that and
   a second of slack ago is not renewing: crashed, frozen or cut off.
   -1: cannot tell (the backend does not report both times). */
enum { RENEW_SLACK_MS = 1000 };
static int renewing(const simba_holder *h) {
    if (h->renewed_ago_ms < 0 || h->expires_in_ms < 0) return -1;
    return h->renewed_ago_ms <= (h->renewed_ago_ms + h->expires_in_ms) / 3 + RENEW_SLACK_MS;
}

static void json_ms(const char *key, int64_t v) {
    if (v < 0) printf(", \"%s\": null", key);
    else printf(", \"%s\": %lld", key, (long long)v);
}

static void print_entry_json(const simba_holder *h, int capacity) {
    int r = renewing(h);
    putchar('{');
    json_field("client", h->client, 1);
    json_field("session", h->session, 0);
    printf(", \"fence\": %lld, \"permits\": %d, \"exclusive\": %s", (long long)h->fence,
           h->weight == 0 ? capacity : h->weight, h->weight == 0 ? "true" : "false");
    json_ms("held_ms", h->held_ms);
    json_ms("renewed_ago_ms", h->renewed_ago_ms);
    json_ms("expires_in_ms", h->expires_in_ms);
    printf(", \"renewing\": %s}", r < 0 ? "null" : r ? "true" : "false");
}

/* "  holder ID session S fence F permits P, held for 3.2 s, renewed 0.4 s
   ago, expires in 15.6 s": the times the backend knows, and a warning when
   the session is not renewing. */
static void print_entry_text(const simba_holder *h) {
    int r = renewing(h);
    printf("  %s %-24s session %s", h->granted ? "holder" : "waiter", h->client, h->session);
    if (h->granted) printf(" fence %lld", (long long)h->fence);
    if (h->weight == 0) printf(" exclusive");
    else printf(" permits %d", h->weight);
    if (h->held_ms >= 0) printf(", held for %.1f s", (double)h->held_ms / 1000.0);
    if (r == 0) printf(", NOT RENEWING (crashed, frozen or cut off?)");
    if (h->renewed_ago_ms >= 0) printf(", renewed %.1f s ago", (double)h->renewed_ago_ms / 1000.0);
    if (h->expires_in_ms >= 0) printf(", expires in %.1f s", (double)h->expires_in_ms / 1000.0);
    putchar('\n');
}

static void print_entries(const simba_holder *h, int n, int granted, int capacity) {
    int i, first = 1;
    for (i = 0; i < n; i++) {
        if (h[i].granted != granted) continue;
        if (o.json) {
            if (!first) printf(", ");
            print_entry_json(&h[i], capacity);
        } else {
            print_entry_text(&h[i]);
        }
        first = 0;
    }
}

/* The permits the holders use (an exclusive one: the whole capacity). */
static long long held_permits(const simba_holder *h, int n, int capacity) {
    long long sum = 0;
    int i;
    for (i = 0; i < n; i++)
        if (h[i].granted) sum += h[i].weight == 0 || h[i].weight > capacity ? capacity : h[i].weight;
    return sum;
}

/* One resource of `simba status`, as INFO (ev) and simba_holders (h, n)
   say, or absent (ev NULL). grace: ms of restart grace left. Returns its
   STATUS_* code. */
static int print_status(const char *name, const simba_event *ev, const simba_holder *h, int n, int64_t grace) {
    int exists = ev && ev->capacity > 0;
    int held = exists ? ev->held : 0, queued = exists ? ev->queued : 0, cap = exists ? ev->capacity : 0;
    long long permits = exists ? held_permits(h, n, cap) : 0;
    int code = !exists ? STATUS_ABSENT : held > 0 ? STATUS_HELD : STATUS_FREE;
    if (o.json) {
        putchar('{');
        json_field("name", name, 1);
        printf(", \"exists\": %s, \"state\": \"%s\", \"capacity\": %d, \"queued\": %d, \"held\": %d, "
               "\"held_permits\": %lld, \"waiting\": %d, \"grace_ms\": %lld, \"holders\": [",
               exists ? "true" : "false", code == STATUS_HELD ? "held" : code == STATUS_FREE ? "free" : "absent",
               cap, queued, held, permits, queued - held, (long long)grace);
        print_entries(h, exists ? n : 0, 1, cap);
        printf("], \"waiters\": [");
        print_entries(h, exists ? n : 0, 0, cap);
        printf("]}\n");
        return code;
    }
    if (!exists) printf("%s: no such resource\n", name);
    else {
        printf("%s: capacity %d, held %d (%lld permit%s), waiting %d, queued %d\n", name, cap, held, permits,
               permits == 1 ? "" : "s", queued - held, queued);
        print_entries(h, n, 1, cap);
        print_entries(h, n, 0, cap);
    }
    if (grace > 0)
        printf("  restart grace: the server grants nothing for %.1f s more (it lost its locks: a holder from "
               "before may still run)%s\n", (double)grace / 1000.0,
               is_redis_url(o.url) ? "; on a brand-new server `simba init-server URL` ends it" : "");
    return code;
}

/* set-capacity on a resource that does not exist would create it: a typo
   must not. Returns 0 when name exists, else the exit code. */
static int require_existing(simba *s, const char *name) {
    int cap, rc = stored_capacity(s, name, &cap);
    if (rc != 0 || cap > 0) return rc;
    if (!o.quiet) fprintf(stderr, "simba: %s '%.200s' failed (no such resource; --create creates it)\n", o.cmd, name);
    return EXIT_ERROR;
}

static int admin(void) {
    int code = -1, i, done = 0, exit_code = 0, state = STATUS_HELD;
    simba *s = make_client(&code);
    simba_lock q[SIMBA_MAX_RESOURCES];
    int64_t deadline;
    if (!s) return code;
    if (strcmp(o.cmd, "set-capacity") == 0 && !o.create && (code = require_existing(s, o.names[0])) != 0) {
        simba_destroy(s);
        return code;
    }
    for (i = 0; i < o.nnames; i++) {
        if (strcmp(o.cmd, "status") == 0) q[i] = simba_inspect(s, o.names[i], NULL);
        else if (strcmp(o.cmd, "delete") == 0) q[i] = simba_delete(s, o.names[i], NULL);
        else q[i] = simba_set_capacity(s, o.names[i], o.setcap, NULL);
        if (q[i].id == 0) {
            char why[SIMBA_MAX_MESSAGE + 96];
            snprintf(why, sizeof why, "%s", cause(simba_last_error(s), simba_last_error_msg(s)));
            simba_destroy(s);
            return usage_error("bad request", why);
        }
    }
    deadline = simba_now_ms(s) + (o.connect_timeout_ms ? o.connect_timeout_ms : 10000);
    /* in name order, so the output is in the order the names were given */
    while (done < o.nnames) {
        simba_event ev;
        int64_t left = deadline - simba_now_ms(s);
        int r = simba_wait(s, q[done], left < 0 ? 0 : (int)left, &ev);
        if (r <= 0) {
            if (!simba_connected(s)) {
                say("cannot connect (%s)", no_connect_why());
                exit_code = simba_last_error(s) == SIMBA_EAUTH || strstr(last_log, "auth") ? EXIT_AUTH : EXIT_CONNECT;
            } else {
                say("no answer from the server (timeout)");
                exit_code = EXIT_ERROR;
            }
            break;
        }
        if (ev.type == SIMBA_EVENT_INFO) {
            simba_holder h[256];
            int n = simba_holders(s, q[done], h, 256), st;
            if (n > 256) n = 256;
            st = print_status(o.names[done], &ev, h, n < 0 ? 0 : n, simba_grace_ms(s));
            if (st > state) state = st;
        } else if ((ev.type == SIMBA_EVENT_ERROR || ev.type == SIMBA_EVENT_DONE) && ev.error == SIMBA_ENOTFOUND &&
                   strcmp(o.cmd, "status") == 0) {
            print_status(o.names[done], NULL, NULL, 0, 0);
            state = STATUS_ABSENT;
        } else if (ev.type == SIMBA_EVENT_DONE && ev.error == 0) {
            if (o.verbose) say("%s '%s': done", o.cmd, o.names[done]);
        } else {
            int err = ev.error ? ev.error : SIMBA_EPROTO;
            char what[320];
            snprintf(what, sizeof what, "%s '%.200s' failed", o.cmd, o.names[done]);
            if (!o.quiet) fprintf(stderr, "simba: %s (%s)\n", what, cause(err, ev.message));
            exit_code = err == SIMBA_ENOTFOUND ? EXIT_ERROR : connect_error_exit(err);
            if (exit_code == EXIT_USAGE && err != SIMBA_ECAPACITY) exit_code = EXIT_ERROR;
        }
        fflush(stdout);
        done++;
    }
    simba_destroy(s);
    if (exit_code == 0 && strcmp(o.cmd, "status") == 0) return state;
    return exit_code;
}

/* ---- the network backends, in simba-net ----
   The `simba` that `make cli` builds and `make install` installs has the
   SQLite and mem backends only (SIMBA_CLI_EXEC_NET): the client libraries of
   the network backends, and theirs (TLS, Kerberos, LDAP: some 30 shared
   objects), would cost every start about 10 ms in the dynamic loader, more
   than a whole `simba run` on SQLite. A URL of theirs is handed to simba-net,
   the same program built with every backend, by exec: the same process,
   arguments, environment and descriptors, before anything is taken. It sits
   next to this program (the build directory) or in ../libexec/simba (an
   installed prefix). */
#ifdef SIMBA_CLI_EXEC_NET
/* Fills where[0..1] with the two places simba-net may be; returns the index
   of the one that is an executable, or -1. */
static int find_simba_net(const char *argv0, char where[2][4200]) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash;
    int i;
    if (n > 0) self[n] = '\0';
    else snprintf(self, sizeof self, "%s", argv0);
    slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    else snprintf(self, sizeof self, ".");
    snprintf(where[0], sizeof where[0], "%s/simba-net", self);
    snprintf(where[1], sizeof where[1], "%s/../libexec/simba/simba-net", self);
    for (i = 0; i < 2; i++)
        if (access(where[i], X_OK) == 0) return i;
    return -1;
}

/* The status of url's scheme (simba_url_scheme_status), written to scheme;
   SIMBA_URL_SCHEME_COMPILED also when the URL does not parse (the ordinary
   path says why). */
static int scheme_status_of(const char *url, char *scheme, size_t cap) {
    simba_url *u = (simba_url *)calloc(1, sizeof *u);
    simba_url_error e;
    int st = SIMBA_URL_SCHEME_COMPILED;
    if (!u) return st;
    if (simba_url_parse(url, u, &e) == SIMBA_OK) {
        st = simba_url_scheme_status(u->scheme);
        snprintf(scheme, cap, "%s", u->scheme);
    }
    simba_url_clear(u);
    free(u);
    return st;
}

/* Execs simba-net for a URL this program cannot serve (an unknown scheme
   too: simba-net's message then lists every scheme). Returns -1 when this
   program is to go on (the scheme is here, or it is unknown and there is no
   simba-net), else an exit code, said on stderr. */
static int exec_simba_net_for(const char *url, char **argv) {
    char where[2][4200], scheme[32];
    int st = scheme_status_of(url, scheme, sizeof scheme), i;
    if (st == SIMBA_URL_SCHEME_COMPILED) return -1;
    i = find_simba_net(argv[0], where);
    if (i < 0 && st == SIMBA_URL_SCHEME_UNKNOWN) return -1;
    if (i >= 0) {
        execv(where[i], argv);
        fprintf(stderr, "simba: cannot run %s for the %s:// URL (%s)\n", where[i], scheme, strerror(errno));
        return EXIT_ERROR;
    }
    fprintf(stderr, "simba: %s:// URLs are served by simba-net, the simba built with every backend, "
                    "and it is neither at %s nor at %s (make cli builds it, make install installs it)\n",
            scheme, where[0], where[1]);
    return EXIT_ERROR;
}

static void print_schemes(const char *argv0) {
    char where[2][4200];
    int i = find_simba_net(argv0, where);
    printf("\nschemes compiled in: %s\n", simba_url_schemes());
    printf("the others, through simba-net (%s%s): %s\n", i >= 0 ? "at " : "not found at ",
           i >= 0 ? where[i] : where[0], simba_url_schemes_list(0));
}
#else
static int exec_simba_net_for(const char *url, char **argv) {
    (void)url;
    (void)argv;
    return -1;
}

static void print_schemes(const char *argv0) {
    (void)argv0;
    printf("\nschemes compiled in: %s\n", simba_url_schemes());
}
#endif

/* ---- init-server ---- */
static int init_server(void) {
    simba_url *u = (simba_url *)calloc(1, sizeof *u);
    simba_url_error e;
    simba_desc d;
    int rc;
    memset(&d, 0, sizeof d);
    memset(&e, 0, sizeof e);
    if (!u) return EXIT_ERROR;
    if ((rc = simba_url_parse(o.url, u, &e)) == SIMBA_OK) rc = simba_url_client_options(u, &d, &e);
#ifndef SIMBA_CLI_NO_REDIS
    if (rc == SIMBA_OK && is_redis_url(o.url))
        rc = simba_redis_init_server_url(u, o.tenant ? o.tenant : d.tenant, &e);
    else
#endif
    if (rc == SIMBA_OK)
        rc = simba_url_fail(&e, SIMBA_EUNSUPPORTED, "scheme", "%s: only a Redis server has a restart grace to end "
                            "(MySQL's ends by itself; ZooKeeper keeps its data; mem: lives in one process)",
                            u->scheme);
    simba_url_clear(u);        /* the password must not linger in our memory */
    free(u);
    if (rc != SIMBA_OK) {
        int code = strcmp(e.part, "server") != 0 ? (rc == SIMBA_EAUTH ? EXIT_AUTH : EXIT_USAGE)
                   : connect_error_exit(rc);
        fprintf(stderr, "simba: init-server failed (%s)\n", e.msg);
        return code;
    }
    if (o.verbose) say("init-server: done; the first grants come at once");
    return 0;
}

int main(int argc, char **argv) {
    int rc, k;
    o.wait_ms = o.kill_after_ms = -1;     /* not given (0 is a value: none, at once) */
    if (argc < 2) {
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    k = find_option(argv[1]);
    if (strcmp(argv[1], "help") == 0 || (k >= 0 && options[k].kind == OPT_HELP)) {
        print_main_help(stdout);
        print_schemes(argv[0]);
        return 0;
    }
    if (k >= 0 && options[k].kind == OPT_VERSION) {
        printf("simba %s\n", simba_version());
        return 0;
    }
    if (strcmp(argv[1], "--list-options") == 0) {
        print_option_list();
        return 0;
    }
    o.cmd = argv[1];
    if (!find_command(o.cmd)) {
        char what[96];
        snprintf(what, sizeof what, "unknown command '%.60s'", o.cmd);
        return usage_error(what, "one of run, elect, status, delete, set-capacity, init-server; see simba --help");
    }
    if ((rc = parse_args(argc - 2, argv + 2)) >= 0) return rc;
    if ((rc = exec_simba_net_for(o.url, argv)) >= 0) return rc;
    if (strcmp(o.cmd, "run") == 0 || strcmp(o.cmd, "elect") == 0) return run_or_elect();
    if (strcmp(o.cmd, "init-server") == 0) return init_server();
    return admin();
}
