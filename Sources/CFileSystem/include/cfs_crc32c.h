// CRC-32C (Castagnoli, the polynomial 0x1EDC6F41 reflected: 0x82F63B78), as LevelDB's log, ext4,
// iSCSI and SCTP use it: the journal's record checksum (FileStore/JournalFile.swift).
//
// No Debian package of this machine's registry offers it as a C library (google/crc32c is not
// packaged here; zlib's crc32 is another polynomial), so it is written here: the SSE4.2 `crc32`
// instruction where the processor has it (checked once at run time), else a table, slicing by 8.
// Both give the same answers (Tests/FileStoreTests/JournalFileTests.swift checks them against the
// standard's test vectors and against each other).
#ifndef CFS_CRC32C_H
#define CFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Extends `crc` (0 to start) with `length` bytes at `data`: crc32c(a + b) ==
/// cfs_crc32c_extend(cfs_crc32c_extend(0, a), b).
uint32_t cfs_crc32c_extend(uint32_t crc, const void *data, size_t length);

/// The same with the table, whatever the processor has (for the tests).
uint32_t cfs_crc32c_extend_portable(uint32_t crc, const void *data, size_t length);

/// Whether cfs_crc32c_extend uses the processor's instruction.
int cfs_crc32c_is_hardware(void);

#endif
