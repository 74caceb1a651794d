/* libFuzzer target for the v1alpha1 backend descriptor codec. Any input must parse or fail with
 * a parse/invalid/size error whose message starts "invalid backend descriptor: " and holds no
 * control bytes, never crash. When it parses, the struct validates, formats, parses back to the
 * same bytes of struct, and formats again to identical text (format∘parse is a fixpoint); its
 * states then go through the evaluation and the explanation JSON. The input is also looked up as
 * a capability name: a hit must spell the key's canonical or field name exactly.
 *
 * Seeds in corpus/fuzz_capability_descriptor: the predecessor's Ollama and llama.cpp
 * descriptors, one with every extension member, and near-misses (override rule, duplicates,
 * unknown members, bad ids, wrong types). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "capability/capability.h"
#include "capability/descriptor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_failure(enum qr_err err, const struct qr_diag *d)
{
    if (err != QR_ERR_PARSE && err != QR_ERR_INVALID && err != QR_ERR_TOO_LARGE)
        abort();
    if (strncmp(d->msg, "invalid backend descriptor: ", 28) != 0)
        abort();
    for (const char *p = d->msg; *p; p++) {
        if ((unsigned char) *p < 0x20)
            abort();
    }
}

static void check_lookup(const uint8_t *data, size_t size)
{
    struct qr_slice s = {(const char *) data, size};
    enum qr_cap_key k = qr_cap_key_parse_any(s);
    if (k == QR_CAP_NOT_A_KEY)
        return;
    const struct qr_cap_info *info = qr_cap_info(k);
    if (!info || (!qr_slice_eq(s, info->name) && !qr_slice_eq(s, info->field)))
        abort();
}

static void evaluate(const struct qr_cap_descriptor *d)
{
    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_from_descriptor(&ev, d);
    struct qr_cap_result r;
    qr_cap_evaluate(&ev, &r);
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        /* a backend claim alone never yields more than the backend declared */
        if (r.keys[k].state == QR_CAP_SUPPORTED && d->caps[k] != QR_CAP_SUPPORTED)
            abort();
        if (r.keys[k].verified || r.keys[k].n_reasons != 1)
            abort();
    }
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *v = qr_cap_result_to_json(&r, NULL, doc);
    if (!v || yyjson_mut_arr_size(v) != QR_CAP__COUNT)
        abort();
    yyjson_mut_doc_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size <= 64)
        check_lookup(data, size);

    struct qr_cap_descriptor *d = malloc(sizeof(*d)), *d2 = malloc(sizeof(*d2));
    struct qr_diag diag = {{0}};
    if (!d || !d2)
        abort();
    enum qr_err err = qr_cap_descriptor_parse((const char *) data, size, &diag, d);
    if (err != QR_OK) {
        check_failure(err, &diag);
        goto done;
    }
    if (qr_cap_descriptor_validate(d, &diag) != QR_OK)
        abort();
    char *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    if (qr_cap_descriptor_format(d, &diag, &a, &alen) != QR_OK)
        abort();
    if (qr_cap_descriptor_parse(a, alen, &diag, d2) != QR_OK)
        abort();
    if (memcmp(d, d2, sizeof(*d)) != 0)
        abort();
    if (qr_cap_descriptor_format(d2, &diag, &b, &blen) != QR_OK || alen != blen ||
        memcmp(a, b, alen) != 0)
        abort();
    free(a);
    free(b);
    evaluate(d);
done:
    free(d);
    free(d2);
    return 0;
}
