# Quantum Runtime -- the two commands are `make run` and `make test` (see README.md).
# Everything else here is a thin layer over CMake presets (CMakePresets.json) in build/<preset>.

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_JOBS ?= $(JOBS)
CMAKE ?= cmake

.PHONY: all build release debug asan fuzz setup run test test-release test-asan test-tsan \
        format format-check bench fuzz-run fuzz-smoke clean help demo-models

all: release

help:
	@echo "make            build the release binary (build/release/quantum-runtime)"
	@echo "make run        set up what is missing, build, generate the demo models, serve them with llama.cpp on 127.0.0.1:11450"
	@echo "make test       set up what is missing, build, run every test (release, ASan/UBSan, TSan, fuzz smoke)"
	@echo "make test-tsan  ThreadSanitizer on the threaded code (build/tsan; part of make test)"
	@echo "make debug|asan|fuzz   other build presets (build/<preset>)"
	@echo "make bench      proxy-path latency benchmark (bench/README.md)"
	@echo "make fuzz-run   run every fuzz target for FUZZ_SECONDS (default 60) each"
	@echo "make fuzz-smoke the short run in make test: every fuzz target for FUZZ_SMOKE_SECONDS (default 5)"
	@echo "make format     clang-format the tree; make format-check verifies it"

build: release

release debug asan:
	@$(CMAKE) --preset $@ >/dev/null
	@$(CMAKE) --build --preset $@ -j $(JOBS)

fuzz:
	@$(CMAKE) --preset fuzz >/dev/null
	@$(CMAKE) --build --preset fuzz -j $(JOBS)

setup:
	@scripts/setup

# The demo models (generated, never downloaded): the deterministic scripted chat model with its
# draft model (tests/fixtures/SCRIPT.md), a small embedding model and a small reranker, in DEMO_MODELS, which `make
# run` serves as the models directory (their builtin manifests: data/models/).
DEMO_MODELS ?= build/demo-models
demo-models: release
	@mkdir -p $(DEMO_MODELS)
	@build/release/tests/fixtures/qr-gen-scripted $(DEMO_MODELS) >/dev/null
	@build/release/tests/fixtures/qr-gen-fixtures $(DEMO_MODELS) bert-embed-tiny.gguf bert-rerank-tiny.gguf >/dev/null
	@echo "demo models in $(DEMO_MODELS): $$(cd $(DEMO_MODELS) && ls *.gguf | tr '\n' ' ')"

# The Runtime runs llama-server itself (backend=llama.cpp, docs/LLAMACPP.md): the demo models load
# on their first request and unload after keep_alive (5m) idle.
run: setup release demo-models
	build/release/quantum-runtime serve --backend llama.cpp --models-dir $(DEMO_MODELS)

test: setup
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory test-release
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory test-tsan
	@$(MAKE) --no-print-directory fuzz-smoke
	@echo "make test: all suites passed (release, ASan+UBSan, TSan, fuzz smoke run)"

test-release: release
	cd build/release && ctest --output-on-failure -j $(CTEST_JOBS)

test-asan: asan
	cd build/asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(CTEST_JOBS)

# ThreadSanitizer (build/tsan) on what runs more than one thread: the calibration bandwidth
# workers, libcurl's threaded resolver (the curl client tests, the daemon with http_client=curl
# and an upstream host name), the native client's tests. Only those targets are built.
TSAN_TARGETS = unit_host_test_calibrate unit_core_test_http_client unit_core_test_http_native \
               integration_test_curl_resolver
TSAN_TESTS = ^(unit_host_test_calibrate|unit_core_test_http_client|unit_core_test_http_native|integration_test_curl_resolver)$$
test-tsan:
	@$(CMAKE) --preset tsan >/dev/null
	@$(CMAKE) --build --preset tsan -j $(JOBS) --target $(TSAN_TARGETS)
	cd build/tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(CTEST_JOBS) \
	  -R '$(TSAN_TESTS)'

FORMAT_FILES = $(shell git ls-files --cached --others --exclude-standard '*.c' '*.h' 2>/dev/null)

format:
	clang-format -i $(FORMAT_FILES)

format-check:
	@out=$$(clang-format --dry-run $(FORMAT_FILES) 2>&1); \
	if [ -n "$$out" ]; then echo "$$out" | head -40; \
	  echo "format-check: run 'make format'"; exit 1; fi; \
	echo "format-check: $(words $(FORMAT_FILES)) files clean"

bench: setup release
	bench/run-proxy-bench
	@mkdir -p build/bench
	build/release/bench/codec_bench --json build/bench/codec.json
	build/release/bench/gguf_bench --json build/bench/gguf.json --peer scripts/engine-exec build/release/bench/ggml_peer
	build/release/bench/router_bench --json build/bench/router.json
	bench/run-llama-bench
	bench/run-load-bench

FUZZ_SECONDS ?= 60
fuzz-run: fuzz
	@scripts/run-fuzz build/fuzz $(FUZZ_SECONDS)

# The CI short run (in `make test`): new inputs go to build/fuzz/fuzz-out/, never into the repo.
FUZZ_SMOKE_SECONDS ?= 5
fuzz-smoke: fuzz
	@scripts/run-fuzz build/fuzz $(FUZZ_SMOKE_SECONDS)

clean:
	rm -rf build

# Install (docs/OPERATIONS.md "Running under systemd"): the binary, the man page, the systemd unit
# (@BINDIR@ replaced by the installed binary's directory) and the example environment file, under
# $(DESTDIR)$(PREFIX). `make install` builds the release binary first; INSTALL_BIN=path installs
# that already built binary instead, without building (the dist_man_unit test does). `make uninstall`
# removes exactly those files, and the directories install created only when DESTDIR is set
# (a staging tree); on the live system the standard directories stay.
.PHONY: install uninstall
PREFIX ?= /usr/local
INSTALL_BIN ?=
QR_BINDIR = $(PREFIX)/bin
QR_MANDIR = $(PREFIX)/share/man/man1
QR_UNITDIR = $(PREFIX)/lib/systemd/system
QR_SHAREDIR = $(PREFIX)/share/quantum-runtime
QR_INSTALLED = $(QR_BINDIR)/quantum-runtime $(QR_MANDIR)/quantum-runtime.1 \
               $(QR_UNITDIR)/quantum-runtime.service $(QR_SHAREDIR)/quantum-runtime.env

install:
	@if [ -z "$(INSTALL_BIN)" ]; then $(MAKE) --no-print-directory release; fi
	install -D -m 0755 $(or $(INSTALL_BIN),build/release/quantum-runtime) $(DESTDIR)$(QR_BINDIR)/quantum-runtime
	install -D -m 0644 docs/quantum-runtime.1 $(DESTDIR)$(QR_MANDIR)/quantum-runtime.1
	install -d $(DESTDIR)$(QR_UNITDIR)
	sed 's|@BINDIR@|$(QR_BINDIR)|g' dist/systemd/quantum-runtime.service \
	  > $(DESTDIR)$(QR_UNITDIR)/quantum-runtime.service
	chmod 0644 $(DESTDIR)$(QR_UNITDIR)/quantum-runtime.service
	install -D -m 0644 dist/systemd/quantum-runtime.env $(DESTDIR)$(QR_SHAREDIR)/quantum-runtime.env

uninstall:
	rm -f $(addprefix $(DESTDIR),$(QR_INSTALLED))
	-rmdir $(DESTDIR)$(QR_SHAREDIR) 2>/dev/null
	@if [ -n "$(DESTDIR)" ]; then \
	  for f in $(QR_INSTALLED); do d=$$(dirname "$$f"); \
	    while [ "$$d" != / ] && [ "$$d" != . ] && rmdir "$(DESTDIR)$$d" 2>/dev/null; do \
	      d=$$(dirname "$$d"); done; \
	  done; fi
