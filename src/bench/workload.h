/* A benchmark workload, schema quantum.runtime/bench-workload/v1alpha1: the shape of a downstream
 * request to replay in `quantum-runtime bench --workload FILE` (docs/BENCHMARK-AB.md), e.g. the
 * Game Ember shape: a ~2,150-token persona system prompt, thinking on, a ~3,100-token answer.
 *
 *   {"schema_version": "quantum.runtime/bench-workload/v1alpha1",
 *    "name": "game-ember",                 1-63 of [A-Za-z0-9._-]
 *    "system_prompt": "...",               the persona text, or
 *    "system_prompt_tokens": 2150,         a generated persona of this many tokens (one of both)
 *    "user_prompt": "...",                 optional, default "Continue the scene."
 *    "think": true,                        optional, default false
 *    "answer_tokens": 3100,                the answer length (ignore_eos: exactly this many)
 *    "notes": "..."}                       optional, free text
 *
 * Read as hostile input: unknown and duplicate fields, wrong types, trailing JSON and counts
 * outside 1..QR_BENCH_MAX_TOKENS are errors naming the field. */
#ifndef QR_BENCH_WORKLOAD_H
#define QR_BENCH_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define QR_BENCH_WORKLOAD_SCHEMA "quantum.runtime/bench-workload/v1alpha1"
#define QR_BENCH_WORKLOAD_MAX    (1u << 20) /* bytes of one workload file */

struct qr_bench_workload {
    char name[64];
    char *system_prompt;           /* owned; NULL when system_prompt_tokens is used */
    uint32_t system_prompt_tokens; /* 0 when system_prompt is given */
    char *user_prompt;             /* owned; never NULL after a successful parse */
    bool think;
    uint32_t answer_tokens;
};

/* Parse text[0..len) into *out (caller storage; release with qr_bench_workload_cleanup, also
 * after a failure). what names the source in diag ("'x.json'"). */
enum qr_err qr_bench_workload_parse(const char *text, size_t len, const char *what,
                                    struct qr_bench_workload *out, struct qr_diag *diag);

/* Read and parse the file at path (at most QR_BENCH_WORKLOAD_MAX bytes). */
enum qr_err qr_bench_workload_load(const char *path, struct qr_bench_workload *out,
                                   struct qr_diag *diag);

void qr_bench_workload_cleanup(struct qr_bench_workload *w);

#endif
