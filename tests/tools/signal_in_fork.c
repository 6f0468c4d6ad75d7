/* signal_in_fork.c -- an LD_PRELOAD shim for tests/test_cli.sh: a signal
   that lands in the child between `simba run`'s fork and the child's
   reset of simba's signal handlers. The child's first call after fork is
   setpgid(0, 0) (simba's own call is setpgid(child, child)); there the
   shim sends the child the signal SIMBA_TEST_SIGNAL_IN_FORK names (a
   number), once. Without the variable it does nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int setpgid(pid_t pid, pid_t pgid) {
    int (*real)(pid_t, pid_t);
    const char *sig = getenv("SIMBA_TEST_SIGNAL_IN_FORK");
    *(void **)&real = dlsym(RTLD_NEXT, "setpgid");
    if (pid == 0 && pgid == 0 && sig && atoi(sig) > 0) {
        unsetenv("SIMBA_TEST_SIGNAL_IN_FORK");   /* once: not again in the command */
        kill(getpid(), atoi(sig));
    }
    return real ? real(pid, pgid) : -1;
}
