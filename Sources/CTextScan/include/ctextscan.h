// Byte scans that want instructions Swift cannot ask for per function: AVX2, chosen at run time
// (the binary stays runnable on any x86-64, and on other architectures these report "not
// available" and the Swift code does the work).
#ifndef CTEXTSCAN_H
#define CTEXTSCAN_H

#include <stddef.h>
#include <stdint.h>

/// Whether `cts_utf8_well_formed_prefix` can run here (an x86-64 processor with AVX2).
int cts_utf8_simd_available(void);

/// A scalar boundary `end` such that `bytes[0..<end]` is well-formed UTF-8 (RFC 3629: no
/// overlong forms, no surrogates, nothing above U+10FFFF), found 64 bytes at a time with AVX2
/// (Keiser and Lemire's table lookups, as simdutf does). It stops before the 64-byte block where
/// the first error shows, backed up to the start of a sequence that block boundary cuts, and short
/// of the last bytes that do not fill a block: the caller checks from `end` on byte by byte,
/// which finds the exact offset and reason of an error. Only call it when
/// `cts_utf8_simd_available()` answers 1.
size_t cts_utf8_well_formed_prefix(const uint8_t *bytes, size_t count);

#endif
