// The floor that saving a document is measured against (performance.md, figure 4): a C program
// making the system calls of our safe save (FileStore's SafeSave, the rename method, for a new
// version of an existing file with the process's owner and group and no extended attributes) from
// one flat buffer, and nothing more: no copy into a write buffer, no content hash.
#ifndef SAVE_FLOOR_H
#define SAVE_FLOOR_H

#include <stddef.h>

/// The phases of `save_floor`, for `phase_ns` (nanoseconds each, CLOCK_MONOTONIC).
enum save_floor_phase {
    /// lstat, open(dir), flock, fstatat, faccessat, geteuid/getegid, getrandom, openat(temp).
    SAVE_FLOOR_SETUP = 0,
    /// pwrite in pieces of `piece_size`.
    SAVE_FLOOR_WRITE = 1,
    /// geteuid/getegid, fchmod, llistxattr.
    SAVE_FLOOR_ATTRIBUTES = 2,
    /// fsync(temp).
    SAVE_FLOOR_FSYNC = 3,
    /// close(temp), fstatat, renameat.
    SAVE_FLOOR_RENAME = 4,
    /// fsync(dir).
    SAVE_FLOOR_FSYNC_DIRECTORY = 5,
    /// fstatat for the new identity, flock(LOCK_UN), close(dir).
    SAVE_FLOOR_FINISH = 6,
    SAVE_FLOOR_PHASES = 7
};

/// Replaces the existing regular file `name` in `directory` with `bytes[0..<count]`, as SafeSave
/// does: the same system calls in the same order. Returns 0, or -1 with errno set (the temp file
/// removed). `*durable` is set to whether the directory's fsync succeeded. `phase_ns`, if not NULL,
/// receives SAVE_FLOOR_PHASES durations.
int save_floor(const char *directory, const char *name, const unsigned char *bytes, size_t count,
               size_t piece_size, int *durable, long long *phase_ns);

/// A page-aligned buffer of `count` bytes (free with `save_floor_free`), as a careful C program
/// would write from: the kernel copies from aligned memory faster on some machines.
unsigned char *save_floor_alloc(size_t count);
void save_floor_free(unsigned char *buffer);

/// statfs(2)'s f_type for `path` (0xEF53 ext2/3/4, 0x01021994 tmpfs, ...), or -1 with errno set.
/// (Swift's Glibc module does not declare statfs.)
long save_floor_filesystem_type(const char *path);

/// The file system of `path` as `stat -f` names the common ones (tmpfs with a warning: fsync costs
/// nothing there), else "f_type 0x..." or "unknown". The string is static (not thread-safe).
const char *save_floor_filesystem_name(const char *path);

#endif
