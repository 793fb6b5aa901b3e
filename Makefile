# Fluxon — build, test, amalgamation, sanitizers, bench. `make help` lists the targets.
# The binary and libraries are built FROM the amalgamation fluxon.c, so it is always
# compiled and tested. Unit tests link the separately compiled objects (internals
# visible), integration tests run the built ./fluxon.

BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
SAN      ?=
PREFIX   ?= /usr/local
BIN      ?= fluxon
VERSION  := $(shell sed -n 's/^\#define FLUXON_VERSION_STRING "\(.*\)"/\1/p' include/fluxon.h)
SOVER    := $(firstword $(subst ., ,$(VERSION)))

# The library: these folders, lowest layer first (scripts/amalgamate sweeps the same list).
# tools/ (the CLI), bench/ and test/ are never part of it.
DIRS     := common transport cache disk plan client master owner node cuda
TOOL_DIRS:= tools tools/demo bench test/fixtures
INC      := -Iinclude $(addprefix -I,$(DIRS) $(TOOL_DIRS))
LIB_SRCS := $(foreach d,$(DIRS),$(wildcard $(d)/*.c))
CLI_SRCS := $(wildcard tools/*.c tools/demo/*.c) cache/evict_policy.c cache/freq_sketch.c # the policy and write-back admission run in the simulator too
BENCH_SRCS := $(filter-out bench/bench_internal.c,$(wildcard bench/*.c))
HDRS     := include/fluxon.h include/fluxon_cuda.h $(foreach d,$(DIRS),$(wildcard $(d)/*.h))
TOOL_HDRS:= $(foreach d,$(TOOL_DIRS),$(wildcard $(d)/*.h))
TEST_SRCS:= $(wildcard test/unit/test_*.c test/integration/test_*.c)
TESTS    := $(patsubst %.c,$(BUILD)/test/%,$(notdir $(TEST_SRCS)))
# plain programs (no Criterion) that suites run, and that `make tsan` runs directly
STRESS   := $(patsubst test/stress/%.c,$(BUILD)/test/stress_%,$(wildcard test/stress/*.c))

PKGS     := ucx liburing libcjson numa libxxhash libcurl
SETUP_OK := build/.setup-ok
# pkg-config runs only after setup installed it (lazy '=' expansion)
DEP_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# Static where Debian ships a static archive (liburing); libxxhash dynamic: its static
# archive lacks the x86 dispatch (XXH3 with AVX2 / AVX-512: the disk records' checksums
# 2.8x faster, disk/disk_format.c); UCX stays
# dynamic (its transports are dlopen'ed modules linked against the shared libucs),
# libnuma dynamic because libucs links the shared one (a second, static copy breaks it),
# cJSON and mimalloc ship no static archive in Debian 12.
STATIC_DEPS  = -Wl,-Bstatic -luring -Wl,-Bdynamic
DYNAMIC_DEPS = -lxxhash -lucp -luct -lucs -lnuma -lcjson -lcurl -lmimalloc -lpthread -lm
DEP_LIBS     = $(STATIC_DEPS) $(DYNAMIC_DEPS)
SO_DEP_LIBS  = -luring $(DYNAMIC_DEPS)

# tools/ only (the binary and the suites that link the CLI objects): the /metrics HTTP
# server; the library (libfluxon, the amalgamation) does not depend on it
TOOL_LIBS    = $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
GIT_COMMIT  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# the commit the objects that print it were built at (fluxon --version, /metrics'
# fluxon_build_info, the node's start line): rewritten only when HEAD moved, so those
# objects are rebuilt then and only then
GIT_STAMP   := $(BUILD)/git-commit
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(GIT_STAMP) 2>/dev/null)" = "$(GIT_COMMIT)" ] || echo "$(GIT_COMMIT)" > $(GIT_STAMP); })

WARN     := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wpointer-arith -Wvla -Wformat -Wformat-security
CFLAGS   ?=
CFLAGS_ALL = -std=gnu11 $(OPT) -g -fPIC $(WARN) $(SAN) $(INC) $(DEP_CFLAGS) -DFX_GIT_COMMIT='"$(GIT_COMMIT)"' $(CFLAGS)
LDFLAGS_ALL = $(SAN) $(LDFLAGS)

.PHONY: all amalgamation setup test test-embed asan tsan bench bench-tiers bench-disk demo help clean install cuda cuda-build cuda-bench \
	test-python fuzz fuzz-build fuzz-seeds chaos
.DEFAULT_GOAL := all

all: $(BIN) $(BUILD)/libfluxon.a $(BUILD)/libfluxon.so $(BUILD)/fluxon.pc

help:
	@echo "make               build ./fluxon, build/libfluxon.{a,so}, build/fluxon.pc (runs setup if needed)"
	@echo "make setup         install missing Debian packages (scripts/setup; root)"
	@echo "make amalgamation  generate fluxon.c + fluxon.h (single-file embed)"
	@echo "make test          build, then run every Criterion suite and the Python tests (all, whatever fails)"
	@echo "make asan          the same tests under AddressSanitizer + UBSan (build-asan/)"
	@echo "make tsan          the concurrent workloads under ThreadSanitizer (build-tsan/)"
	@echo "make test-embed    only the embed suite: amalgamation from two files, C/C++ embeds, install"
	@echo "make test-python   the Python package, SGLang backend and vLLM connector suites (pytest, Debian's python3)"
	@echo "make bench         benchmarks (figures, not pass/fail)"
	@echo "make bench-tiers   what a CPU owner costs and buys in the trace replay (RUNS=3; minutes)"
	@echo "make bench-disk    what the disk tier costs and buys in the trace replay, and across a restart (RUNS=3; minutes)"
	@echo "make cuda          build/libfluxon_cuda.so (nvcc; scripts/setup --cuda if absent) and run the GPU tests (skip without a GPU)"
	@echo "make cuda-bench    the GPU tests, then backup/restore GB/s next to pinned cudaMemcpyAsync"
	@echo "make demo          replay the real LLM-serving trace (embedded master, owner, workers)"
	@echo "make install PREFIX=/usr/local   install binary, libraries, header, fluxon.pc, the demo's trace"
	@echo "make fuzz [FUZZ_SECONDS=N]  build the libFuzzer targets (clang) and run each N s [10]"
	@echo "make chaos [CHAOS_SECONDS=N]  the chaos run (issue 17): replays, kill -9 of every role, message faults; N s [180]"
	@echo "make clean         remove build outputs"

$(SETUP_OK): scripts/setup
	@mkdir -p build
	@./scripts/setup --quiet
	@touch $@

setup:
	./scripts/setup

amalgamation: fluxon.c fluxon.h

fluxon.c: $(LIB_SRCS) $(HDRS) scripts/amalgamate | $(SETUP_OK)
	./scripts/amalgamate $@

fluxon.h: include/fluxon.h
	cp $< $@

# internals unused by the library itself (bench and test entry points) are static here
$(BUILD)/fluxon.o: fluxon.c fluxon.h $(GIT_STAMP) | $(SETUP_OK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Wno-unused-function -c $< -o $@

CLI_OBJS := $(patsubst %.c,$(BUILD)/cli/%.o,$(CLI_SRCS))
$(BUILD)/cli/%.o: %.c $(HDRS) $(TOOL_HDRS) | $(SETUP_OK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BIN): $(BUILD)/fluxon.o $(CLI_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(DEP_LIBS) $(TOOL_LIBS)

$(BUILD)/libfluxon.a: $(BUILD)/fluxon.o
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libfluxon.so: $(BUILD)/fluxon.o scripts/fluxon.map
	$(CC) -shared $(LDFLAGS_ALL) -Wl,-soname,libfluxon.so.$(SOVER) -Wl,--version-script=scripts/fluxon.map \
	    -o $@ $(BUILD)/fluxon.o $(SO_DEP_LIBS)
	ln -sf libfluxon.so $(BUILD)/libfluxon.so.$(SOVER) # its soname: a program linked with -L$(BUILD) -lfluxon runs from here

$(BUILD)/fluxon.pc: scripts/fluxon.pc.in include/fluxon.h
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(abspath $(BUILD))|; s|@INCLUDEDIR@|$(abspath include)|; s|@VERSION@|$(VERSION)|' $< > $@

# ---- unit tests: objects compiled one by one, internals visible ----
OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
$(BUILD)/obj/%.o: %.c $(HDRS) | $(SETUP_OK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c $< -o $@
$(BUILD)/obj/node/node.o $(BUILD)/cli/tools/cli.o: $(GIT_STAMP)
$(BUILD)/libfx_test.a: $(OBJS)
	rm -f $@ && ar rcs $@ $^
# suites link the CLI-side objects (tools/ minus main) and the bench entry points too
CLI_LIB_OBJS := $(filter-out $(BUILD)/cli/tools/cli.o,$(CLI_OBJS))
BENCH_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(BENCH_SRCS))
$(BUILD)/obj/bench/%.o: bench/%.c $(HDRS) bench/bench.h $(wildcard test/fixtures/*.h) | $(SETUP_OK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c $< -o $@
TEST_DEPS := $(wildcard test/fixtures/*.h) $(BUILD)/libfx_test.a $(CLI_LIB_OBJS) $(BENCH_OBJS)
TEST_LINK = $(CC) $(CFLAGS_ALL) -o $@ $< $(CLI_LIB_OBJS) $(BENCH_OBJS) $(BUILD)/libfx_test.a \
	    $(LDFLAGS_ALL) -lcriterion $(DEP_LIBS) $(TOOL_LIBS)
$(BUILD)/test/%: test/unit/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(TEST_LINK)
$(BUILD)/test/%: test/integration/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(TEST_LINK)

$(BUILD)/test/stress_%: test/stress/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libfx_test.a $(LDFLAGS_ALL) $(DEP_LIBS)

# fuzz targets (test/fuzz/fuzz_X.c): `make test` replays their corpora (see "fuzzing" below)
FUZZ_TARGETS := $(patsubst test/fuzz/fuzz_%.c,%,$(wildcard test/fuzz/fuzz_*.c))
FUZZ_REPLAY  := $(patsubst %,$(BUILD)/test/fuzz_replay_%,$(FUZZ_TARGETS))
# Every suite and the Python tests run, whatever fails; the end says what failed. Suites'
# output: $(BUILD)/test-logs/<suite>.log (scripts/run-tests).
TEST_LOGS = $(abspath $(BUILD))/test-logs
test: all $(TESTS) $(STRESS) $(FUZZ_REPLAY)
	@if grep -rn 'cr_log_warn\|cr_log_error' test/; then \
	  echo "== make test: the lines above use cr_log_warn/cr_log_error, after which Criterion 2.4's runner exits 1"; \
	  echo "   with every test passing (a CI failure of session 23): use th_note (test/fixtures/helpers.h)"; exit 1; fi
	@t0=$$(date +%s); rc=0; \
	FLUXON_TEST_LOGS=$(TEST_LOGS) FLUXON_BIN=$(abspath $(BIN)) ./scripts/run-tests $(TESTS) $(FUZZ_REPLAY) || rc=1; \
	$(MAKE) --no-print-directory test-python || { rc=1; echo "test-python" >> $(TEST_LOGS)/FAILED; }; \
	if [ $$rc = 0 ]; then echo "== make test: every suite and the Python tests passed in $$(( $$(date +%s) - t0 )) s"; \
	else echo "== make test FAILED after $$(( $$(date +%s) - t0 )) s:" $$(cat $(TEST_LOGS)/FAILED); exit 1; fi

# ---- fuzzing (issue 22): libFuzzer targets test/fuzz/fuzz_X.c ----
# `make test` replays each target's corpus (test/fuzz/corpus/X) with a plain driver built
# by $(CC) (build/test/fuzz_replay_X: no libFuzzer needed); `make fuzz` builds the targets
# with clang (libFuzzer + ASan + UBSan, library objects in build-fuzz/) and runs each for
# FUZZ_SECONDS, one at a time, printing execs, exec/s, coverage and crashes per target.
FUZZ_DEPS    := test/fuzz/fuzz.h test/fuzz/replay.c
# the master target runs on its own clock (fuzz_master.c)
FUZZ_LDFLAGS_master := -Wl,--wrap=fx_now_ms -Wl,--wrap=fx_now_ns -Wl,--wrap=fx_realtime_ns -Wl,--wrap=fx_hmap_create
comma := ,
# the owner target: no socket, no UCX, one segment (fuzz_owner.c)
FUZZ_LDFLAGS_owner := $(FUZZ_LDFLAGS_master) $(patsubst %,-Wl$(comma)--wrap=%,fx_segment_create_huge fx_segment_destroy fx_segment_memory_limit \
	fx_unix_listen fx_acceptor_start fx_acceptor_stop fx_tcp_socket fx_connect_start fx_conn_new fx_unix_send_fd fx_unix_send_fds \
	fx_opeers_init fx_opeers_shutdown fx_opeers_fini fx_opeers_ucx fx_opeers_info fx_opeers_get fx_ucx_set_timeout_ms)
# the owner target with a disk tier (fuzz_owner_disk.c includes fuzz_owner.c): the store is learnt at its open,
# its tombstones and barriers noted (what a later life must not bring back)
FUZZ_LDFLAGS_owner_disk := $(FUZZ_LDFLAGS_owner) -Wl,--wrap=fx_disk_open -Wl,--wrap=fx_disk_kill -Wl,--wrap=fx_disk_barrier
$(BUILD)/test/fuzz_replay_%: test/fuzz/fuzz_%.c $(FUZZ_DEPS) $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Wno-unused-function -Itest/fuzz -DFUZZ_CORPUS='"$(abspath test/fuzz/corpus/$*)"' \
	    -o $@ $< test/fuzz/replay.c $(CLI_LIB_OBJS) $(BUILD)/libfx_test.a $(LDFLAGS_ALL) $(FUZZ_LDFLAGS_$*) $(DEP_LIBS) $(TOOL_LIBS)

FUZZ_CC      ?= clang-14
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 10
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS   = -std=gnu11 -O1 -g $(WARN) -Wno-unused-function $(FUZZ_SAN) -DFX_USE_LIBC_MALLOC $(INC) \
	    -Itest/fuzz $(DEP_CFLAGS)
FUZZ_OBJS    := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(LIB_SRCS) tools/demo/cli_trace.c)
FUZZ_BINS    := $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))
$(FUZZ_BUILD)/obj/%.o: %.c $(HDRS) $(TOOL_HDRS) | $(SETUP_OK)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_BUILD)/libfx_fuzz.a: $(FUZZ_OBJS)
	rm -f $@ && ar rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/fuzz.h $(FUZZ_BUILD)/libfx_fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_BUILD)/libfx_fuzz.a $(FUZZ_LDFLAGS_$*) $(DEP_LIBS)
$(BUILD)/test/fuzz_replay_owner_disk $(FUZZ_BUILD)/fuzz_owner_disk: test/fuzz/fuzz_owner.c
# seeds (corpus/codec, corpus/master) and the frame dictionaries, from the catalog
$(BUILD)/test/fuzz_seeds: test/fuzz/seeds.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libfx_test.a $(LDFLAGS_ALL) $(DEP_LIBS)
fuzz-seeds: $(BUILD)/test/fuzz_seeds
	$(BUILD)/test/fuzz_seeds test/fuzz
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	FUZZ_BUILD=$(FUZZ_BUILD) ./scripts/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The chaos run (issue 17; not part of `make test`, which runs its 10 s version): the demo's
# replay over a master + 3 owners with random kill -9 / restart of each role and dropped,
# delayed and duplicated control frames for CHAOS_SECONDS; prints the chaos report (also
# written to $(BUILD)/chaos-report.txt). CHAOS_SEED=S replays one schedule; CHAOS_DISK=1
# gives each owner a disk tier, kept across its kills.
CHAOS_SECONDS ?= 180
chaos: all $(BUILD)/test/test_chaos
	FLUXON_BIN=$(abspath $(BIN)) FLUXON_CHAOS_SECONDS=$(CHAOS_SECONDS) FLUXON_CHAOS_SEED=$(CHAOS_SEED) FLUXON_CHAOS_DISK=$(CHAOS_DISK) \
	    FLUXON_CHAOS_REPORT=$(abspath $(BUILD))/chaos-report.txt $(BUILD)/test/test_chaos --jobs=1 --filter 'chaos_long/*'

# The Python package (python/fluxon, issue 20) over $(BUILD)/libfluxon.so, with Debian's
# python3 + python3-pytest + python3-numpy. Skipped under sanitizers: an instrumented
# libfluxon.so cannot be loaded into an uninstrumented python3.
PYTHON   ?= /usr/bin/python3
PYTHONDIR = $(PREFIX)/lib/$(shell $(PYTHON) -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null || echo python3)/dist-packages
test-python: all
	@if [ -n "$(SAN)" ]; then echo "test-python: skipped (SAN is set)"; else \
	    tmp=$$(mktemp -d /tmp/fluxon-pytest-XXXXXX) && \
	    FLUXON_LIB=$(abspath $(BUILD))/libfluxon.so FLUXON_BIN=$(abspath $(BIN)) PYTHONPATH=$(abspath python) \
	    timeout -k 10 600 $(PYTHON) -m pytest -q -p no:cacheprovider --basetemp=$$tmp/t python/tests; \
	    rc=$$?; rm -rf "$$tmp"; exit $$rc; fi

# The embed suite (issue 8) builds the amalgamation the way an embedder does, from
# fluxon.c + fluxon.h alone, and runs `make install` into a temporary prefix; programs
# linked against an installed sanitizer build need the same flags ($(SAN)).
EMBED_FILES := $(wildcard test/embed/*)
$(BUILD)/test/test_embed: fluxon.c fluxon.h $(EMBED_FILES)
test test-embed: export FLUXON_SAN = $(SAN)
test-embed: all $(BUILD)/test/test_embed
	FLUXON_TEST_LOGS=$(TEST_LOGS) FLUXON_BIN=$(abspath $(BIN)) ./scripts/run-tests $(BUILD)/test/test_embed

asan:
	ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(abspath scripts/lsan.supp) \
	$(MAKE) BUILD=build-asan BIN=build-asan/fluxon OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -DFX_USE_LIBC_MALLOC" test

# ThreadSanitizer (build-tsan/). Criterion cannot start under TSan (its BoxFort arena maps
# at fixed addresses TSan reserves: Criterion issue #274), so tsan runs the concurrent
# workloads as plain programs: the 8-thread hostless stress program, the trace replay
# (worker threads, one client each, master + 2 owners in one process) and bench-hostless.
# Third-party races are suppressed in scripts/tsan.supp, never Fluxon's own.
TSAN_BUILD := BUILD=build-tsan BIN=build-tsan/fluxon OPT=-O1 \
	SAN="-fsanitize=thread -fno-omit-frame-pointer -DFX_USE_LIBC_MALLOC"
tsan:
	$(MAKE) $(TSAN_BUILD) build-tsan/fluxon build-tsan/test/stress_hostless_threads
	TSAN_OPTIONS="suppressions=$(abspath scripts/tsan.supp) halt_on_error=1 exitcode=66" ./scripts/run-tsan

$(BUILD)/bench_internal: bench/bench_internal.c $(BENCH_OBJS) $(BUILD)/libfx_test.a
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BENCH_OBJS) $(BUILD)/libfx_test.a $(LDFLAGS_ALL) $(DEP_LIBS)

# What a CPU owner costs and buys in the trace replay, write-back vs ucx_perftest, the same
# over TCP between network namespaces (issue 38; minutes: RUNS=3 whole-trace replays of 4 setups)
bench-tiers: all
	FLUXON_BIN=$(abspath $(BIN)) ./bench/tiers.sh

bench-disk: all
	FLUXON_BIN=$(abspath $(BIN)) ./bench/disk_tier.sh

bench: all $(BUILD)/bench_internal
	FLUXON_BIN=$(abspath $(BIN)) FLUXON_BENCH_INTERNAL=$(abspath $(BUILD)/bench_internal) ./scripts/bench

# ---- CUDA kernels (optional; the core library never links CUDA) ----
# nvcc from PATH or /usr/local/cuda; else scripts/setup --cuda installs Debian's toolkit.
CUDA_ARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
NVFLAGS   := -O2 -std=c++17 -Xcompiler -fPIC,-Wall $(CUDA_ARCH) -Iinclude -Icuda
NVCC_FIND := command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; }
cuda: all
	@$(NVCC_FIND) >/dev/null || ./scripts/setup --cuda
	@$(MAKE) --no-print-directory NVCC="$$($(NVCC_FIND))" cuda-build
	$(BUILD)/test/cuda_test
cuda-bench: cuda
	$(BUILD)/test/cuda_test --bench
cuda-build: $(BUILD)/libfluxon_cuda.so $(BUILD)/test/cuda_test
$(BUILD)/libfluxon_cuda.so: cuda/kernels.cu cuda/layout.h include/fluxon_cuda.h include/fluxon.h
	$(NVCC) $(NVFLAGS) -shared -o $@ cuda/kernels.cu
$(BUILD)/test/cuda_test: test/cuda/test_cuda.cu $(BUILD)/libfluxon_cuda.so $(BUILD)/libfluxon.a
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -o $@ $< -L$(BUILD) -lfluxon_cuda $(BUILD)/libfluxon.a $(SO_DEP_LIBS) \
	    -Xlinker -rpath,$(abspath $(BUILD))

demo: all
	./fluxon demo

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/fluxon
	install -m 0644 $(BUILD)/libfluxon.a $(DESTDIR)$(PREFIX)/lib/libfluxon.a
	install -m 0755 $(BUILD)/libfluxon.so $(DESTDIR)$(PREFIX)/lib/libfluxon.so.$(VERSION)
	ln -sf libfluxon.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libfluxon.so.$(SOVER)
	ln -sf libfluxon.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libfluxon.so
	install -m 0644 include/fluxon.h include/fluxon_cuda.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(PREFIX)/share/fluxon
	install -m 0644 data/conversation_trace.jsonl data/README.md $(DESTDIR)$(PREFIX)/share/fluxon/
	sed -e 's|@PREFIX@|$(abspath $(PREFIX))/lib|; s|@INCLUDEDIR@|$(abspath $(PREFIX))/include|; s|@VERSION@|$(VERSION)|' \
	    scripts/fluxon.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/fluxon.pc
	install -d $(DESTDIR)$(PYTHONDIR)/fluxon
	install -m 0644 python/fluxon/*.py $(DESTDIR)$(PYTHONDIR)/fluxon/
	install -d $(DESTDIR)$(PYTHONDIR)/fluxon/vllm
	install -m 0644 python/fluxon/vllm/*.py $(DESTDIR)$(PYTHONDIR)/fluxon/vllm/

clean:
	rm -rf build build-asan build-tsan build-fuzz fluxon fluxon.c fluxon.h
