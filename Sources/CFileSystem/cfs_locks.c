#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "cfs_locks.h"

static int set_lock(int fd, short type) {
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = type;
    lock.l_whence = SEEK_SET;
    lock.l_start = 0;
    lock.l_len = 0;  // the whole file
    // l_pid must be 0 for OFD locks.
    int result;
    do {
        result = fcntl(fd, F_OFD_SETLK, &lock);
    } while (result != 0 && errno == EINTR);
    if (result != 0 && errno == EACCES) errno = EAGAIN;  // POSIX allows either for "held"
    return result;
}

int cfs_ofd_lock(int fd, int exclusive) { return set_lock(fd, exclusive ? F_WRLCK : F_RDLCK); }

int cfs_ofd_unlock(int fd) { return set_lock(fd, F_UNLCK); }
