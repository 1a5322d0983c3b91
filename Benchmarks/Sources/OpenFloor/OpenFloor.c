#include "OpenFloor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

long long open_floor_count_newlines(const unsigned char *bytes, size_t count) {
    long long lines = 0;
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i newline = _mm_set1_epi8('\n');
    const __m128i zero = _mm_setzero_si128();
    while (i + 16 <= count) {
        // Per-lane counts in bytes (a match is 0xFF, so subtracting adds one), summed with
        // psadbw before any lane can wrap.
        __m128i lanes = _mm_setzero_si128();
        size_t rounds = 0;
        while (i + 16 <= count && rounds < 255) {
            __m128i block = _mm_loadu_si128((const __m128i *)(bytes + i));
            lanes = _mm_sub_epi8(lanes, _mm_cmpeq_epi8(block, newline));
            i += 16;
            rounds++;
        }
        __m128i sums = _mm_sad_epu8(lanes, zero);
        lines += _mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
    }
#endif
    for (; i < count; i++) lines += bytes[i] == '\n';
    return lines;
}

long long open_floor_read_count(const char *path, size_t piece_size, long long *bytes_read) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    // Page-aligned, as a careful C program would have it: the kernel copies into a destination
    // that is not 32-byte aligned up to three times slower on the development VM (malloc's 1 MiB
    // blocks start 16 bytes into a page), which would flatter every ratio measured against this.
    unsigned char *buffer = aligned_alloc(4096, (piece_size + 4095) / 4096 * 4096);
    if (buffer == NULL) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    long long lines = 0;
    long long total = 0;
    for (;;) {
        ssize_t got = read(fd, buffer, piece_size);
        if (got < 0) {
            if (errno == EINTR) continue;
            int saved = errno;
            free(buffer);
            close(fd);
            errno = saved;
            return -1;
        }
        if (got == 0) break;
        total += got;
        lines += open_floor_count_newlines(buffer, (size_t)got);
    }
    free(buffer);
    close(fd);
    *bytes_read = total;
    return lines;
}

// MARK: - The reference

#if defined(__SSE2__)
static inline __m128i load16(const unsigned char *p) { return _mm_loadu_si128((const __m128i *)p); }
static inline __m128i splat(unsigned char c) { return _mm_set1_epi8((char)c); }

/// Whether bytes[16..<count] pass the block checks (the first block and the tail are left out:
/// a reference for the cost, not a validator).
static int blocks_are_well_formed(const unsigned char *b, size_t count) {
    for (size_t i = 16; i + 16 <= count; i += 16) {
        __m128i x = load16(b + i), p1 = load16(b + i - 1), p2 = load16(b + i - 2), p3 = load16(b + i - 3);
        __m128i required = _mm_or_si128(_mm_or_si128(_mm_subs_epu8(p1, splat(0x40)), _mm_subs_epu8(p2, splat(0x60))),
                                        _mm_subs_epu8(p3, splat(0x70)));
        __m128i s1 = _mm_add_epi8(x, x), s2 = _mm_add_epi8(s1, s1), s3 = _mm_add_epi8(s2, s2);
        __m128i bad = _mm_xor_si128(required, _mm_andnot_si128(s1, x));
        bad = _mm_or_si128(bad, _mm_or_si128(_mm_subs_epu8(x, splat(0x75)),
                                             _mm_cmpeq_epi8(_mm_and_si128(x, splat(0xFE)), splat(0xC0))));
        __m128i b54 = _mm_or_si128(s2, s3);
        bad = _mm_or_si128(bad, _mm_or_si128(_mm_andnot_si128(s2, _mm_cmpeq_epi8(p1, splat(0xE0))),
                                             _mm_and_si128(s2, _mm_cmpeq_epi8(p1, splat(0xED)))));
        bad = _mm_or_si128(bad, _mm_or_si128(_mm_andnot_si128(b54, _mm_cmpeq_epi8(p1, splat(0xF0))),
                                             _mm_and_si128(b54, _mm_cmpeq_epi8(p1, splat(0xF4)))));
        if (_mm_movemask_epi8(bad)) return 0;
    }
    return 1;
}
#else
static int blocks_are_well_formed(const unsigned char *b, size_t count) { (void)b; (void)count; return 1; }
#endif

struct reference_blocks {
    size_t count, capacity;
    void **blocks;
};

void *open_reference_read(const char *path, size_t piece_size, long long *bytes_read, long long *lines, int *valid) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    unsigned char *buffer = aligned_alloc(4096, (piece_size + 4095) / 4096 * 4096);
    struct reference_blocks *list = calloc(1, sizeof *list);
    if (buffer == NULL || list == NULL) {
        free(buffer);
        free(list);
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    long long total = 0;
    *lines = 0;
    *valid = 1;
    for (;;) {
        ssize_t got = read(fd, buffer, piece_size);
        if (got < 0) {
            if (errno == EINTR) continue;
            int saved = errno;
            free(buffer);
            open_reference_free(list);
            close(fd);
            errno = saved;
            return NULL;
        }
        if (got == 0) break;
        total += got;
        *lines += open_floor_count_newlines(buffer, (size_t)got);
        *valid &= blocks_are_well_formed(buffer, (size_t)got);
        for (ssize_t offset = 0; offset < got; offset += 896) {
            size_t length = (size_t)(got - offset) < 896 ? (size_t)(got - offset) : 896;
            if (list->count == list->capacity) {
                list->capacity = list->capacity ? list->capacity * 2 : 1024;
                list->blocks = realloc(list->blocks, list->capacity * sizeof(void *));
            }
            unsigned char *block = malloc(32 + length);
            memcpy(block + 32, buffer + offset, length);
            list->blocks[list->count++] = block;
        }
    }
    free(buffer);
    close(fd);
    *bytes_read = total;
    return list;
}

void open_reference_free(void *blocks) {
    struct reference_blocks *list = blocks;
    if (list == NULL) return;
    for (size_t i = 0; i < list->count; i++) free(list->blocks[i]);
    free(list->blocks);
    free(list);
}
