/* Incremental HTTP/1.x request-head parser and chunked body decoder (picohttpparser style).
 *
 * Nothing here allocates or owns memory: the parsers read a caller's buffer and answer "complete,
 * consumed N" / "need more" / "error (which)", handing back slices that point into that buffer.
 * They are strict on purpose, since a lenient parser in front of a proxy is how requests get
 * smuggled: lines end in CRLF only (a bare CR or a bare LF is an error), no obs-fold, no space
 * before a header colon, token-only methods and header names, origin-form targets (or `*` for
 * OPTIONS), HTTP/1.0 and HTTP/1.1 only. The framing helper applies RFC 9112's rules for
 * Content-Length and Transfer-Encoding and refuses every ambiguous combination. */
#ifndef QR_CORE_HTTP_PARSE_H
#define QR_CORE_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/http_server.h"

/* Why a head (or its framing) was refused. Append-only. */
enum qr_http_perr {
    QR_HTTP_PERR_NONE = 0,
    QR_HTTP_PERR_LINE_END,         /* CR not followed by LF, or a bare LF */
    QR_HTTP_PERR_METHOD,           /* method is not a token */
    QR_HTTP_PERR_TARGET,           /* request-target not origin-form (or '*' with OPTIONS) */
    QR_HTTP_PERR_VERSION,          /* not HTTP/1.0 or HTTP/1.1 */
    QR_HTTP_PERR_REQUEST_LINE,     /* wrong separators or stray bytes in the request line */
    QR_HTTP_PERR_HEADER_NAME,      /* empty name, non-token byte, or space before the colon */
    QR_HTTP_PERR_HEADER_VALUE,     /* control byte in a header value */
    QR_HTTP_PERR_OBS_FOLD,         /* header line folding */
    QR_HTTP_PERR_TOO_MANY_HEADERS, /* more headers than the caller's array holds (431) */
    QR_HTTP_PERR_CONTENT_LENGTH,   /* malformed, overflowing or conflicting Content-Length */
    QR_HTTP_PERR_CL_AND_TE,        /* both Content-Length and Transfer-Encoding */
    QR_HTTP_PERR_TE_UNSUPPORTED,   /* Transfer-Encoding other than exactly "chunked" (501) */
    QR_HTTP_PERR_TE_HTTP10,        /* Transfer-Encoding in an HTTP/1.0 request */
    QR_HTTP_PERR__COUNT
};

/* Lowercase detail text for an error ("invalid method token"), static, never NULL. */
const char *qr_http_perr_str(enum qr_http_perr e);

/* HTTP status to answer an error with: 400, 431 or 501. */
int qr_http_perr_status(enum qr_http_perr e);

/* The parsed request head. Every slice points into the buffer given to the parser (borrowed). */
struct qr_http_head {
    struct qr_slice method;
    struct qr_slice target;
    int minor_version;              /* 0 or 1 */
    struct qr_http_header *headers; /* caller's array, filled in order */
    size_t num_headers;             /* headers filled */
};

#define QR_HTTP_PARSE_ERROR     (-1L)
#define QR_HTTP_PARSE_NEED_MORE (-2L)

/* Parse the request head at buf[0..len). headers/max_headers is the caller's array (borrowed).
 * Returns the bytes consumed (> 0, through the empty line) when the head is complete,
 * QR_HTTP_PARSE_NEED_MORE when buf is a valid prefix, or QR_HTTP_PARSE_ERROR with *out_err set
 * as soon as a byte proves the head invalid, complete or not. Empty lines (CRLF) before the
 * request line are skipped and counted in the bytes consumed. */
long qr_http_parse_request(const char *buf, size_t len, struct qr_http_header *headers,
                           size_t max_headers, struct qr_http_head *out,
                           enum qr_http_perr *out_err);

/* Strict Content-Length value: 1*DIGIT, no sign, no spaces, at most INT64_MAX. */
bool qr_http_parse_content_length(struct qr_slice v, uint64_t *out);

/* How the body of a request is delimited, and the connection options its head asked for. */
struct qr_http_framing {
    bool chunked;
    uint64_t content_length; /* 0 when chunked or no body */
    bool keep_alive;         /* 1.1 unless "Connection: close"; 1.0 only with keep-alive */
    bool expect_continue;    /* "Expect: 100-continue" */
};

/* Apply the body-framing rules to a parsed head: Content-Length strict and every copy equal,
 * Transfer-Encoding only "chunked" and never with Content-Length or in HTTP/1.0. Returns
 * QR_HTTP_PERR_NONE and fills *out, or the reason to refuse the request. */
enum qr_http_perr qr_http_head_framing(const struct qr_http_head *head,
                                       struct qr_http_framing *out);

/* Incremental chunked transfer-coding decoder. Caller storage, no memory of its own. */
struct qr_http_chunked {
    int state;
    uint64_t remaining; /* data bytes left in the current chunk */
    size_t line_bytes;  /* bytes in the current size or trailer line (capped) */
    size_t trailer_bytes;
    bool digits;
};

enum qr_http_chunked_rc {
    QR_HTTP_CHUNKED_MORE = 0,  /* call again with the rest of buf, or with more bytes */
    QR_HTTP_CHUNKED_DONE = 1,  /* last chunk and trailers ended; *out_consumed stops there */
    QR_HTTP_CHUNKED_ERROR = -1 /* malformed size, size overflow, missing CRLF, huge trailers */
};

void qr_http_chunked_init(struct qr_http_chunked *c);

/* Decode from buf[0..len): consumes framing and at most one run of data, which comes back as
 * *out_data (a slice into buf, possibly empty). *out_consumed says how much of buf was used;
 * with MORE and *out_consumed < len, call again with the rest. Trailers are checked for CRLF
 * and size, then discarded. */
enum qr_http_chunked_rc qr_http_chunked_step(struct qr_http_chunked *c, const char *buf, size_t len,
                                             size_t *out_consumed, struct qr_slice *out_data);

#endif
