/* libFuzzer target for the OpenAI-compatible upstream decoder (SSE framing, chunk
 * interpretation, tool-call assembly, think splitting, whole and error bodies). Input layout:
 * byte 0 = flags (think tags, stream flag, transport ending, small caps, status, content type),
 * bytes 1-2 = a split position (odd with a JSON content type and no stream flag: the request is
 * a rerank of three documents), the rest = the upstream body. The body is decoded whole, split
 * in two at that position, and (when short) one byte at a time: the three event logs must be
 * identical, every log must satisfy the order contract (qr_answer_add) and end in exactly one
 * DONE or ERROR. Any difference aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codec.h"
#include "contract/event.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PROTO        QR_UP_OPENAI
#define STREAM_CTYPE "text/event-stream"

#include "fuzz_upstream_common.h"
