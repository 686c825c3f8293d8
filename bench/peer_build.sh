#!/usr/bin/env bash
# Builds llama.cpp's own benchmark tools (llama-bench, llama-batched-bench,
# llama-quantize) from the llama-cpp-python sdist on PyPI, which vendors the
# whole llama.cpp tree under vendor/llama.cpp. Native Release build with
# CMake; no prebuilt binaries are downloaded and nothing lands in the repo.
#
#   bash bench/peer_build.sh          build once, print the bin directory
#
# Everything is cached under $FOLIO_PEER_DIR (~/.cache/folio/peer):
#   dist/   the sdist (pip download --no-binary :all: --no-deps)
#   src/    the extracted sdist
#   build/  the CMake build directory (log: build.log)
#   bin/    the three binaries, plus stamp (what they were built from)
# A second run with the same version, flags and CPU builds nothing.
# Variables: FOLIO_PEER_DIR, LLAMA_CPP_PYTHON_VERSION (0.3.36), JOBS (2).
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
PEER_DIR="${FOLIO_PEER_DIR:-$HOME/.cache/folio/peer}"
JOBS="${JOBS:-2}"
TARGETS=(llama-bench llama-batched-bench llama-quantize)

DIST_DIR="$PEER_DIR/dist"
SRC_ROOT="$PEER_DIR/src/llama_cpp_python-$VERSION"
LLAMA_DIR="$SRC_ROOT/vendor/llama.cpp"
BUILD_DIR="$PEER_DIR/build"
BIN_DIR="$PEER_DIR/bin"
LOG="$PEER_DIR/build.log"

fail() {
  echo "peer_build: $*" >&2
  exit 1
}

# The llama.cpp commit the sdist vendors, from its CHANGELOG ("update
# llama.cpp to ggml-org/llama.cpp@HASH" under the version's heading); the
# extracted tree has no .git, so CMake alone would say "unknown".
llama_commit() {
  awk -v v="## [$VERSION]" '
    $0 == v { on = 1; next }
    on && /^## / { exit }
    on && match($0, /llama\.cpp@[0-9a-f]+/) { print substr($0, RSTART + 10, RLENGTH - 10); exit }
  ' "$SRC_ROOT/CHANGELOG.md" 2>/dev/null || true
}

CMAKE_ARGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DGGML_NATIVE=ON
  -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_SERVER=OFF
  -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_OPENSSL=OFF
)

# What the binaries depend on: a change in any of these rebuilds.
stamp_text() {
  echo "llama-cpp-python $VERSION"
  echo "llama.cpp commit $(llama_commit)"
  echo "cmake ${CMAKE_ARGS[*]}"
  echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cpu flags $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2- | md5sum | cut -c1-12)"
}

have_binaries() {
  for t in "${TARGETS[@]}"; do [[ -x "$BIN_DIR/$t" ]] || return 1; done
  [[ -f "$BIN_DIR/stamp" ]] && [[ "$(cat "$BIN_DIR/stamp")" == "$(stamp_text)" ]]
}

fetch_sdist() {
  local tarball="$DIST_DIR/llama_cpp_python-$VERSION.tar.gz"
  if [[ ! -f "$tarball" ]]; then
    echo "peer_build: pip download llama-cpp-python==$VERSION (sdist, ~75 MB)" >&2
    mkdir -p "$DIST_DIR"
    python3 -m pip download --quiet --no-binary :all: --no-deps --dest "$DIST_DIR" \
      "llama-cpp-python==$VERSION" || fail "pip download llama-cpp-python==$VERSION failed"
  fi
  [[ -f "$tarball" ]] || fail "pip download did not leave $tarball"
  echo "$tarball"
}

extract_sdist() {
  [[ -f "$LLAMA_DIR/CMakeLists.txt" ]] && return 0
  local tarball
  tarball="$(fetch_sdist)"
  echo "peer_build: extracting $tarball" >&2
  rm -rf "$SRC_ROOT"
  mkdir -p "$PEER_DIR/src"
  tar -xzf "$tarball" -C "$PEER_DIR/src" || fail "could not extract $tarball"
  [[ -f "$LLAMA_DIR/CMakeLists.txt" ]] || fail "$tarball has no vendor/llama.cpp/CMakeLists.txt"
}

show_log_tail() {
  echo "---- last 40 lines of $LOG ----" >&2
  tail -n 40 "$LOG" >&2
  fail "$1 failed (full log: $LOG)"
}

build() {
  local commit
  commit="$(llama_commit)"
  : >"$LOG"
  echo "peer_build: configuring llama.cpp ${commit:-?} in $BUILD_DIR" >&2
  cmake -S "$LLAMA_DIR" -B "$BUILD_DIR" "${CMAKE_ARGS[@]}" \
    ${commit:+-DLLAMA_BUILD_COMMIT="$commit"} >>"$LOG" 2>&1 || show_log_tail "cmake configure"
  echo "peer_build: building ${TARGETS[*]} with -j$JOBS (5-20 minutes on 2 cores; log: $LOG)" >&2
  local start=$SECONDS
  cmake --build "$BUILD_DIR" --config Release -j"$JOBS" --target "${TARGETS[@]}" >>"$LOG" 2>&1 ||
    show_log_tail "cmake --build"
  echo "peer_build: built in $((SECONDS - start)) s" >&2
  mkdir -p "$BIN_DIR"
  for t in "${TARGETS[@]}"; do
    [[ -x "$BUILD_DIR/bin/$t" ]] || fail "the build left no $BUILD_DIR/bin/$t"
    cp "$BUILD_DIR/bin/$t" "$BIN_DIR/$t"
  done
  stamp_text >"$BIN_DIR/stamp"
}

main() {
  command -v cmake >/dev/null || fail "cmake is not installed (make setup)"
  if ! have_binaries; then
    extract_sdist
    build
  fi
  echo "$BIN_DIR"
}

main "$@"
