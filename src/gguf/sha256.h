/* SHA-256 (FIPS 180-4), small and dependency-free: used to identify chat templates and other
 * metadata blobs by content. Streaming (init/update/final) and one-shot forms. */
#ifndef QR_GGUF_SHA256_H
#define QR_GGUF_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define QR_SHA256_LEN 32u /* digest bytes */
#define QR_SHA256_HEX 65u /* hex digest plus the NUL */

/* Hashing state in caller storage; owns nothing. */
struct qr_sha256 {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t block[64];
    size_t used; /* bytes pending in block */
};

void qr_sha256_init(struct qr_sha256 *s);
/* Hash n more bytes at p (borrowed; p may be NULL when n is 0). */
void qr_sha256_update(struct qr_sha256 *s, const void *p, size_t n);
/* Write the digest into out and leave s in an unspecified state (init again to reuse). */
void qr_sha256_final(struct qr_sha256 *s, uint8_t out[QR_SHA256_LEN]);

/* One shot. */
void qr_sha256(const void *p, size_t n, uint8_t out[QR_SHA256_LEN]);
/* Lowercase hex of a digest into out, NUL-terminated. */
void qr_sha256_hex(const uint8_t digest[QR_SHA256_LEN], char out[QR_SHA256_HEX]);

#endif
