/* libFuzzer target for what the OpenAI-compatible adapter reads from an upstream it probes
 * (backend/openai/profile.h): the /version and /health bodies through qr_openai_detect,
 * qr_openai_version_of and the health rule of every builtin profile; and the same bytes as a
 * dialect profile file (strict parser). Never a crash; the detection always names one of the four
 * dialects, with NUL-terminated fields; the version read, if any, compares with itself as equal.
 *
 * Seeds in corpus/fuzz_openai_probe: vLLM /version answers of several eras, mlx_lm.server's
 * /health, a builtin profile, and hostile variants. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/openai/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct qr_slice body = {(const char *) data, size};
    static const char *const dialects[] = {"vllm", "mlx-lm", "llama-server", "generic"};
    for (int v = 0; v < 3; v++) {
        struct qr_oa_probe_answers a = {
            .version_status = v == 0 ? 200 : 404,
            .version_body = body,
            .props_status = 404,
            .health_status = v == 2 ? 200 : 503,
            .health_body = body,
        };
        struct qr_oa_detection det;
        qr_openai_detect(&a, &det);
        bool known = false;
        for (size_t i = 0; i < sizeof dialects / sizeof dialects[0]; i++)
            known = known || !strcmp(det.dialect, dialects[i]);
        if (!known || strnlen(det.version, sizeof det.version) == sizeof det.version ||
            strnlen(det.why, sizeof det.why) == sizeof det.why)
            abort();
    }
    char version[QR_OA_MAX_VERSION];
    if (qr_openai_version_of(body, version, sizeof version)) {
        if (strnlen(version, sizeof version) == sizeof version ||
            qr_openai_version_cmp(version, version) != 0)
            abort();
    }
    for (size_t i = 0; i < sizeof dialects / sizeof dialects[0]; i++) {
        static struct qr_oa_profile p;
        struct qr_diag d = {{0}};
        if (qr_openai_profile_load(dialects[i], &p, &d) != QR_OK)
            abort(); /* the builtin profiles always load */
        (void) qr_openai_profile_healthy(&p, 200, body);
        (void) qr_openai_profile_reasoning_field(&p, version);
    }
    static struct qr_oa_profile q;
    struct qr_diag d = {{0}};
    enum qr_err e = qr_openai_profile_parse("fuzz.json", (const char *) data, size, NULL, &q, &d);
    if (e != QR_OK && !d.msg[0])
        abort();
    return 0;
}
