#define _GNU_SOURCE
#include "cfilesystem.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

int cfs_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    // Through syscall(2): glibc's wrapper exists only from 2.28, the system call from Linux 3.15.
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

ssize_t cfs_llistxattr(const char *path, char *list, size_t size) { return llistxattr(path, list, size); }
ssize_t cfs_lgetxattr(const char *path, const char *name, void *value, size_t size) {
    return lgetxattr(path, name, value, size);
}
int cfs_fsetxattr(int fd, const char *name, const void *value, size_t size) {
    return fsetxattr(fd, name, value, size, 0);
}
ssize_t cfs_flistxattr(int fd, char *list, size_t size) { return flistxattr(fd, list, size); }
ssize_t cfs_fgetxattr(int fd, const char *name, void *value, size_t size) {
    return fgetxattr(fd, name, value, size);
}

int cfs_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

int cfs_set_thread_nice(int nice) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

#include <pthread.h>

void cfs_set_thread_name(const char *name) {
    char copy[16];
    snprintf(copy, sizeof copy, "%s", name);
    pthread_setname_np(pthread_self(), copy);
}

#include <sys/eventfd.h>

int cfs_eventfd_nonblocking(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int cfs_open_path_only(const char *path) {
    return open(path, O_PATH | O_CLOEXEC);
}
