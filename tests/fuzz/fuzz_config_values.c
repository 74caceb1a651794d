/* Fuzz target: the small parsers that read outside text -- configuration values (from env,
 * flags, files), the Host header check and the bearer-token check. The first byte picks the
 * parser; the rest is the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    char *s = malloc(size);
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    uint64_t u;
    bool b;
    char *host = NULL;
    uint16_t port;
    struct qr_diag d;
    switch (data[0] % 7) {
    case 0:
        qr_config_parse_duration_ms(s, &u);
        break;
    case 1:
        qr_config_parse_bytes(s, &u);
        break;
    case 2:
        qr_config_parse_bool(s, &b);
        break;
    case 3:
        if (qr_config_parse_listen(s, &host, &port, &b) == QR_OK)
            free(host);
        break;
    case 4:
        qr_config_check_url(s, &d);
        break;
    case 5:
        qr_api_host_is_loopback_name(s);
        break;
    case 6:
        qr_api_auth_ok(s, "fuzz-token");
        break;
    }
    free(s);
    return 0;
}
