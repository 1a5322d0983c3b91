// Path resolution that cannot leave a directory: openat2(2) with RESOLVE_BENEATH (Linux 5.6),
// and the O_PATH opens the component-by-component fallback needs (O_PATH needs _GNU_SOURCE, which
// Swift's Glibc module is not built with). FileStore's SandboxRoots is the only user.
#ifndef CFS_BENEATH_H
#define CFS_BENEATH_H

/// openat2(2)'s `resolve` flags (<linux/openat2.h>), for Swift.
#define CFS_RESOLVE_NO_XDEV 0x01
/// Refuses /proc's "magic links" (/proc/self/fd/N, /proc/PID/root, ...) met during resolution.
#define CFS_RESOLVE_NO_MAGICLINKS 0x02
#define CFS_RESOLVE_NO_SYMLINKS 0x04
/// Fails with EXDEV when resolution would leave `dirfd`: a `..` above it, an absolute path or an
/// absolute symlink.
#define CFS_RESOLVE_BENEATH 0x08
/// Resolves as if `dirfd` were the root directory (`..` and absolute symlinks stay inside it).
#define CFS_RESOLVE_IN_ROOT 0x10

/// How many times cfs_openat2 retries when the kernel answers EAGAIN (a concurrent rename or
/// mount made it give up a resolution it could not prove safe).
#define CFS_OPENAT2_ATTEMPTS 8

/// openat2(2) through syscall(2) (glibc has no wrapper): opens `path` relative to `dirfd` with
/// open(2) `flags` (O_CLOEXEC is always added), `mode` for a creation, and `resolve` (CFS_RESOLVE_*).
/// Retries EAGAIN up to CFS_OPENAT2_ATTEMPTS times. Returns the descriptor, or -1 and sets errno:
/// ENOSYS on kernels before 5.6 (EPERM where a seccomp filter refuses the call), EXDEV when
/// resolution would escape `dirfd`, ELOOP for too many symlinks or a refused magic link, EAGAIN
/// when every attempt raced with a rename, E2BIG or EINVAL for flags the kernel does not know, and
/// every errno of openat(2).
int cfs_openat2(int dirfd, const char *path, int flags, unsigned int mode, unsigned long long resolve);

/// openat2(2) with O_PATH and `extra_flags` (O_DIRECTORY, O_NOFOLLOW, ...): a descriptor that
/// holds the object `path` names without opening it for reading or writing. As cfs_openat2.
int cfs_openat2_path(int dirfd, const char *path, int extra_flags, unsigned long long resolve);

/// openat(2) with O_PATH | O_CLOEXEC | `extra_flags`. With O_NOFOLLOW a final symlink is opened
/// itself (its target then reads with readlinkat(fd, "", ...)). Returns -1 and sets errno.
int cfs_openat_path(int dirfd, const char *path, int extra_flags);

#endif
