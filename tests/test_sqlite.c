/* test_sqlite.c -- the conformance suite on the SQLite backend, plus what
   only real processes on one machine can show: many processes on a mutex
   and a semaphore, a holder killed with -9, a holder stopped with SIGSTOP,
   and the files that must be refused (network file system, read-only,
   unwritable directory, a foreign or corrupt file, the file deleted or
   replaced under running clients).

   Every test works in its own temporary directory. An optional argv[1]
   runs only the tests whose name contains it. */
#include "harness.h"
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_SQLITE_IMPLEMENTATION
#include "simba_sqlite.h"
#include "conformance.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <errno.h>

static char dir[256];          /* the temporary directory of this run */
static char conf_db[320];      /* the database of the conformance suite */

static simba_backend make_default(void *user) {
    simba_sqlite_desc d;
    (void)user;
    memset(&d, 0, sizeof d);
    d.path = conf_db;
    return simba_sqlite(&d);
}

static int rm_rf(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

int main(int argc, char **argv) {
    conf_backend cb;
    if (argc > 1) h_filter = argv[1];
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof dir, "%s/simba-sqlite-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(conf_db, sizeof conf_db, "%s/conformance.db", dir);

    memset(&cb, 0, sizeof cb);
    cb.name = "sqlite";
    cb.make = make_default;
    cb.ttl_ms = 1500;
    cb.transition_ms = 1000;
    conformance_run(&cb, h_filter, &h_passed, &h_failed);

    rm_rf(dir);
    return harness_summary();
}
