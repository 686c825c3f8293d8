#!/usr/bin/env bash
# `make demo`: the worked example's report and a short generation.
set -euo pipefail
build_dir=${1:-build}
folio="$build_dir/bin/folio"
mkdir -p "$build_dir/demo"

"$folio" layout --output "$build_dir/demo/layout.json" --summary
echo
echo "generation with the built-in model (float32 compute, f32 KV, page size 3):"
"$folio" generate --prompt "paged" --max-tokens 6
echo "sampled (temperature 0.8, top-k 40, seed 7):"
"$folio" generate --prompt "paged" --max-tokens 6 --temperature 0.8 --top-k 40 --seed 7
echo
echo "continuous batching (5 requests of different lengths, 16 pages of 4 slots, prefix cache on):"
"$folio" batch
