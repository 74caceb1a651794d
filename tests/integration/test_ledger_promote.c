/* Test-gated upstream promotion (docs/CONFORMANCE.md "Ledger promotion"), through the real
 * binaries and the evidence store.
 *
 * A deliberately broken engine: a shell wrapper around the real llama-server that answers
 * --version with build 99999 instead of 11669 and otherwise runs the real server with
 * `--reasoning-format none` as its last arguments, so reasoning tags leak into content. On the
 * scripted model, `ledger evaluate --backend llamacpp --engine WRAPPER` exits 1; the stored
 * reports show reasoning.on passing on the pinned build and failing on the candidate; the local
 * ledger holds a candidate entry for b99999 and a known-bad block for reasoning.control on
 * b99999 citing the stored report; `ledger promote` refuses and changes nothing. A daemon that
 * runs the wrapper then refuses a reasoning request naming the block, while a daemon on the
 * pinned engine with the same state still serves it.
 *
 * The promotion decision itself (what the broken engine cannot show: a candidate that passes) is
 * tested on records written to a temporary evidence store: everything passed and decode within 5%
 * promotes; a case regression, a decode loss past the guard, too few samples or no evaluation at
 * all refuse. The local ledger writer: entries and blocks replaced by id, a document the ledger
 * parser refuses or whose id is also in the builtin ledger never replaces the file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "conformance/record.h"
#include "core/arena.h"
#include "harness.h"
#include "policy/ledger.h"
#include "policy/ledger_local.h"
#include "store/store.h"

static char dir[128], models[200], state[200], wrapper[200];

static int setup(void **st)
{
    (void) st;
    snprintf(dir, sizeof dir, "/tmp/qr-test-ledger-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(dir))
        return -1;
    snprintf(models, sizeof models, "%s/models", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(wrapper, sizeof wrapper, "%s/llama-server-b99999", dir);
    return mkdir(models, 0700) == 0 && mkdir(state, 0700) == 0 ? 0 : -1;
}

static int teardown(void **st)
{
    (void) st;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* ---- the decision on stored records ---- */

/* A report with the given case statuses ("pass"/"fail"/"skip"). */
static char *report(const char *model, const char *engine, const char *const *ids,
                    const char *const *status, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    unsigned cnt[3] = {0};
    for (size_t i = 0; i < n; i++)
        cnt[status[i][0] == 'p' ? 0 : status[i][0] == 'f' ? 1 : 2]++;
    fprintf(f,
            "{\"schema_version\":\"quantum.runtime/conformance-report/v1alpha1\",\"model\":\"%s\","
            "\"url\":\"http://127.0.0.1:1\",\"backend\":\"llama.cpp\",\"engine_version\":\"%s\","
            "\"host_class\":null,\"started_at\":\"2026-12-02T00:00:00Z\",\"duration_ms\":1,"
            "\"summary\":{\"passed\":%u,\"failed\":%u,\"skipped\":%u},\"cases\":[",
            model, engine, cnt[0], cnt[1], cnt[2]);
    for (size_t i = 0; i < n; i++)
        fprintf(f,
                "%s{\"id\":\"%s\",\"needs\":[\"inference.text\"],\"verifies\":[\"inference.text\"],"
                "\"status\":\"%s\",\"reason\":\"%s\",\"ms\":1.0}",
                i ? "," : "", ids[i], status[i], status[i][0] == 'f' ? "it broke" : "");
    fputs("]}", f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

/* Store one evaluation of model for candidate entry id: both reports and the decode samples. */
static void add_eval(struct qr_store *s, const char *entry, const char *run, const char *model,
                     const char *const *pin_status, const char *const *cand_status,
                     const double *ptps, size_t np, const double *ctps, size_t nc)
{
    static const char *const ids[] = {"identity", "reasoning.on", "tools"};
    char *p = report(model, "b11669", ids, pin_status, 3);
    char *c = report(model, "b99999", ids, cand_status, 3);
    struct qr_diag d = {{0}};
    int64_t pid = 0, cid = 0;
    assert_int_equal(qr_conf_record_add(s, QR_CONF_KIND_PINNED, p, &pid, &d), QR_OK);
    assert_int_equal(qr_conf_record_add(s, QR_CONF_KIND_CANDIDATE, c, &cid, &d), QR_OK);
    const char *pn[] = {"0.7.0", "b11669"}, *cn[] = {"0.7.0", "b99999"};
    struct qr_conf_eval ev = {
        .candidate_entry = entry,
        .run = run,
        .model = model,
        .backend = "llama.cpp",
        .hardware_class = "",
        .gen_tokens = 64,
        .pinned = {"/pinned", pn, 2, pid, ptps, np},
        .candidate = {"/cand", cn, 2, cid, ctps, nc},
    };
    assert_int_equal(qr_conf_eval_add(s, &ev, NULL, &d), QR_OK);
    free(p);
    free(c);
}

static void test_promote_decision(void **st)
{
    (void) st;
    char sd[260];
    snprintf(sd, sizeof sd, "%s/decision", dir);
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_conf_store_open(sd, &s, &d), QR_OK);
    static const char *const PPP[] = {"pass", "pass", "pass"};
    static const char *const PFP[] = {"pass", "fail", "pass"};
    static const char *const PPS[] = {"pass", "pass", "skip"};
    const double fast[] = {100, 101, 99, 100, 100}, same[] = {98, 99, 97, 98, 99};
    const double slow[] = {90, 91, 89, 90, 90}, one[] = {100};
    struct qr_conf_promote *p = calloc(1, sizeof *p);
    assert_non_null(p);

    /* no evaluation at all: fail closed */
    assert_int_equal(qr_conf_promote_check(s, "nothing", -1, p, &d), QR_OK);
    assert_false(p->ok);
    assert_int_equal(p->n_models, 0);
    assert_non_null(strstr(p->reason, "no stored evaluation"));

    /* everything passed, decode -2%: promotable (two models of one run) */
    add_eval(s, "good", "2026-12-02T10:00:00Z", "m1", PPP, PPP, fast, 5, same, 5);
    add_eval(s, "good", "2026-12-02T10:00:00Z", "m2", PPS, PPS, fast, 5, same, 5);
    assert_int_equal(qr_conf_promote_check(s, "good", -1, p, &d), QR_OK);
    assert_true(p->ok);
    assert_int_equal(p->n_models, 2);
    assert_string_equal(p->run, "2026-12-02T10:00:00Z");
    assert_true(p->models[0].cases_ok && p->models[1].cases_ok);
    assert_int_equal(p->models[0].guard.verdict, QR_GUARD_VERIFIED);

    /* a case the pinned build passed fails on the candidate */
    add_eval(s, "regressed", "2026-12-02T11:00:00Z", "m1", PPP, PFP, fast, 5, fast, 5);
    assert_int_equal(qr_conf_promote_check(s, "regressed", -1, p, &d), QR_OK);
    assert_false(p->ok);
    assert_false(p->models[0].cases_ok);
    assert_non_null(strstr(p->models[0].why,
                           "'reasoning.on' passed on the pinned build but is fail on "
                           "the candidate"));
    assert_non_null(strstr(p->models[0].why, "it broke"));

    /* a case the pinned build did not pass does not count against the candidate */
    add_eval(s, "skips", "2026-12-02T11:30:00Z", "m1", PPS, PPP, fast, 5, fast, 5);
    assert_int_equal(qr_conf_promote_check(s, "skips", -1, p, &d), QR_OK);
    assert_true(p->ok);

    /* decode 10% slower: refused by the guard; a 15% threshold lets it through */
    add_eval(s, "slow", "2026-12-02T12:00:00Z", "m1", PPP, PPP, fast, 5, slow, 5);
    assert_int_equal(qr_conf_promote_check(s, "slow", -1, p, &d), QR_OK);
    assert_false(p->ok);
    assert_true(p->models[0].cases_ok);
    assert_int_equal(p->models[0].guard.verdict, QR_GUARD_REFUSED);
    assert_int_equal(qr_conf_promote_check(s, "slow", 15.0, p, &d), QR_OK);
    assert_true(p->ok);

    /* one decode sample: too thin to decide, fail closed */
    add_eval(s, "thin", "2026-12-02T13:00:00Z", "m1", PPP, PPP, fast, 5, one, 1);
    assert_int_equal(qr_conf_promote_check(s, "thin", -1, p, &d), QR_OK);
    assert_false(p->ok);
    assert_int_equal(p->models[0].guard.verdict, QR_GUARD_INSUFFICIENT);

    /* only the newest run counts: a later failing run of "good" makes it unpromotable */
    add_eval(s, "good", "2026-12-02T14:00:00Z", "m1", PPP, PFP, fast, 5, same, 5);
    assert_int_equal(qr_conf_promote_check(s, "good", -1, p, &d), QR_OK);
    assert_false(p->ok);
    assert_int_equal(p->n_models, 1);
    assert_string_equal(p->run, "2026-12-02T14:00:00Z");

    /* the records' fields come from the report */
    struct qr_arena a;
    qr_arena_init(&a, 0);
    struct qr_store_filter f = {.kind = QR_CONF_KIND_CANDIDATE, .model = "m2"};
    struct qr_store_conformance *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_conformance_list(s, &f, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].backend_id, "llama.cpp");
    assert_string_equal(rows[0].engine_version, "b99999");
    assert_string_equal(rows[0].hardware_class, "");
    assert_int_equal(rows[0].n_pass, 2);
    assert_int_equal(rows[0].n_skip, 1);
    qr_arena_cleanup(&a);
    /* not a report: refused */
    assert_int_equal(qr_conf_record_add(s, "manual", "{\"x\":1}", NULL, &d), QR_ERR_INVALID);
    free(p);
    qr_store_close(s);
}

/* ---- the local ledger writer ---- */

static yyjson_mut_val *block(yyjson_mut_doc *d, const char *id, const char *cap)
{
    yyjson_mut_val *b = yyjson_mut_obj(d);
    yyjson_mut_obj_add_str(d, b, "id", id);
    yyjson_mut_obj_add_str(d, b, "backend_kind", "llama.cpp");
    yyjson_mut_obj_add_str(d, b, "model_family", "*");
    yyjson_mut_obj_add_str(d, b, "hardware_class", "*");
    yyjson_mut_obj_add_str(d, b, "capability", cap);
    yyjson_mut_obj_add_str(d, b, "reason", "test");
    yyjson_mut_val *s = yyjson_mut_obj_add_arr(d, b, "sources");
    yyjson_mut_arr_add_str(d, s, "evidence:conformance/1");
    return b;
}

static void test_local_ledger(void **st)
{
    (void) st;
    char sd[260], path[320];
    snprintf(sd, sizeof sd, "%s/local", dir);
    snprintf(path, sizeof path, "%s/%s", sd, QR_LEDGER_LOCAL_FILE);
    struct qr_ledger_local l;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_ledger_local_open(sd, &l, &d), QR_OK);
    assert_false(l.existed);
    assert_int_equal(qr_ledger_local_put_block(&l, block(l.doc, "t.a", "reasoning.control")),
                     QR_OK);
    assert_int_equal(qr_ledger_local_put_block(&l, block(l.doc, "t.b", "inference.text")), QR_OK);
    assert_int_equal(qr_ledger_local_put_block(&l, block(l.doc, "u.c", "tools.calling")), QR_OK);
    /* replaced by id, not added twice */
    assert_int_equal(qr_ledger_local_put_block(&l, block(l.doc, "t.a", "structured_output")),
                     QR_OK);
    assert_int_equal(yyjson_mut_arr_size(l.blocks), 3);
    assert_int_equal(qr_ledger_local_save(&l, &d), QR_OK);
    qr_ledger_local_cleanup(&l);

    assert_int_equal(qr_ledger_local_open(sd, &l, &d), QR_OK);
    assert_true(l.existed);
    yyjson_mut_val *a = qr_ledger_local_find_block(&l, "t.a");
    assert_non_null(a);
    assert_string_equal(yyjson_mut_get_str(yyjson_mut_obj_get(a, "capability")),
                        "structured_output");
    assert_int_equal(qr_ledger_local_remove_blocks(&l, "t."), 2);
    assert_null(qr_ledger_local_find_block(&l, "t.b"));
    assert_non_null(qr_ledger_local_find_block(&l, "u.c"));

    /* an id the builtin ledger has: refused, the file keeps its three blocks */
    size_t before_len = 0;
    char *before = qr_t_read_file(path, &before_len);
    assert_non_null(before);
    assert_int_equal(
        qr_ledger_local_put_block(
            &l, block(l.doc, "llamacpp-b11669-parallel-false-ignored", "tools.calling")),
        QR_OK);
    assert_int_not_equal(qr_ledger_local_save(&l, &d), QR_OK);
    assert_non_null(strstr(d.msg, "also in the builtin ledger"));
    /* an unknown capability key: refused by the ledger's own parser */
    qr_ledger_local_cleanup(&l);
    assert_int_equal(qr_ledger_local_open(sd, &l, &d), QR_OK);
    assert_int_equal(qr_ledger_local_put_block(&l, block(l.doc, "t.z", "no.such.key")), QR_OK);
    assert_int_equal(qr_ledger_local_save(&l, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "no.such.key"));
    qr_ledger_local_cleanup(&l);
    size_t after_len = 0;
    char *after = qr_t_read_file(path, &after_len);
    assert_int_equal(before_len, after_len);
    assert_memory_equal(before, after, before_len);
    free(before);
    free(after);

    /* a damaged file is an error and is never overwritten */
    write_text(path, "{\"schema_version\":\"quantum.runtime/upstream-ledger/v1alpha1\",");
    assert_int_equal(qr_ledger_local_open(sd, &l, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, QR_LEDGER_LOCAL_FILE));
    char *kept = qr_t_read_file(path, NULL);
    assert_non_null(strstr(kept, "v1alpha1\","));
    free(kept);
}

/* ---- the broken engine, end to end ---- */

static char *ledger_cmd(char **argv_tail, int *rc)
{
    char *argv[32] = {QR_TEST_DAEMON, "ledger"};
    size_t n = 2;
    for (char **p = argv_tail; *p && n < 31; p++)
        argv[n++] = *p;
    argv[n] = NULL;
    char *out = NULL;
    *rc = qr_t_run(argv, NULL, 240000, &out);
    return out;
}

static yyjson_doc *stored_report(const char *kind)
{
    char sd[260];
    snprintf(sd, sizeof sd, "%s", state);
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_conf_store_open(sd, &s, &d), QR_OK);
    struct qr_arena a;
    qr_arena_init(&a, 0);
    struct qr_store_filter f = {.kind = kind, .model = "scripted-chat"};
    struct qr_store_conformance *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_conformance_list(s, &f, &a, &rows, &n, &d), QR_OK);
    assert_true(n >= 1); /* newest first */
    assert_string_equal(rows[0].backend_id, "llama.cpp");
    assert_string_equal(rows[0].engine_version, !strcmp(kind, "pinned") ? "b11669" : "b99999");
    yyjson_doc *doc = yyjson_read(rows[0].report_json, strlen(rows[0].report_json), 0);
    qr_arena_cleanup(&a);
    qr_store_close(s);
    assert_non_null(doc);
    return doc;
}

static const char *case_status(yyjson_doc *d, const char *id)
{
    size_t i, max;
    yyjson_val *c;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(d), "cases"), i, max, c)
    {
        if (yyjson_equals_str(yyjson_obj_get(c, "id"), id))
            return yyjson_get_str(yyjson_obj_get(c, "status"));
    }
    fail_msg("case '%s' not in the stored report", id);
    return NULL;
}

static const char REASONING_ON[] =
    "{\"model\":\"scripted-chat\",\"reasoning_effort\":\"medium\",\"max_tokens\":64,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"Hallo\"}]}";

static void test_broken_engine_blocked(void **st)
{
    (void) st;
    char *out = NULL;
    char *gen[] = {QR_TEST_GEN_SCRIPTED, models, NULL};
    assert_int_equal(qr_t_run(gen, NULL, 60000, &out), 0);
    free(out);
    char script[1024];
    snprintf(script, sizeof script,
             "#!/bin/sh\n"
             "REAL='%s'\n"
             "for a in \"$@\"; do\n"
             "  if [ \"$a\" = --version ]; then\n"
             "    \"$REAL\" --version 2>&1 | sed 's/build 11669/build 99999/'\n"
             "    exit 0\n"
             "  fi\n"
             "done\n"
             "exec \"$REAL\" \"$@\" --reasoning-format none\n",
             QR_TEST_LLAMA_SERVER);
    write_text(wrapper, script);
    assert_int_equal(chmod(wrapper, 0700), 0);

    int rc;
    char *eval[] = {"evaluate",
                    "--backend",
                    "llamacpp",
                    "--engine",
                    wrapper,
                    "--models-dir",
                    models,
                    "--state-dir",
                    state,
                    "--llama-server",
                    QR_TEST_LLAMA_SERVER,
                    "--llama-threads",
                    "1",
                    "--llama-ctx",
                    "1024",
                    "--reps",
                    "3",
                    "--model",
                    "scripted-chat",
                    NULL};
    out = ledger_cmd(eval, &rc);
    if (rc != 1)
        fprintf(stderr, "ledger evaluate (rc %d): %s\n", rc, out ? out : "");
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "REGRESSION"));
    assert_non_null(strstr(out, "llamacpp-candidate-b99999"));
    free(out);

    /* the evidence: reasoning.on passed on the pinned build, failed on the candidate */
    yyjson_doc *pinned = stored_report("pinned"), *cand = stored_report("candidate");
    assert_string_equal(case_status(pinned, "reasoning.on"), "pass");
    assert_string_equal(case_status(cand, "reasoning.on"), "fail");
    yyjson_doc_free(pinned);
    yyjson_doc_free(cand);

    /* the local ledger: a candidate entry and a reasoning.control block on b99999 only */
    char path[320];
    snprintf(path, sizeof path, "%s/%s", state, QR_LEDGER_LOCAL_FILE);
    size_t len = 0;
    char *text = qr_t_read_file(path, &len);
    assert_non_null(text);
    struct qr_ledger *l = NULL;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_ledger_parse_local(path, text, len, &d, &l), QR_OK);
    assert_int_equal(qr_ledger_entry_count(l), 1);
    const struct qr_ledger_entry *e = qr_ledger_entry_at(l, 0);
    assert_string_equal(e->id, "llamacpp-candidate-b99999");
    assert_int_equal(e->status, QR_LEDGER_CANDIDATE);
    assert_int_equal(e->n_engine_versions, 1);
    assert_string_equal(e->engine_versions[0], "b99999");
    bool broken = false;
    for (size_t i = 0; i < e->n_broken; i++)
        broken |= !strcmp(e->broken_capabilities[i], "reasoning.control");
    assert_true(broken);
    const struct qr_ledger_block *rb = NULL;
    for (size_t i = 0; i < qr_ledger_block_count(l); i++) {
        const struct qr_ledger_block *b = qr_ledger_block_at(l, i);
        assert_string_equal(b->backend_kind, "llama.cpp");
        assert_int_equal(b->n_engine_versions, 1);
        assert_string_equal(b->engine_versions[0], "b99999");
        assert_true(b->n_sources >= 1);
        assert_true(!strncmp(b->sources[0], "evidence:conformance/", 21));
        if (!strcmp(b->capability, "reasoning.control"))
            rb = b;
    }
    assert_non_null(rb);
    assert_string_equal(rb->model, "scripted-chat");
    assert_string_equal(rb->model_family, "llama");
    assert_non_null(strstr(rb->reason, "reasoning.on"));
    char block_id[160];
    snprintf(block_id, sizeof block_id, "%s", rb->id);
    /* the pinned build is not blocked: a query for b11669 misses */
    const char *pv[] = {"0.7.0", "b11669"};
    struct qr_ledger_query q = {.capability = "reasoning.control",
                                .backend_kind = "llama.cpp",
                                .engine_versions = pv,
                                .n_engine_versions = 2,
                                .model_family = "llama",
                                .model = "scripted-chat",
                                .hardware_class = "x"};
    struct qr_ledger_hit hit;
    assert_int_equal(qr_ledger_blocked(l, &q, &hit, 1), 0);
    const char *cv[] = {"0.7.0", "b99999"};
    q.engine_versions = cv;
    assert_int_equal(qr_ledger_blocked(l, &q, &hit, 1), 1);
    qr_ledger_free(l);

    /* evaluated again: the first evaluation's blocks and records do not decide the second (the
     * daemons run on a scratch state_dir): no case is refused by the Runtime itself (422), and
     * the earlier blocks are replaced */
    out = ledger_cmd(eval, &rc);
    assert_int_equal(rc, 1);
    if (strstr(out, "REGRESSION: status 422") || !strstr(out, "of an earlier evaluation replaced"))
        fprintf(stderr, "second evaluate: %s\n", out);
    assert_null(strstr(out, "REGRESSION: status 422"));
    assert_non_null(strstr(out, "of an earlier evaluation replaced"));
    free(out);
    cand = stored_report("candidate");
    assert_string_equal(case_status(cand, "identity"), "pass");
    assert_string_equal(case_status(cand, "reasoning.on"), "fail");
    yyjson_doc_free(cand);
    free(text);
    text = qr_t_read_file(path, &len);
    assert_non_null(text);

    /* promote refuses and changes nothing */
    char *prom[] = {"promote", "--state-dir", state, NULL};
    out = ledger_cmd(prom, &rc);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "not promoted"));
    assert_non_null(strstr(out, "'reasoning.on' passed on the pinned build"));
    free(out);
    char *again = qr_t_read_file(path, NULL);
    assert_string_equal(again, text);
    free(again);
    free(text);
    char *show[] = {"show", "--state-dir", state, NULL};
    out = ledger_cmd(show, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "entry llamacpp-candidate-b99999 [b99999] candidate"));
    assert_non_null(strstr(out, block_id));
    free(out);

    /* the router enforces the block on the broken build, not on the pinned one */
    struct qr_child bad, good;
    const char *const bad_args[] = {"--backend",
                                    "llama.cpp",
                                    "--models-dir",
                                    models,
                                    "--state-dir",
                                    state,
                                    "--llama-server",
                                    wrapper,
                                    "--llama-threads",
                                    "1",
                                    "--llama-ctx",
                                    "1024",
                                    NULL};
    qr_t_daemon_start_args(&bad, 0, NULL, bad_args);
    struct qr_t_resp r;
    qr_t_request("POST", bad.port, "/v1/chat/completions", NULL, REASONING_ON, strlen(REASONING_ON),
                 &r);
    if (r.status != 422)
        fprintf(stderr, "reasoning on with the blocked engine: %ld %s\n", r.status, r.body);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "reasoning.control"));
    assert_null(strstr(r.body, "<think>"));
    qr_t_resp_free(&r);
    /* the route explanation names the block as the reason */
    static const char ROUTE[] =
        "{\"model\":\"scripted-chat\",\"capabilities\":[\"reasoning.control\"]}";
    qr_t_request("POST", bad.port, "/v1/route", NULL, ROUTE, strlen(ROUTE), &r);
    if (!strstr(r.body, block_id))
        fprintf(stderr, "route with the blocked engine: %ld %s\n", r.status, r.body);
    assert_non_null(strstr(r.body, "\"reason\":\"ledger_block\""));
    assert_non_null(strstr(r.body, block_id));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&bad, SIGTERM, 15000), 0);

    const char *const good_args[] = {"--backend",
                                     "llama.cpp",
                                     "--models-dir",
                                     models,
                                     "--state-dir",
                                     state,
                                     "--llama-server",
                                     QR_TEST_LLAMA_SERVER,
                                     "--llama-threads",
                                     "1",
                                     "--llama-ctx",
                                     "1024",
                                     NULL};
    qr_t_daemon_start_args(&good, 0, NULL, good_args);
    qr_t_request("POST", good.port, "/v1/chat/completions", NULL, REASONING_ON,
                 strlen(REASONING_ON), &r);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "<think>"));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&good, SIGTERM, 15000), 0);
}

/* The CLI's promotion on evidence that passes: the entry becomes tested and the latest known
 * good llama.cpp build of the merged ledger; promoting again changes nothing. */
static void test_promote_cli_success(void **st)
{
    (void) st;
    char sd[260];
    snprintf(sd, sizeof sd, "%s/promotable", dir);
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_conf_store_open(sd, &s, &d), QR_OK);
    static const char *const PPP[] = {"pass", "pass", "pass"};
    const double a[] = {100, 101, 99}, b[] = {99, 100, 99};
    add_eval(s, "llamacpp-candidate-b77777", "2026-12-02T10:00:00Z", "scripted-chat", PPP, PPP, a,
             3, b, 3);
    qr_store_close(s);
    struct qr_ledger_local l;
    assert_int_equal(qr_ledger_local_open(sd, &l, &d), QR_OK);
    yyjson_mut_doc *doc = l.doc;
    yyjson_mut_val *e = yyjson_mut_obj(doc);
    yyjson_mut_obj_add_str(doc, e, "id", "llamacpp-candidate-b77777");
    yyjson_mut_obj_add_str(doc, e, "project", "llama.cpp / ggml");
    yyjson_mut_obj_add_str(doc, e, "backend_kind", "llama.cpp");
    yyjson_mut_obj_add_str(doc, e, "source_url", "https://github.com/ggml-org/llama.cpp");
    yyjson_mut_obj_add_str(doc, e, "tested_ref", "b77777");
    yyjson_mut_val *v = yyjson_mut_obj_add_arr(doc, e, "engine_versions");
    yyjson_mut_arr_add_str(doc, v, "b77777");
    yyjson_mut_obj_add_str(doc, e, "status", "candidate");
    yyjson_mut_obj_add_str(doc, e, "observed_at", "2099-01-01T00:00:00Z");
    yyjson_mut_obj_add_str(doc, e, "license_ref", "MIT");
    assert_int_equal(qr_ledger_local_put_entry(&l, e), QR_OK);
    assert_int_equal(qr_ledger_local_save(&l, &d), QR_OK);
    qr_ledger_local_cleanup(&l);

    int rc;
    char *wrong[] = {"promote", "--candidate", "nope", "--state-dir", sd, NULL};
    char *out = ledger_cmd(wrong, &rc);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "no entry 'nope'"));
    free(out);
    char *prom[] = {"promote", "--state-dir", sd, NULL};
    out = ledger_cmd(prom, &rc);
    if (rc != 0)
        fprintf(stderr, "ledger promote (rc %d): %s\n", rc, out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "promoted: llamacpp-candidate-b77777 is tested"));
    assert_non_null(strstr(out, "decode: verified"));
    free(out);

    char path[320];
    snprintf(path, sizeof path, "%s/%s", sd, QR_LEDGER_LOCAL_FILE);
    size_t len = 0;
    char *text = qr_t_read_file(path, &len);
    struct qr_ledger *local = NULL, *builtin = NULL, *merged = NULL;
    assert_int_equal(qr_ledger_parse_local(path, text, len, &d, &local), QR_OK);
    assert_int_equal(qr_ledger_load_builtin(&d, &builtin), QR_OK);
    assert_int_equal(qr_ledger_merge(builtin, local, path, &d, &merged), QR_OK);
    const struct qr_ledger_entry *lkg[8];
    size_t n = qr_ledger_latest_known_good(merged, lkg, 8);
    bool found = false;
    for (size_t i = 0; i < n && i < 8; i++)
        found |= !strcmp(lkg[i]->backend_kind, "llama.cpp") &&
                 !strcmp(lkg[i]->id, "llamacpp-candidate-b77777");
    assert_true(found);
    qr_ledger_free(merged);
    out = ledger_cmd(prom, &rc); /* the newest candidate is gone: nothing left to promote */
    assert_int_equal(rc, 1);
    free(out);
    char *again[] = {"promote", "--candidate", "llamacpp-candidate-b77777", "--state-dir",
                     sd,        NULL};
    out = ledger_cmd(again, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "already tested"));
    free(out);
    char *after = qr_t_read_file(path, NULL);
    assert_string_equal(after, text);
    free(after);
    free(text);
}

static void test_usage_errors(void **st)
{
    (void) st;
    int rc;
    char *none[] = {NULL};
    free(ledger_cmd(none, &rc));
    assert_int_equal(rc, 2);
    char *no_engine[] = {"evaluate", "--backend", "llamacpp", NULL};
    char *out = ledger_cmd(no_engine, &rc);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "--engine"));
    free(out);
    char *other[] = {"evaluate", "--backend", "ollama", "--engine", "/bin/sh", NULL};
    out = ledger_cmd(other, &rc);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "llamacpp only"));
    free(out);
    char *missing[] = {"evaluate", "--backend", "llamacpp", "--engine", "/nonexistent/x", NULL};
    out = ledger_cmd(missing, &rc);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "not an executable"));
    free(out);
    char sd[260];
    snprintf(sd, sizeof sd, "%s/empty", dir);
    char *nothing[] = {"promote", "--state-dir", sd, NULL};
    out = ledger_cmd(nothing, &rc);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "no candidate entry"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),          cmocka_unit_test(test_promote_decision),
        cmocka_unit_test(test_local_ledger),          cmocka_unit_test(test_promote_cli_success),
        cmocka_unit_test(test_broken_engine_blocked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
