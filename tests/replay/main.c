/* qr-replay command line: load the transcripts, bind, publish the port (stdout and, atomically,
 * the --port-file), serve until SIGTERM or SIGINT, exit 0. See tests/replay/README.md. */
#include "replay.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: qr-replay [--listen HOST:PORT] [--port-file FILE] [--log FILE]\n"
               "                 TRANSCRIPT.json|DIR [...]\n"
               "  --listen     address to bind (default 127.0.0.1:0, an ephemeral port)\n"
               "  --port-file  write the bound port here (atomically: temp file + rename)\n"
               "  --log        append every received request as one JSON line\n"
               "control endpoints: GET /__replay/requests, POST /__replay/reset,\n"
               "                   GET /__replay/exchanges\n");
}

static enum qr_err write_port_file(const char *path, int port, struct qr_diag *diag)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long) getpid()) >= (int) sizeof(tmp))
        return qr_diag_set(diag, QR_ERR_CONFIG, "port file path too long '%s'", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return qr_diag_set(diag, QR_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    int bad = fprintf(f, "%d\n", port) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return qr_diag_set(diag, QR_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    return QR_OK;
}

int main(int argc, char **argv)
{
    const char *listen_addr = "127.0.0.1:0", *port_file = NULL, *log_file = NULL;
    struct qr_replay_set set;
    struct qr_replay_log log;
    struct qr_replay_server *srv = NULL;
    struct qr_diag diag = {{0}};
    enum qr_err err = QR_OK;
    int n_transcripts = 0, port = 0;

    qr_replay_set_init(&set);
    memset(&log, 0, sizeof(log));
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    for (int i = 1; i < argc && !err; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            qr_replay_set_cleanup(&set);
            return 0;
        }
        const char **opt = strcmp(a, "--listen") == 0      ? &listen_addr
                           : strcmp(a, "--port-file") == 0 ? &port_file
                           : strcmp(a, "--log") == 0       ? &log_file
                                                           : NULL;
        if (opt) {
            if (i + 1 >= argc) {
                err = qr_diag_set(&diag, QR_ERR_CONFIG, "option '%s' needs a value", a);
                break;
            }
            *opt = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            err = qr_diag_set(&diag, QR_ERR_CONFIG, "unknown option '%s'", a);
        } else {
            err = qr_replay_set_load(&set, a, &diag);
            n_transcripts++;
        }
    }
    if (!err && !n_transcripts) {
        usage(stderr);
        err = qr_diag_set(&diag, QR_ERR_CONFIG, "no transcript given");
    }
    if (!err)
        err = qr_replay_log_open(&log, log_file, &diag);
    if (!err)
        err = qr_replay_server_new(&set, &log, listen_addr, &srv, &port, &diag);
    if (!err && port_file)
        err = write_port_file(port_file, port, &diag);
    if (err)
        goto fail;

    char host[256];
    snprintf(host, sizeof(host), "%s", listen_addr);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    printf("qr-replay listening on %s:%d\n", host, port);
    fprintf(stderr, "qr-replay: %zu exchanges loaded\n", set.n);

    err = qr_replay_server_run(srv);
    if (err)
        qr_diag_set(&diag, err, "event loop failed");
fail:
    if (err)
        fprintf(stderr, "qr-replay: %s\n", diag.msg[0] ? diag.msg : qr_err_str(err));
    qr_replay_server_free(srv);
    qr_replay_log_close(&log);
    qr_replay_set_cleanup(&set);
    return err ? 1 : 0;
}
