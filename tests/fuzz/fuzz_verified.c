/* libFuzzer target for the conformance report as the daemon reads it back from the evidence store
 * (api/verified.c qr_verified_report_parse: cases[] {id, verifies[], status, reason}). Any input
 * must parse or fail with QR_ERR_INVALID and a message, never crash. A parsed report never
 * calls a key both verified and refuted; every refuted key names its first failing case (a
 * NUL-terminated id and reason within their fields) and no other key has one; a failure leaves the
 * report empty. Parsing the same bytes twice gives the same report.
 *
 * Seeds in corpus/fuzz_verified: a report with passing, failing and skipped cases, unknown keys
 * and long reasons, and one file per rejection class (not JSON, no cases array, a case without
 * id or status, too many cases). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/verified.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_field(const char *s, size_t cap)
{
    if (!memchr(s, '\0', cap))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct qr_verified_report r, again;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_verified_report_parse((const char *) data, size, &r, &d);
    if (err != QR_OK) {
        if (err != QR_ERR_INVALID || d.msg[0] == '\0' || !qr_cap_set_empty(r.verified) ||
            !qr_cap_set_empty(r.refuted))
            abort();
        return 0;
    }
    if (!qr_cap_set_empty((struct qr_cap_set){r.verified.bits & r.refuted.bits}))
        abort();
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        check_field(r.failed[k].id, sizeof r.failed[k].id);
        check_field(r.failed[k].reason, sizeof r.failed[k].reason);
        if (!qr_cap_set_has(r.refuted, (enum qr_cap_key) k) &&
            (r.failed[k].id[0] || r.failed[k].reason[0]))
            abort();
    }
    if (qr_verified_report_parse((const char *) data, size, &again, &d) != QR_OK ||
        memcmp(&r, &again, sizeof r) != 0)
        abort();
    return 0;
}
