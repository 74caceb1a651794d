/* Error names, their HTTP mapping and the diagnostic helper. One table keeps the three in step:
 * adding an error means adding one row, and the static assert below refuses a missing row. */
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>

static const struct {
    const char *name;
    int status;
} err_table[] = {
    [QR_OK] = {"ok", 200},
    [QR_ERR_NOMEM] = {"out_of_memory", 500},
    [QR_ERR_INVALID] = {"invalid_request", 400},
    [QR_ERR_CONFIG] = {"invalid_configuration", 500},
    [QR_ERR_IO] = {"io_error", 500},
    [QR_ERR_NOT_FOUND] = {"not_found", 404},
    [QR_ERR_TOO_LARGE] = {"request_too_large", 413},
    [QR_ERR_UNAUTHORIZED] = {"unauthorized", 401},
    [QR_ERR_FORBIDDEN] = {"forbidden", 403},
    [QR_ERR_METHOD] = {"method_not_allowed", 405},
    [QR_ERR_UPSTREAM] = {"upstream_error", 502},
    [QR_ERR_UPSTREAM_TIMEOUT] = {"upstream_timeout", 504},
    [QR_ERR_UNAVAILABLE] = {"upstream_unavailable", 503},
    [QR_ERR_BUSY] = {"server_busy", 503},
    [QR_ERR_CANCELLED] = {"cancelled", 499},
    [QR_ERR_TIMEOUT] = {"request_timeout", 408},
    [QR_ERR_INTERNAL] = {"internal_error", 500},
    [QR_ERR_PARSE] = {"bad_request", 400},
    [QR_ERR_UPSTREAM_CONNECT_TIMEOUT] = {"upstream_connect_timeout", 504},
    [QR_ERR_UPSTREAM_FIRST_BYTE_TIMEOUT] = {"upstream_first_token_timeout", 504},
    [QR_ERR_UPSTREAM_IDLE_TIMEOUT] = {"upstream_idle_timeout", 504},
};

_Static_assert(QR_ARRAY_LEN(err_table) == QR_ERR__COUNT, "every qr_err needs a table row");

const char *qr_err_str(enum qr_err err)
{
    if ((unsigned) err >= QR_ERR__COUNT || !err_table[err].name)
        return "unknown_error";
    return err_table[err].name;
}

int qr_err_http_status(enum qr_err err)
{
    if ((unsigned) err >= QR_ERR__COUNT)
        return 500;
    return err_table[err].status;
}

enum qr_err qr_diag_set(struct qr_diag *diag, enum qr_err err, const char *fmt, ...)
{
    if (diag) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(diag->msg, sizeof(diag->msg), fmt, ap);
        va_end(ap);
    }
    return err;
}

#ifndef NDEBUG
void qr_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "quantum-runtime: invariant '%s' failed at %s:%d\n", expr, file, line);
    abort();
}
#endif
