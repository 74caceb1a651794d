/* libFuzzer target for the think-tag splitter. The body is fed in chunks of pseudo-random sizes
 * (zero included) and the reasoning and content that come out must equal what a plain
 * whole-input reference gives: scan left to right, at each byte either the current mode's tag
 * starts here (switch mode, drop it) or the byte is text of the current mode, with whitespace
 * after a close dropped until the first other content byte. So reasoning + content + the removed
 * tags rebuild the input whenever nothing was stripped. Also: no empty event, no other event
 * type, never more bytes out than in, and one feed call gives a bounded number of events (runs
 * are coalesced, not emitted per byte).
 *
 * Layout: [flags][seed][limit] ([open_len][close_len] open close when flags & 0x1c == 0x1c) body.
 * flags bit 0: start_inside; bit 1: keep whitespace; bits 2..4: tag pair from the table below. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream/think.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const TAGS[7][2] = {
    {"<think>", "</think>"},
    {"[THINK]", "[/THINK]"},
    {"aab", "c"},
    {"<|channel|>analysis<|message|>", "<|end|>"},
    {"<", ">"},
    {"ab", "ab"},
    {"<|0123456789abcdef0123456789ab|>", "</|0123456789abcdef0123456789a|>"},
};

struct out {
    char *content, *reasoning;
    size_t n_content, n_reasoning, cap;
    size_t events; /* in the current feed call */
};

static enum qr_err collect(void *arg, const struct qr_event *ev)
{
    struct out *o = arg;
    if (ev->text.len == 0 || !ev->text.ptr)
        abort();
    o->events++;
    if (ev->type == QR_EV_CONTENT) {
        if (ev->text.len > o->cap - o->n_content)
            abort();
        memcpy(o->content + o->n_content, ev->text.ptr, ev->text.len);
        o->n_content += ev->text.len;
    } else if (ev->type == QR_EV_REASONING) {
        if (ev->text.len > o->cap - o->n_reasoning)
            abort();
        memcpy(o->reasoning + o->n_reasoning, ev->text.ptr, ev->text.len);
        o->n_reasoning += ev->text.len;
    } else {
        abort();
    }
    return QR_OK;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The whole-input reference. ends[i] is 1 where a tag ends at byte i. Returns bytes of tags. */
static size_t reference(const char *open, const char *close, bool inside, bool strip,
                        const char *in, size_t len, struct out *o, uint8_t *ends)
{
    size_t ol = strlen(open), cl = strlen(close), i = 0, tags = 0;
    bool eating = false;
    while (i < len) {
        const char *t = inside ? close : open;
        size_t tl = inside ? cl : ol;
        if (len - i >= tl && memcmp(in + i, t, tl) == 0) {
            i += tl;
            ends[i - 1] = 1;
            tags += tl;
            eating = inside && strip;
            inside = !inside;
            continue;
        }
        char c = in[i++];
        if (inside) {
            o->reasoning[o->n_reasoning++] = c;
        } else if (!(eating && is_ws(c))) {
            eating = false;
            o->content[o->n_content++] = c;
        }
    }
    return tags;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    uint8_t flags = data[0];
    uint32_t rng = data[1] * 2654435761u + 7;
    size_t limit = (size_t) data[2] * 2 + 1;
    const uint8_t *p = data + 3;
    size_t left = size - 3;
    char open[QR_THINK_TAG_MAX + 1], close[QR_THINK_TAG_MAX + 1];
    size_t which = (flags >> 2) & 7;
    if (which < 7) {
        strcpy(open, TAGS[which][0]);
        strcpy(close, TAGS[which][1]);
    } else {
        if (left < 2)
            return 0;
        size_t ol = 1 + p[0] % QR_THINK_TAG_MAX, cl = 1 + p[1] % QR_THINK_TAG_MAX;
        p += 2;
        left -= 2;
        if (left < ol + cl)
            return 0;
        for (size_t i = 0; i < ol; i++)
            open[i] = p[i] ? (char) p[i] : '0';
        for (size_t i = 0; i < cl; i++)
            close[i] = p[ol + i] ? (char) p[ol + i] : '0';
        open[ol] = close[cl] = '\0';
        p += ol + cl;
        left -= ol + cl;
    }
    const char *in = (const char *) p;
    size_t len = left;
    bool start_inside = flags & 1, strip = !(flags & 2);

    struct out want = {0}, got = {0};
    want.cap = got.cap = len;
    want.content = malloc(len + 1);
    want.reasoning = malloc(len + 1);
    got.content = malloc(len + 1);
    got.reasoning = malloc(len + 1);
    uint8_t *ends = calloc(len + 1, 1);
    if (!want.content || !want.reasoning || !got.content || !got.reasoning || !ends)
        abort();
    size_t tag_bytes = reference(open, close, start_inside, strip, in, len, &want, ends);

    struct qr_think_split s;
    if (qr_think_init(&s, open, close, start_inside) != QR_OK)
        abort();
    s.strip_leading_ws = strip;
    size_t fed = 0;
    while (fed < len) {
        rng = rng * 1103515245u + 12345u;
        size_t chunk = (rng >> 16) % (limit + 1);
        if (chunk > len - fed)
            chunk = len - fed;
        size_t tags_here = 0;
        for (size_t i = fed; i < fed + chunk; i++)
            tags_here += ends[i];
        got.events = 0;
        if (qr_think_feed(&s, in + fed, chunk, collect, &got) != QR_OK)
            abort();
        /* Coalesced: a run per tag boundary, plus held bytes given back (at most a tag's worth). */
        if (got.events > 2 * tags_here + QR_THINK_TAG_MAX + 2)
            abort();
        if (s.n_held >= QR_THINK_TAG_MAX || s.n_held > fed + chunk)
            abort();
        fed += chunk;
    }
    if (qr_think_flush(&s, collect, &got) != QR_OK || s.n_held != 0)
        abort();

    if (got.n_content != want.n_content || got.n_reasoning != want.n_reasoning)
        abort();
    if (memcmp(got.content, want.content, got.n_content) != 0 ||
        memcmp(got.reasoning, want.reasoning, got.n_reasoning) != 0)
        abort();
    if (got.n_content + got.n_reasoning + tag_bytes > len)
        abort();
    if (!strip && got.n_content + got.n_reasoning + tag_bytes != len)
        abort();
    free(ends);
    free(want.content);
    free(want.reasoning);
    free(got.content);
    free(got.reasoning);
    return 0;
}
