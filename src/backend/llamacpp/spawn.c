/* Engine child processes: one posix_spawn recipe for the version probe and the supervised
 * llama-server processes. posix_spawn (vfork-like in glibc) keeps the daemon's memory untouched,
 * which matters for a large daemon and for AddressSanitizer builds; the child's descriptors,
 * process group, signals and environment are set by spawn attributes and file actions. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/llamacpp/spawn.h"

#define MAX_ENV  4096 /* environment entries passed on; more is refused */
#define MAX_ARGS 1024 /* argv entries; more is refused */

/* util-linux's setpriv (Essential in Debian) sets the child's parent-death signal and then execs
 * the engine in the same process, so an engine never outlives a daemon that was killed with
 * SIGKILL (posix_spawn has no attribute for PR_SET_PDEATHSIG). The signal survives the engine
 * wrapper's exec. Without setpriv the engine is started directly, as before. */
#define SETPRIV "/usr/bin/setpriv"

extern char **environ;

/* environ minus LLAMA_* plus extra; *out owned by the caller (the strings stay borrowed). */
static enum qr_err build_env(const char *const *extra, struct qr_diag *diag, char ***out)
{
    size_t n = 0, n_extra = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    for (const char *const *e = extra; e && *e; e++)
        n_extra++;
    if (n + n_extra > MAX_ENV)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "environment has more than %d entries", MAX_ENV);
    char **env = calloc(n + n_extra + 1, sizeof *env);
    if (!env)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate the engine environment");
    size_t k = 0;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "LLAMA_", 6) != 0)
            env[k++] = *e;
    for (const char *const *e = extra; e && *e; e++)
        env[k++] = (char *) *e;
    env[k] = NULL;
    *out = env;
    return QR_OK;
}

enum qr_err qr_llama_spawn(const char *path, char *const argv[], int out_fd,
                           const char *const *extra_env, struct qr_diag *diag, pid_t *out)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool have_fa = false, have_attr = false;
    sigset_t none, all;
    char **env = NULL;
    int moved = -1;
    enum qr_err err = build_env(extra_env, diag, &env);
    if (err != QR_OK)
        return err;
    /* a daemon started with closed stdio can get 0..2 for the pipe: the file actions below would
     * overwrite it before it is duplicated, so move it out of the way first */
    if (out_fd < 3) {
        moved = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
        if (moved < 0) {
            err =
                qr_diag_set(diag, QR_ERR_IO, "cannot start '%s': fcntl: %s", path, strerror(errno));
            goto fail;
        }
        out_fd = moved;
    }
    have_fa = posix_spawn_file_actions_init(&fa) == 0;
    have_attr = have_fa && posix_spawnattr_init(&attr) == 0;
    if (!have_attr) {
        err = qr_diag_set(diag, QR_ERR_NOMEM, "cannot start '%s': spawn setup failed", path);
        goto fail;
    }
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    int rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    if (!rc)
        rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    if (!rc)
        rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                 POSIX_SPAWN_SETSIGDEF);
    if (!rc)
        rc = posix_spawnattr_setpgroup(&attr, 0);
    if (!rc)
        rc = posix_spawnattr_setsigmask(&attr, &none);
    if (!rc)
        rc = posix_spawnattr_setsigdefault(&attr, &all);
    /* setpriv --pdeathsig KILL -- path argv[1..]: argv[0] of the engine stays path */
    char *wrapped[MAX_ARGS + 5];
    const char *exe = path;
    char *const *args = argv;
    size_t n = 0;
    while (argv[n] && n < MAX_ARGS)
        n++;
    if (argv[n]) {
        err = qr_diag_set(diag, QR_ERR_TOO_LARGE, "cannot start '%s': more than %d arguments", path,
                          MAX_ARGS);
        goto fail;
    }
    /* what posix_spawn would have said of the engine itself, said before setpriv runs it */
    if (access(path, X_OK) != 0) {
        err = qr_diag_set(diag, QR_ERR_IO, "cannot start '%s': %s", path, strerror(errno));
        goto fail;
    }
    if (access(SETPRIV, X_OK) == 0) {
        wrapped[0] = "setpriv";
        wrapped[1] = "--pdeathsig";
        wrapped[2] = "KILL";
        wrapped[3] = "--";
        wrapped[4] = (char *) path;
        for (size_t i = 1; i <= n; i++)
            wrapped[4 + i] = argv[i];
        exe = SETPRIV;
        args = wrapped;
    }
    pid_t pid = -1;
    if (!rc)
        rc = posix_spawn(&pid, exe, &fa, &attr, args, env);
    if (rc != 0) {
        err = qr_diag_set(diag, QR_ERR_IO, "cannot start '%s': %s", path, strerror(rc));
        goto fail;
    }
    *out = pid;
fail:
    if (have_attr)
        posix_spawnattr_destroy(&attr);
    if (have_fa)
        posix_spawn_file_actions_destroy(&fa);
    if (moved >= 0)
        close(moved);
    free(env);
    return err;
}

void qr_llama_spawn_kill(pid_t pid, int sig)
{
    if (pid <= 0)
        return;
    if (kill(-pid, sig) != 0 && errno == ESRCH)
        kill(pid, sig);
}
