/* What a canonical request needs from the engine that serves it: the request -> required
 * capability mapping of capability.h, read off struct qr_request field by field, so that a
 * request no candidate can serve is refused naming the capability instead of being answered in a
 * degraded way (an image silently ignored, tools silently dropped). */
#include "capability/capability.h"

#include "contract/request.h"

static bool parts_have(const struct qr_part *parts, size_t n, enum qr_part_kind kind)
{
    for (size_t i = 0; parts && i < n; i++) {
        if (parts[i].kind == kind)
            return true;
    }
    return false;
}

/* Content parts of every message plus the generate "images". */
static bool request_has_part(const struct qr_request *req, enum qr_part_kind kind)
{
    if (parts_have(req->images, req->n_images, kind))
        return true;
    for (size_t i = 0; req->messages && i < req->n_messages; i++) {
        if (parts_have(req->messages[i].parts, req->messages[i].n_parts, kind))
            return true;
    }
    return false;
}

/* Earlier tool calls or tool results the chat template has to render. */
static bool history_has_tools(const struct qr_request *req)
{
    for (size_t i = 0; req->messages && i < req->n_messages; i++) {
        const struct qr_message *m = &req->messages[i];
        if (m->n_tool_calls > 0 || m->role == QR_ROLE_TOOL)
            return true;
    }
    return false;
}

/* Tools the model may call in this answer. */
static bool tools_callable(const struct qr_request *req)
{
    enum qr_tool_choice_kind tc = req->tool_choice.kind;
    if (tc == QR_TOOL_CHOICE_REQUIRED || tc == QR_TOOL_CHOICE_FUNCTION)
        return true;
    return req->n_tools > 0 && tc != QR_TOOL_CHOICE_NONE;
}

struct qr_cap_set qr_cap_required(const struct qr_request *req)
{
    struct qr_cap_set s = QR_CAP_SET_EMPTY;
    if (!req)
        return s;
    if (req->op == QR_OP_EMBED)
        return qr_cap_required_for_endpoint(QR_CAP_EP_EMBED);
    if (req->op == QR_OP_RERANK)
        return qr_cap_required_for_endpoint(QR_CAP_EP_RERANK);
    /* every other op generates text; an op this table does not know still needs text */
    qr_cap_set_add(&s, QR_CAP_INFERENCE_TEXT);

    bool callable = tools_callable(req);
    if (callable || history_has_tools(req))
        qr_cap_set_add(&s, QR_CAP_TOOLS_CALLING);
    if (req->think.kind != QR_THINK_UNSET)
        qr_cap_set_add(&s, QR_CAP_REASONING_CONTROL);
    if (req->format.kind == QR_FORMAT_JSON || req->format.kind == QR_FORMAT_SCHEMA)
        qr_cap_set_add(&s, QR_CAP_STRUCTURED_OUTPUT);
    if (request_has_part(req, QR_PART_IMAGE))
        qr_cap_set_add(&s, QR_CAP_VISION);
    if (request_has_part(req, QR_PART_AUDIO))
        qr_cap_set_add(&s, QR_CAP_AUDIO);

    if (req->stream) {
        qr_cap_set_add(&s, QR_CAP_STREAM_CONTENT);
        if (callable) {
            qr_cap_set_add(&s, QR_CAP_TOOLS_STREAMING);
            qr_cap_set_add(&s, QR_CAP_STREAM_TOOL_ARGS);
        }
        if (req->think.kind == QR_THINK_ON || req->think.kind == QR_THINK_LEVEL)
            qr_cap_set_add(&s, QR_CAP_STREAM_REASONING);
    }
    return s;
}

struct qr_cap_set qr_cap_required_for_endpoint(enum qr_cap_endpoint ep)
{
    struct qr_cap_set s = QR_CAP_SET_EMPTY;
    switch (ep) {
    case QR_CAP_EP_CHAT:
    case QR_CAP_EP_COMPLETION:
        qr_cap_set_add(&s, QR_CAP_INFERENCE_TEXT);
        break;
    case QR_CAP_EP_EMBED:
        qr_cap_set_add(&s, QR_CAP_EMBEDDINGS);
        break;
    case QR_CAP_EP_RERANK:
        qr_cap_set_add(&s, QR_CAP_RERANKING);
        break;
    }
    return s;
}
