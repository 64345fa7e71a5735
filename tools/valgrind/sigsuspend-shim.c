/* Preloaded into the Homebase when tools/bench-instructions runs it under valgrind. libdispatch parks the main
 * thread in sigsuspend(2); under valgrind 3.19 that call dies with SIGSEGV (an access fault at an address in
 * libdispatch's read-only data, where its signal mask lies). Passing the kernel a copy of the mask on the stack
 * avoids it; the call is otherwise the same. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, _NSIG / 8);
}
