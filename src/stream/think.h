/* Streaming-safe splitter for reasoning written inline as tags (e.g. "<think>...</think>") by
 * backends that do not separate it themselves. Tag pairs come from model profiles. Correct when a
 * tag is split across chunks at any byte; never emits part of a tag as content or reasoning. The
 * only state is a fixed buffer for a possible partial tag (tags are at most QR_THINK_TAG_MAX). */
#ifndef QR_STREAM_THINK_H
#define QR_STREAM_THINK_H

#include <stdbool.h>
#include <stddef.h>

#include "contract/event.h"

#define QR_THINK_TAG_MAX 32

struct qr_think_split {
    char open[QR_THINK_TAG_MAX + 1];
    char close[QR_THINK_TAG_MAX + 1];
    size_t open_len, close_len;
    bool inside;                 /* currently in reasoning */
    bool seen_open;              /* an opening tag (or start_inside) happened */
    char held[QR_THINK_TAG_MAX]; /* bytes that may begin a tag */
    size_t n_held;
    bool strip_leading_ws; /* drop whitespace right after a closing tag (as peers do) */
    bool eating_ws;        /* after a closing tag, no content byte yet: dropping ws */
};

/* open/close: the tag pair, e.g. "<think>", "</think>" (1..QR_THINK_TAG_MAX bytes each).
 * start_inside: the prompt already opened the tag (the model starts in reasoning). */
enum qr_err qr_think_init(struct qr_think_split *s, const char *open, const char *close,
                          bool start_inside);

/* Split n content bytes into QR_EV_CONTENT / QR_EV_REASONING events passed to fn (slices are
 * borrowed for the call). Returns the first non-OK result of fn. */
enum qr_err qr_think_feed(struct qr_think_split *s, const char *p, size_t n, qr_event_fn fn,
                          void *arg);

/* End of stream: bytes held as a possible partial tag are emitted as what they are. */
enum qr_err qr_think_flush(struct qr_think_split *s, qr_event_fn fn, void *arg);

#endif
