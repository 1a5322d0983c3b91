#include "ctextscan.h"

#if defined(__x86_64__)
#include <immintrin.h>

int cts_utf8_simd_available(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return known;
}

// The error bits of Keiser and Lemire, "Validating UTF-8 In Less Than One Instruction Per Byte"
// (Software: Practice and Experience, 2021): three table lookups classify each pair of a byte and
// the byte before it; a set bit is a kind of error, except TWO_CONTS, which is checked against
// whether the byte two or three before leads a three- or four-byte sequence.
#define TOO_SHORT (1 << 0)
#define TOO_LONG (1 << 1)
#define OVERLONG_3 (1 << 2)
#define TOO_LARGE (1 << 3)
#define SURROGATE (1 << 4)
#define OVERLONG_2 (1 << 5)
#define TOO_LARGE_1000 (1 << 6)
#define OVERLONG_4 (1 << 6)
#define TWO_CONTS (1 << 7)
#define CARRY (TOO_SHORT | TOO_LONG | TWO_CONTS)

// A 16-entry table, repeated in both 128-bit lanes (vpshufb looks up within each lane).
#define B(x) ((char)(unsigned char)(x))
#define TABLE(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p)                                               \
    _mm256_setr_epi8(B(a), B(b), B(c), B(d), B(e), B(f), B(g), B(h), B(i), B(j), B(k), B(l), B(m), B(n), B(o), \
                     B(p), B(a), B(b), B(c), B(d), B(e), B(f), B(g), B(h), B(i), B(j), B(k), B(l), B(m), B(n), \
                     B(o), B(p))

__attribute__((target("avx2"))) static inline __m256i prev(__m256i input, __m256i previous, int n) {
    // The block shifted right by n bytes across the 128-bit lanes, the previous block's last n
    // bytes coming in.
    __m256i joined = _mm256_permute2x128_si256(previous, input, 0x21);
    switch (n) {
    case 1: return _mm256_alignr_epi8(input, joined, 16 - 1);
    case 2: return _mm256_alignr_epi8(input, joined, 16 - 2);
    default: return _mm256_alignr_epi8(input, joined, 16 - 3);
    }
}

__attribute__((target("avx2"))) static inline __m256i check_block(__m256i input, __m256i previous) {
    const __m256i byte_1_high_table = TABLE(
        TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG,
        TWO_CONTS, TWO_CONTS, TWO_CONTS, TWO_CONTS,
        TOO_SHORT | OVERLONG_2, TOO_SHORT, TOO_SHORT | OVERLONG_3 | SURROGATE,
        TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4);
    const __m256i byte_1_low_table = TABLE(
        CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4, CARRY | OVERLONG_2, CARRY, CARRY,
        CARRY | TOO_LARGE, CARRY | TOO_LARGE | TOO_LARGE_1000, CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000, CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000, CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000, CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE, CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000);
    const __m256i byte_2_high_table = TABLE(
        TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
        TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT);
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);

    __m256i prev1 = prev(input, previous, 1);
    // No byte-wise shift in AVX2: shift 16-bit words and mask the nibble.
    __m256i byte_1_high = _mm256_shuffle_epi8(byte_1_high_table, _mm256_and_si256(_mm256_srli_epi16(prev1, 4), low_nibble));
    __m256i byte_1_low = _mm256_shuffle_epi8(byte_1_low_table, _mm256_and_si256(prev1, low_nibble));
    __m256i byte_2_high = _mm256_shuffle_epi8(byte_2_high_table, _mm256_and_si256(_mm256_srli_epi16(input, 4), low_nibble));
    __m256i special = _mm256_and_si256(_mm256_and_si256(byte_1_high, byte_1_low), byte_2_high);

    // A continuation must follow a three-byte lead two places before, or a four-byte lead three
    // places before: exactly there TWO_CONTS is expected, and nowhere else.
    __m256i prev2 = prev(input, previous, 2);
    __m256i prev3 = prev(input, previous, 3);
    __m256i third = _mm256_subs_epu8(prev2, _mm256_set1_epi8((char)(0xE0 - 0x80)));
    __m256i fourth = _mm256_subs_epu8(prev3, _mm256_set1_epi8((char)(0xF0 - 0x80)));
    __m256i must_be_continuation = _mm256_and_si256(_mm256_or_si256(third, fourth), _mm256_set1_epi8((char)0x80));
    return _mm256_xor_si256(must_be_continuation, special);
}

__attribute__((target("avx2"))) size_t cts_utf8_well_formed_prefix(const uint8_t *bytes, size_t count) {
    // Sequences cut off at the end of a block: a lead in its last three bytes that needs more
    // bytes than are left in it (compared by saturating subtraction: above 0 means incomplete).
    const __m256i incomplete_limits = _mm256_setr_epi8(
        (char)255, (char)255, (char)255, (char)255, (char)255, (char)255, (char)255, (char)255,
        (char)255, (char)255, (char)255, (char)255, (char)255, (char)255, (char)255, (char)255,
        (char)255, (char)255, (char)255, (char)255, (char)255, (char)255, (char)255, (char)255,
        (char)255, (char)255, (char)255, (char)255, (char)255,
        (char)(0xF0 - 1), (char)(0xE0 - 1), (char)(0xC0 - 1));
    __m256i previous = _mm256_setzero_si256();
    __m256i incomplete = _mm256_setzero_si256();
    size_t end = 0;
    while (end + 64 <= count) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(bytes + end));
        __m256i b = _mm256_loadu_si256((const __m256i *)(bytes + end + 32));
        __m256i error;
        if (_mm256_movemask_epi8(_mm256_or_si256(a, b)) == 0) {
            // All ASCII: wrong only if the block before ended inside a sequence.
            error = incomplete;
            incomplete = _mm256_setzero_si256();
        } else {
            error = _mm256_or_si256(check_block(a, previous), check_block(b, a));
            incomplete = _mm256_subs_epu8(b, incomplete_limits);
        }
        if (!_mm256_testz_si256(error, error)) break;
        previous = b;
        end += 64;
    }
    // Back up to the start of a sequence that the last block boundary cuts (or that holds the
    // error): the caller goes on from a scalar boundary.
    size_t start = end;
    for (size_t lead = end >= 3 ? end - 3 : 0; lead < end; lead++) {
        uint8_t byte = bytes[lead];
        size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
        if (byte >= 0xC0 && lead + length > end) {
            start = lead;
            break;
        }
    }
    return start;
}

#else

int cts_utf8_simd_available(void) { return 0; }

size_t cts_utf8_well_formed_prefix(const uint8_t *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return 0;
}

#endif
