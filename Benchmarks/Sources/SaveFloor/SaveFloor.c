#define _GNU_SOURCE
#include "SaveFloor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

unsigned char *save_floor_alloc(size_t count) {
    return aligned_alloc(4096, (count + 4095) / 4096 * 4096 + 4096);
}

void save_floor_free(unsigned char *buffer) { free(buffer); }

long save_floor_filesystem_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long)info.f_type;
}

static int same_state(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int save_floor(const char *directory, const char *name, const unsigned char *bytes, size_t count,
               size_t piece_size, int *durable, long long *phase_ns) {
    long long mark = phase_ns ? now_ns() : 0;
#define PHASE(p)                                  \
    do {                                          \
        if (phase_ns) {                           \
            long long t = now_ns();               \
            phase_ns[p] = t - mark;               \
            mark = t;                             \
        }                                         \
    } while (0)

    char path[4096];
    snprintf(path, sizeof path, "%s/%s", directory, name);
    // SafeSave.resolveSymlinks: one lstat, the path is not a link.
    struct stat link;
    if (lstat(path, &link) != 0) return -1;
    int dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -1;
    int result = -1, saved = 0, tfd = -1;
    char temp[64] = "";
    struct stat existing, now, identity;
    unsigned long long random_name;
    while (flock(dfd, LOCK_EX) != 0) {
        if (errno != EINTR) goto close_directory;
    }
    if (fstatat(dfd, name, &existing, AT_SYMLINK_NOFOLLOW) != 0) goto unlock;
    if (!S_ISREG(existing.st_mode)) { errno = EINVAL; goto unlock; }
    if (faccessat(dfd, name, W_OK, AT_EACCESS) != 0) goto unlock;
    // The method: the owner can be reproduced (SafeSave.canReproduceOwner: root can, anyone else
    // when the file is theirs and in their group).
    if (existing.st_nlink > 1 || (geteuid() != 0 && (existing.st_uid != geteuid() || existing.st_gid != getegid()))) {
        errno = EPERM;  // the floor measures the rename method only
        goto unlock;
    }
    // A random temp name, as SafeSave's SystemRandomNumberGenerator (getrandom).
    if (getrandom(&random_name, sizeof random_name, 0) != sizeof random_name) goto unlock;
    snprintf(temp, sizeof temp, ".docsession-save-%llx", random_name);
    tfd = openat(dfd, temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (tfd < 0) goto unlock;
    PHASE(SAVE_FLOOR_SETUP);

    // Every byte, straight from the flat buffer: pwritev of one vector per piece, as SafeSave's
    // sink (which gathers a rope's chunks), and the writeback started every 8 MiB as it does.
    size_t writeback_start = 0;
    for (size_t offset = 0; offset < count;) {
        size_t piece = count - offset < piece_size ? count - offset : piece_size;
        size_t done = 0;
        while (done < piece) {
            struct iovec vector = {.iov_base = (void *)(bytes + offset + done), .iov_len = piece - done};
            ssize_t wrote = pwritev(tfd, &vector, 1, (off_t)(offset + done));
            if (wrote < 0) {
                if (errno == EINTR) continue;
                goto remove_temp;
            }
            done += (size_t)wrote;
        }
        offset += piece;
        if (offset - writeback_start >= (8u << 20)) {
            sync_file_range(tfd, (off_t)writeback_start, (off_t)(offset - writeback_start), SYNC_FILE_RANGE_WRITE);
            writeback_start = offset;
        }
    }
    PHASE(SAVE_FLOOR_WRITE);

    // Owner (same: no fchown), mode, extended attributes (listed, none to copy).
    if (existing.st_uid != geteuid() || existing.st_gid != getegid()) {
        if (fchown(tfd, existing.st_uid, existing.st_gid) != 0) goto remove_temp;
    }
    if (fchmod(tfd, existing.st_mode & 07777) != 0) goto remove_temp;
    ssize_t listed = llistxattr(path, NULL, 0);
    if (listed < 0 && errno != ENOTSUP) goto remove_temp;
    if (listed > 0) { errno = EPERM; goto remove_temp; }  // the floor measures the no-xattr case
    PHASE(SAVE_FLOOR_ATTRIBUTES);

    if (fsync(tfd) != 0) goto remove_temp;
    PHASE(SAVE_FLOOR_FSYNC);
    int closed = close(tfd);
    tfd = -1;
    if (closed != 0) goto remove_temp;
    if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) != 0) goto remove_temp;
    if (!same_state(&now, &existing)) { errno = ESTALE; goto remove_temp; }
    if (renameat(dfd, temp, dfd, name) != 0) goto remove_temp;
    PHASE(SAVE_FLOOR_RENAME);

    *durable = fsync(dfd) == 0;
    PHASE(SAVE_FLOOR_FSYNC_DIRECTORY);
    if (fstatat(dfd, name, &identity, AT_SYMLINK_NOFOLLOW) != 0) memset(&identity, 0, sizeof identity);
    result = 0;
    goto unlock;

remove_temp:
    saved = errno;
    if (tfd >= 0) close(tfd);
    unlinkat(dfd, temp, 0);
    errno = saved;
unlock:
    saved = errno;
    flock(dfd, LOCK_UN);
close_directory:
    if (result != 0 && saved == 0) saved = errno;
    close(dfd);
    if (result != 0) errno = saved;
    PHASE(SAVE_FLOOR_FINISH);
    return result;
#undef PHASE
}

const char *save_floor_filesystem_name(const char *path) {
    static char other[32];
    long type = save_floor_filesystem_type(path);
    if (type == -1) return "unknown";
    switch ((unsigned long)type) {
    case 0xEF53: return "ext2/ext3/ext4";
    case 0x01021994: return "tmpfs (fsync costs nothing: use --dir on a disk)";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794C7630: return "overlayfs";
    default: snprintf(other, sizeof other, "f_type 0x%lx", (unsigned long)type); return other;
    }
}
