/* libFuzzer target for the HTTP request-head parser, the framing rules and the chunked decoder.
 * The input is split at a position taken from its first byte, the way a socket would deliver it;
 * the parser must give the same answer for the split prefix and the whole (or say "need more"),
 * and the chunked decoder must never hand back bytes outside its input or more than it was
 * given. Whatever follows a complete head is fed to the chunked decoder. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXH 32

static void check_slice(struct qr_slice s, const char *buf, size_t len)
{
    if (s.len && (s.ptr < buf || s.ptr + s.len > buf + len))
        abort();
}

static void fuzz_chunked(const char *buf, size_t len, size_t piece)
{
    struct qr_http_chunked c;
    qr_http_chunked_init(&c);
    size_t pos = 0, total = 0;
    enum qr_http_chunked_rc rc = QR_HTTP_CHUNKED_MORE;
    while (pos < len && rc == QR_HTTP_CHUNKED_MORE) {
        size_t avail = len - pos < piece ? len - pos : piece;
        size_t used;
        struct qr_slice d;
        rc = qr_http_chunked_step(&c, buf + pos, avail, &used, &d);
        if (used > avail)
            abort();
        check_slice(d, buf + pos, used);
        total += d.len;
        if (rc == QR_HTTP_CHUNKED_MORE && used == 0)
            break;
        pos += used;
    }
    if (total > len)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t split = data[0] % (size);
    const char *buf = (const char *) data + 1;
    size_t len = size - 1;
    if (split > len)
        split = len;

    struct qr_http_header hdrs[MAXH];
    struct qr_http_head head;
    enum qr_http_perr err = QR_HTTP_PERR_NONE, err2 = QR_HTTP_PERR_NONE;
    long rc = qr_http_parse_request(buf, len, hdrs, MAXH, &head, &err);
    if (rc > 0) {
        if ((size_t) rc > len)
            abort();
        check_slice(head.method, buf, (size_t) rc);
        check_slice(head.target, buf, (size_t) rc);
        if (head.minor_version != 0 && head.minor_version != 1)
            abort();
        if (head.num_headers > MAXH)
            abort();
        for (size_t i = 0; i < head.num_headers; i++) {
            check_slice(hdrs[i].name, buf, (size_t) rc);
            check_slice(hdrs[i].value, buf, (size_t) rc);
            if (hdrs[i].name.len == 0)
                abort();
        }
        struct qr_http_framing fr;
        enum qr_http_perr ferr = qr_http_head_framing(&head, &fr);
        if (ferr == QR_HTTP_PERR_NONE && fr.chunked && fr.content_length)
            abort();
        (void) qr_http_perr_str(ferr);
        fuzz_chunked(buf + rc, len - (size_t) rc, split ? split : 1);
    } else if (rc == QR_HTTP_PARSE_ERROR) {
        if (err == QR_HTTP_PERR_NONE || err >= QR_HTTP_PERR__COUNT)
            abort();
    } else if (rc != QR_HTTP_PARSE_NEED_MORE) {
        abort();
    }

    /* A prefix must agree with the whole: need more, or the same error. */
    struct qr_http_head head2;
    struct qr_http_header hdrs2[MAXH];
    long rc2 = qr_http_parse_request(buf, split, hdrs2, MAXH, &head2, &err2);
    if (rc2 == QR_HTTP_PARSE_ERROR && (rc != QR_HTTP_PARSE_ERROR || err2 != err))
        abort();
    if (rc2 > 0 && rc2 != rc)
        abort();

    /* The whole input as a chunked body, delivered in pieces. */
    fuzz_chunked(buf, len, split ? split : len);
    return 0;
}
