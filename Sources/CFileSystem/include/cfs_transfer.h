// Linux calls for FileStore's file transfers (FileTransfer.swift) that Swift's Glibc module does
// not declare (they need _GNU_SOURCE).
#ifndef CFS_TRANSFER_H
#define CFS_TRANSFER_H

#include <stddef.h>
#include <sys/types.h>

/// copy_file_range(2) from and to the files' current offsets (both advance): up to `length` bytes
/// copied inside the kernel. Returns the bytes copied (0 at the end of the input) or -1 with errno
/// (EXDEV, EINVAL, ENOSYS, EOPNOTSUPP where the kernel or file systems cannot do it).
ssize_t cfs_copy_file_range(int in_fd, int out_fd, size_t length);

#endif
