/* Names of the canonical request's enums, for logs and encoders. */
#include "contract/request.h"

const char *qr_role_str(enum qr_role r)
{
    switch (r) {
    case QR_ROLE_SYSTEM:
        return "system";
    case QR_ROLE_USER:
        return "user";
    case QR_ROLE_ASSISTANT:
        return "assistant";
    case QR_ROLE_TOOL:
        return "tool";
    case QR_ROLE_DEVELOPER:
        return "developer";
    }
    return "user";
}
