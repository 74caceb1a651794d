/* `quantum-runtime ledger evaluate|promote|show`: test-gated upstream promotion
 * (docs/CONFORMANCE.md "Ledger promotion").
 *
 * evaluate --backend llamacpp --engine PATH [--model M]... [--reps N] [--gen-tokens N] [OPTIONS]
 *   starts two daemons with the same configuration (OPTIONS are serve's): the pinned one with the
 *   configured llama-server, the candidate one with --llama-server PATH; runs the conformance
 *   suite on both for every model (default: every chat model the managed backend serves), then
 *   a short decode throughput measurement interleaved between the two; stores both reports
 *   (kinds pinned/candidate) and one evaluation record per model in the evidence store; writes a
 *   candidate entry to <state_dir>/upstream-ledger.local.json and, for every case that passed on
 *   the pinned build and failed on the candidate, a known-bad block per capability key the case
 *   refutes. Exit 0 when the candidate passed everything the pinned build passed, else 1.
 * promote [--candidate ID] [--threshold PCT] [OPTIONS]
 *   sets the candidate entry to "tested" only when its newest evaluation shows every case the
 *   pinned build passed passing, and its decode median within the regression guard of the
 *   pinned one (bench/guard.h); otherwise exit 1 with the reasons and nothing changed.
 * show [--json] [OPTIONS]
 *   lists the local ledger's entries and blocks.
 * Exit 2 on a usage or configuration error, 130 when interrupted. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "conformance/record.h"
#include "conformance/runner.h"
#include "core/config.h"
#include "policy/ledger.h"
#include "policy/ledger_local.h"
#include "store/store.h"

extern char **environ;

int qr_cli_ledger(int argc, char **argv); /* the CLI table in main.c */

#define EXIT_USAGE      2
#define MAX_MODELS      16u
#define LEDGER_KIND     "llama.cpp" /* the ledger's backend_kind of the managed engine */
#define DEFAULT_REPS    5u
#define DEFAULT_GEN     64u
#define BLOCK_ID_MAX    128u
#define LEDGER_TEXT_MAX 4000u

static volatile sig_atomic_t g_interrupted;

struct opts {
    const char *backend, *engine, *candidate;
    const char *models[MAX_MODELS];
    size_t n_models;
    unsigned reps, gen_tokens;
    double threshold;
    bool json;
    const char **rest;
    int n_rest;
};

static int usage(const char *why)
{
    fprintf(stderr,
            "quantum-runtime ledger: %s\n"
            "usage: quantum-runtime ledger evaluate --backend llamacpp --engine PATH [--model M]..."
            " [--reps N] [--gen-tokens N] [serve options]\n"
            "       quantum-runtime ledger promote [--candidate ID] [--threshold PCT] "
            "[serve options]\n"
            "       quantum-runtime ledger show [--json] [serve options]\n",
            why);
    return EXIT_USAGE;
}

static bool parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = (unsigned) v;
    return true;
}

static int parse(const char *cmd, int argc, char **argv, struct opts *o)
{
    o->reps = DEFAULT_REPS;
    o->gen_tokens = DEFAULT_GEN;
    o->threshold = QR_GUARD_DEFAULT_THRESHOLD_PCT;
    o->rest = calloc((size_t) argc + 3, sizeof *o->rest);
    if (!o->rest)
        abort();
    bool eval = !strcmp(cmd, "evaluate"), prom = !strcmp(cmd, "promote");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc && argv[i + 1][0];
        char msg[160];
        if (eval && (!strcmp(a, "--backend") || !strcmp(a, "--engine") || !strcmp(a, "--model") ||
                     !strcmp(a, "--reps") || !strcmp(a, "--gen-tokens"))) {
            if (!has_value)
                return usage("an option needs a value");
            const char *v = argv[++i];
            if (!strcmp(a, "--backend")) {
                o->backend = v;
            } else if (!strcmp(a, "--engine")) {
                o->engine = v;
            } else if (!strcmp(a, "--model")) {
                if (o->n_models == MAX_MODELS)
                    return usage("at most 16 --model options");
                o->models[o->n_models++] = v;
            } else if (!strcmp(a, "--reps")) {
                if (!parse_uint(v, 2, QR_CONF_MAX_SAMPLES, &o->reps))
                    return usage("--reps must be 2..32");
            } else if (!parse_uint(v, 8, 4096, &o->gen_tokens)) {
                return usage("--gen-tokens must be 8..4096");
            }
        } else if (prom && (!strcmp(a, "--candidate") || !strcmp(a, "--threshold"))) {
            if (!has_value)
                return usage("an option needs a value");
            const char *v = argv[++i];
            if (a[2] == 'c') {
                o->candidate = v;
                continue;
            }
            char *end;
            errno = 0;
            o->threshold = strtod(v, &end);
            if (errno || end == v || *end || !(o->threshold >= 0 && o->threshold <= 100))
                return usage("--threshold must be a percentage 0..100");
        } else if (!strcmp(cmd, "show") && !strcmp(a, "--json")) {
            o->json = true;
        } else if (!strncmp(a, "--", 2) && a[2]) {
            o->rest[o->n_rest++] = a; /* a serve option; its value follows as is */
        } else if (o->n_rest > 0) {
            o->rest[o->n_rest++] = a;
        } else {
            snprintf(msg, sizeof msg, "unknown argument '%.100s'", a);
            return usage(msg);
        }
    }
    if (eval) {
        if (!o->backend || !o->engine)
            return usage("evaluate needs --backend and --engine");
        if (strcmp(o->backend, "llamacpp") && strcmp(o->backend, "llama.cpp"))
            return usage("evaluate supports --backend llamacpp only: the managed engine is the "
                         "one whose binary can be swapped");
        if (access(o->engine, X_OK) != 0) {
            char msg[600];
            snprintf(msg, sizeof msg, "--engine '%.500s' is not an executable file", o->engine);
            return usage(msg);
        }
        o->rest[o->n_rest++] = "--backend";
        o->rest[o->n_rest++] = "llama.cpp";
    }
    return 0;
}

/* ---- small helpers ---- */

static void utc_now(char *out, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
}

/* A ledger string: control characters become spaces, at most LEDGER_TEXT_MAX bytes (cut at a
 * whole UTF-8 character). Malloc'd. */
static char *ledger_text(const char *s)
{
    size_t n = strlen(s);
    if (n > LEDGER_TEXT_MAX) {
        n = LEDGER_TEXT_MAX;
        while (n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
            n--;
    }
    char *t = strndup(s, n);
    if (!t)
        abort();
    for (char *p = t; *p; p++)
        if ((unsigned char) *p < 0x20 || *p == 0x7f)
            *p = ' ';
    return t;
}

/* An id part: [A-Za-z0-9._-], anything else '-'. */
static void id_part(char *out, size_t cap, const char *s)
{
    size_t k = 0;
    for (; *s && k + 1 < cap; s++)
        out[k++] = isalnum((unsigned char) *s) || *s == '.' || *s == '_' || *s == '-' ? *s : '-';
    out[k] = '\0';
}

static bool has_name(const struct qr_conf_engine *e, const char *name)
{
    for (size_t i = 0; i < e->n_names; i++)
        if (!strcmp(e->names[i], name))
            return true;
    return false;
}

/* What the daemon says about a model: family (manifest model.architecture), canonical id, and
 * whether it takes a reasoning switch. */
struct model_facts {
    char family[128], canonical[128];
    bool reasoning;
};

static void model_facts(const char *url, const char *model, struct model_facts *f)
{
    memset(f, 0, sizeof *f);
    snprintf(f->canonical, sizeof f->canonical, "%s", model);
    char path[600], *esc = curl_easy_escape(NULL, model, 0);
    if (!esc)
        abort();
    snprintf(path, sizeof path, "/v1/models/%s", esc);
    curl_free(esc);
    struct qr_conf_ctx c = {.url = url, .timeout_ms = 20000};
    struct qr_conf_resp r;
    qr_conf_http(&c, "GET", path, NULL, &r);
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    yyjson_val *root = yyjson_doc_get_root(d);
    const char *fam = yyjson_get_str(yyjson_ptr_get(root, "/model/model/architecture"));
    const char *can = yyjson_get_str(yyjson_obj_get(root, "canonical_id"));
    if (fam && strlen(fam) < sizeof f->family)
        snprintf(f->family, sizeof f->family, "%s", fam);
    if (can && strlen(can) < sizeof f->canonical)
        snprintf(f->canonical, sizeof f->canonical, "%s", can);
    yyjson_val *caps = yyjson_ptr_get(root, "/model/capabilities");
    f->reasoning = yyjson_is_true(yyjson_obj_get(caps, "reasoning_control")) ||
                   yyjson_is_true(yyjson_obj_get(caps, "thinking"));
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
}

/* ---- evaluate ---- */

struct model_run {
    const char *model;
    struct model_facts facts;
    struct qr_conf_outcome pinned, candidate;
    bool ran;
    double tps[2][QR_CONF_MAX_SAMPLES];
    size_t n_tps[2];
    int64_t rec_id[2];
};

struct eval {
    const struct opts *o;
    const struct qr_config *cfg;
    struct qr_conf_daemon dm[2]; /* pinned, candidate */
    struct qr_conf_engine eng[2];
    const char *cand_names[QR_CONF_MAX_NAMES]; /* the candidate's names the pinned lacks */
    size_t n_cand_names;
    char entry_id[BLOCK_ID_MAX];
    char run[32];
    char host_class[128];
    struct model_run models[MAX_MODELS];
    size_t n_models;
};

static const char *const ARM[2] = {"pinned", "candidate"};

static int start_daemons(struct eval *e)
{
    char exe[PATH_MAX];
    if (!realpath("/proc/self/exe", exe))
        snprintf(exe, sizeof exe, "/proc/self/exe");
    const struct opts *o = e->o;
    /* A scratch state_dir without evidence or a local ledger: what the Runtime already concluded
     * about the candidate (its blocks, its refuted keys) must not decide its re-evaluation. */
    static char scratch[PATH_MAX];
    static const char *const stale[] = {QR_STORE_FILE, QR_STORE_FILE "-wal", QR_STORE_FILE "-shm",
                                        QR_LEDGER_LOCAL_FILE};
    snprintf(scratch, sizeof scratch, "%s/ledger-evaluate", e->cfg->state_dir);
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++) {
        char f[PATH_MAX + 64];
        snprintf(f, sizeof f, "%s/%s", scratch, stale[i]);
        if (unlink(f) != 0 && errno != ENOENT) {
            fprintf(stderr, "ledger evaluate: cannot remove '%s': %s\n", f, strerror(errno));
            return 1;
        }
    }
    for (int k = 0; k < 2; k++) {
        char log[PATH_MAX];
        snprintf(log, sizeof log, "%s/ledger-%s.log", e->cfg->state_dir, ARM[k]);
        size_t n = (size_t) o->n_rest;
        const char **args = calloc(n + 5, sizeof *args);
        if (!args)
            abort();
        memcpy(args, o->rest, n * sizeof *args);
        args[n++] = "--state-dir";
        args[n++] = scratch;
        if (k == 1) {
            args[n++] = "--llama-server";
            args[n++] = o->engine;
        }
        struct qr_diag d = {{0}};
        enum qr_err err =
            qr_conf_daemon_start(exe, args, n, log, QR_CONF_READY_TIMEOUT_MS, &e->dm[k], &d);
        free(args);
        if (err == QR_OK)
            err = qr_conf_engine_get(e->dm[k].url, NULL, &e->eng[k], &d);
        if (err == QR_OK && e->eng[k].n_names == 0)
            err = qr_diag_set(&d, QR_ERR_UPSTREAM, "the daemon reports no engine version");
        if (err != QR_OK) {
            fprintf(stderr, "ledger evaluate: the %s daemon: %s\n", ARM[k], d.msg);
            return g_interrupted ? 130 : 1;
        }
        fprintf(stderr, "ledger evaluate: %s engine %s (%s) at %s\n", ARM[k],
                e->eng[k].names[e->eng[k].n_names - 1], e->eng[k].path, e->dm[k].url);
    }
    for (size_t i = 0; i < e->eng[1].n_names; i++)
        if (!has_name(&e->eng[0], e->eng[1].names[i]))
            e->cand_names[e->n_cand_names++] = e->eng[1].names[i];
    if (e->n_cand_names == 0) {
        fprintf(stderr,
                "ledger evaluate: the candidate engine reports the same build as the pinned one "
                "(%s): nothing to evaluate\n",
                e->eng[1].names[e->eng[1].n_names - 1]);
        return EXIT_USAGE;
    }
    char part[96];
    id_part(part, sizeof part, e->cand_names[e->n_cand_names - 1]);
    snprintf(e->entry_id, sizeof e->entry_id, "llamacpp-candidate-%s", part);
    return 0;
}

static int pick_models(struct eval *e)
{
    static char found[MAX_MODELS][128];
    const char *list[MAX_MODELS];
    size_t n = e->o->n_models;
    memcpy(list, e->o->models, n * sizeof *list);
    if (n == 0) {
        enum qr_err err;
        struct qr_diag d = {{0}};
        n = qr_conf_chat_models(e->dm[0].url, &e->eng[0], found, MAX_MODELS, &err, &d);
        if (err != QR_OK) {
            fprintf(stderr, "ledger evaluate: cannot list the models: %s\n", d.msg);
            return 1;
        }
        if (n > MAX_MODELS) {
            fprintf(stderr,
                    "ledger evaluate: %zu chat models; evaluating the first %u (name "
                    "them with --model)\n",
                    n, MAX_MODELS);
            n = MAX_MODELS;
        }
        for (size_t i = 0; i < n; i++)
            list[i] = found[i];
    }
    if (n == 0) {
        fprintf(stderr, "ledger evaluate: the managed backend serves no chat model (models_dir?); "
                        "name one with --model\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        e->models[i].model = list[i];
    e->n_models = n;
    return 0;
}

static int run_suites(struct eval *e)
{
    bool tty = isatty(STDERR_FILENO) == 1;
    for (size_t i = 0; i < e->n_models && !g_interrupted; i++) {
        struct model_run *m = &e->models[i];
        model_facts(e->dm[0].url, m->model, &m->facts);
        for (int k = 0; k < 2 && !g_interrupted; k++) {
            fprintf(stderr, "ledger evaluate: conformance of '%s' on the %s engine\n", m->model,
                    ARM[k]);
            struct qr_diag d = {{0}};
            struct qr_conf_outcome *out = k ? &m->candidate : &m->pinned;
            if (qr_conf_outcome_run(e->dm[k].url, m->model, tty, true, NULL, out, &d) != QR_OK) {
                fprintf(stderr, "ledger evaluate: %s\n", d.msg);
                return g_interrupted ? 130 : 1;
            }
        }
        m->ran = true;
    }
    return g_interrupted ? 130 : 0;
}

/* Decode tokens/s, interleaved pinned/candidate after one warm-up each. */
static void measure(struct eval *e)
{
    for (size_t i = 0; i < e->n_models && !g_interrupted; i++) {
        struct model_run *m = &e->models[i];
        for (unsigned r = 0; r <= e->o->reps && !g_interrupted; r++) {
            for (int k = 0; k < 2; k++) {
                double tps = 0;
                struct qr_diag d = {{0}};
                enum qr_err err = qr_conf_decode_sample(e->dm[k].url, m->model, e->o->gen_tokens,
                                                        m->facts.reasoning, &tps, &d);
                if (err != QR_OK)
                    fprintf(stderr, "ledger evaluate: %s engine: %s\n", ARM[k], d.msg);
                else if (r > 0) /* r == 0: the warm-up */
                    m->tps[k][m->n_tps[k]++] = tps;
                if (err != QR_OK && r == 0 && k == 0) { /* the pinned build cannot decode it */
                    fprintf(stderr, "ledger evaluate: no decode measurement of '%s'\n", m->model);
                    r = e->o->reps;
                    break;
                }
            }
        }
    }
}

/* Keys collected from the candidate reports: verified by a passing case, refuted by a failing
 * one. */
struct keyset {
    char k[32][64];
    size_t n;
};

static void keyset_add(struct keyset *s, const char *k)
{
    if (!k || strlen(k) >= sizeof s->k[0])
        return;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->k[i], k))
            return;
    if (s->n < 32)
        snprintf(s->k[s->n++], sizeof s->k[0], "%s", k);
}

static bool keyset_has(const struct keyset *s, const char *k)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->k[i], k))
            return true;
    return false;
}

static void add_strs(yyjson_mut_doc *d, yyjson_mut_val *o, const char *key, const char *const *v,
                     size_t n)
{
    if (n == 0)
        return;
    yyjson_mut_val *a = yyjson_mut_obj_add_arr(d, o, key);
    for (size_t i = 0; i < n; i++)
        yyjson_mut_arr_add_strcpy(d, a, v[i]);
}

/* The builtin entry of the pinned build (project, source, license), or NULL. */
static const struct qr_ledger_entry *pinned_entry(const struct qr_ledger *l,
                                                  const struct qr_conf_engine *eng)
{
    for (size_t i = 0; i < qr_ledger_entry_count(l); i++) {
        const struct qr_ledger_entry *en = qr_ledger_entry_at(l, i);
        if (strcmp(en->backend_kind, LEDGER_KIND) != 0)
            continue;
        for (size_t j = 0; j < en->n_engine_versions; j++)
            if (has_name(eng, en->engine_versions[j]))
                return en;
    }
    return NULL;
}

/* One known-bad block: the candidate build x model x host x capability refuted by a case. */
static yyjson_mut_val *make_block(struct eval *e, yyjson_mut_doc *d, const struct model_run *m,
                                  const char *case_id, const char *key, const char *why)
{
    char mp[128], cp[64], id[512];
    id_part(mp, sizeof mp, m->facts.canonical);
    id_part(cp, sizeof cp, case_id);
    snprintf(id, sizeof id, "%s.%s.%s.%s", e->entry_id, mp, cp, key);
    if (strlen(id) >= BLOCK_ID_MAX) { /* too long for an id: the model and case as a hash */
        uint64_t h = 1469598103934665603ull;
        for (const char *p = id; *p; p++)
            h = (h ^ (unsigned char) *p) * 1099511628211ull;
        snprintf(id, sizeof id, "%s.%016llx.%s", e->entry_id, (unsigned long long) h, key);
    }
    yyjson_mut_val *b = yyjson_mut_obj(d);
    yyjson_mut_obj_add_strcpy(d, b, "id", id);
    yyjson_mut_obj_add_str(d, b, "backend_kind", LEDGER_KIND);
    add_strs(d, b, "engine_versions", e->cand_names, e->n_cand_names);
    yyjson_mut_obj_add_strcpy(d, b, "model_family", m->facts.family[0] ? m->facts.family : "*");
    if (m->facts.family[0])
        yyjson_mut_obj_add_strcpy(d, b, "model", m->facts.canonical);
    yyjson_mut_obj_add_strcpy(d, b, "hardware_class", e->host_class[0] ? e->host_class : "*");
    yyjson_mut_obj_add_strcpy(d, b, "capability", key);
    char reason[LEDGER_TEXT_MAX + 256];
    snprintf(reason, sizeof reason,
             "conformance case '%s' failed on %s (it passed on the pinned %s): %s", case_id,
             e->cand_names[e->n_cand_names - 1], e->eng[0].names[e->eng[0].n_names - 1],
             why && why[0] ? why : "no reason given");
    char *r = ledger_text(reason);
    yyjson_mut_obj_add_strcpy(d, b, "reason", r);
    free(r);
    char src[2][64];
    snprintf(src[0], sizeof src[0], "evidence:conformance/%lld", (long long) m->rec_id[1]);
    snprintf(src[1], sizeof src[1], "evidence:conformance/%lld", (long long) m->rec_id[0]);
    const char *srcs[2] = {src[0], src[1]};
    add_strs(d, b, "sources", srcs, 2);
    char notes[256];
    snprintf(notes, sizeof notes,
             "written by quantum-runtime ledger evaluate at %s: the candidate's report is the "
             "first source, the pinned build's the second",
             e->run);
    yyjson_mut_obj_add_strcpy(d, b, "notes", notes);
    return b;
}

/* Blocks for every regression of every model; returns how many were written, and counts the
 * regressions (blocked or not) in *regressions. */
static size_t write_blocks(struct eval *e, struct qr_ledger_local *l, struct keyset *ok,
                           struct keyset *bad, size_t *regressions)
{
    size_t n = 0;
    *regressions = 0;
    for (size_t i = 0; i < e->n_models; i++) {
        struct model_run *m = &e->models[i];
        yyjson_doc *p = yyjson_read(m->pinned.json, strlen(m->pinned.json), 0);
        yyjson_doc *c = yyjson_read(m->candidate.json, strlen(m->candidate.json), 0);
        size_t j, max, k, kmax;
        yyjson_val *cc, *key;
        yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(c), "cases"), j, max, cc)
        {
            const char *id = yyjson_get_str(yyjson_obj_get(cc, "id"));
            bool pass = yyjson_equals_str(yyjson_obj_get(cc, "status"), "pass");
            bool fail = yyjson_equals_str(yyjson_obj_get(cc, "status"), "fail");
            yyjson_arr_foreach(yyjson_obj_get(cc, "verifies"), k, kmax, key)
            {
                if (pass)
                    keyset_add(ok, yyjson_get_str(key));
                else if (fail)
                    keyset_add(bad, yyjson_get_str(key));
            }
            yyjson_val *pc = id ? qr_conf_report_case(yyjson_doc_get_root(p), id) : NULL;
            if (!id || pass || !yyjson_equals_str(yyjson_obj_get(pc, "status"), "pass"))
                continue;
            (*regressions)++;
            const char *why = yyjson_get_str(yyjson_obj_get(cc, "reason"));
            yyjson_arr_foreach(yyjson_obj_get(cc, "verifies"), k, kmax, key)
            {
                const char *kn = yyjson_get_str(key);
                if (kn && qr_ledger_capability_known(kn) &&
                    qr_ledger_local_put_block(l, make_block(e, l->doc, m, id, kn, why)) == QR_OK)
                    n++;
            }
        }
        yyjson_doc_free(p);
        yyjson_doc_free(c);
    }
    return n;
}

static yyjson_mut_val *make_entry(struct eval *e, yyjson_mut_doc *d, const struct keyset *ok,
                                  const struct keyset *bad)
{
    struct qr_ledger *builtin = NULL;
    struct qr_diag dg = {{0}};
    qr_ledger_load_builtin(&dg, &builtin);
    const struct qr_ledger_entry *pe = builtin ? pinned_entry(builtin, &e->eng[0]) : NULL;
    yyjson_mut_val *o = yyjson_mut_obj(d);
    yyjson_mut_obj_add_strcpy(d, o, "id", e->entry_id);
    yyjson_mut_obj_add_strcpy(d, o, "project", pe ? pe->project : "llama.cpp / ggml");
    yyjson_mut_obj_add_str(d, o, "backend_kind", LEDGER_KIND);
    yyjson_mut_obj_add_strcpy(d, o, "source_url",
                              pe ? pe->source_url : "https://github.com/ggml-org/llama.cpp");
    yyjson_mut_obj_add_strcpy(d, o, "tested_ref", e->cand_names[e->n_cand_names - 1]);
    add_strs(d, o, "engine_versions", e->cand_names, e->n_cand_names);
    yyjson_mut_obj_add_str(d, o, "status", "candidate");
    yyjson_mut_obj_add_strcpy(d, o, "observed_at", e->run);
    const char *enabled[32];
    size_t n_enabled = 0;
    for (size_t i = 0; i < ok->n; i++)
        if (!keyset_has(bad, ok->k[i]) && qr_ledger_capability_known(ok->k[i]))
            enabled[n_enabled++] = ok->k[i];
    const char *broken[32];
    size_t n_broken = 0;
    for (size_t i = 0; i < bad->n; i++)
        if (qr_ledger_capability_known(bad->k[i]))
            broken[n_broken++] = bad->k[i];
    add_strs(d, o, "enabled_capabilities", enabled, n_enabled);
    add_strs(d, o, "broken_capabilities", broken, n_broken);
    if (e->host_class[0]) {
        const char *hc = e->host_class;
        add_strs(d, o, "hardware_classes", &hc, 1);
    }
    yyjson_mut_obj_add_strcpy(d, o, "license_ref",
                              pe && pe->license_ref
                                  ? pe->license_ref
                                  : "not verified: check the candidate build's license before use");
    char prov[PATH_MAX * 2 + 256];
    snprintf(prov, sizeof prov,
             "quantum-runtime ledger evaluate: candidate engine '%s' against the pinned engine "
             "'%s' (%s), same configuration and state_dir",
             e->eng[1].path, e->eng[0].path, e->eng[0].names[e->eng[0].n_names - 1]);
    char *pv = ledger_text(prov);
    yyjson_mut_obj_add_strcpy(d, o, "provenance", pv);
    free(pv);
    char notes[256];
    snprintf(notes, sizeof notes,
             "candidate written by ledger evaluate at %s from %zu model(s); the evidence is the "
             "evidence store's ledger.evaluate records of this entry id",
             e->run, e->n_models);
    yyjson_mut_obj_add_strcpy(d, o, "notes", notes);
    qr_ledger_free(builtin);
    return o;
}

static int store_evidence(struct eval *e)
{
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_conf_store_open(e->cfg->state_dir, &s, &d);
    for (size_t i = 0; err == QR_OK && i < e->n_models; i++) {
        struct model_run *m = &e->models[i];
        err = qr_conf_record_add(s, QR_CONF_KIND_PINNED, m->pinned.json, &m->rec_id[0], &d);
        if (err == QR_OK)
            err =
                qr_conf_record_add(s, QR_CONF_KIND_CANDIDATE, m->candidate.json, &m->rec_id[1], &d);
        const char *names[2][QR_CONF_MAX_NAMES];
        for (int k = 0; k < 2; k++)
            for (size_t j = 0; j < e->eng[k].n_names; j++)
                names[k][j] = e->eng[k].names[j];
        struct qr_conf_eval ev = {
            .candidate_entry = e->entry_id,
            .run = e->run,
            .model = m->model,
            .backend = e->eng[0].id,
            .hardware_class = e->host_class,
            .gen_tokens = e->o->gen_tokens,
            .pinned = {e->eng[0].path, names[0], e->eng[0].n_names, m->rec_id[0], m->tps[0],
                       m->n_tps[0]},
            .candidate = {e->eng[1].path, names[1], e->eng[1].n_names, m->rec_id[1], m->tps[1],
                          m->n_tps[1]},
        };
        if (err == QR_OK)
            err = qr_conf_eval_add(s, &ev, NULL, &d);
    }
    qr_store_close(s);
    if (err != QR_OK) {
        fprintf(stderr, "ledger evaluate: cannot store the evidence: %s\n", d.msg);
        return 1;
    }
    printf("evidence: %s/%s\n", e->cfg->state_dir, QR_STORE_FILE);
    return 0;
}

static void print_model(const struct eval *e, const struct model_run *m)
{
    printf("model %s: pinned %s, candidate %s\n", m->model, e->eng[0].names[e->eng[0].n_names - 1],
           e->cand_names[e->n_cand_names - 1]);
    yyjson_doc *p = yyjson_read(m->pinned.json, strlen(m->pinned.json), 0);
    yyjson_doc *c = yyjson_read(m->candidate.json, strlen(m->candidate.json), 0);
    size_t i, max;
    yyjson_val *pc;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(p), "cases"), i, max, pc)
    {
        const char *id = yyjson_get_str(yyjson_obj_get(pc, "id"));
        yyjson_val *cc = id ? qr_conf_report_case(yyjson_doc_get_root(c), id) : NULL;
        const char *ps = yyjson_get_str(yyjson_obj_get(pc, "status"));
        const char *cs = cc ? yyjson_get_str(yyjson_obj_get(cc, "status")) : "missing";
        bool regress = ps && !strcmp(ps, "pass") && (!cs || strcmp(cs, "pass"));
        const char *why = regress ? yyjson_get_str(yyjson_obj_get(cc, "reason")) : NULL;
        char *line = ledger_text(why ? why : "");
        printf("  %-20s pinned %-4s candidate %-7s%s%s\n", id ? id : "?", ps ? ps : "?",
               cs ? cs : "?", regress ? "  REGRESSION: " : "", line);
        free(line);
    }
    yyjson_doc_free(p);
    yyjson_doc_free(c);
    double a = qr_conf_median(m->tps[0], m->n_tps[0]), b = qr_conf_median(m->tps[1], m->n_tps[1]);
    printf("  %-20s pinned %.1f tok/s (%zu), candidate %.1f tok/s (%zu), %+.1f%%\n", "decode", a,
           m->n_tps[0], b, m->n_tps[1], isfinite(a) && a > 0 ? (b - a) / a * 100.0 : NAN);
}

static int write_ledger(struct eval *e, size_t *regressions)
{
    struct qr_ledger_local l;
    struct qr_diag d = {{0}};
    if (qr_ledger_local_open(e->cfg->state_dir, &l, &d) != QR_OK) {
        fprintf(stderr, "ledger evaluate: %s\n", d.msg);
        return 1;
    }
    char prefix[BLOCK_ID_MAX + 2];
    snprintf(prefix, sizeof prefix, "%s.", e->entry_id);
    size_t removed = qr_ledger_local_remove_blocks(&l, prefix);
    struct keyset ok = {0}, bad = {0};
    size_t blocks = write_blocks(e, &l, &ok, &bad, regressions);
    qr_ledger_local_put_entry(&l, make_entry(e, l.doc, &ok, &bad));
    enum qr_err err = qr_ledger_local_save(&l, &d);
    if (err != QR_OK) {
        fprintf(stderr, "ledger evaluate: the local ledger was not changed: %s\n", d.msg);
        qr_ledger_local_cleanup(&l);
        return 1;
    }
    printf("candidate entry: %s (status candidate) in %s\n", e->entry_id, l.path);
    printf("known-bad blocks: %zu written%s", blocks, removed ? "" : "\n");
    if (removed)
        printf(", %zu of an earlier evaluation replaced\n", removed);
    for (size_t i = 0; i < yyjson_mut_arr_size(l.blocks); i++) {
        yyjson_mut_val *b = yyjson_mut_arr_get(l.blocks, i);
        const char *id = yyjson_mut_get_str(yyjson_mut_obj_get(b, "id"));
        if (id && !strncmp(id, prefix, strlen(prefix)))
            printf("  block %s: %s\n", id, yyjson_mut_get_str(yyjson_mut_obj_get(b, "capability")));
    }
    qr_ledger_local_cleanup(&l);
    return 0;
}

static int evaluate(const struct opts *o, const struct qr_config *cfg)
{
    struct eval *e = calloc(1, sizeof *e);
    if (!e)
        abort();
    e->o = o;
    e->cfg = cfg;
    utc_now(e->run, sizeof e->run);
    qr_conf_interrupt_install(&g_interrupted);
    int rc = start_daemons(e);
    if (!rc)
        rc = pick_models(e);
    if (!rc)
        rc = run_suites(e);
    if (!rc)
        measure(e);
    for (int k = 0; k < 2; k++)
        qr_conf_daemon_stop(&e->dm[k], QR_CONF_STOP_TIMEOUT_MS);
    if (g_interrupted) {
        fprintf(stderr, "ledger evaluate: interrupted, nothing stored\n");
        rc = 130;
    }
    size_t regressions = 0;
    if (!rc) {
        /* the host class the pinned run saw (both daemons run on this host) */
        yyjson_doc *d = yyjson_read(e->models[0].pinned.json, strlen(e->models[0].pinned.json), 0);
        const char *hc = yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(d), "host_class"));
        if (hc && strlen(hc) < sizeof e->host_class)
            snprintf(e->host_class, sizeof e->host_class, "%s", hc);
        yyjson_doc_free(d);
        for (size_t i = 0; i < e->n_models; i++)
            print_model(e, &e->models[i]);
        rc = store_evidence(e);
    }
    if (!rc)
        rc = write_ledger(e, &regressions);
    if (!rc && regressions)
        printf("the candidate failed %zu case(s) the pinned build passed: not promotable\n",
               regressions);
    else if (!rc)
        printf("the candidate passed every case the pinned build passed: `quantum-runtime ledger "
               "promote --candidate %s` may promote it\n",
               e->entry_id);
    for (size_t i = 0; i < e->n_models; i++) {
        qr_conf_outcome_cleanup(&e->models[i].pinned);
        qr_conf_outcome_cleanup(&e->models[i].candidate);
    }
    free(e);
    return rc ? rc : regressions ? 1 : 0;
}

/* ---- promote ---- */

/* The newest entry with status candidate (by observed_at), or NULL. */
static const char *newest_candidate(const struct qr_ledger_local *l)
{
    const char *best = NULL, *best_at = "";
    size_t i, max;
    yyjson_mut_val *en;
    yyjson_mut_arr_foreach(l->entries, i, max, en)
    {
        const char *at = yyjson_mut_get_str(yyjson_mut_obj_get(en, "observed_at"));
        if (!yyjson_mut_equals_str(yyjson_mut_obj_get(en, "status"), "candidate"))
            continue;
        if (!best || (at && strcmp(at, best_at) > 0)) {
            best = yyjson_mut_get_str(yyjson_mut_obj_get(en, "id"));
            best_at = at ? at : "";
        }
    }
    return best;
}

static void print_decision(const struct qr_conf_promote *p)
{
    for (size_t i = 0; i < p->n_models; i++) {
        const struct qr_conf_promote_model *m = &p->models[i];
        printf("model %s (evaluation record %lld, conformance %lld pinned / %lld candidate):\n",
               m->model, (long long) m->eval_id, (long long) m->pinned_id,
               (long long) m->candidate_id);
        printf("  cases: %s%s\n", m->cases_ok ? "every case the pinned build passed, passed" : "",
               m->why);
        if (isfinite(m->guard.delta_pct))
            printf("  decode: %s: the candidate's median differs from the pinned one by %+.2f%% (a "
                   "loss of more than %.2f%% is refused)%s\n",
                   qr_guard_verdict_str(m->guard.verdict), m->guard.delta_pct,
                   m->guard.threshold_pct,
                   m->guard.verdict == QR_GUARD_INSUFFICIENT ? "; the samples are too noisy" : "");
        else
            printf("  decode: %s: %s\n", qr_guard_verdict_str(m->guard.verdict), m->guard.reason);
    }
}

static int promote(const struct opts *o, const struct qr_config *cfg)
{
    struct qr_ledger_local l;
    struct qr_diag d = {{0}};
    if (qr_ledger_local_open(cfg->state_dir, &l, &d) != QR_OK) {
        fprintf(stderr, "ledger promote: %s\n", d.msg);
        return 1;
    }
    int rc = 1;
    const char *id = o->candidate ? o->candidate : newest_candidate(&l);
    yyjson_mut_val *en = id ? qr_ledger_local_find_entry(&l, id) : NULL;
    struct qr_store *s = NULL;
    struct qr_conf_promote *p = calloc(1, sizeof *p);
    if (!p)
        abort();
    if (!en) {
        fprintf(stderr, "ledger promote: %s%s%s in %s\n", id ? "no entry '" : "no candidate entry",
                id ? id : "", id ? "'" : "", l.path);
        goto done;
    }
    if (yyjson_mut_equals_str(yyjson_mut_obj_get(en, "status"), "tested")) {
        printf("%s is already tested: nothing to do\n", id);
        rc = 0;
        goto done;
    }
    if (!yyjson_mut_equals_str(yyjson_mut_obj_get(en, "status"), "candidate")) {
        fprintf(stderr, "ledger promote: '%s' is not a candidate entry\n", id);
        goto done;
    }
    if (qr_conf_store_open(cfg->state_dir, &s, &d) != QR_OK ||
        qr_conf_promote_check(s, id, o->threshold, p, &d) != QR_OK) {
        fprintf(stderr, "ledger promote: cannot read the evidence: %s\n", d.msg);
        goto done;
    }
    print_decision(p);
    if (!p->ok) {
        printf("not promoted: %s; the ledger is unchanged\n",
               p->reason[0] ? p->reason
                            : "the candidate regressed against the pinned build's evidence");
        goto done;
    }
    char at[32], notes[LEDGER_TEXT_MAX + 128];
    utc_now(at, sizeof at);
    const char *old = yyjson_mut_get_str(yyjson_mut_obj_get(en, "notes"));
    snprintf(notes, sizeof notes, "%s; promoted to tested at %s (evaluation run %s)",
             old ? old : "", at, p->run);
    char *nt = ledger_text(notes);
    yyjson_mut_obj_put(en, yyjson_mut_strcpy(l.doc, "status"), yyjson_mut_strcpy(l.doc, "tested"));
    yyjson_mut_obj_put(en, yyjson_mut_strcpy(l.doc, "notes"), yyjson_mut_strcpy(l.doc, nt));
    free(nt);
    if (qr_ledger_local_save(&l, &d) != QR_OK) {
        fprintf(stderr, "ledger promote: the local ledger was not changed: %s\n", d.msg);
        goto done;
    }
    printf("promoted: %s is tested (the latest known good %s build) in %s\n", id, LEDGER_KIND,
           l.path);
    rc = 0;
done:
    free(p);
    qr_store_close(s);
    qr_ledger_local_cleanup(&l);
    return rc;
}

/* ---- show ---- */

static const char *field(yyjson_mut_val *o, const char *key)
{
    const char *s = yyjson_mut_get_str(yyjson_mut_obj_get(o, key));
    return s ? s : "-";
}

static void print_list(const char *what, yyjson_mut_val *arr)
{
    size_t i, max;
    yyjson_mut_val *v;
    yyjson_mut_arr_foreach(arr, i, max, v)
    {
        printf("%s %s", what, field(v, "id"));
        yyjson_mut_val *vs = yyjson_mut_obj_get(v, "engine_versions");
        size_t j, jm;
        yyjson_mut_val *s;
        printf(" [");
        yyjson_mut_arr_foreach(vs, j, jm, s)
        {
            printf("%s%s", j ? " " : "", yyjson_mut_get_str(s) ? yyjson_mut_get_str(s) : "?");
        }
        printf("]");
        if (!strcmp(what, "entry"))
            printf(" %s observed %s\n", field(v, "status"), field(v, "observed_at"));
        else
            printf(" %s model %s host %s: %s\n", field(v, "capability"),
                   yyjson_mut_obj_get(v, "model") ? field(v, "model") : field(v, "model_family"),
                   field(v, "hardware_class"), field(v, "reason"));
    }
}

static int show(const struct opts *o, const struct qr_config *cfg)
{
    struct qr_ledger_local l;
    struct qr_diag d = {{0}};
    if (qr_ledger_local_open(cfg->state_dir, &l, &d) != QR_OK) {
        fprintf(stderr, "ledger show: %s\n", d.msg);
        return 1;
    }
    if (o->json) {
        char *s = yyjson_mut_write(l.doc, YYJSON_WRITE_PRETTY_TWO_SPACES, NULL);
        if (s)
            printf("%s\n", s);
        free(s);
    } else {
        printf("local ledger: %s%s\n", l.path, l.existed ? "" : " (not written yet)");
        print_list("entry", l.entries);
        print_list("block", l.blocks);
    }
    qr_ledger_local_cleanup(&l);
    return 0;
}

int qr_cli_ledger(int argc, char **argv)
{
    if (argc < 1)
        return usage("a subcommand is required");
    const char *cmd = argv[0];
    if (strcmp(cmd, "evaluate") && strcmp(cmd, "promote") && strcmp(cmd, "show"))
        return usage("the subcommands are evaluate, promote and show");
    struct opts o = {0};
    int rc = parse(cmd, argc - 1, argv + 1, &o);
    struct qr_config cfg;
    struct qr_diag d = {{0}};
    if (!rc && qr_config_load(&cfg, o.n_rest, (char **) o.rest, environ, &d)) {
        fprintf(stderr, "quantum-runtime ledger: invalid configuration: %s\n", d.msg);
        rc = EXIT_USAGE;
    } else if (!rc) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            fprintf(stderr, "quantum-runtime ledger: cannot initialise libcurl\n");
            rc = 1;
        } else {
            rc = !strcmp(cmd, "evaluate")  ? evaluate(&o, &cfg)
                 : !strcmp(cmd, "promote") ? promote(&o, &cfg)
                                           : show(&o, &cfg);
            curl_global_cleanup();
        }
        qr_config_cleanup(&cfg);
    }
    free(o.rest);
    return rc;
}
