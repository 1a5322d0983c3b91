// See include/cfs_process.h.
#define _GNU_SOURCE
#include "cfs_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int cfs_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int cfs_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

static volatile int forward_fd = -1;

static void forward(int signal) {
    int saved = errno;
    unsigned char byte = (unsigned char)signal;
    if (forward_fd >= 0) (void)!write(forward_fd, &byte, 1);
    errno = saved;
}

int cfs_forward_signal(int signal, int pipe_fd) {
    forward_fd = pipe_fd;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = forward;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(signal, &action, NULL);
}
