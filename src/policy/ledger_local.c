/* The local ledger file writer (ledger_local.h): read-modify-write of
 * <state_dir>/upstream-ledger.local.json under a file lock, entries and blocks replaced by id, and
 * a save that only ever renames a document the ledger's own parser accepted (alone and merged
 * with the builtin ledger) over the old file. */
#include "policy/ledger_local.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "policy/pjson.h"

static enum qr_err lock(struct qr_ledger_local *l, struct qr_diag *diag)
{
    char lp[4300];
    snprintf(lp, sizeof lp, "%s.lock", l->path);
    l->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (l->lock_fd < 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot open '%s': %s", lp, strerror(errno));
    for (unsigned waited = 0;; waited += 50) {
        if (flock(l->lock_fd, LOCK_EX | LOCK_NB) == 0)
            return QR_OK;
        if (errno != EWOULDBLOCK || waited >= QR_LEDGER_LOCK_WAIT_MS)
            break;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    close(l->lock_fd);
    l->lock_fd = -1;
    return qr_diag_set(diag, QR_ERR_BUSY, "'%s' is being written by another process", l->path);
}

/* The file's text (NUL-terminated, malloc'd), NULL with *missing when it does not exist. */
static char *read_text(const char *path, size_t *len, bool *missing, struct qr_diag *diag)
{
    *missing = false;
    FILE *f = fopen(path, "rb");
    if (!f) {
        *missing = errno == ENOENT;
        if (!*missing)
            qr_diag_set(diag, QR_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(QR_PJ_MAX_FILE + 1);
    if (!buf)
        abort();
    size_t n = fread(buf, 1, QR_PJ_MAX_FILE + 1, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad || n > QR_PJ_MAX_FILE) {
        free(buf);
        qr_diag_set(diag, bad ? QR_ERR_IO : QR_ERR_TOO_LARGE, "cannot read '%s': %s", path,
                    bad ? "read error" : "larger than 1 MiB");
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void start_empty(struct qr_ledger_local *l)
{
    l->doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = l->doc ? yyjson_mut_obj(l->doc) : NULL;
    if (!root)
        abort();
    yyjson_mut_doc_set_root(l->doc, root);
    yyjson_mut_obj_add_str(l->doc, root, "schema_version", QR_LEDGER_SCHEMA);
}

/* entries and blocks arrays exist in the root (created empty when absent). */
static void ensure_lists(struct qr_ledger_local *l)
{
    yyjson_mut_val *root = yyjson_mut_doc_get_root(l->doc);
    l->entries = yyjson_mut_obj_get(root, "entries");
    if (!l->entries)
        l->entries = yyjson_mut_obj_add_arr(l->doc, root, "entries");
    l->blocks = yyjson_mut_obj_get(root, "blocks");
    if (!l->blocks)
        l->blocks = yyjson_mut_obj_add_arr(l->doc, root, "blocks");
    if (!l->entries || !l->blocks)
        abort();
}

enum qr_err qr_ledger_local_open(const char *state_dir, struct qr_ledger_local *out,
                                 struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    out->lock_fd = -1;
    if (!state_dir || !state_dir[0])
        return qr_diag_set(diag, QR_ERR_CONFIG, "no state_dir for the local ledger");
    if (snprintf(out->path, sizeof out->path, "%s/%s", state_dir, QR_LEDGER_LOCAL_FILE) >=
        (int) sizeof out->path)
        return qr_diag_set(diag, QR_ERR_INVALID, "state_dir is too long");
    qr_mkdir_p(state_dir, false);
    enum qr_err err = lock(out, diag);
    if (err != QR_OK)
        return err;
    size_t len = 0;
    bool missing;
    char *text = read_text(out->path, &len, &missing, diag);
    if (!text && !missing) {
        qr_ledger_local_cleanup(out);
        return QR_ERR_IO;
    }
    if (!text) {
        start_empty(out);
        ensure_lists(out);
        return QR_OK;
    }
    out->existed = true;
    struct qr_ledger *check = NULL;
    err = qr_ledger_parse_local(out->path, text, len, diag, &check);
    qr_ledger_free(check);
    yyjson_doc *d = err == QR_OK ? yyjson_read(text, len, 0) : NULL;
    free(text);
    if (err == QR_OK)
        out->doc = d ? yyjson_doc_mut_copy(d, NULL) : NULL;
    yyjson_doc_free(d);
    if (err != QR_OK || !out->doc) {
        qr_ledger_local_cleanup(out);
        return err != QR_OK ? err : QR_ERR_NOMEM;
    }
    ensure_lists(out);
    return QR_OK;
}

void qr_ledger_local_cleanup(struct qr_ledger_local *l)
{
    yyjson_mut_doc_free(l->doc);
    l->doc = NULL;
    l->entries = l->blocks = NULL;
    if (l->lock_fd >= 0)
        close(l->lock_fd); /* releases the flock */
    l->lock_fd = -1;
}

static yyjson_mut_val *find(yyjson_mut_val *arr, const char *id, size_t *idx)
{
    size_t i, max;
    yyjson_mut_val *v;
    yyjson_mut_arr_foreach(arr, i, max, v)
    {
        if (yyjson_mut_equals_str(yyjson_mut_obj_get(v, "id"), id)) {
            if (idx)
                *idx = i;
            return v;
        }
    }
    return NULL;
}

yyjson_mut_val *qr_ledger_local_find_entry(const struct qr_ledger_local *l, const char *id)
{
    return find(l->entries, id, NULL);
}

yyjson_mut_val *qr_ledger_local_find_block(const struct qr_ledger_local *l, const char *id)
{
    return find(l->blocks, id, NULL);
}

static enum qr_err put(yyjson_mut_val *arr, yyjson_mut_val *obj)
{
    const char *id = yyjson_mut_get_str(yyjson_mut_obj_get(obj, "id"));
    if (!yyjson_mut_is_obj(obj) || !id)
        return QR_ERR_INVALID;
    size_t idx;
    if (find(arr, id, &idx))
        yyjson_mut_arr_replace(arr, idx, obj);
    else
        yyjson_mut_arr_append(arr, obj);
    return QR_OK;
}

enum qr_err qr_ledger_local_put_entry(struct qr_ledger_local *l, yyjson_mut_val *obj)
{
    return put(l->entries, obj);
}

enum qr_err qr_ledger_local_put_block(struct qr_ledger_local *l, yyjson_mut_val *obj)
{
    return put(l->blocks, obj);
}

size_t qr_ledger_local_remove_blocks(struct qr_ledger_local *l, const char *prefix)
{
    size_t n = 0, plen = strlen(prefix);
    for (size_t i = yyjson_mut_arr_size(l->blocks); i-- > 0;) {
        const char *id =
            yyjson_mut_get_str(yyjson_mut_obj_get(yyjson_mut_arr_get(l->blocks, i), "id"));
        if (id && strncmp(id, prefix, plen) == 0) {
            yyjson_mut_arr_remove(l->blocks, i);
            n++;
        }
    }
    return n;
}

static char *render(const struct qr_ledger_local *l, size_t *len)
{
    char *s = yyjson_mut_write(l->doc, YYJSON_WRITE_PRETTY_TWO_SPACES, len);
    if (!s)
        abort();
    return s;
}

enum qr_err qr_ledger_local_parse(const struct qr_ledger_local *l, struct qr_ledger **out,
                                  struct qr_diag *diag)
{
    size_t len = 0;
    char *text = render(l, &len);
    enum qr_err err = qr_ledger_parse_local(l->path, text, len, diag, out);
    free(text);
    return err;
}

/* Validated alone and merged with the builtin ledger (no id in both). */
static enum qr_err validate(const struct qr_ledger_local *l, const char *text, size_t len,
                            struct qr_diag *diag)
{
    struct qr_ledger *local = NULL, *builtin = NULL, *merged = NULL;
    enum qr_err err = qr_ledger_parse_local(l->path, text, len, diag, &local);
    if (err != QR_OK)
        return err;
    err = qr_ledger_load_builtin(diag, &builtin);
    if (err != QR_OK) {
        qr_ledger_free(local);
        return err;
    }
    err = qr_ledger_merge(builtin, local, l->path, diag, &merged); /* takes both */
    qr_ledger_free(merged);
    return err;
}

enum qr_err qr_ledger_local_save(struct qr_ledger_local *l, struct qr_diag *diag)
{
    size_t len = 0;
    char *text = render(l, &len);
    enum qr_err err = validate(l, text, len, diag);
    if (err != QR_OK) {
        free(text);
        return err;
    }
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", l->path, (long) getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0;
    for (size_t off = 0; ok && off < len;) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        off += ok ? (size_t) w : 0;
    }
    ok = ok && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    int saved = errno;
    if (fd >= 0 && close(fd) != 0)
        ok = false;
    free(text);
    if (!ok || rename(tmp, l->path) != 0) {
        saved = ok ? errno : saved;
        unlink(tmp);
        return qr_diag_set(diag, QR_ERR_IO, "cannot write '%s': %s", l->path, strerror(saved));
    }
    /* the rename itself survives a crash once the directory is synced */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", l->path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        int dfd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    l->existed = true;
    return QR_OK;
}
