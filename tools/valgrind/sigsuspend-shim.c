/* Preloaded into a process run under valgrind (tools/bench-instructions). libdispatch parks the main thread in
 * sigsuspend(2) with a signal mask in read-only memory; valgrind 3.19 writes to the mask it is given and dies
 * with SIGSEGV. This passes the kernel a copy on the stack instead. Nothing else changes. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, _NSIG / 8);
}
