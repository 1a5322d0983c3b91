// Open file description locks (fcntl F_OFD_SETLK, Linux 3.15), which Swift's Glibc module does not
// declare: a lock that belongs to the open file description, not to the process, so that threads of
// one process each holding their own descriptor exclude each other, and it goes when the
// description is closed (or the process dies).
#ifndef CFS_LOCKS_H
#define CFS_LOCKS_H

/// Takes a lock on the whole of `fd`'s file, without waiting: `exclusive` a write lock, else a read
/// lock. Returns 0; -1 with errno EAGAIN when another description holds a conflicting lock, or the
/// error of fcntl.
int cfs_ofd_lock(int fd, int exclusive);

/// Releases the lock `fd`'s description holds. Returns 0 or -1 with errno.
int cfs_ofd_unlock(int fd);

#endif
