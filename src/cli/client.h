/* Client subcommands that talk to a running daemon over its own HTTP API: `models`, `ps`,
 * `show MODEL` and `run MODEL [PROMPT]` (src/cli/client.c, docs/CLI.md). Each takes the
 * subcommand's arguments (argv after the command name, borrowed) and returns the process exit
 * status: QR_CLI_EXIT_* below. */
#ifndef QR_CLI_CLIENT_H
#define QR_CLI_CLIENT_H

enum {
    QR_CLI_EXIT_OK = 0,
    QR_CLI_EXIT_FAILED = 1,      /* the request failed or the daemon answered an error */
    QR_CLI_EXIT_USAGE = 2,       /* bad arguments */
    QR_CLI_EXIT_UNREACHABLE = 3, /* no connection to the daemon */
    QR_CLI_EXIT_NOT_FOUND = 4,   /* the daemon does not know the model */
    QR_CLI_EXIT_INTERRUPTED = 130
};

int qr_cli_models(int argc, char **argv);
int qr_cli_ps(int argc, char **argv);
int qr_cli_show(int argc, char **argv);
int qr_cli_run(int argc, char **argv);

#endif
