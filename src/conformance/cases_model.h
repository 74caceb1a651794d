/* The model metadata cases of the conformance suite (docs/CONFORMANCE.md): what the daemon says
 * about a model's identity and shape, checked through its own native API only (GET /v1/models/{M},
 * POST /api/show, POST /v1/route, POST /v1/placement, GET /v1/loaded, GET /v1/backends): both
 * metadata views agree, dense vs MoE metadata matches the file the placement plan sizes, expert
 * routing requirements are negotiated by the model's own class, the artifact's format is one the
 * backend lists, and speculation is either served as set up or refused clearly. Rows in the case
 * table (cases.c); run by qr_conf_run. Every function follows qr_conf_case_fn. */
#ifndef QR_CONFORMANCE_CASES_MODEL_H
#define QR_CONFORMANCE_CASES_MODEL_H

#include <stddef.h>

#include "conformance/suite.h"

enum qr_conf_status qr_conf_case_metadata(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_moe_metadata(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_experts_config(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_quantization(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_speculative(struct qr_conf_ctx *c, char *reason, size_t cap);

/* The verifies lists of the rows above (static, NULL-terminated). */
extern const char *const qr_conf_verifies_quantization[];
extern const char *const qr_conf_verifies_speculative[];

#endif
