/* Starting an engine child process the one way the llama.cpp backend does it (posix_spawn, no
 * fork of the daemon's address space): stdin from /dev/null, stdout and stderr into one given
 * descriptor, every other descriptor closed, its own process group (so that one kill reaches the
 * wrapper script and whatever it execs), default signal dispositions and an empty signal mask (the
 * daemon ignores SIGPIPE; the engine must not inherit that), and the daemon's environment minus
 * every LLAMA_* variable, so that no engine setting reaches the engine except through the plan. */
#ifndef QR_BACKEND_LLAMACPP_SPAWN_H
#define QR_BACKEND_LLAMACPP_SPAWN_H

#include <sys/types.h>

#include "core/err.h"

/* Spawn path with argv (argv[0] first, NULL-terminated; borrowed). out_fd (borrowed) becomes the
 * child's stdout and stderr. extra_env: NULL or a NULL-terminated list of "NAME=value" strings
 * (borrowed) added to the environment. The child's pid is also its process group id. */
enum qr_err qr_llama_spawn(const char *path, char *const argv[], int out_fd,
                           const char *const *extra_env, struct qr_diag *diag, pid_t *out);

/* Signal the child's whole process group (pgid = pid); falls back to the pid alone when the group
 * is gone. No-op for pid <= 0. */
void qr_llama_spawn_kill(pid_t pid, int sig);

#endif
