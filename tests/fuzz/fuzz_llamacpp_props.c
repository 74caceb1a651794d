/* libFuzzer target for the llama.cpp /props parser (backend/llamacpp/evidence.h): any body must
 * parse or fail with QR_ERR_PARSE / QR_ERR_TOO_LARGE and a message, never crash; a parsed one
 * is valid with a slot context in range, and its strings are NUL-terminated, printable (control
 * bytes replaced) and within their buffers; the JSON rendering of it works.
 *
 * Seeds in corpus/fuzz_llamacpp_props: the packaged engine's answers for a model with tool
 * syntax and one without, and hostile variants (string booleans, huge n_ctx, no caps object). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "backend/llamacpp/evidence.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void printable(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == cap)
        abort(); /* not terminated */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct qr_llamacpp_props p;
    struct qr_diag d = {{0}};
    enum qr_err e = qr_llamacpp_props_parse((const char *) data, size, &p, &d);
    if (e != QR_OK) {
        if (e != QR_ERR_PARSE && e != QR_ERR_TOO_LARGE)
            abort();
        if (!d.msg[0])
            abort();
        return 0;
    }
    if (!p.valid || p.n_ctx_slot == 0)
        abort();
    printable(p.build_info, sizeof p.build_info);
    printable(p.model_path, sizeof p.model_path);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = doc ? yyjson_mut_obj(doc) : NULL;
    if (o && !qr_llamacpp_props_json(doc, o, &p))
        abort();
    yyjson_mut_doc_free(doc);
    return 0;
}
