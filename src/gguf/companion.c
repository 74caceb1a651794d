/* Named chat templates and projector files next to a model; see companion.h. */
#include "gguf/companion.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/arch.h"

#define TEMPLATE_PREFIX "tokenizer.chat_template."

static const char *const MATCH_NAMES[] = {"unknown", "match", "mismatch"};

const char *qr_projector_match_name(unsigned m)
{
    return m < sizeof MATCH_NAMES / sizeof MATCH_NAMES[0] ? MATCH_NAMES[m] : NULL;
}

/* Copy a slice into a NUL-terminated buffer, cut at cap - 1 bytes. */
static void copy_cut(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

size_t qr_gguf_named_templates(const struct qr_gguf *g, struct qr_gguf_template *out, size_t cap)
{
    size_t plen = strlen(TEMPLATE_PREFIX), n = 0;
    for (size_t i = 0; i < qr_gguf_kv_count(g); i++) {
        const struct qr_gguf_kv *kv = qr_gguf_kv_at(g, i);
        if (kv->key.len <= plen || memcmp(kv->key.ptr, TEMPLATE_PREFIX, plen) != 0 ||
            kv->type != QR_GGUF_STR)
            continue;
        if (n < cap) {
            struct qr_gguf_template *t = &out[n];
            struct qr_slice v = {(const char *) kv->val, (size_t) kv->val_len};
            copy_cut(t->name, sizeof t->name, kv->key.ptr + plen, kv->key.len - plen);
            t->bytes = kv->val_len;
            qr_sha256(v.ptr, v.len, t->sha256);
            t->markers = qr_arch_template_markers(v);
        }
        n++;
    }
    return n;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool get_bool(const struct qr_gguf *g, const char *key, bool *out)
{
    return qr_gguf_get_bool(g, key, out) == QR_OK;
}

static uint64_t get_dim(const struct qr_gguf *g, const char *key)
{
    const struct qr_gguf_kv *kv = qr_gguf_find(g, key);
    uint64_t v = 0;
    if (!kv || qr_gguf_kv_u64(kv, &v) != QR_OK)
        return 0;
    return v;
}

/* Fill p from an open file; false when it is not a projector. */
static bool describe(const struct qr_gguf *g, const char *file, uint64_t n_embd,
                     struct qr_gguf_projector *p)
{
    struct qr_slice arch;
    if (qr_gguf_get_str(g, "general.architecture", &arch) != QR_OK || arch.len != 4 ||
        memcmp(arch.ptr, "clip", 4) != 0)
        return false;
    memset(p, 0, sizeof *p);
    copy_cut(p->file, sizeof p->file, file, strlen(file));
    static const char *const TYPE_KEYS[] = {"clip.projector_type", "clip.vision.projector_type",
                                            "clip.audio.projector_type"};
    for (size_t i = 0; i < sizeof TYPE_KEYS / sizeof TYPE_KEYS[0]; i++) {
        struct qr_slice t;
        if (qr_gguf_get_str(g, TYPE_KEYS[i], &t) == QR_OK) {
            size_t k = 0; /* printable ASCII only: the value is printed */
            for (size_t j = 0; j < t.len && k + 1 < sizeof p->projector_type; j++)
                if (t.ptr[j] >= 0x20 && t.ptr[j] < 0x7f)
                    p->projector_type[k++] = t.ptr[j];
            p->projector_type[k] = '\0';
            break;
        }
    }
    p->vision_known = get_bool(g, "clip.has_vision_encoder", &p->vision);
    p->audio_known = get_bool(g, "clip.has_audio_encoder", &p->audio);
    p->vision_projection_dim = get_dim(g, "clip.vision.projection_dim");
    p->audio_projection_dim = get_dim(g, "clip.audio.projection_dim");
    uint64_t dims[2] = {p->vision_projection_dim, p->audio_projection_dim};
    p->match = QR_PROJECTOR_UNKNOWN;
    if (n_embd) {
        for (size_t i = 0; i < 2; i++) {
            if (!dims[i])
                continue;
            if (dims[i] == n_embd) {
                p->match = QR_PROJECTOR_MATCH;
                break;
            }
            p->match = QR_PROJECTOR_MISMATCH;
        }
    }
    return true;
}

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const struct qr_gguf_projector *) a)->file,
                  ((const struct qr_gguf_projector *) b)->file);
}

enum qr_err qr_gguf_find_projectors(const char *model_path, uint64_t n_embd,
                                    struct qr_gguf_projector *out, size_t cap, size_t *n_found,
                                    struct qr_diag *diag)
{
    *n_found = 0;
    char dir[PATH_MAX];
    const char *slash = strrchr(model_path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == model_path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t) (slash - model_path) >= sizeof dir)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "model path too long");
    else
        copy_cut(dir, sizeof dir, model_path, (size_t) (slash - model_path));

    struct stat self;
    if (stat(model_path, &self) != 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot stat '%s': %s", model_path, strerror(errno));
    DIR *d = opendir(dir);
    if (!d)
        return qr_diag_set(diag, QR_ERR_IO, "cannot read directory '%s': %s", dir, strerror(errno));
    struct dirent *e;
    size_t scanned = 0, kept = 0;
    /* Every projector is counted; out keeps the first cap in name order, so the candidates are
     * collected in a scratch array of all of them (bounded by the scan cap) and sorted. */
    struct qr_gguf_projector *all = NULL;
    size_t n_all = 0, cap_all = 0;
    enum qr_err err = QR_OK;
    while ((e = readdir(d)) != NULL && scanned < QR_COMPANION_MAX_SCAN) {
        scanned++;
        if (!ends_with(e->d_name, ".gguf") || strlen(e->d_name) >= QR_COMPANION_NAME_MAX)
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int) sizeof path)
            continue;
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
            (st.st_dev == self.st_dev && st.st_ino == self.st_ino))
            continue;
        struct qr_gguf *g = NULL;
        struct qr_diag ignored;
        if (qr_gguf_open(path, NULL, &ignored, &g) != QR_OK)
            continue; /* a bad neighbour is not the model's problem */
        struct qr_gguf_projector p;
        bool is = describe(g, e->d_name, n_embd, &p);
        qr_gguf_close(g);
        if (!is)
            continue;
        if (n_all == cap_all) {
            size_t nc = cap_all ? cap_all * 2 : 4;
            struct qr_gguf_projector *grown = realloc(all, nc * sizeof *grown);
            if (!grown) {
                err = qr_diag_set(diag, QR_ERR_NOMEM, "out of memory listing projectors");
                break;
            }
            all = grown;
            cap_all = nc;
        }
        all[n_all++] = p;
    }
    closedir(d);
    if (err == QR_OK) {
        if (n_all > 1)
            qsort(all, n_all, sizeof *all, cmp_file);
        kept = n_all < cap ? n_all : cap;
        if (kept)
            memcpy(out, all, kept * sizeof *out);
        *n_found = n_all;
    }
    free(all);
    return err;
}
