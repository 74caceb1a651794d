/* ggml_peer: the installed engine's own GGUF code, called through its public C API, so that our
 * reader can be compared with it in the same run and our ggml type table checked against it.
 * It links nothing of the project and loads libggml-base.so.0 with dlopen, because that library
 * needs the private prefix's newer glibc: run it through scripts/engine-exec, which uses the
 * prefix's own dynamic loader (the system's libc is not touched).
 *
 *   ggml_peer types          one line per ggml type id the library names:
 *                            "<id> <name> <block elements> <block bytes>"
 *   ggml_peer gguf FILE N    open FILE's metadata N times (no tensor data: no_alloc, no ggml
 *                            context) and print the best time in ms
 *
 * The declarations below restate the documented public API (ggml.h, gguf.h) for the symbols it
 * resolves. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct gguf_init_params {
    bool no_alloc;
    void **ctx; /* struct ggml_context ** */
};

typedef const char *(*type_name_fn)(int type);
typedef int64_t (*blck_size_fn)(int type);
typedef size_t (*type_size_fn)(int type);
typedef void *(*gguf_init_fn)(const char *fname, struct gguf_init_params params);
typedef void (*gguf_free_fn)(void *ctx);
typedef int64_t (*gguf_count_fn)(const void *ctx);

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "ggml_peer: %s not found: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/* The ids the library knows. Its name and size functions index a traits table without a bound
 * check and its type count is not exported, so every id is probed in a child process: the walk
 * stops at the first id whose name is not a type name (or whose probe crashes). Removed ids (the
 * library names them "DEPRECATED" or "... REMOVED ...") print as "<id> removed". */
static bool plain_name(const char *n)
{
    if (!n || !*n || strlen(n) > 16)
        return false;
    for (const char *c = n; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            return false;
    return true;
}

static int probe(void *lib, int id)
{
    type_name_fn name = (type_name_fn) sym(lib, "ggml_type_name");
    blck_size_fn blck = (blck_size_fn) sym(lib, "ggml_blck_size");
    type_size_fn size = (type_size_fn) sym(lib, "ggml_type_size");
    const char *n = name(id);
    if (n && (strcmp(n, "DEPRECATED") == 0 || strstr(n, "REMOVED"))) {
        printf("%d removed\n", id);
        return 0;
    }
    if (!plain_name(n) || strcmp(n, "NONE") == 0)
        return 3;
    int64_t b = blck(id);
    size_t z = size(id);
    if (b < 1 || b > 65536 || z < 1 || z > 65536)
        return 3;
    printf("%d %s %lld %zu\n", id, n, (long long) b, z);
    return 0;
}

static int types(void *lib)
{
    for (int id = 0; id < 256; id++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0)
            _exit(probe(lib, id) == 0 && fflush(stdout) == 0 ? 0 : 3);
        int st = 0;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            break;
    }
    return 0;
}

static int gguf(void *lib, const char *file, int iters)
{
    gguf_init_fn init = (gguf_init_fn) sym(lib, "gguf_init_from_file");
    gguf_free_fn done = (gguf_free_fn) sym(lib, "gguf_free");
    gguf_count_fn n_kv = (gguf_count_fn) sym(lib, "gguf_get_n_kv");
    gguf_count_fn n_t = (gguf_count_fn) sym(lib, "gguf_get_n_tensors");
    double best = 1e18;
    int64_t kv = 0, nt = 0;
    for (int i = 0; i < iters; i++) {
        struct gguf_init_params p = {true, NULL};
        double t0 = now_ms();
        void *ctx = init(file, p);
        double t = now_ms() - t0;
        if (!ctx) {
            fprintf(stderr, "ggml_peer: gguf_init_from_file('%s') failed\n", file);
            return 1;
        }
        kv = n_kv(ctx);
        nt = n_t(ctx);
        done(ctx);
        best = t < best ? t : best;
    }
    printf("%.4f %lld %lld\n", best, (long long) kv, (long long) nt);
    return 0;
}

int main(int argc, char **argv)
{
    void *lib = dlopen("libggml-base.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr,
                "ggml_peer: cannot load libggml-base.so.0: %s (run it through "
                "scripts/engine-exec)\n",
                dlerror());
        return 1;
    }
    int rc = 2;
    if (argc == 2 && strcmp(argv[1], "types") == 0)
        rc = types(lib);
    else if (argc == 4 && strcmp(argv[1], "gguf") == 0 && atoi(argv[3]) > 0)
        rc = gguf(lib, argv[2], atoi(argv[3]));
    else
        fprintf(stderr, "usage: ggml_peer types | ggml_peer gguf FILE N\n");
    dlclose(lib);
    return rc;
}
