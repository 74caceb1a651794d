/* `quantum-runtime inspect FILE [--json] [--ctx N]`: open a GGUF file with the hardened reader,
 * derive the architecture contract (gguf/arch.h) and print it, one `key: value` line per field or
 * one JSON object, followed by the memory sizing (gguf/sizing.h): weight bytes by class and the
 * f16 KV cache for N cells (default: the model's context_length when the file states it). A
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
    f_bool(o, "add_bos_token", &a->add_bos_token);
    f_bool(o, "add_space_prefix", &a->add_space_prefix);
    f_template(o, a);
    f_quant(o, a);
    f_unknown_keys(o, a);
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

#define KV_F16_X100 200u /* f16 K and V elements: 2 bytes each */

/* The sizing section: text lines `weights.<class>: N` (non-empty classes), `weight_bytes`,
 * `kv.ctx`, `kv.bytes_per_token`, `kv.bytes` or `kv: unknown (<reason>)`; in JSON one "sizing"
 * object with the same fields ("kv" null and "kv_unknown" the reason when unknown). n_ctx 0 means
 * no context length is known (none given, none stated): the KV part is unknown (no_ctx). */
static void print_sizing(struct out *o, const struct qr_sizing *s, uint64_t n_ctx)
{
    const char *reason = !n_ctx                        ? "no_ctx"
                         : s->kv != QR_SIZING_KV_KNOWN ? qr_sizing_kv_name(s->kv)
                                                       : NULL;
    if (o->json) {
        key(o, "sizing");
        puts_(o, "{\"weights\":{");
        bool first = true;
        for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++) {
            if (!s->cls[c].n_tensors && !s->cls[c].bytes)
                continue;
            putf(o, "%s\"%s\":%" PRIu64, first ? "" : ",", qr_sizing_class_name(c),
                 s->cls[c].bytes);
            first = false;
        }
        putf(o, "},\"weight_bytes\":%" PRIu64 ",\"kv\":", s->weight_bytes);
        if (reason)
            putf(o, "null,\"kv_unknown\":\"%s\"", reason);
        else
            putf(o,
                 "{\"ctx\":%" PRIu64 ",\"type\":\"f16\",\"bytes_per_token\":%" PRIu64
                 ",\"bytes\":%" PRIu64 "}",
                 n_ctx, s->kv_bytes_per_token, s->kv_bytes);
        puts_(o, "}");
        return;
    }
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++)
        if (s->cls[c].n_tensors || s->cls[c].bytes)
            putf(o, "weights.%s: %" PRIu64 "\n", qr_sizing_class_name(c), s->cls[c].bytes);
    putf(o, "weight_bytes: %" PRIu64 "\n", s->weight_bytes);
    if (reason) {
        putf(o, "kv: unknown (%s)\n", reason);
        return;
    }
    putf(o, "kv.ctx: %" PRIu64 "\n", n_ctx);
    putf(o, "kv.bytes_per_token: %" PRIu64 "\n", s->kv_bytes_per_token);
    putf(o, "kv.bytes: %" PRIu64 "\n", s->kv_bytes);
}

int qr_cli_inspect(int argc, char **argv)
{
    bool json = false;
    const char *path = NULL;
    uint64_t n_ctx = 0; /* 0: the model's context_length */
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--ctx")) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            char *endp = NULL;
            errno = 0;
            unsigned long long x = strtoull(v, &endp, 10);
            if (!*v || *endp || errno || v[0] == '-' || v[0] == '+' || !x) {
                fprintf(stderr,
                        "quantum-runtime inspect: --ctx wants a positive integer, got '%s'\n", v);
                return 2;
            }
            n_ctx = (uint64_t) x;
        } else if (path || argv[i][0] == '-') {
            fprintf(stderr, "quantum-runtime inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "usage: quantum-runtime inspect FILE [--json] [--ctx N]\n");
        return 2;
    }
    struct qr_diag diag = {{0}};
    struct qr_gguf *g = NULL;
    struct qr_arch arch;
    int rc = 1;
    if (qr_gguf_open(path, NULL, &diag, &g)) {
        fprintf(stderr, "quantum-runtime inspect: %s\n", diag.msg);
        goto done;
    }
    if (qr_gguf_arch_derive(g, &arch, &diag)) {
        fprintf(stderr, "quantum-runtime inspect: cannot inspect '%s': %s\n", path, diag.msg);
        goto done;
    }
    if (!n_ctx && arch.context_length.known)
        n_ctx = arch.context_length.v;
    struct qr_sizing sz;
    /* n_ctx 0 (unknown) still sizes the weights: size for 1 cell, then report the KV unknown.
     * QR_ERR_TOO_LARGE leaves the weights filled and sz.kv OVERFLOW, printed as unknown. */
    enum qr_err se = qr_gguf_size(g, &arch, n_ctx ? n_ctx : 1, KV_F16_X100, &sz, &diag);
    if (se && se != QR_ERR_TOO_LARGE) {
        fprintf(stderr, "quantum-runtime inspect: cannot size '%s': %s\n", path, diag.msg);
        goto done;
    }
    struct out o = {.json = json, .first = true};
    qr_buf_init(&o.b, 0);
    puts_(&o, json ? "{" : "");
    print_contract(&o, &arch);
    print_companions(&o, g, &arch, path);
    print_sizing(&o, &sz, n_ctx);
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
    return rc;
}
