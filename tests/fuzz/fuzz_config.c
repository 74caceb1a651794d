/* libFuzzer target for the configuration file: the whole input is the file named by --config,
 * read by the real loader (core/config.c qr_config_load: every setting, JSON arrays for the list
 * settings, the `backends` list of core/config_backends.c with urls, dialects, api_key_env,
 * parsers, parallelism), through a memfd named as /proc/self/fd/N. Any input must load or fail
 * with QR_ERR_CONFIG and a message. A file that loads must: have a default backend and find
 * every backend by its own id; print (text and JSON, as check-config does) without the upstream
 * key's value; reload from the same sources with no change to warn about; and load again to an
 * equal backend list.
 *
 * Seeds in corpus/fuzz_config: the documented backends example, single-backend files with every
 * kind of setting, list settings as arrays, and one file per rejection class (unknown key,
 * duplicate id, second llamacpp, bad URL, api_key_env unset, wrong types, not an object). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "core/config_backends.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET "fuzz-secret-9f3c"

static char *envp[] = {"HOME=/nonexistent-fuzz-home", "QR_FUZZ_KEY=" SECRET,
                       "QR_FUZZ_EMPTY=", NULL};

static void no_secret(const struct qr_config *cfg, bool json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        abort();
    qr_config_print(cfg, json, f);
    fclose(f);
    if (len == 0 || memmem(text, len, SECRET, strlen(SECRET)))
        abort();
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64], flag[80];
    if (fd < 0) {
        fd = memfd_create("fuzz-config", 0);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        snprintf(flag, sizeof flag, "--config=%s", path);
    }
    if (size > 65536)
        return 0;
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t) size))
        abort();
    char *argv[] = {"--config", path};
    struct qr_config cfg;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_config_load(&cfg, 2, argv, envp, &d);
    if (err != QR_OK) {
        if (err != QR_ERR_CONFIG || d.msg[0] == '\0')
            abort();
        if (getenv("QR_FUZZ_VERBOSE")) /* why a seed is refused */
            fprintf(stderr, "refused: %s\n", d.msg);
        return 0;
    }
    if (cfg.n_backends < 1 || !cfg.backends || !cfg.config_file || strcmp(cfg.config_file, path))
        abort();
    for (size_t i = 0; i < cfg.n_backends; i++) {
        const struct qr_backend_spec *b = &cfg.backends[i];
        if (!b->id || !b->kind || qr_config_backend_find(&cfg, b->id) != b)
            abort();
    }
    if (!memmem(data, size, SECRET, strlen(SECRET))) { /* else the file itself holds it */
        no_secret(&cfg, false);
        no_secret(&cfg, true);
    }
    struct qr_diag warn = {{0}};
    if (qr_config_reload(&cfg, 2, argv, envp, &warn, &d) != QR_OK || warn.msg[0] != '\0')
        abort();
    char *argv2[] = {flag};
    struct qr_config again;
    if (qr_config_load(&again, 1, argv2, envp, &d) != QR_OK || !qr_cfg_backends_equal(&cfg, &again))
        abort();
    qr_config_cleanup(&again);
    qr_config_cleanup(&cfg);
    return 0;
}
