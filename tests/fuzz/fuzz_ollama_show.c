/* libFuzzer target for the Ollama /api/show parser (backend/ollama/show.h): any body must parse
 * or fail with QR_ERR_PARSE / QR_ERR_TOO_LARGE and a message, never crash; the result is always
 * fully written: only known capability bits, only known thinking-level bits, a NUL-terminated
 * printable architecture label, and counts that are zero when nothing usable was sent.
 *
 * Seeds in corpus/fuzz_ollama_show: answers of a thinking model with tools, of one with levels,
 * of a plain one, of an MoE model with expert counts, and hostile variants. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codec.h"
#include "backend/ollama/show.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct qr_ollama_show s;
    memset(&s, 0xa5, sizeof s); /* the parser must write every member */
    struct qr_diag d = {{0}};
    enum qr_err e = qr_ollama_show_parse((const char *) data, size, &s, &d);
    if (e != QR_OK && e != QR_ERR_PARSE && e != QR_ERR_TOO_LARGE)
        abort();
    if (e != QR_OK && !d.msg[0])
        abort();
    const uint32_t caps = QR_OLLAMA_CAP_COMPLETION | QR_OLLAMA_CAP_TOOLS | QR_OLLAMA_CAP_INSERT |
                          QR_OLLAMA_CAP_VISION | QR_OLLAMA_CAP_EMBEDDING | QR_OLLAMA_CAP_THINKING;
    if (s.caps & ~caps)
        abort();
    if (!s.has_caps && s.caps)
        abort();
    if (s.think_levels & ~(QR_THINK_LEVEL_LOW | QR_THINK_LEVEL_MEDIUM | QR_THINK_LEVEL_HIGH))
        abort();
    size_t n = strnlen(s.arch, sizeof s.arch);
    if (n == sizeof s.arch)
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char) s.arch[i] < 0x20 || s.arch[i] == 0x7f)
            abort();
    if (s.expert_used_count > s.expert_count && s.expert_count)
        abort();
    return 0;
}
