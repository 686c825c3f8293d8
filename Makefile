# folio: the two Quick start targets, plus the builds around them.
#   make demo          install what is missing, build, run the worked example
#   make test          install what is missing, build, run every test
# Other targets:
#   make build         configure (Release) and build into build/
#   make asan          an ASan + UBSan build in build-asan/, and its tests
#   make fuzz          libFuzzer (clang, ASan + UBSan) on the GGUF, safetensors,
#                      Hurray descriptor and KV snapshot readers and the server's
#                      request parser, FUZZ_SECONDS (60) each, in build-fuzz/
#   make format        clang-format -i the C++ sources (FORMAT_FILES)
#   make format-check  fail if any of them is not clang-formatted (.ci/run)
#   make clean         remove build/, build-asan/ and build-fuzz/
# Variables: BUILD_DIR, ASAN_DIR, FUZZ_DIR, JOBS (2), CMAKE_FLAGS, FUZZ_SECONDS.

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= 2
CMAKE_FLAGS ?=

FUZZ_DIR  ?= build-fuzz
FUZZ_SECONDS ?= 60

.PHONY: all setup configure build test demo asan fuzz clean format format-check

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

asan: setup
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_DIR) -j$(JOBS)
	cd $(ASAN_DIR) && ctest --output-on-failure -j$(JOBS)

# Coverage-guided fuzzing of the file readers with clang's libFuzzer, ASan
# and UBSan; seeds are small valid files written by tools/fuzz/make_seeds.py
# and, for descriptors, tools/fuzz/descriptor_seeds.cc. (make test runs the
# descriptor fuzzer for 20 s too: src/format/CMakeLists.txt.)
FORMAT_SOURCES = src/format/element_type.cc src/format/quantization.cc \
  src/format/block_paged_layout.cc src/format/descriptor.cc
FUZZ_CXX = clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -Isrc
# The server's request parser needs a tokenizer (the byte-level one).
FUZZ_TOKENIZER_SOURCES = $(addprefix src/model/,byte_tokenizer.cc bpe_tokenizer.cc \
  spm_tokenizer.cc tokenizer_common.cc tokenizer_spec.cc split_regex.cc unicode.cc \
  unicode_tables.cc)
fuzz: build
	mkdir -p $(FUZZ_DIR)
	$(FUZZ_CXX) tools/fuzz/fuzz_gguf.cc src/model/gguf.cc src/core/status.cc \
	  src/core/dtype.cc src/core/file_bytes.cc -o $(FUZZ_DIR)/fuzz_gguf
	$(FUZZ_CXX) tools/fuzz/fuzz_safetensors.cc src/model/safetensors.cc \
	  src/core/status.cc src/core/dtype.cc src/core/file_bytes.cc -o $(FUZZ_DIR)/fuzz_safetensors
	$(FUZZ_CXX) tools/fuzz/fuzz_descriptor.cc $(FORMAT_SOURCES) \
	  src/core/status.cc -o $(FUZZ_DIR)/fuzz_descriptor
	clang++ -std=c++20 -O1 -Iinclude -Isrc -Isrc/format \
	  tools/fuzz/descriptor_seeds.cc $(FORMAT_SOURCES) src/core/status.cc \
	  -o $(FUZZ_DIR)/descriptor_seeds
	python3 tools/fuzz/make_seeds.py $(FUZZ_DIR)/seeds
	$(FUZZ_DIR)/descriptor_seeds $(FUZZ_DIR)/seeds/descriptor
	$(FUZZ_CXX) tools/fuzz/fuzz_snapshot.cc $(FORMAT_SOURCES) src/format/kv_snapshot.cc \
	  src/core/status.cc src/core/file_bytes.cc -lz -o $(FUZZ_DIR)/fuzz_snapshot
	mkdir -p $(FUZZ_DIR)/seeds/snapshot
	$(BUILD_DIR)/bin/folio kv export -o $(FUZZ_DIR)/seeds/snapshot/two.kvs --page-size 4 \
	  --prompt "paged attention" --prompt "kv" > /dev/null
	$(FUZZ_CXX) tools/fuzz/fuzz_request.cc src/server/request.cc src/server/chat_template.cc \
	  src/sampling/sampler.cc $(FUZZ_TOKENIZER_SOURCES) src/core/status.cc \
	  -lpcre2-8 -o $(FUZZ_DIR)/fuzz_request
	for t in gguf safetensors descriptor snapshot request; do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t; \
	  $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	    $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/seeds/$$t || exit 1; \
	done

# The C++ sources clang-format keeps (.clang-format): every tracked .h and
# .cc under include, src, bench, tools and python/src, except generated
# files.
FORMAT_GENERATED = src/model/unicode_tables.cc
FORMAT_FILES = $(filter-out $(FORMAT_GENERATED),$(shell git ls-files -- \
  'include/*.h' 'include/*.cc' 'src/*.h' 'src/*.cc' 'bench/*.h' 'bench/*.cc' \
  'tools/*.h' 'tools/*.cc' 'python/src/*.h' 'python/src/*.cc'))

format: setup
	clang-format -i $(FORMAT_FILES)

format-check: setup
	clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)
