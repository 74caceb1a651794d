/* `quantum-runtime inspect FILE [--json] [--ctx N]`: open a GGUF file with the hardened reader,
 * derive the architecture contract (gguf/arch.h) and print it, one `key: value` line per field or
 * one JSON object, followed by the memory sizing (gguf/sizing.h): weight bytes by class, the
 * f16 KV caches llama-server allocates for N cells (default: the model's context_length when the
 * file states it) and its compute buffer (an estimate), for the engine flags given (--parallel,
 * --kv-unified, --batch, --ubatch, --flash-attn, --non-causal; llama-server's defaults). A
 * field the contract cannot read prints `unknown` (JSON null); unknown `<arch>.*` keys are listed
 * by name. Exit 0 on success, 2 on a usage error, 1 when the file cannot be read. */
#include <inttypes.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "gguf/arch.h"
#include "gguf/companion.h"
#include "gguf/gguf.h"
#include "gguf/hfconfig.h"
#include "gguf/sha256.h"
#include "gguf/sizing.h"

int qr_cli_inspect(int argc, char **argv); /* the CLI table in main.c */

/* Output in either form into one buffer; a failed append (NOMEM) is sticky. */
struct out {
    struct qr_buf b;
    bool json, first;
    enum qr_err err;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (!o->err)
        o->err = qr_buf_append(&o->b, s, n);
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3))) putf(struct out *o, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(o, tmp, (size_t) n < sizeof tmp ? (size_t) n : sizeof tmp - 1);
}

/* A file-supplied string: JSON-escaped (bytes >= 0x7f as \u00XX) or, in text, printable ASCII
 * with everything else as \xNN so that a file cannot drive the terminal. */
static void put_str(struct out *o, struct qr_slice s)
{
    if (o->json)
        puts_(o, "\"");
    for (size_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char) s.ptr[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            put(o, (const char *) &c, 1);
        else if (o->json)
            putf(o, "\\u%04x", c);
        else
            putf(o, "\\x%02x", c);
    }
    if (o->json)
        puts_(o, "\"");
}

static void key(struct out *o, const char *k)
{
    if (o->json)
        putf(o, "%s\"%s\":", o->first ? "" : ",", k);
    else
        putf(o, "%s: ", k);
    o->first = false;
}

static void unknown(struct out *o)
{
    puts_(o, o->json ? "null" : "unknown");
}

static void end(struct out *o)
{
    if (!o->json)
        puts_(o, "\n");
}

static void f_u64(struct out *o, const char *k, const struct qr_arch_u64 *v)
{
    key(o, k);
    if (v->known)
        putf(o, "%" PRIu64, v->v);
    else
        unknown(o);
    end(o);
}

static void f_f64(struct out *o, const char *k, const struct qr_arch_f64 *v)
{
    key(o, k);
    if (!v->known)
        unknown(o);
    else if (o->json && !isfinite(v->v))
        putf(o, "\"%g\"", v->v); /* JSON has no NaN or Infinity: a string */
    else
        putf(o, "%.9g", v->v);
    end(o);
}

static void f_bool(struct out *o, const char *k, const struct qr_arch_bool *v)
{
    key(o, k);
    if (v->known)
        puts_(o, v->v ? "true" : "false");
    else
        unknown(o);
    end(o);
}

static void f_str(struct out *o, const char *k, const struct qr_arch_str *v)
{
    key(o, k);
    if (v->known)
        put_str(o, v->v);
    else
        unknown(o);
    end(o);
}

/* A static name (quoted in JSON) or unknown. */
static void f_name(struct out *o, const char *k, const char *name)
{
    key(o, k);
    if (!name)
        unknown(o);
    else if (o->json)
        putf(o, "\"%s\"", name);
    else
        puts_(o, name);
    end(o);
}

static void f_layers(struct out *o, const char *k, const struct qr_arch_layers *v)
{
    key(o, k);
    if (!v->known) {
        unknown(o);
    } else if (!v->arr) {
        putf(o, "%" PRIu64, v->min);
    } else {
        puts_(o, "[");
        for (uint64_t i = 0; i < v->arr->arr_len; i++) {
            uint64_t x = 0;
            qr_arch_layers_at(v, i, &x);
            putf(o, "%s%" PRIu64, i ? "," : "", x);
        }
        puts_(o, "]");
    }
    end(o);
}

static void f_pattern(struct out *o, const struct qr_arch_pattern *p)
{
    key(o, "attention.sliding_window_pattern");
    if (!p->known) {
        unknown(o);
    } else {
        puts_(o, "[");
        for (uint64_t il = 0; il < p->n_layers; il++) {
            bool swa = false;
            qr_arch_pattern_swa(p, il, &swa);
            putf(o, "%s%s", il ? "," : "", swa ? "true" : "false");
        }
        puts_(o, "]");
    }
    end(o);
    key(o, "attention.global_layers");
    if (!p->known) {
        unknown(o);
    } else {
        puts_(o, "[");
        bool first = true;
        for (uint64_t il = 0; il < p->n_layers; il++) {
            bool swa = true;
            qr_arch_pattern_swa(p, il, &swa);
            if (!swa)
                putf(o, "%s%" PRIu64, first ? "" : ",", il);
            first &= swa;
        }
        puts_(o, "]");
    }
    end(o);
}

static void f_template(struct out *o, const struct qr_arch *a)
{
    key(o, "chat_template.sha256");
    if (a->chat_template_known) {
        char hex[QR_SHA256_HEX];
        qr_sha256_hex(a->chat_template_sha256, hex);
        putf(o, o->json ? "\"%s\"" : "%s", hex);
    } else {
        unknown(o);
    }
    end(o);
    f_u64(o, "chat_template.bytes",
          &(struct qr_arch_u64){a->chat_template_known, a->chat_template_len});
    key(o, "chat_template.markers");
    if (!a->chat_template_known) {
        unknown(o);
    } else {
        puts_(o, "[");
        bool first = true;
        for (unsigned i = 0; i < QR_ARCH_TPL_MARKER_COUNT; i++) {
            if (!(a->chat_template_markers & (1u << i)))
                continue;
            putf(o, o->json ? "%s\"%s\"" : "%s%s", first ? "" : ",", qr_arch_marker_name(1u << i));
            first = false;
        }
        puts_(o, "]");
    }
    end(o);
}

static void f_quant(struct out *o, const struct qr_arch *a)
{
    f_u64(o, "file_type", &a->file_type);
    f_name(o, "file_type.name", a->file_type.known ? qr_arch_file_type_name(a->file_type.v) : NULL);
    f_u64(o, "tensors", &(struct qr_arch_u64){true, a->n_tensors});
    key(o, "tensor_types");
    puts_(o, o->json ? "{" : "");
    bool first = true;
    for (uint32_t t = 0; t < QR_GGML_TYPE_COUNT; t++) {
        if (!a->tensor_type_count[t])
            continue;
        const struct qr_ggml_type_info *ti = qr_ggml_type_get(t);
        const char *name = ti ? ti->name : "?";
        if (o->json)
            putf(o, "%s\"%s\":{\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", first ? "" : ",",
                 name, a->tensor_type_count[t], a->tensor_type_bytes[t]);
        else
            putf(o, "%s%s=%" PRIu64 " (%" PRIu64 " bytes)", first ? "" : ", ", name,
                 a->tensor_type_count[t], a->tensor_type_bytes[t]);
        first = false;
    }
    puts_(o, o->json ? "}" : "");
    end(o);
    f_u64(o, "params.total", &a->params_total);
    f_u64(o, "params.active", &a->params_active);
}

static void f_unknown_keys(struct out *o, const struct qr_arch *a)
{
    f_u64(o, "unknown_keys.count", &(struct qr_arch_u64){a->architecture.known, a->n_unknown_keys});
    key(o, "unknown_keys");
    if (!a->architecture.known) {
        unknown(o);
    } else {
        puts_(o, "[");
        size_t n =
            a->n_unknown_keys < QR_ARCH_MAX_UNKNOWN ? a->n_unknown_keys : QR_ARCH_MAX_UNKNOWN;
        for (size_t i = 0; i < n; i++) {
            puts_(o, i ? "," : "");
            put_str(o, a->unknown_keys[i]);
        }
        puts_(o, "]");
    }
    end(o);
}

/* Values the contract refused: JSON `"invalid":[{"field","value","reason"}]`, text one
 * `invalid: field=value (reason)` item per refusal joined by ", " (or `invalid: none`). */
static void f_invalid(struct out *o, const struct qr_arch *a)
{
    key(o, "invalid");
    puts_(o, o->json ? "[" : (a->n_invalid ? "" : "none"));
    size_t n = a->n_invalid < QR_ARCH_MAX_INVALID ? a->n_invalid : QR_ARCH_MAX_INVALID;
    for (size_t i = 0; i < n; i++) {
        const struct qr_arch_invalid *v = &a->invalid[i];
        if (o->json)
            putf(o, "%s{\"field\":\"%s\",\"value\":%" PRIu64 ",\"reason\":\"%s\"}", i ? "," : "",
                 v->field, v->value, v->reason);
        else
            putf(o, "%s%s=%" PRIu64 " (%s)", i ? ", " : "", v->field, v->value, v->reason);
    }
    puts_(o, o->json ? "]" : "");
    end(o);
}

static void print_contract(struct out *o, const struct qr_arch *a)
{
    static const char *const FFN[] = {NULL, "dense", "moe"};
    f_str(o, "architecture", &a->architecture);
    f_u64(o, "block_count", &a->block_count);
    f_u64(o, "embedding_length", &a->embedding_length);
    f_u64(o, "context_length", &a->context_length);
    f_layers(o, "feed_forward_length", &a->feed_forward_length);
    f_layers(o, "attention.head_count", &a->head_count);
    f_layers(o, "attention.head_count_kv", &a->head_count_kv);
    f_u64(o, "attention.key_length", &a->key_length);
    f_u64(o, "attention.value_length", &a->value_length);
    f_u64(o, "attention.key_length_swa", &a->key_length_swa);
    f_u64(o, "attention.value_length_swa", &a->value_length_swa);
    f_u64(o, "attention.head_dim_k", &a->head_dim_k);
    f_u64(o, "attention.head_dim_v", &a->head_dim_v);
    f_u64(o, "attention.head_dim_k_swa", &a->head_dim_k_swa);
    f_u64(o, "attention.head_dim_v_swa", &a->head_dim_v_swa);
    f_bool(o, "attention.head_dims_from_tensors",
           &(struct qr_arch_bool){true, a->head_dims_from_tensors});
    f_u64(o, "attention.kv_lora_rank", &a->kv_lora_rank);
    f_u64(o, "attention.q_lora_rank", &a->q_lora_rank);
    f_u64(o, "attention.key_length_mla", &a->key_length_mla);
    f_u64(o, "attention.value_length_mla", &a->value_length_mla);
    f_bool(o, "attention.causal", &a->causal);
    f_f64(o, "attention.layer_norm_epsilon", &a->layer_norm_epsilon);
    f_f64(o, "attention.layer_norm_rms_epsilon", &a->layer_norm_rms_epsilon);
    f_u64(o, "attention.sliding_window", &a->sliding_window);
    f_pattern(o, &a->sliding_window_pattern);
    f_u64(o, "attention.shared_kv_layers", &a->shared_kv_layers);
    f_f64(o, "rope.freq_base", &a->rope_freq_base);
    f_f64(o, "rope.freq_base_swa", &a->rope_freq_base_swa);
    f_u64(o, "rope.dimension_count", &a->rope_dimension_count);
    f_u64(o, "rope.dimension_count_swa", &a->rope_dimension_count_swa);
    f_str(o, "rope.scaling.type", &a->rope_scaling_type);
    f_f64(o, "rope.scaling.factor", &a->rope_scaling_factor);
    f_name(o, "ffn", FFN[a->ffn]);
    f_u64(o, "expert_count", &a->expert_count);
    f_u64(o, "expert_used_count", &a->expert_used_count);
    f_u64(o, "expert_shared_count", &a->expert_shared_count);
    f_u64(o, "expert_feed_forward_length", &a->expert_feed_forward_length);
    f_u64(o, "leading_dense_block_count", &a->leading_dense_block_count);
    f_u64(o, "expert_gating_func", &a->expert_gating_func);
    f_name(o, "expert_gating_func.name",
           a->expert_gating_func.known ? qr_arch_gating_name(a->expert_gating_func.v) : NULL);
    f_f64(o, "expert_weights_scale", &a->expert_weights_scale);
    f_bool(o, "expert_weights_norm", &a->expert_weights_norm);
    f_u64(o, "nextn_predict_layers", &a->nextn_predict_layers);
    f_bool(o, "per_layer_embeddings", &a->per_layer_embeddings);
    f_u64(o, "embedding_length_per_layer_input", &a->embedding_length_per_layer_input);
    f_f64(o, "final_logit_softcapping", &a->final_logit_softcapping);
    f_f64(o, "attn_logit_softcapping", &a->attn_logit_softcapping);
    f_u64(o, "pooling_type", &a->pooling_type);
    f_name(o, "pooling_type.name",
           a->pooling_type.known ? qr_arch_pooling_name(a->pooling_type.v) : NULL);
    f_str(o, "tokenizer.model", &a->tokenizer_model);
    f_str(o, "tokenizer.pre", &a->tokenizer_pre);
    f_u64(o, "vocab_size", &a->vocab_size);
    f_u64(o, "bos_token_id", &a->bos_token_id);
    f_u64(o, "eos_token_id", &a->eos_token_id);
    f_u64(o, "pad_token_id", &a->pad_token_id);
    f_u64(o, "token_type_count", &a->token_type_count);
    f_bool(o, "add_bos_token", &a->add_bos_token);
    f_bool(o, "add_space_prefix", &a->add_space_prefix);
    f_template(o, a);
    f_quant(o, a);
    f_unknown_keys(o, a);
    f_invalid(o, a);
}

/* Named chat templates (`chat_templates`: name, sha256, bytes, markers) and projector files in
 * the model's directory (`projectors`: file, projector_type, vision, audio, projection dims,
 * match against embedding_length); see gguf/companion.h. In text, one line per item. */
static void put_markers(struct out *o, unsigned bits)
{
    puts_(o, "[");
    bool first = true;
    for (unsigned i = 0; i < QR_ARCH_TPL_MARKER_COUNT; i++) {
        if (!(bits & (1u << i)))
            continue;
        putf(o, o->json ? "%s\"%s\"" : "%s%s", first ? "" : ",", qr_arch_marker_name(1u << i));
        first = false;
    }
    puts_(o, "]");
}

static void print_companions(struct out *o, const struct qr_gguf *g, const struct qr_arch *a,
                             const char *path)
{
    struct qr_gguf_template t[QR_COMPANION_MAX_TEMPLATES];
    size_t nt = qr_gguf_named_templates(g, t, QR_COMPANION_MAX_TEMPLATES);
    size_t shown = nt < QR_COMPANION_MAX_TEMPLATES ? nt : QR_COMPANION_MAX_TEMPLATES;
    key(o, "chat_templates");
    putf(o, o->json ? "[" : "%zu\n", nt);
    for (size_t i = 0; i < shown; i++) {
        char hex[QR_SHA256_HEX];
        qr_sha256_hex(t[i].sha256, hex);
        if (o->json) {
            putf(o, "%s{\"name\":", i ? "," : "");
            put_str(o, qr_slice_str(t[i].name));
            putf(o, ",\"sha256\":\"%s\",\"bytes\":%" PRIu64 ",\"markers\":", hex, t[i].bytes);
            put_markers(o, t[i].markers);
            puts_(o, "}");
        } else {
            puts_(o, "  chat_template.");
            put_str(o, qr_slice_str(t[i].name));
            putf(o, ": sha256 %s, %" PRIu64 " bytes, markers ", hex, t[i].bytes);
            put_markers(o, t[i].markers);
            puts_(o, "\n");
        }
    }
    if (o->json)
        puts_(o, "]");

    struct qr_gguf_projector p[QR_COMPANION_MAX_PROJECTORS];
    size_t np = 0;
    struct qr_diag d = {{0}};
    uint64_t n_embd = a->embedding_length.known ? a->embedding_length.v : 0;
    bool listed =
        qr_gguf_find_projectors(path, n_embd, p, QR_COMPANION_MAX_PROJECTORS, &np, &d) == QR_OK;
    size_t pshown = np < QR_COMPANION_MAX_PROJECTORS ? np : QR_COMPANION_MAX_PROJECTORS;
    key(o, "projectors");
    if (!listed) {
        unknown(o);
        end(o);
        return;
    }
    putf(o, o->json ? "[" : "%zu\n", np);
    for (size_t i = 0; i < pshown; i++) {
        const char *b[3] = {"null", "false", "true"};
        if (o->json) {
            putf(o, "%s{\"file\":", i ? "," : "");
            put_str(o, qr_slice_str(p[i].file));
            puts_(o, ",\"projector_type\":");
            if (p[i].projector_type[0])
                put_str(o, qr_slice_str(p[i].projector_type));
            else
                puts_(o, "null");
            putf(o,
                 ",\"vision\":%s,\"audio\":%s,\"vision_projection_dim\":%" PRIu64
                 ",\"audio_projection_dim\":%" PRIu64 ",\"match\":\"%s\"}",
                 b[p[i].vision_known ? 1 + p[i].vision : 0],
                 b[p[i].audio_known ? 1 + p[i].audio : 0], p[i].vision_projection_dim,
                 p[i].audio_projection_dim, qr_projector_match_name(p[i].match));
        } else {
            puts_(o, "  projector ");
            put_str(o, qr_slice_str(p[i].file));
            puts_(o, ": type ");
            put_str(o, qr_slice_str(p[i].projector_type[0] ? p[i].projector_type : "unknown"));
            putf(o, ", vision %s, audio %s, projection dims %" PRIu64 "/%" PRIu64 ", %s\n",
                 b[p[i].vision_known ? 1 + p[i].vision : 0],
                 b[p[i].audio_known ? 1 + p[i].audio : 0], p[i].vision_projection_dim,
                 p[i].audio_projection_dim, qr_projector_match_name(p[i].match));
        }
    }
    if (o->json) {
        puts_(o, "]");
        end(o);
    }
}

/* The engine the sizing follows (gguf/sizing.h, llama-server's flags): defaults from
 * qr_sizing_params_init, then the flags given. An explicit --parallel clears kv_unified (as -np N
 * does in llama-server) unless --kv-unified is given too. */
struct sizing_flags {
    uint64_t parallel, batch, ubatch; /* 0: not given */
    int unified, flash_attn;          /* -1: not given, else 0/1 */
    bool non_causal;
};

/* A positive decimal integer option value (argv[*i + 1]); false (message printed) when absent or
 * malformed. */
static bool opt_u64(int argc, char **argv, int *i, uint64_t *out)
{
    const char *name = argv[*i], *v = *i + 1 < argc ? argv[++*i] : "";
    char *endp = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &endp, 10);
    if (!*v || *endp || errno || v[0] == '-' || v[0] == '+' || !x) {
        fprintf(stderr, "quantum-runtime inspect: %s wants a positive integer, got '%s'\n", name,
                v);
        return false;
    }
    *out = (uint64_t) x;
    return true;
}

/* One engine flag at argv[*i] into *f: 1 consumed, 0 not an engine flag, -1 malformed. */
static int sizing_flag(int argc, char **argv, int *i, struct sizing_flags *f)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--parallel"))
        return opt_u64(argc, argv, i, &f->parallel) ? 1 : -1;
    if (!strcmp(a, "--batch"))
        return opt_u64(argc, argv, i, &f->batch) ? 1 : -1;
    if (!strcmp(a, "--ubatch"))
        return opt_u64(argc, argv, i, &f->ubatch) ? 1 : -1;
    if (!strcmp(a, "--non-causal")) {
        f->non_causal = true;
        return 1;
    }
    if (!strcmp(a, "--kv-unified") || !strcmp(a, "--no-kv-unified")) {
        f->unified = a[2] == 'k';
        return 1;
    }
    if (!strcmp(a, "--flash-attn")) {
        const char *v = *i + 1 < argc ? argv[++*i] : "";
        f->flash_attn = !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : -1;
        if (f->flash_attn < 0)
            fprintf(stderr, "quantum-runtime inspect: --flash-attn wants on or off, got '%s'\n", v);
        return f->flash_attn < 0 ? -1 : 1;
    }
    return 0;
}

static struct qr_sizing_params sizing_params(const struct sizing_flags *f, uint64_t n_ctx)
{
    struct qr_sizing_params p;
    qr_sizing_params_init(&p, n_ctx);
    if (f->parallel) {
        p.n_seq = f->parallel;
        p.kv_unified = false;
    }
    if (f->unified >= 0)
        p.kv_unified = f->unified;
    if (f->batch)
        p.n_batch = f->batch;
    if (f->ubatch)
        p.n_ubatch = f->ubatch;
    if (f->flash_attn >= 0)
        p.flash_attn = f->flash_attn;
    p.non_causal = f->non_causal;
    return p;
}

/* The sizing section: text lines `weights.<class>: N` (non-empty classes), `weight_bytes`, then
 * `kv.*` lines or `kv: unknown (<reason>)`, `engine.*` and `compute.*` lines or `compute:
 * unknown (<reason>)`; in JSON one "sizing" object with the same fields ("kv" null and
 * "kv_unknown" the reason when unknown; "compute" null and "compute_unknown" likewise). kv.bytes
 * is what llama-server allocates for the engine parameters (both caches of a sliding-window
 * model); kv.bytes_window the window model (sliding layers hold min(ctx, window) cells, nothing
 * padded). n_ctx 0 means no context length is known (none given, none stated): the KV part is
 * unknown (no_ctx). */
static void print_sizing(struct out *o, const struct qr_sizing *s, const struct qr_sizing_params *p,
                         bool weights_known)
{
    const struct qr_sizing_engine *e = &s->eng;
    const char *reason = !p->n_ctx                     ? "no_ctx"
                         : s->kv != QR_SIZING_KV_KNOWN ? qr_sizing_kv_name(s->kv)
                                                       : NULL;
    const char *creason = reason ? "no_kv" : !e->compute_known ? "no_vocab_or_embd" : NULL;
    bool j = o->json;
    const char *sep = j ? "," : "\n", *q = j ? "\"" : "", *eq = j ? "\":" : ": ";
    if (j) {
        key(o, "sizing");
        puts_(o, "{\"weights\":{");
    }
    bool first = true;
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++) {
        if (!s->cls[c].n_tensors && !s->cls[c].bytes)
            continue;
        putf(o, j ? "%s\"%s\":%" PRIu64 : "%sweights.%s: %" PRIu64 "\n", first || !j ? "" : ",",
             qr_sizing_class_name(c), s->cls[c].bytes);
        first = false;
    }
    if (weights_known)
        putf(o, j ? "},\"weight_bytes\":%" PRIu64 ",\"engine\":{" : "weight_bytes: %" PRIu64 "\n",
             s->weight_bytes);
    else /* a config.json has no tensor table: its weights are hf.weight_bytes, when stated */
        puts_(o, j ? "},\"weight_bytes\":null,\"engine\":{" : "weight_bytes: unknown\n");
    const char *pre = j ? "" : "engine.";
    putf(o, "%s%sparallel%s%" PRIu64 "%s", q, pre, eq, p->n_seq, sep);
    putf(o, "%s%skv_unified%s%s%s", q, pre, eq, p->kv_unified ? "true" : "false", sep);
    putf(o, "%s%sbatch%s%" PRIu64 "%s", q, pre, eq, p->n_batch, sep);
    putf(o, "%s%subatch%s%" PRIu64 "%s", q, pre, eq, p->n_ubatch, sep);
    putf(o, "%s%sflash_attn%s%s%s", q, pre, eq, p->flash_attn ? "true" : "false", sep);
    putf(o, "%s%snon_causal%s%s%s", q, pre, eq, p->non_causal || e->no_cache ? "true" : "false",
         j ? "}" : sep);
    if (reason) {
        putf(o, j ? ",\"kv\":null,\"kv_unknown\":\"%s\"" : "kv: unknown (%s)\n", reason);
    } else {
        const struct {
            const char *k;
            uint64_t v;
        } kv[] = {
            {"ctx", p->n_ctx},
            {"bytes_per_token", s->kv_bytes_per_token},
            {"bytes_per_token_full", s->kv_bytes_per_token_full},
            {"bytes", e->kv_bytes},
            {"bytes_full", e->kv_bytes_full},
            {"bytes_swa", e->kv_bytes_swa},
            {"bytes_window", s->kv_bytes},
            {"layers", s->kv_layers},
            {"layers_swa", s->kv_layers_swa},
            {"layers_shared", s->kv_layers_shared},
            {"window", s->kv_window},
            {"streams", e->streams},
            {"cells", e->cells},
            {"cells_swa", e->cells_swa},
            {"ubatch", e->n_ubatch},
        };
        puts_(o, j ? ",\"kv\":{\"type\":\"f16\"" : "kv.type: f16\n");
        putf(o, j ? ",\"mla_absorbed\":%s" : "kv.mla_absorbed: %s\n",
             s->kv_mla_absorbed ? "true" : "false");
        for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
            putf(o, j ? ",\"%s\":%" PRIu64 : "kv.%s: %" PRIu64 "\n", kv[i].k, kv[i].v);
        puts_(o, j ? "}" : "");
    }
    if (creason) {
        putf(o, j ? ",\"compute\":null,\"compute_unknown\":\"%s\"" : "compute: unknown (%s)\n",
             creason);
    } else {
        putf(o,
             j ? ",\"compute\":{\"bytes\":%" PRIu64 ",\"mask\":%" PRIu64 ",\"kq\":%" PRIu64
                 ",\"act\":%" PRIu64 ",\"widest_layer\":%" PRIu64 "}"
               : "compute.bytes: %" PRIu64 "\ncompute.mask: %" PRIu64 "\ncompute.kq: %" PRIu64
                 "\ncompute.act: %" PRIu64 "\ncompute.widest_layer: %" PRIu64 "\n",
             e->compute_bytes, e->compute_mask, e->compute_kq, e->compute_act, e->widest_layer);
    }
    puts_(o, j ? "}" : "");
}

/* The Hugging Face section of a config.json source (gguf/hfconfig.h): `hf.*` lines, or one "hf"
 * object in JSON. The contract above it came from the same rules as a GGUF file's. */
static void print_hf(struct out *o, const struct qr_hfconfig *hf)
{
    static const char *const MODALITIES[] = {"vision", "audio"};
    bool j = o->json;
    if (j) {
        key(o, "hf");
        puts_(o, "{");
        o->first = true;
    }
    const char *pre = j ? "" : "hf.";
    char k[64];
#define HK(name) (snprintf(k, sizeof k, "%s%s", pre, name), k)
    f_str(o, HK("model_type"), &(struct qr_arch_str){true, hf->model_type});
    f_bool(o, HK("architecture_mapped"), &(struct qr_arch_bool){true, hf->arch_mapped});
    f_bool(o, HK("text_config"), &(struct qr_arch_bool){true, hf->text_config});
    key(o, HK("modalities"));
    puts_(o, j ? "[\"text\"" : "[text");
    for (unsigned i = 0; i < QR_ARRAY_LEN(MODALITIES); i++)
        if (hf->modalities & (1u << i))
            putf(o, j ? ",\"%s\"" : ",%s", MODALITIES[i]);
    puts_(o, "]");
    end(o);
    f_bool(o, HK("projector_needed"), &(struct qr_arch_bool){true, hf->modalities != 0});
    f_str(o, HK("dtype"), &hf->dtype);
    f_bool(o, HK("tie_word_embeddings"), &hf->tie_word_embeddings);
    f_str(o, HK("quant_method"), &hf->quant_method);
    f_u64(o, HK("quant_bits"), &hf->quant_bits);
    f_u64(o, HK("quant_group_size"), &hf->quant_group_size);
    f_u64(o, HK("weight_bytes"), &hf->weight_bytes);
    f_name(o, HK("weight_bytes_from"), hf->weight_bytes_from);
    f_u64(o, HK("unknown_fields.count"), &(struct qr_arch_u64){true, hf->n_unknown});
    key(o, HK("unknown_fields"));
    puts_(o, "[");
    for (size_t i = 0; i < hf->n_unknown && i < QR_HF_MAX_UNKNOWN; i++) {
        puts_(o, i ? "," : "");
        put_str(o, (struct qr_slice){hf->unknown[i].name, hf->unknown[i].len});
    }
    puts_(o, "]");
    end(o);
    key(o, HK("notes"));
    puts_(o, "[");
    for (size_t i = 0; i < hf->n_notes; i++) {
        puts_(o, i ? (j ? "," : "; ") : "");
        put_str(o, qr_slice_str(hf->notes[i]));
    }
    puts_(o, "]");
    end(o);
#undef HK
    if (j) {
        puts_(o, "}");
        o->first = false;
    }
}

int qr_cli_inspect(int argc, char **argv)
{
    bool json = false;
    const char *path = NULL;
    uint64_t n_ctx = 0; /* 0: the model's context_length */
    struct sizing_flags sf = {.unified = -1, .flash_attn = -1};
    int flag;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--ctx")) {
            if (!opt_u64(argc, argv, &i, &n_ctx))
                return 2;
        } else if ((flag = sizing_flag(argc, argv, &i, &sf)) != 0) {
            if (flag < 0)
                return 2;
        } else if (path || argv[i][0] == '-') {
            fprintf(stderr, "quantum-runtime inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "usage: quantum-runtime inspect FILE|DIR [--json] [--ctx N] [--parallel N]"
                        " [--kv-unified|--no-kv-unified] [--batch N] [--ubatch N]"
                        " [--flash-attn on|off] [--non-causal]\n");
        return 2;
    }
    struct qr_diag diag = {{0}};
    struct qr_gguf *g = NULL;
    struct qr_hfconfig *hf = NULL; /* a config.json source: hf->gguf holds its keys */
    struct qr_arch arch;
    int rc = 1;
    if (qr_hfconfig_probe(path)) {
        if (qr_hfconfig_open(path, &diag, &hf)) {
            fprintf(stderr, "quantum-runtime inspect: %s\n", diag.msg);
            goto done;
        }
        arch = hf->arch;
    } else if (qr_gguf_open(path, NULL, &diag, &g)) {
        fprintf(stderr, "quantum-runtime inspect: %s\n", diag.msg);
        goto done;
    } else if (qr_gguf_arch_derive(g, &arch, &diag)) {
        fprintf(stderr, "quantum-runtime inspect: cannot inspect '%s': %s\n", path, diag.msg);
        goto done;
    }
    if (!n_ctx && arch.context_length.known)
        n_ctx = arch.context_length.v;
    struct qr_sizing sz;
    /* n_ctx 0 (unknown) still sizes the weights: size for 1 cell, then report the KV unknown.
     * QR_ERR_TOO_LARGE leaves the weights filled and sz.kv OVERFLOW, printed as unknown. */
    struct qr_sizing_params sp = sizing_params(&sf, n_ctx ? n_ctx : 1);
    enum qr_err se = qr_gguf_size_engine(g ? g : hf->gguf, &arch, &sp, &sz, &diag);
    sp.n_ctx = n_ctx;
    if (se && se != QR_ERR_TOO_LARGE) {
        fprintf(stderr, "quantum-runtime inspect: cannot size '%s': %s\n", path, diag.msg);
        goto done;
    }
    struct out o = {.json = json, .first = true};
    qr_buf_init(&o.b, 0);
    puts_(&o, json ? "{" : "");
    if (hf) { /* GGUF output stays as it was: no source line */
        f_name(&o, "source", "hf-config");
        print_contract(&o, &arch);
        print_hf(&o, hf);
    } else {
        print_contract(&o, &arch);
        print_companions(&o, g, &arch, path);
    }
    print_sizing(&o, &sz, &sp, hf == NULL);
    puts_(&o, json ? "}\n" : "");
    if (o.err) {
        fprintf(stderr, "quantum-runtime inspect: %s\n", qr_err_str(o.err));
    } else {
        fwrite(o.b.ptr, 1, o.b.len, stdout);
        rc = fflush(stdout) ? 1 : 0;
    }
    qr_buf_cleanup(&o.b);
done:
    qr_gguf_close(g);
    qr_hfconfig_free(hf);
    return rc;
}
