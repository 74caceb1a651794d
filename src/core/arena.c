/* Capped bump allocator for per-request data: chunks grow geometrically, nothing is freed
 * individually, the cap is checked before every allocation. */
#include "core/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct qr_arena_chunk {
    struct qr_arena_chunk *next;
    size_t size; /* usable bytes after the header */
    size_t off;
    _Alignas(16) unsigned char data[];
};

#define MIN_CHUNK 4096

void qr_arena_init(struct qr_arena *a, size_t cap)
{
    a->head = NULL;
    a->used = 0;
    a->cap = cap ? cap : (size_t) 1 << 30;
}

void qr_arena_cleanup(struct qr_arena *a)
{
    struct qr_arena_chunk *c = a->head;
    while (c) {
        struct qr_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}

void *qr_arena_alloc(struct qr_arena *a, size_t n)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX - 15)
        return NULL;
    size_t need = (n + 15) & ~(size_t) 15;
    if (need > a->cap - a->used || a->used > a->cap)
        return NULL;
    struct qr_arena_chunk *c = a->head;
    if (!c || c->size - c->off < need) {
        size_t size = c ? c->size * 2 : MIN_CHUNK;
        if (size < need)
            size = need;
        if (size > a->cap - a->used && need <= a->cap - a->used)
            size = need > MIN_CHUNK ? need : MIN_CHUNK;
        c = malloc(sizeof(*c) + size);
        if (!c)
            return NULL;
        c->next = a->head;
        c->size = size;
        c->off = 0;
        a->head = c;
    }
    void *p = c->data + c->off;
    c->off += need;
    a->used += need;
    memset(p, 0, n);
    return p;
}

void *qr_arena_array(struct qr_arena *a, size_t n, size_t sz)
{
    if (sz && n > SIZE_MAX / sz)
        return NULL;
    return qr_arena_alloc(a, n * sz);
}

struct qr_slice qr_arena_dup(struct qr_arena *a, const char *s, size_t n)
{
    char *p = n < SIZE_MAX ? qr_arena_alloc(a, n + 1) : NULL;
    if (!p)
        return (struct qr_slice){NULL, 0};
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return (struct qr_slice){p, n};
}
