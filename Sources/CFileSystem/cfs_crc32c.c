// CRC-32C: see include/cfs_crc32c.h.
#include "cfs_crc32c.h"

#include <string.h>

static uint32_t table[8][256];
static int table_ready;

static void make_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
        table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = table[0][crc & 0xff] ^ (crc >> 8);
            table[k][n] = crc;
        }
    }
    __atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

uint32_t cfs_crc32c_extend_portable(uint32_t crc, const void *data, size_t length) {
    if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE)) make_table();  // idempotent: a race writes the same values
    const unsigned char *p = data;
    crc = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = table[7][word & 0xff] ^ table[6][(word >> 8) & 0xff] ^ table[5][(word >> 16) & 0xff] ^
              table[4][(word >> 24) & 0xff] ^ table[3][(word >> 32) & 0xff] ^ table[2][(word >> 40) & 0xff] ^
              table[1][(word >> 48) & 0xff] ^ table[0][word >> 56];
        p += 8;
        length -= 8;
    }
    while (length--) crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t extend_hardware(uint32_t crc, const void *data, size_t length) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        length -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (length--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}

static int has_hardware(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
}
#else
static uint32_t extend_hardware(uint32_t crc, const void *data, size_t length) {
    return cfs_crc32c_extend_portable(crc, data, length);
}
static int has_hardware(void) { return 0; }
#endif

static int hardware = -1;

int cfs_crc32c_is_hardware(void) {
    int known = __atomic_load_n(&hardware, __ATOMIC_RELAXED);
    if (known < 0) {
        known = has_hardware();
        __atomic_store_n(&hardware, known, __ATOMIC_RELAXED);
    }
    return known;
}

uint32_t cfs_crc32c_extend(uint32_t crc, const void *data, size_t length) {
    return cfs_crc32c_is_hardware() ? extend_hardware(crc, data, length) : cfs_crc32c_extend_portable(crc, data, length);
}
