// The Linux file calls that Swift's Glibc module does not declare (they need _GNU_SOURCE or
// <sys/xattr.h>), wrapped for FileStore, the only module that makes file syscalls.
#ifndef CFILESYSTEM_H
#define CFILESYSTEM_H

#include <stddef.h>
#include <sys/types.h>

/// renameat2(2); `flags` 1 is RENAME_NOREPLACE, 2 is RENAME_EXCHANGE (both names must exist; they
/// are swapped in one step, directories included: the package save's swap). Sets errno (ENOSYS or
/// EINVAL where the kernel or the file system does not support the flag).
int cfs_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);

/// ioctl(dst, FICLONE, src) (FICLONE is 0x40049409; Swift cannot call the variadic ioctl): makes
/// `dst` share `src`'s blocks, copy on write (a reflink), where the file system can (Btrfs, XFS
/// with reflink, bcachefs). Returns 0, or -1 with errno: EOPNOTSUPP, ENOTTY or EINVAL where the file
/// system cannot, EXDEV across file systems.
int cfs_ficlone(int dst, int src);

/// The extended-attribute calls of <sys/xattr.h>, on paths without following a final symlink.
ssize_t cfs_llistxattr(const char *path, char *list, size_t size);
ssize_t cfs_lgetxattr(const char *path, const char *name, void *value, size_t size);
/// On an open file.
int cfs_fsetxattr(int fd, const char *name, const void *value, size_t size);
ssize_t cfs_flistxattr(int fd, char *list, size_t size);
ssize_t cfs_fgetxattr(int fd, const char *name, void *value, size_t size);

/// sync_file_range(2) with SYNC_FILE_RANGE_WRITE: starts writeback of a range without waiting.
int cfs_start_writeback(int fd, long long offset, long long length);

/// Sets the calling thread's nice value (Linux schedules threads separately).
int cfs_set_thread_nice(int nice);

/// Names the calling thread (its first 15 bytes), as `top -H` and `perf` show it.
void cfs_set_thread_name(const char *name);

/// The symbolic name of an errno value ("ENOENT"), or NULL for a number glibc does not know
/// (strerrorname_np, glibc 2.32; Glibc's module declares it only under _GNU_SOURCE).
const char *cfs_errno_name(int number);

/// eventfd(2) with EFD_CLOEXEC | EFD_NONBLOCK and a zero count (Glibc's module does not declare
/// <sys/eventfd.h>): the file watcher's wake-up descriptor. Returns -1 and sets errno on failure.
int cfs_eventfd_nonblocking(void);

/// open(2) with O_PATH | O_CLOEXEC (O_PATH needs _GNU_SOURCE): a descriptor that holds a file
/// without opening it for reading or writing, for finding it again after a move.
int cfs_open_path_only(const char *path);

// The other headers of this target (one module with all of them); included here too, so a build
// whose module cache predates one of them still sees it.
#include "cfs_beneath.h"
#include "cfs_transfer.h"
#include "cfs_crc32c.h"
#include "cfs_process.h"
#include "cfs_locks.h"

/// Unless GLIBC_TUNABLES already names `glibc.malloc.tcache_count`, re-executes this program
/// (/proc/self/exe, the same argv) with that tunable set to `count` put before GLIBC_TUNABLES' own, so
/// that glibc keeps more freed blocks per size in each thread's cache. Returns only when it did
/// not re-execute: 0 when the tunable was already there (or the process is set-user-ID, whose
/// GLIBC_TUNABLES glibc drops), -1 when the exec failed (errno set; the program goes on as it is).
int cfs_reexec_with_tcache_count(char *const argv[], int count);

// Unix sockets and detached processes (cfs_socket.c), for the daemon's socket
// (SystemCalls/UnixSocket.swift): accept4 and struct ucred need _GNU_SOURCE, and Swift does not see
// POSIX_SPAWN_SETSID.

/// accept4(2) with SOCK_CLOEXEC: the connection is blocking (whatever the listener is) and closed on
/// exec. Returns the descriptor, or -1 with errno (EAGAIN when none is waiting on a non-blocking
/// listener).
int cfs_accept_cloexec(int listener);

/// getsockopt(SO_PEERCRED) on a connected Unix socket: the peer's process, user and group as they
/// were when it connected. Returns 0, or -1 with errno.
int cfs_peer_credentials(int socket, int *pid, unsigned int *uid, unsigned int *gid);

/// posix_spawn(3) (posix_spawnp(3) with `search_path`) of `path` with `argv` and this process's
/// environment, every signal at its default disposition and none blocked. With `detach`, the child
/// starts a new session (POSIX_SPAWN_SETSID) with stdin on /dev/null and stdout and stderr on
/// `output` (/dev/null when -1); without, it inherits the standard descriptors. Returns 0 with the
/// child's id in *pid, or -1 with errno.
int cfs_spawn(const char *path, char *const argv[], int search_path, int detach, int output, int *pid);

#endif
