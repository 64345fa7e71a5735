#ifndef CSHA256SHIM_H
#define CSHA256SHIM_H
#include <stddef.h>
#include <stdint.h>
/* SHA-256 (FIPS 180-4) on the x86 SHA extensions. libsodium's portable code hashes at a fraction of the speed of
 * these instructions, too slow to verify a download as fast as it arrives (issue 22). Only HomebaseCrypto uses this,
 * and only after csha256_accelerated() said yes; otherwise it hashes with libsodium. */

/* Streaming state: the eight chaining words, the bytes hashed so far and a partial block. */
typedef struct {
    uint32_t h[8];
    uint64_t length;
    uint8_t buffer[64];
    size_t buffered;
} csha256_ctx;

/* 1 when this is x86 and the CPU has SHA, SSE4.1 and SSSE3 (CPUID); 0 otherwise. */
int csha256_accelerated(void);

/* The streaming API. Only for a CPU where csha256_accelerated() is 1: elsewhere the instructions fault (on
 * non-x86 builds, abort). */
void csha256_init(csha256_ctx *ctx);
void csha256_update(csha256_ctx *ctx, const uint8_t *data, size_t count);
void csha256_final(csha256_ctx *ctx, uint8_t digest[32]);
#endif
