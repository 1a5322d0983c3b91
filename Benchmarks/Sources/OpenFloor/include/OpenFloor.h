// The floor that opening a document is measured against (performance.md, figure 6): what a C
// program does to read a file and learn its lines, and nothing more.
#ifndef OPEN_FLOOR_H
#define OPEN_FLOOR_H

#include <stddef.h>

/// Reads the file at `path` with open(2) and read(2) into one buffer of `piece_size` bytes,
/// counting the '\n' bytes of each piece with a vectorised count. Returns the number of '\n'
/// bytes and stores the bytes read in `*bytes_read`; returns -1 with errno set on failure.
long long open_floor_read_count(const char *path, size_t piece_size, long long *bytes_read);

/// The number of '\n' bytes in `bytes[0..<count]` (SSE2 sixteen bytes at a time, as a C program
/// would count them).
long long open_floor_count_newlines(const unsigned char *bytes, size_t count);

/// A reference, not a floor: the work an open cannot skip, written in C. Reads `path` as
/// `open_floor_read_count` does, also validates each piece as UTF-8 (SSE2, the same rules and
/// method as FileStore's `TextDecoder.wellFormedPrefix`, with `pmovmskb` for the test) and copies
/// the text into `malloc`ed blocks of 896 bytes behind a 32-byte header, as a rope's chunks are.
/// Returns the blocks (for `open_reference_free`, outside the timing) or NULL with errno set;
/// `*lines` gets the '\n' count, `*valid` 0 if a block failed validation.
void *open_reference_read(const char *path, size_t piece_size, long long *bytes_read, long long *lines, int *valid);

/// Frees what `open_reference_read` returned.
void open_reference_free(void *blocks);

#endif
