/* Explanations as JSON: one evaluation with its rule and reasons, a result filtered to the
 * required keys in name order, the sorted required-capability list; detail strings are copied,
 * so the evidence may die before the document is written. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "capability/capability.h"

static char *write_val(yyjson_mut_doc *doc, yyjson_mut_val *v)
{
    assert_non_null(v);
    yyjson_mut_doc_set_root(doc, v);
    char *s = yyjson_mut_write(doc, 0, NULL);
    assert_non_null(s);
    return s;
}

static void test_eval_json(void **state)
{
    (void) state;
    char ledger_reason[64];
    strcpy(ledger_reason, "tool streaming loses ids on 0.9.1");
    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_TOOLS_STREAMING, QR_CAP_SUPPORTED,
                        "manifest \"tools\"");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, QR_CAP_TOOLS_STREAMING, QR_CAP_CONDITIONAL, NULL);
    qr_cap_evidence_block(&ev, QR_CAP_SRC_LEDGER, QR_CAP_TOOLS_STREAMING, ledger_reason);
    struct qr_cap_eval e;
    qr_cap_evaluate_key(&ev, QR_CAP_TOOLS_STREAMING, &e);

    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *v = qr_cap_eval_to_json(&e, doc);
    memset(ledger_reason, 'Z', sizeof(ledger_reason) - 1); /* copied, not borrowed */
    char *s = write_val(doc, v);
    assert_string_equal(
        s, "{\"key\":\"tools.streaming\",\"state\":\"unsupported\",\"verified\":false,"
           "\"rule\":\"blocked by the ledger\",\"reasons\":["
           "{\"source\":\"model\",\"state\":\"supported\",\"detail\":\"manifest \\\"tools\\\"\"},"
           "{\"source\":\"backend\",\"state\":\"conditional\",\"detail\":\"\"},"
           "{\"source\":\"ledger\",\"state\":\"unsupported\","
           "\"detail\":\"tool streaming loses ids on 0.9.1\"}]}");
    free(s);
    yyjson_mut_doc_free(doc);
}

static void test_result_and_set_json(void **state)
{
    (void) state;
    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, QR_CAP_STREAM_CONTENT, QR_CAP_SUPPORTED, "d");
    qr_cap_evidence_verify(&ev, QR_CAP_STREAM_CONTENT, "run 7");
    struct qr_cap_result r;
    qr_cap_evaluate(&ev, &r);

    struct qr_cap_set only = QR_CAP_SET_EMPTY;
    qr_cap_set_add(&only, QR_CAP_STREAM_CONTENT);
    qr_cap_set_add(&only, QR_CAP_INFERENCE_TEXT);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    char *s = write_val(doc, qr_cap_result_to_json(&r, &only, doc));
    assert_string_equal(
        s, "[{\"key\":\"inference.text\",\"state\":\"unknown\",\"verified\":false,"
           "\"rule\":\"the backend does not declare it\",\"reasons\":[]},"
           "{\"key\":\"streaming.content\",\"state\":\"supported\",\"verified\":true,"
           "\"rule\":\"the backend supports it for any model\",\"reasons\":["
           "{\"source\":\"backend\",\"state\":\"supported\",\"detail\":\"d\"},"
           "{\"source\":\"conformance\",\"state\":\"supported\",\"detail\":\"run 7\"}]}]");
    free(s);
    yyjson_mut_doc_free(doc);

    /* all keys, in name order */
    doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *all = qr_cap_result_to_json(&r, NULL, doc);
    assert_int_equal(yyjson_mut_arr_size(all), QR_CAP__COUNT);
    assert_string_equal(
        yyjson_mut_get_str(yyjson_mut_obj_get(yyjson_mut_arr_get_first(all), "key")),
        "architecture.dense");
    assert_string_equal(yyjson_mut_get_str(yyjson_mut_obj_get(yyjson_mut_arr_get_last(all), "key")),
                        "tools.streaming");
    yyjson_mut_doc_free(doc);

    doc = yyjson_mut_doc_new(NULL);
    s = write_val(doc, qr_cap_set_to_json(only, doc));
    assert_string_equal(s, "[\"inference.text\",\"streaming.content\"]");
    free(s);
    yyjson_mut_doc_free(doc);

    doc = yyjson_mut_doc_new(NULL);
    s = write_val(doc, qr_cap_set_to_json(QR_CAP_SET_EMPTY, doc));
    assert_string_equal(s, "[]");
    free(s);
    yyjson_mut_doc_free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_json),
        cmocka_unit_test(test_result_and_set_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
