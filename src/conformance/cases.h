/* The conformance cases: one static table, run in order by qr_conf_run (suite.h). Each case names
 * the capability keys it needs (canonical names, capability.h); the runner skips it when one is
 * not claimed, or when the model claims the key in `unless` (a case about refusing what is not
 * supported). docs/CONFORMANCE.md describes every case. */
#ifndef QR_CONFORMANCE_CASES_H
#define QR_CONFORMANCE_CASES_H

#include <stddef.h>

#include "conformance/suite.h"

/* Run one case: fill reason (one line, lowercase; may stay empty on pass) and return the status.
 * A case may return QR_CONF_SKIP itself when the daemon lacks what it measures against. */
typedef enum qr_conf_status (*qr_conf_case_fn)(struct qr_conf_ctx *c, char *reason, size_t cap);

struct qr_conf_case {
    const char *id;
    const char *const *needs; /* NULL-terminated, static */
    const char *unless;       /* NULL, or a key whose claim makes the case not applicable */
    qr_conf_case_fn run;
    /* NULL-terminated, static: the capability keys a pass verifies and a fail refutes for the
     * exact backend x engine version x model x host class of the run (docs/CONFORMANCE.md);
     * only keys the model claims count. NULL: the case is evidence of nothing by itself. */
    const char *const *verifies;
};

size_t qr_conf_n_cases(void);
/* The i-th case (static), i < qr_conf_n_cases(). */
const struct qr_conf_case *qr_conf_case_get(size_t i);

#endif
