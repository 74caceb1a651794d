/* registry/registry.h for files that also include capability/capability.h (router.h does).
 *
 * registry/manifest.h names its capability bits QR_CAP_AUDIO, QR_CAP_EMBEDDINGS,
 * QR_CAP_REASONING_CONTROL, QR_CAP_RERANKING, QR_CAP_STRUCTURED_OUTPUT and QR_CAP_VISION, the same
 * names capability.h gives its keys, so the two headers cannot meet in one file. Including this
 * header instead of registry/registry.h renames the manifest's six bits to QR_MCAP_* for that
 * file (the values are unchanged; the other bits keep their names). Include it before or after
 * capability.h; a file that includes registry/registry.h directly as well must include this one
 * first. To be removed once the registry renames its bits. */
#ifndef QR_ROUTER_WITH_REGISTRY_H
#define QR_ROUTER_WITH_REGISTRY_H

#ifdef QR_REGISTRY_MANIFEST_H
#error "include router/with_registry.h before registry/registry.h or registry/manifest.h"
#endif

#define QR_CAP_AUDIO             QR_MCAP_AUDIO
#define QR_CAP_EMBEDDINGS        QR_MCAP_EMBEDDINGS
#define QR_CAP_REASONING_CONTROL QR_MCAP_REASONING_CONTROL
#define QR_CAP_RERANKING         QR_MCAP_RERANKING
#define QR_CAP_STRUCTURED_OUTPUT QR_MCAP_STRUCTURED_OUTPUT
#define QR_CAP_VISION            QR_MCAP_VISION
#include "registry/registry.h"
#undef QR_CAP_AUDIO
#undef QR_CAP_EMBEDDINGS
#undef QR_CAP_REASONING_CONTROL
#undef QR_CAP_RERANKING
#undef QR_CAP_STRUCTURED_OUTPUT
#undef QR_CAP_VISION

#endif
