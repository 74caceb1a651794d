/* `quantum-runtime host [--json]`: the host profile and limits (host/profile.h), the same document
 * GET /v1/host answers. Text: one `key: value` line per fact. Exit 0, 2 on a usage error, 1 when
 * out of memory. */
#include <stdio.h>
#include <string.h>

#include <yyjson.h>

#include "host/profile.h"
#include "router/router.h" /* QR_ROUTE_API_VERSION */

int qr_cli_host(int argc, char **argv); /* the CLI table in main.c */

/* Text form: every scalar as path: value, arrays of scalars joined by spaces. */
static void print_text(yyjson_mut_val *v, const char *prefix)
{
    if (yyjson_mut_is_obj(v)) {
        size_t i, max;
        yyjson_mut_val *k, *x;
        yyjson_mut_obj_foreach(v, i, max, k, x)
        {
            char path[256];
            snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "",
                     yyjson_mut_get_str(k));
            print_text(x, path);
        }
        return;
    }
    if (yyjson_mut_is_arr(v)) {
        size_t i, max;
        yyjson_mut_val *x;
        bool scalars = true;
        yyjson_mut_arr_foreach(v, i, max, x) scalars = scalars && !yyjson_mut_is_ctn(x);
        if (!scalars) {
            yyjson_mut_arr_foreach(v, i, max, x)
            {
                char path[256];
                snprintf(path, sizeof path, "%s[%zu]", prefix, i);
                print_text(x, path);
            }
            return;
        }
        printf("%s:", prefix);
        yyjson_mut_arr_foreach(v, i, max, x)
        {
            char *s = yyjson_mut_val_write(x, 0, NULL);
            const char *t = yyjson_mut_is_str(x) ? yyjson_mut_get_str(x) : s;
            printf(" %s", t ? t : "");
            free(s);
        }
        printf("\n");
        return;
    }
    if (yyjson_mut_is_str(v)) {
        printf("%s: %s\n", prefix, yyjson_mut_get_str(v));
        return;
    }
    char *s = yyjson_mut_val_write(v, 0, NULL);
    printf("%s: %s\n", prefix, s ? s : "");
    free(s);
}

int qr_cli_host(int argc, char **argv)
{
    bool json = false;
    for (int i = 0; i < argc; i++) { /* argv: what follows the command name */
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else {
            fprintf(stderr, "host: unknown argument '%s' (usage: host [--json])\n", argv[i]);
            return 2;
        }
    }
    yyjson_mut_doc *doc = qr_host_document(NULL, QR_ROUTE_API_VERSION);
    if (!doc) {
        fprintf(stderr, "host: out of memory\n");
        return 1;
    }
    if (json) {
        char *s = yyjson_mut_write(doc, YYJSON_WRITE_PRETTY_TWO_SPACES, NULL);
        if (s)
            printf("%s\n", s);
        free(s);
    } else {
        yyjson_mut_val *root = yyjson_mut_doc_get_root(doc);
        print_text(yyjson_mut_obj_get(root, "host"), "host");
        print_text(yyjson_mut_obj_get(root, "limits"), "limits");
    }
    yyjson_mut_doc_free(doc);
    return 0;
}
