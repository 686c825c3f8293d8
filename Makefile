# folio: the two Quick start targets, plus the builds around them.
#   make demo          install what is missing, build, run the worked example
#   make test          install what is missing, build, run every test
# Other targets:
#   make setup         install the missing Debian and Python packages (tools/setup.sh)
#   make configure     setup, then configure build/ (Release) if it is not
#   make build         configure (Release) and build into build/
#   make asan          an ASan + UBSan build in build-asan/, and its tests
#   make fuzz          libFuzzer (clang, ASan + UBSan) on the GGUF, safetensors,
#                      Hurray descriptor and KV snapshot readers, the server's
#                      request parser, the chat template interpreter, the
#                      chat reply reader and the GBNF, JSON Schema and regex
#                      compilers, FUZZ_SECONDS (60) each, in build-fuzz/;
#                      an input slower than FUZZ_TIMEOUT (10 s) or a process
#                      past FUZZ_RSS_MB (2048) is a crash
#   make fuzz-long     the same, FUZZ_RUNS (10 million) executions each
#   make abuse         hostile clients against folio serve on loopback
#                      (tools/abuse_suite.py: slowloris, idle keep-alives,
#                      oversized, chunked and abandoned bodies, a gzip bomb,
#                      a header flood, 64 streams, SIGTERM under a slow
#                      client; /health and a normal completion probed
#                      throughout), about 4 minutes; prints JSON, fails
#                      when a target is missed
#   make bench-peer    folio beside llama.cpp's own llama-bench (pp512, tg128,
#                      2 threads) on the same GGUF files, as one JSON
#                      (bench/peer_bench.py; builds llama.cpp's tools once
#                      from the llama-cpp-python sdist into
#                      ~/.cache/folio/peer, 10-20 minutes on 2 cores);
#                      PEER_FLAGS passes options, e.g. "--rounds 1 --types Q4_1"
#   make format        clang-format -i the C++ sources (FORMAT_FILES)
#   make format-check  fail if any of them is not clang-formatted (.ci/run)
#   make clean         remove build/, build-asan/ and build-fuzz/
# Variables: BUILD_DIR, ASAN_DIR, FUZZ_DIR, JOBS (2), CMAKE_FLAGS, FUZZ_SECONDS,
# FUZZ_TIMEOUT, FUZZ_RSS_MB, FUZZ_RUNS, PEER_FLAGS.

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= 2
CMAKE_FLAGS ?=

FUZZ_DIR  ?= build-fuzz
FUZZ_SECONDS ?= 60
# Slow inputs and memory blow-ups count as crashes: an input that runs
# longer than FUZZ_TIMEOUT seconds, or a process past FUZZ_RSS_MB.
FUZZ_TIMEOUT ?= 10
FUZZ_RSS_MB ?= 2048
# make fuzz-long: executions per fuzzer.
FUZZ_RUNS ?= 10000000
# make bench-peer: options for bench/peer_bench.py.
PEER_FLAGS ?=

.PHONY: all setup configure build test demo asan fuzz fuzz-long fuzz-build abuse bench-setup bench-peer clean format format-check

all: build

setup:
	@bash tools/setup.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: setup $(BUILD_DIR)/CMakeCache.txt

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

demo: build
	@bash tools/demo.sh $(BUILD_DIR)

abuse: build
	python3 tools/abuse_suite.py --folio $(BUILD_DIR)/bin/folio

# Benchmark-only Python packages (bench/ort_attention_bench.py's ONNX
# Runtime row; bench/peer_logits.py's llama.cpp, built from the sdist for
# this CPU, minutes once); never needed by make test.
bench-setup: setup
	python3 -m pip install --quiet onnxruntime onnx

# llama.cpp's own benchmarks beside folio's on the same files; never part
# of make test. The llama.cpp build is cached, so a second run builds nothing.
bench-peer: build
	JOBS=$(JOBS) python3 bench/peer_bench.py --folio $(BUILD_DIR)/bin/folio $(PEER_FLAGS)

asan: setup
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_DIR) -j$(JOBS)
	cd $(ASAN_DIR) && ctest --output-on-failure -j$(JOBS)

# Coverage-guided fuzzing with clang's libFuzzer, ASan and UBSan: a clang
# configure of the same CMake project with -DFOLIO_FUZZ=ON builds the
# fuzzers (tools/fuzz/CMakeLists.txt) over instrumented module libraries.
# Seeds: small valid files from tools/fuzz/make_seeds.py, descriptors from
# descriptor_seeds, and a KV snapshot that the Release build's `folio kv
# export` writes. (make test runs the descriptor fuzzer for 20 s too:
# src/format/CMakeLists.txt.)
FUZZERS = gguf safetensors descriptor snapshot request jinja chat_output gbnf json_schema \
  tokenizer_json

$(FUZZ_DIR)/CMakeCache.txt:
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_FUZZ=ON $(CMAKE_FLAGS)

fuzz-build: configure $(FUZZ_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS) --target folio
	cmake --build $(FUZZ_DIR) -j$(JOBS) --target folio_fuzzers
	python3 tools/fuzz/make_seeds.py $(FUZZ_DIR)/seeds
	$(FUZZ_DIR)/descriptor_seeds $(FUZZ_DIR)/seeds/descriptor
	mkdir -p $(FUZZ_DIR)/seeds/snapshot
	$(BUILD_DIR)/bin/folio kv export -o $(FUZZ_DIR)/seeds/snapshot/two.kvs --page-size 4 \
	  --prompt "paged attention" --prompt "kv" > /dev/null

# Each fuzzer FUZZ_SECONDS (make fuzz) or FUZZ_RUNS executions (make
# fuzz-long: hours; the last line of each run gives the executions reached
# and the corpus size).
FUZZ_RUN = for t in $(FUZZERS); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/artifacts/$$t; \
	  $(FUZZ_DIR)/fuzz_$$t $(1) -max_len=65536 -timeout=$(FUZZ_TIMEOUT) \
	    -rss_limit_mb=$(FUZZ_RSS_MB) -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t/ \
	    $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/seeds/$$t || exit 1; \
	done

fuzz: fuzz-build
	$(call FUZZ_RUN,-max_total_time=$(FUZZ_SECONDS))

fuzz-long: fuzz-build
	$(call FUZZ_RUN,-runs=$(FUZZ_RUNS))

# The C++ sources clang-format keeps (.clang-format): every tracked .h and
# .cc under include, src, bench, tools and python/src, except generated
# files.
FORMAT_GENERATED = src/tokenizer/unicode_tables.cc src/tokenizer/unicode_bert_tables.cc
FORMAT_FILES = $(filter-out $(FORMAT_GENERATED),$(shell git ls-files -- \
  'include/*.h' 'include/*.cc' 'src/*.h' 'src/*.cc' 'bench/*.h' 'bench/*.cc' \
  'tools/*.h' 'tools/*.cc' 'python/src/*.h' 'python/src/*.cc'))

format: setup
	clang-format -i $(FORMAT_FILES)

format-check: setup
	clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)
