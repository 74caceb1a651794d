/* libFuzzer target for the Ollama native upstream decoder (NDJSON framing, line
 * interpretation, whole tool calls with exact argument serialization, think splitting, whole
 * bodies, embeddings and error bodies). Input layout: byte 0 = flags (think tags, stream flag,
 * transport ending, small caps, status, content type / embeddings), bytes 1-2 = a split
 * position, the rest = the upstream body. The body is decoded whole, split in two at that
 * position, and (when short) one byte at a time: the three event logs must be identical, every
 * log must satisfy the order contract (qr_answer_add) and end in exactly one DONE or ERROR. Any
 * difference aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codec.h"
#include "contract/event.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PROTO        QR_UP_OLLAMA
#define STREAM_CTYPE "application/x-ndjson"

#include "fuzz_upstream_common.h"
