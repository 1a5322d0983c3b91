#define _GNU_SOURCE
#include "cfilesystem.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

int cfs_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    // Through syscall(2): glibc's wrapper exists only from 2.28, the system call from Linux 3.15.
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

int cfs_ficlone(int dst, int src) {
    // The request number, rather than <linux/fs.h>'s FICLONE, so that old kernel headers build too.
    return ioctl(dst, 0x40049409UL, src);
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

#include <string.h>

const char *cfs_errno_name(int number) { return strerrorname_np(number); }

#include <sys/eventfd.h>

int cfs_eventfd_nonblocking(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int cfs_open_path_only(const char *path) {
    return open(path, O_PATH | O_CLOEXEC);
}

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

int cfs_reexec_with_tcache_count(char *const argv[], int count) {
    // A set-user-ID program has GLIBC_TUNABLES removed at start: it would re-execute forever.
    if (getauxval(AT_SECURE) != 0) return 0;
    const char *found = getenv("GLIBC_TUNABLES");
    if (found != NULL && strstr(found, "glibc.malloc.tcache_count") != NULL) return 0;
    char *current = found != NULL ? strdup(found) : NULL;
    if (found != NULL && current == NULL) return -1;
    char setting[64];
    snprintf(setting, sizeof setting, "glibc.malloc.tcache_count=%d", count);
    size_t length = (current != NULL ? strlen(current) + 1 : 0) + strlen(setting) + 1;
    char *value = malloc(length);
    if (value == NULL) { free(current); return -1; }
    if (current != NULL && current[0] != '\0') {
        snprintf(value, length, "%s:%s", setting, current);
    } else {
        snprintf(value, length, "%s", setting);
    }
    int saved;
    if (setenv("GLIBC_TUNABLES", value, 1) == 0) {
        execv("/proc/self/exe", argv);
        saved = errno;
        // Not re-executed: leave the environment as it was.
        if (current != NULL) setenv("GLIBC_TUNABLES", current, 1); else unsetenv("GLIBC_TUNABLES");
    } else {
        saved = errno;
    }
    free(value);
    free(current);
    errno = saved;
    return -1;
}
