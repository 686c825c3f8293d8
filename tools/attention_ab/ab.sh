#!/usr/bin/env bash
# Times up to four versions of the paged-attention kernel side by side in one
# process, so that a shared machine's slow spells land on all of them.
#
#   tools/attention_ab/ab.sh REV [REV...] -- [harness arguments]
#
# Each REV is a git revision, or "." for the working tree; V0 is the first.
# Its src/attention/paged_attention{.cc,_internal.h,_kernel.cc} are compiled
# with their internal namespace and entry points renamed per variant and
# linked into harness.cc together with the current build's core, kv and bench
# libraries (run `make build` first). Harness arguments: -b BATCH,
# -c CONTEXT, -g QUERY_HEADS (a multiple of the 8 K/V heads), -p PAGE_SIZE, -t THREADS, -d f32|bf16|i8 (i8: codes and row
# scales), -r ROUNDS, --huge (K/V on transparent huge pages), --in-order
# (pages not shuffled), --short N (a ragged batch: sequences after the first
# have N keys), --target-ab AVX2 (V0 on the best SIMD target against V0 on
# AVX2), --dense-ab (V0 on the paged pool against V0 on the same rows laid
# out densely; not i8), --threads-ab (V0 on -t threads against V0 on one
# thread), --dtype-ab f32|bf16|i8 (V0 on -d's pools against V0 on pools of
# the named dtype, fresh content of the same shape), --target AVX2 (every
# slot dispatched to that target, e.g. to time an AVX2 machine's path).
# Defaults: the out-of-cache decode shape, batch 8, 16384 tokens, f32,
# 2 threads.
#
# Example: tools/attention_ab/ab.sh HEAD~1 HEAD -- -d bf16 --huge -r 7
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
build=${BUILD_DIR:-$root/build}
out=$build/attention_ab
revs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do revs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
if [ ${#revs[@]} -lt 1 ] || [ ${#revs[@]} -gt 4 ]; then
  echo "usage: $0 REV [REV...] -- [harness arguments] (1 to 4 revisions)" >&2
  exit 2
fi
for lib in src/core/libfolio_core src/kv/libfolio_kv src/attention/libfolio_attention \
           bench/libfolio_bench; do
  [ -f "$build/$lib.a" ] || { echo "build first: make build" >&2; exit 2; }
done

flags=(-O3 -DNDEBUG -std=c++20 -ffp-contract=off "-DHWY_DISABLED_TARGETS=(HWY_SSSE3|HWY_SSE4)"
       $(pkg-config --cflags libhwy) -I"$root/include" ${AB_CFLAGS:-})
show() {  # show REV PATH
  if [ "$1" = "." ]; then cat "$root/$2"; else git -C "$root" show "$1:$2"; fi
}
objects=()
for i in "${!revs[@]}"; do
  dir=$out/v$i
  mkdir -p "$dir/attention"
  ns="s/folio::attention::internal\b/&_v$i/g"
  show "${revs[$i]}" src/attention/paged_attention_internal.h | sed -E "$ns" \
    > "$dir/attention/paged_attention_internal.h"
  show "${revs[$i]}" src/attention/paged_attention_kernel.cc |
    sed -E "s|\"attention/paged_attention_kernel.cc\"|\"attention/kernel.cc\"|; $ns" \
    > "$dir/attention/kernel.cc"
  show "${revs[$i]}" src/attention/paged_attention.cc | sed -E "s/\binternal::/internal_v$i::/g" \
    > "$dir/paged_attention.cc"
  names=(-I"$dir" -I"$root/src" -DPagedAttention=PagedAttentionV$i
         -DValidatePagedAttention=ValidatePagedAttentionV$i -DPagedAttentionPlan=PagedAttentionPlanV$i)
  c++ "${flags[@]}" "${names[@]}" -c "$dir/attention/kernel.cc" -o "$dir/kernel.o" &
  c++ "${flags[@]}" "${names[@]}" -c "$dir/paged_attention.cc" -o "$dir/paged_attention.o" &
  wait
  objects+=("$dir/kernel.o" "$dir/paged_attention.o")
  echo "V$i = ${revs[$i]}" >&2
done
c++ "${flags[@]}" -I"$root" -DFOLIO_AB_VARIANTS=${#revs[@]} -c "$root/tools/attention_ab/harness.cc" \
  -o "$out/harness.o"
c++ -o "$out/harness" "$out/harness.o" "${objects[@]}" "$build/bench/libfolio_bench.a" \
  "$build/src/attention/libfolio_attention.a" \
  "$build/src/kv/libfolio_kv.a" "$build/src/core/libfolio_core.a" $(pkg-config --libs libhwy) -pthread
"$out/harness" "$@"
