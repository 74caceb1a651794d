/* Kept for files written while registry/manifest.h and capability/capability.h shared six enum
 * names; the manifest's capability bits are now QR_MANIFEST_CAP_*, so this only includes the
 * registry. New code includes registry/registry.h directly. */
#ifndef QR_ROUTER_WITH_REGISTRY_H
#define QR_ROUTER_WITH_REGISTRY_H

#include "registry/registry.h"

#endif
