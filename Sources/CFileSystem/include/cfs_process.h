// Process calls that Swift's Glibc module does not declare or that need C: a descriptor for another
// process (to learn when it dies), and signal handlers that only write to a pipe
// (SystemCalls/Signals.swift).
#ifndef CFS_PROCESS_H
#define CFS_PROCESS_H

#include <sys/types.h>

/// pidfd_open(2) (Linux 5.3): a descriptor that becomes readable when the process `pid` ends.
/// Returns -1 with errno (ESRCH: no such process; ENOSYS: an older kernel).
int cfs_pidfd_open(pid_t pid);

/// pipe2(2) with O_CLOEXEC (Glibc's module does not declare pipe2): fds[0] the read end, fds[1] the
/// write end. Returns 0, or -1 with errno.
int cfs_pipe_cloexec(int fds[2]);

/// Installs, for `signal`, a handler that writes the signal's number (one byte) to `pipe_fd` and
/// does nothing else (write(2) is async-signal-safe). SA_RESTART is set. Returns 0, or -1 with errno.
int cfs_forward_signal(int signal, int pipe_fd);

#endif
