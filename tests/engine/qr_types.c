/* qr-types: our ggml type table in ggml_peer's `types` format ("<id> <name> <block elements>
 * <block bytes>", "<id> removed"), for the engine_ggml_types test. */
#include <stdio.h>

#include "gguf/gguf.h"

int main(void)
{
    for (uint32_t id = 0; id < QR_GGML_TYPE_COUNT; id++) {
        const struct qr_ggml_type_info *t = qr_ggml_type_get(id);
        if (t)
            printf("%u %s %u %u\n", id, t->name, t->blck, t->bytes);
        else
            printf("%u removed\n", id);
    }
    return 0;
}
