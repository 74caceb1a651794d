#!/usr/bin/env bash
# engine_ggml_types: our ggml tensor type table (ids, names, block elements, block bytes; removed
# ids) equals the installed engine's, read from its own library through its public C API
# (bench/ggml_peer.c run by scripts/engine-exec). A newer engine that adds a type makes this fail
# until the reader knows the type's geometry.
# Usage: test_ggml_types.sh QR_TYPES GGML_PEER ENGINE_EXEC
set -u
ours=$("$1") || { echo "FAIL: qr-types failed" >&2; exit 1; }
# The peer loads the engine's libggml-base; in the sanitizer build LeakSanitizer would report that
# library's own allocations (freed by nobody after dlclose), which are not ours to fix.
theirs=$(ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$3" "$2" types) || { echo "FAIL: ggml_peer types failed (engine prefix missing?)" >&2; exit 1; }
[ "$(grep -c . <<<"$theirs")" -ge 40 ] || { echo "FAIL: the engine named too few types: $theirs" >&2; exit 1; }
if [ "$ours" != "$theirs" ]; then
    echo "FAIL: our ggml type table differs from the engine's (< ours, > engine):" >&2
    diff <(echo "$ours") <(echo "$theirs") >&2
    exit 1
fi
echo "PASS: $(grep -c . <<<"$ours") ggml type ids agree with the engine's library"
