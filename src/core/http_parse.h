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
    QR_HTTP_PERR_STATUS_LINE,      /* response status line not "HTTP/1.x DDD[ reason]" (or < 100) */
    QR_HTTP_PERR_HEAD_TOO_LARGE,   /* response head longer than INT_MAX bytes */
    QR_HTTP_PERR__COUNT
};

/* Lowercase detail text for an error ("invalid method token"), static, never NULL. */
const char *qr_http_perr_str(enum qr_http_perr e);

/* HTTP status to answer an error with: 400, 431 or 501 (502 for the response-only errors). */
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

/* --- upstream responses ------------------------------------------------------------------------
 *
 * The response side is deliberately lenient where the request side is strict: it reads what the
 * engines we proxy actually send, with the tolerance the native client has always had (and curl
 * has). A line ends at LF, with or without a CR before it; the head ends at the first empty line
 * ("\n\n" or "\n\r\n"). The status line must be exactly "HTTP/1.0 DDD" or "HTTP/1.1 DDD", then
 * the end of the line or a space and any reason, with DDD >= 100 (only one trailing CR is
 * dropped, so "200\r\r" is malformed). Header names and values are trimmed of SP/HTAB (and CRs at
 * their ends) and may hold any other byte; a line without a colon, or with an empty name, is
 * ignored. A line starting with SP/HTAB (obs-fold) continues the last named field: the parser
 * extends that field's value slice over the continuation (so the raw slice holds the line breaks)
 * and sets `folded`; qr_http_response_head_unfold rewrites such values in place, joining the
 * non-empty continuations with one space as curl does. Continuations before the first named
 * field, and empty ones, are dropped. */

/* A parsed response head. Every slice points into the buffer given to the parser (borrowed). */
struct qr_http_response_head {
    int status;                     /* 100..999 */
    int minor_version;              /* 0 or 1 */
    struct qr_slice reason;         /* after "DDD ", possibly empty; not trimmed */
    struct qr_http_header *headers; /* in: the caller's array of max_headers (borrowed) */
    size_t num_headers;             /* named fields filled, in order */
    bool folded;                    /* some value spans obs-fold lines: unfold before use */
};

/* Length of the response head at buf[0..len) through its empty line, or 0 when the empty line is
 * not in buf yet. *scan (caller's, 0 for a new head) remembers how far the search got, so calling
 * again with the same bytes plus more does not rescan them; it is reset to 0 when the end is found.
 * This is the cheap completeness check to run on every read before parsing once. */
size_t qr_http_response_head_end(const char *buf, size_t len, size_t *scan);

/* Parse the response head at buf[0..len). Set out->headers to an array of max_headers fields first
 * (NULL when max_headers is 0); everything else in *out is overwritten. Returns the bytes consumed
 * (> 0, through the empty line) when the head is complete, 0 when more bytes are needed, or -1
 * with *err set: QR_HTTP_PERR_STATUS_LINE (reported as soon as the first line is complete),
 * QR_HTTP_PERR_TOO_MANY_HEADERS (more named fields than max_headers; the caller may grow the array
 * and parse again) or QR_HTTP_PERR_HEAD_TOO_LARGE. Any split of the input gives 0 or the answer
 * the whole input gives. */
int qr_http_parse_response_head(const char *buf, size_t len, struct qr_http_response_head *out,
                                size_t max_headers, enum qr_http_perr *err);

/* Join obs-fold continuations in place when h->folded: buf is the (writable) buffer the head was
 * parsed from; every folded value becomes "first line" + (" " + continuation)... and shrinks.
 * Bytes of buf between the values are overwritten. Clears h->folded. */
void qr_http_response_head_unfold(char *buf, struct qr_http_response_head *h);

/* How a response body is delimited. (Not "qr_http_framing": that tag is the request struct's.) */
enum qr_http_body_framing {
    QR_HTTP_FRAMING_ERROR = -1, /* *err says why */
    QR_HTTP_FRAMING_NONE = 0,   /* no body: HEAD, 1xx, 204, 304 */
    QR_HTTP_FRAMING_LENGTH,     /* *content_length bytes (possibly 0) */
    QR_HTTP_FRAMING_CHUNKED,    /* chunked transfer coding */
    QR_HTTP_FRAMING_CLOSE       /* until the connection closes */
};

/* Decide the body framing of a final response to a request (HEAD when head_request), with the
 * native client's rules: every Content-Length must be valid and all equal (QR_HTTP_PERR_CONTENT_
 * LENGTH), even where no body follows; Transfer-Encoding wins over Content-Length; its last
 * coding (of the last Transfer-Encoding field) decides CHUNKED, any other coding reads until
 * close (no error); no framing header means CLOSE. h must be unfolded. *content_length is set
 * for LENGTH and 0 otherwise; *err is QR_HTTP_PERR_NONE unless ERROR is returned. */
enum qr_http_body_framing qr_http_response_framing(int status, bool head_request, int minor,
                                                   const struct qr_http_response_head *h,
                                                   uint64_t *content_length,
                                                   enum qr_http_perr *err);

/* May the connection carry another request after this response? Not when the body reads until
 * close, nor with "Connection: close"; HTTP/1.0 only with "Connection: keep-alive". */
bool qr_http_response_keep_alive(int minor, const struct qr_http_response_head *h,
                                 enum qr_http_body_framing framing);

#endif
