/* Per-request memory: a capped bump allocator. Everything a decoded request owns (strings,
 * arrays) lives in one arena and is released at once when the request ends. The cap bounds what
 * one request may allocate, whatever its JSON says. */
#ifndef QR_CORE_ARENA_H
#define QR_CORE_ARENA_H

#include <stddef.h>

#include "core/buf.h"

struct qr_arena_chunk;

struct qr_arena {
    struct qr_arena_chunk *head; /* owned */
    size_t used;                 /* bytes handed out, all chunks */
    size_t cap;                  /* limit on used; 0 = 1 GiB */
};

void qr_arena_init(struct qr_arena *a, size_t cap);
void qr_arena_cleanup(struct qr_arena *a);

/* n bytes, 16-byte aligned, zeroed; NULL when the cap would be passed or memory ran out. */
void *qr_arena_alloc(struct qr_arena *a, size_t n);

/* Array of n elements of size sz, overflow-checked; NULL as above. */
void *qr_arena_array(struct qr_arena *a, size_t n, size_t sz);

/* Copy of s as a NUL-terminated slice (ptr NULL on failure, len 0). */
struct qr_slice qr_arena_dup(struct qr_arena *a, const char *s, size_t n);

#endif
