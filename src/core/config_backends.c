/* The `backends` list: several engines behind one daemon, each with its own id, kind, URL(s),
 * dialect and upstream key. Entries are decoded strictly (an unknown member is an error, every
 * value is checked), so a typo never silently becomes a default. */
#include "core/config_backends.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kinds[] = {"llamacpp", "ollama", "openai", NULL};
static const char *const dialects[] = {"auto", "vllm", "mlx-lm", "llama-server", "generic", NULL};
static const char *const reasoning_fields[] = {"reasoning_content", "reasoning", NULL};

static char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        abort();
    return d;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++) {
        if (!strcmp(s, *list))
            return true;
    }
    return false;
}

static bool id_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > QR_BACKEND_ID_MAX ||
        !(islower((unsigned char) s[0]) || isdigit((unsigned char) s[0])))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];
        if (!islower(c) && !isdigit(c) && c != '.' && c != '_' && c != '-')
            return false;
    }
    return true;
}

static bool env_name_ok(const char *s)
{
    if (!s[0] || isdigit((unsigned char) s[0]) || strlen(s) > 128)
        return false;
    for (; *s; s++) {
        if (!isalnum((unsigned char) *s) && *s != '_')
            return false;
    }
    return true;
}

static void spec_free(struct qr_backend_spec *s)
{
    free(s->id);
    free(s->kind);
    for (size_t i = 0; i < s->n_urls; i++)
        free(s->urls[i]);
    free(s->urls);
    free(s->dialect);
    free(s->reasoning_field);
    free(s->api_key_env);
    free(s->api_key);
    free(s->parsers.tool_call);
    free(s->parsers.reasoning);
    memset(s, 0, sizeof(*s));
}

void qr_cfg_backends_free(struct qr_config *cfg)
{
    for (size_t i = 0; i < cfg->n_backends; i++)
        spec_free(&cfg->backends[i]);
    free(cfg->backends);
    cfg->backends = NULL;
    cfg->n_backends = 0;
}

static enum qr_err add_url(struct qr_backend_spec *s, const char *url, const char *who,
                           struct qr_diag *diag)
{
    struct qr_diag sub = {{0}};
    if (qr_config_check_url(url, &sub))
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%s' is not a valid URL: %s", who, url,
                           sub.msg);
    for (size_t i = 0; i < s->n_urls; i++) {
        if (!strcmp(s->urls[i], url))
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%s' is listed twice", who, url);
    }
    if (s->n_urls >= QR_BACKEND_URL_MAX)
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s: more than %u URLs", who, QR_BACKEND_URL_MAX);
    char **u = realloc(s->urls, (s->n_urls + 1) * sizeof(*u));
    if (!u)
        abort();
    s->urls = u;
    s->urls[s->n_urls++] = xstrdup(url);
    return QR_OK;
}

static enum qr_err parse_parallelism(struct qr_backend_spec *s, yyjson_val *v, const char *who,
                                     struct qr_diag *diag)
{
    if (!yyjson_is_obj(v))
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s.parallelism must be an object", who);
    size_t i, max;
    yyjson_val *k, *m;
    yyjson_obj_foreach(v, i, max, k, m)
    {
        const char *name = yyjson_get_str(k);
        uint64_t *slot =
            !strcmp(name, "tensor_parallel_size")     ? &s->parallelism.tensor_parallel_size
            : !strcmp(name, "pipeline_parallel_size") ? &s->parallelism.pipeline_parallel_size
            : !strcmp(name, "data_parallel_size")     ? &s->parallelism.data_parallel_size
            : !strcmp(name, "nodes")                  ? &s->parallelism.nodes
                                                      : NULL;
        if (slot) {
            if (!yyjson_is_uint(m) || yyjson_get_uint(m) < 1 || yyjson_get_uint(m) > 65536)
                return qr_diag_set(diag, QR_ERR_CONFIG,
                                   "%s.parallelism.%s must be a whole number from 1 to 65536", who,
                                   name);
            *slot = yyjson_get_uint(m);
        } else if (!strcmp(name, "expert_parallel")) {
            if (!yyjson_is_bool(m))
                return qr_diag_set(diag, QR_ERR_CONFIG,
                                   "%s.parallelism.expert_parallel must be true or false", who);
            s->parallelism.expert_parallel = yyjson_get_bool(m);
        } else {
            return qr_diag_set(diag, QR_ERR_CONFIG,
                               "%s.parallelism: unknown member '%s' (tensor_parallel_size, "
                               "pipeline_parallel_size, data_parallel_size, expert_parallel, "
                               "nodes)",
                               who, name);
        }
    }
    return QR_OK;
}

static enum qr_err parse_parsers(struct qr_backend_spec *s, yyjson_val *v, const char *who,
                                 struct qr_diag *diag)
{
    if (!yyjson_is_obj(v))
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s.parsers must be an object", who);
    s->parsers.set = true;
    size_t i, max;
    yyjson_val *k, *m;
    yyjson_obj_foreach(v, i, max, k, m)
    {
        const char *name = yyjson_get_str(k);
        char **slot = !strcmp(name, "tool_call")   ? &s->parsers.tool_call
                      : !strcmp(name, "reasoning") ? &s->parsers.reasoning
                                                   : NULL;
        if (slot) {
            if (!yyjson_is_str(m) || !yyjson_get_len(m) || yyjson_get_len(m) > 64)
                return qr_diag_set(diag, QR_ERR_CONFIG,
                                   "%s.parsers.%s must be a parser name (1-64 bytes)", who, name);
            free(*slot);
            *slot = strdup(yyjson_get_str(m));
            if (!*slot)
                abort();
        } else if (!strcmp(name, "auto_tool_choice")) {
            if (!yyjson_is_bool(m))
                return qr_diag_set(diag, QR_ERR_CONFIG,
                                   "%s.parsers.auto_tool_choice must be true or false", who);
            s->parsers.auto_tool_choice = yyjson_get_bool(m);
        } else {
            return qr_diag_set(diag, QR_ERR_CONFIG,
                               "%s.parsers: unknown member '%s' (tool_call, auto_tool_choice, "
                               "reasoning)",
                               who, name);
        }
    }
    return QR_OK;
}

/* A string member, checked against choices when given. */
static enum qr_err str_member(yyjson_val *m, const char *who, const char *name,
                              const char *const *choices, char **out, struct qr_diag *diag)
{
    if (!yyjson_is_str(m) || !yyjson_get_len(m))
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s.%s must be a non-empty string", who, name);
    const char *v = yyjson_get_str(m);
    if (choices && !in_list(v, choices)) {
        char list[200] = "";
        size_t used = 0;
        for (const char *const *c = choices; *c && used < sizeof(list); c++)
            used += (size_t) snprintf(list + used, sizeof(list) - used, "%s%s",
                                      c == choices ? "" : ", ", *c);
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s.%s: '%s' is not one of %s", who, name, v, list);
    }
    free(*out);
    *out = xstrdup(v);
    return QR_OK;
}

static enum qr_err parse_entry(struct qr_backend_spec *s, yyjson_val *e, const char *who,
                               struct qr_diag *diag)
{
    if (!yyjson_is_obj(e))
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s must be an object", who);
    enum qr_err err = QR_OK;
    yyjson_val *url = NULL, *urls = NULL;
    size_t i, max;
    yyjson_val *k, *m;
    yyjson_obj_foreach(e, i, max, k, m)
    {
        const char *name = yyjson_get_str(k);
        if (!strcmp(name, "id"))
            err = str_member(m, who, name, NULL, &s->id, diag);
        else if (!strcmp(name, "kind"))
            err = str_member(m, who, name, kinds, &s->kind, diag);
        else if (!strcmp(name, "dialect"))
            err = str_member(m, who, name, dialects, &s->dialect, diag);
        else if (!strcmp(name, "reasoning_field"))
            err = str_member(m, who, name, reasoning_fields, &s->reasoning_field, diag);
        else if (!strcmp(name, "api_key_env"))
            err = str_member(m, who, name, NULL, &s->api_key_env, diag);
        else if (!strcmp(name, "url"))
            url = m;
        else if (!strcmp(name, "urls"))
            urls = m;
        else if (!strcmp(name, "parallelism"))
            err = parse_parallelism(s, m, who, diag);
        else if (!strcmp(name, "parsers"))
            err = parse_parsers(s, m, who, diag);
        else if (!strcmp(name, "max_queue")) {
            if (!yyjson_is_uint(m) || yyjson_get_uint(m) < 1 || yyjson_get_uint(m) > 65535)
                err = qr_diag_set(diag, QR_ERR_CONFIG,
                                  "%s.max_queue must be a whole number from 1 to 65535", who);
            else
                s->max_queue = yyjson_get_uint(m);
        } else
            err = qr_diag_set(diag, QR_ERR_CONFIG,
                              "%s: unknown member '%s' (id, kind, url, urls, dialect, "
                              "reasoning_field, api_key_env, parallelism, parsers, max_queue)",
                              who, name);
        if (err)
            return err;
    }
    if (!s->id)
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s: 'id' is required", who);
    if (!id_ok(s->id))
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "%s.id: '%s' must be 1-%u of a-z, 0-9, '.', '_', '-', starting with a "
                           "letter or digit",
                           who, s->id, QR_BACKEND_ID_MAX);
    if (!s->kind)
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s: 'kind' is required (llamacpp, ollama, openai)",
                           who);
    if (url && urls)
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s: give 'url' or 'urls', not both", who);
    char sub[320];
    if (url) {
        if (!yyjson_is_str(url))
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s.url must be a string", who);
        snprintf(sub, sizeof(sub), "%s.url", who);
        if ((err = add_url(s, yyjson_get_str(url), sub, diag)))
            return err;
    }
    if (urls) {
        if (!yyjson_is_arr(urls) || !yyjson_arr_size(urls))
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s.urls must be a non-empty array", who);
        yyjson_val *u;
        yyjson_arr_foreach(urls, i, max, u)
        {
            snprintf(sub, sizeof(sub), "%s.urls[%zu]", who, i);
            if (!yyjson_is_str(u))
                return qr_diag_set(diag, QR_ERR_CONFIG, "%s must be a string", sub);
            if ((err = add_url(s, yyjson_get_str(u), sub, diag)))
                return err;
        }
    }
    bool is_openai = !strcmp(s->kind, "openai");
    if (!strcmp(s->kind, "llamacpp") && s->n_urls)
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "%s: a llamacpp backend is run by the Runtime and has no url (an "
                           "llama-server you run yourself is kind 'openai')",
                           who);
    if (!strcmp(s->kind, "ollama") && s->n_urls > 1)
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s: an ollama backend has one url", who);
    if (is_openai && !s->n_urls)
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s: an openai backend needs 'url' or 'urls'", who);
    if (!is_openai && (s->dialect || s->reasoning_field || s->api_key_env || s->parsers.set))
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "%s: dialect, reasoning_field, api_key_env and parsers apply to kind "
                           "'openai' only",
                           who);
    if (s->parsers.auto_tool_choice && !s->parsers.tool_call)
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "%s.parsers: auto_tool_choice needs a tool_call parser (vLLM refuses "
                           "--enable-auto-tool-choice without --tool-call-parser)",
                           who);
    if (s->api_key_env && !env_name_ok(s->api_key_env))
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "%s.api_key_env: '%s' is not an environment variable name", who,
                           s->api_key_env);
    if (is_openai && !s->dialect)
        s->dialect = xstrdup("auto");
    s->listed = true;
    return QR_OK;
}

enum qr_err qr_cfg_backends_parse(struct qr_config *cfg, yyjson_val *arr, const char *who,
                                  struct qr_diag *diag)
{
    if (!yyjson_is_arr(arr) || !yyjson_arr_size(arr))
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s must be a non-empty array of objects", who);
    if (yyjson_arr_size(arr) > QR_BACKENDS_MAX)
        return qr_diag_set(diag, QR_ERR_CONFIG, "%s has more than %u entries", who,
                           QR_BACKENDS_MAX);
    qr_cfg_backends_free(cfg);
    cfg->backends = calloc(yyjson_arr_size(arr), sizeof(*cfg->backends));
    if (!cfg->backends)
        abort();
    size_t i, max;
    yyjson_val *e;
    unsigned managed = 0;
    yyjson_arr_foreach(arr, i, max, e)
    {
        char ewho[200];
        snprintf(ewho, sizeof(ewho), "%s[%zu]", who, i);
        struct qr_backend_spec *s = &cfg->backends[cfg->n_backends++];
        enum qr_err err = parse_entry(s, e, ewho, diag);
        if (err)
            return err;
        for (size_t j = 0; j + 1 < cfg->n_backends; j++) {
            if (!strcmp(cfg->backends[j].id, s->id))
                return qr_diag_set(diag, QR_ERR_CONFIG, "%s.id: '%s' is used by entry %zu too",
                                   ewho, s->id, j);
        }
        if (!strcmp(s->kind, "llamacpp") && ++managed > 1)
            return qr_diag_set(diag, QR_ERR_CONFIG,
                               "%s: only one llamacpp backend (the Runtime runs its processes "
                               "itself; one entry serves every local model)",
                               ewho);
    }
    return QR_OK;
}

/* The single backend of a configuration without a list. */
static void legacy(struct qr_config *cfg)
{
    struct qr_backend_spec *s = calloc(1, sizeof(*s));
    if (!s)
        abort();
    bool managed = !strcmp(cfg->backend, "llama.cpp");
    bool openai = !strcmp(cfg->backend, "openai");
    s->id = xstrdup(cfg->backend);
    s->kind = xstrdup(managed ? "llamacpp" : openai ? "openai" : "ollama");
    if (!managed) {
        s->urls = malloc(sizeof(*s->urls));
        if (!s->urls)
            abort();
        s->urls[0] = xstrdup(openai ? cfg->openai_url : cfg->ollama_url);
        s->n_urls = 1;
    }
    if (openai) {
        s->dialect = xstrdup(cfg->openai_dialect);
        if (cfg->source[QR_CFG_OPENAI_REASONING_FIELD] != QR_SRC_DEFAULT)
            s->reasoning_field = xstrdup(cfg->openai_reasoning_field);
        s->api_key = xstrdup(cfg->openai_api_key);
    }
    cfg->backends = s;
    cfg->n_backends = 1;
}

static const char *env_get(char **envp, const char *name)
{
    size_t n = strlen(name);
    for (char **e = envp; e && *e; e++) {
        if (!strncmp(*e, name, n) && (*e)[n] == '=')
            return *e + n + 1;
    }
    return NULL;
}

enum qr_err qr_cfg_backends_finish(struct qr_config *cfg, char **envp, struct qr_diag *diag)
{
    if (!cfg->n_backends) {
        legacy(cfg);
        return QR_OK;
    }
    if (cfg->source[QR_CFG_BACKEND] != QR_SRC_DEFAULT)
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "'backend' and the config file's 'backends' list cannot both be set: "
                           "the first entry of 'backends' is the default backend");
    for (size_t i = 0; i < cfg->n_backends; i++) {
        struct qr_backend_spec *s = &cfg->backends[i];
        if (!strcmp(s->kind, "ollama") && !s->n_urls) {
            s->urls = malloc(sizeof(*s->urls));
            if (!s->urls)
                abort();
            s->urls[0] = xstrdup(cfg->ollama_url);
            s->n_urls = 1;
        }
        free(s->api_key);
        s->api_key = NULL;
        if (s->api_key_env) {
            const char *v = env_get(envp, s->api_key_env);
            if (!v || !v[0])
                return qr_diag_set(diag, QR_ERR_CONFIG,
                                   "backends[%zu] ('%s'): api_key_env names %s, which is not set "
                                   "in the environment",
                                   i, s->id, s->api_key_env);
            s->api_key = xstrdup(v);
        } else {
            s->api_key = xstrdup("");
        }
    }
    return QR_OK;
}

const struct qr_backend_spec *qr_config_backend_find(const struct qr_config *cfg, const char *id)
{
    for (size_t i = 0; id && i < cfg->n_backends; i++) {
        if (!strcmp(cfg->backends[i].id, id))
            return &cfg->backends[i];
    }
    return NULL;
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

bool qr_cfg_backends_equal(const struct qr_config *a, const struct qr_config *b)
{
    if (a->n_backends != b->n_backends)
        return false;
    for (size_t i = 0; i < a->n_backends; i++) {
        const struct qr_backend_spec *x = &a->backends[i], *y = &b->backends[i];
        if (!str_eq(x->id, y->id) || !str_eq(x->kind, y->kind) || !str_eq(x->dialect, y->dialect) ||
            !str_eq(x->reasoning_field, y->reasoning_field) ||
            !str_eq(x->api_key_env, y->api_key_env) || !str_eq(x->api_key, y->api_key) ||
            x->parsers.set != y->parsers.set ||
            !str_eq(x->parsers.tool_call, y->parsers.tool_call) ||
            !str_eq(x->parsers.reasoning, y->parsers.reasoning) ||
            x->parsers.auto_tool_choice != y->parsers.auto_tool_choice || x->n_urls != y->n_urls ||
            x->max_queue != y->max_queue ||
            memcmp(&x->parallelism, &y->parallelism, sizeof(x->parallelism)))
            return false;
        for (size_t j = 0; j < x->n_urls; j++) {
            if (strcmp(x->urls[j], y->urls[j]))
                return false;
        }
    }
    return true;
}

/* A URL as shown: without its query string. */
static void shown_url(const char *u, char *out, size_t cap)
{
    snprintf(out, cap, "%.*s", (int) strcspn(u, "?"), u);
}

void qr_cfg_backends_print_json(const struct qr_config *cfg, yyjson_mut_doc *doc,
                                yyjson_mut_val *root)
{
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, root, "backends");
    char tmp[4200];
    for (size_t i = 0; i < cfg->n_backends; i++) {
        const struct qr_backend_spec *s = &cfg->backends[i];
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
        yyjson_mut_obj_add_strcpy(doc, o, "id", s->id);
        yyjson_mut_obj_add_strcpy(doc, o, "kind", s->kind);
        yyjson_mut_obj_add_bool(doc, o, "default", i == 0);
        yyjson_mut_obj_add_str(doc, o, "source", s->listed ? "file" : "settings");
        yyjson_mut_val *u = yyjson_mut_obj_add_arr(doc, o, "urls");
        for (size_t j = 0; j < s->n_urls; j++) {
            shown_url(s->urls[j], tmp, sizeof(tmp));
            yyjson_mut_arr_add_strcpy(doc, u, tmp);
        }
        if (s->dialect)
            yyjson_mut_obj_add_strcpy(doc, o, "dialect", s->dialect);
        if (s->reasoning_field)
            yyjson_mut_obj_add_strcpy(doc, o, "reasoning_field", s->reasoning_field);
        if (s->api_key_env)
            yyjson_mut_obj_add_strcpy(doc, o, "api_key_env", s->api_key_env);
        if (!strcmp(s->kind, "openai"))
            yyjson_mut_obj_add_str(doc, o, "api_key",
                                   s->api_key && s->api_key[0] ? "<redacted>" : "");
        if (s->max_queue)
            yyjson_mut_obj_add_uint(doc, o, "max_queue", s->max_queue);
        if (s->parsers.set) {
            yyjson_mut_val *pv = yyjson_mut_obj_add_obj(doc, o, "parsers");
            if (s->parsers.tool_call)
                yyjson_mut_obj_add_strcpy(doc, pv, "tool_call", s->parsers.tool_call);
            yyjson_mut_obj_add_bool(doc, pv, "auto_tool_choice", s->parsers.auto_tool_choice);
            if (s->parsers.reasoning)
                yyjson_mut_obj_add_strcpy(doc, pv, "reasoning", s->parsers.reasoning);
        }
    }
}

void qr_cfg_backends_print_text(const struct qr_config *cfg, FILE *out)
{
    char tmp[4200];
    for (size_t i = 0; i < cfg->n_backends; i++) {
        const struct qr_backend_spec *s = &cfg->backends[i];
        fprintf(out, "backends[%zu]=%s kind=%s%s", i, s->id, s->kind, i == 0 ? " default" : "");
        for (size_t j = 0; j < s->n_urls; j++) {
            shown_url(s->urls[j], tmp, sizeof(tmp));
            fprintf(out, " url=%s", tmp);
        }
        if (s->dialect)
            fprintf(out, " dialect=%s", s->dialect);
        if (s->api_key_env)
            fprintf(out, " api_key_env=%s", s->api_key_env);
        fprintf(out, " (%s)\n", s->listed ? "file" : "settings");
    }
}
