// Preloaded into the gateway under valgrind by Benchmarks/per-request.sh.
//
// Valgrind 3.19 (Debian 12) writes into the signal mask passed to
// rt_sigsuspend, to keep its own signals unblocked. libdispatch parks the
// main thread after dispatch_main() with sigsuspend() on a `static const
// sigset_t`, in read-only memory, so valgrind dies of SIGSEGV ("the
// 'impossible' happened") as soon as the gateway has started. This
// sigsuspend passes valgrind a copy of the mask on the stack instead; what
// the program does is unchanged.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, sizeof(unsigned long));
}
