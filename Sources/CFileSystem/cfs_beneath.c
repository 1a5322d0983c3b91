#define _GNU_SOURCE
#include "cfs_beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define CFS_HAVE_OPEN_HOW 1
#endif
#endif

#ifndef CFS_HAVE_OPEN_HOW
// <linux/openat2.h> (Linux 5.6 headers): the argument of openat2, extensible by its size.
struct open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};
#endif

#ifndef SYS_openat2
#ifdef __NR_openat2
#define SYS_openat2 __NR_openat2
#else
// The same number on every architecture (the system calls added since 5.1 share one table).
#define SYS_openat2 437
#endif
#endif

int cfs_openat2(int dirfd, const char *path, int flags, unsigned int mode, unsigned long long resolve) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(unsigned int)(flags | O_CLOEXEC);
    how.mode = mode;
    how.resolve = resolve;
    long result = -1;
    for (int attempt = 0; attempt < CFS_OPENAT2_ATTEMPTS; attempt++) {
        result = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        if (result >= 0 || errno != EAGAIN) break;
    }
    return (int)result;
}

int cfs_openat2_path(int dirfd, const char *path, int extra_flags, unsigned long long resolve) {
    return cfs_openat2(dirfd, path, O_PATH | extra_flags, 0, resolve);
}

int cfs_openat_path(int dirfd, const char *path, int extra_flags) {
    return openat(dirfd, path, O_PATH | O_CLOEXEC | extra_flags);
}
