/* GET /v1/host: the host profile and limits (host/profile.h), discovered on every call. */
#include <yyjson.h>

#include "api/api.h"
#include "core/http_server.h"
#include "host/profile.h"
#include "router/router.h" /* QR_ROUTE_API_VERSION */

void qr_api_host(struct qr_app *app, struct qr_http_req *req)
{
    (void) app;
    yyjson_mut_doc *doc = qr_host_document(NULL, QR_ROUTE_API_VERSION);
    if (!doc) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}
