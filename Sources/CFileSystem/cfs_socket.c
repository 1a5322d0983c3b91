// See include/cfilesystem.h ("Unix sockets and detached processes"): the calls of the daemon's
// socket (SystemCalls/UnixSocket.swift) that Swift's Glibc module does not declare: accept4(2) and
// struct ucred need _GNU_SOURCE, and POSIX_SPAWN_SETSID is not exported to Swift.
#define _GNU_SOURCE
#include "cfilesystem.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

int cfs_accept_cloexec(int listener) { return accept4(listener, NULL, NULL, SOCK_CLOEXEC); }

int cfs_peer_credentials(int socket, int *pid, unsigned int *uid, unsigned int *gid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    memset(&credentials, 0, sizeof credentials);
    if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    if (length != sizeof credentials) {
        errno = EINVAL;
        return -1;
    }
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

int cfs_spawn(const char *path, char *const argv[], int search_path, int detach, int output, int *pid) {
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_t actions;
    int result = posix_spawnattr_init(&attributes);
    if (result != 0) {
        errno = result;
        return -1;
    }
    result = posix_spawn_file_actions_init(&actions);
    if (result != 0) {
        posix_spawnattr_destroy(&attributes);
        errno = result;
        return -1;
    }
    // Every signal back to its default disposition (the caller ignores SIGPIPE, say), none blocked.
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
    if (detach) flags |= POSIX_SPAWN_SETSID;
    result = posix_spawnattr_setflags(&attributes, flags);
    if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &all);
    if (result == 0) result = posix_spawnattr_setsigmask(&attributes, &none);
    if (result == 0 && detach) {
        result = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
        if (result == 0) {
            if (output >= 0) {
                result = posix_spawn_file_actions_adddup2(&actions, output, 1);
            } else {
                result = posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
            }
        }
        if (result == 0) result = posix_spawn_file_actions_adddup2(&actions, 1, 2);
    }
    pid_t child = 0;
    if (result == 0) {
        result = search_path ? posix_spawnp(&child, path, &actions, &attributes, argv, environ)
                             : posix_spawn(&child, path, &actions, &attributes, argv, environ);
    }
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (result != 0) {
        errno = result;
        return -1;
    }
    *pid = child;
    return 0;
}
