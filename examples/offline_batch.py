"""Offline batch inference with folio.LLM, vLLM's LLM API.

    python examples/offline_batch.py [MODEL]

MODEL is a model folder, a .gguf file or "builtin" (the default: folio's
byte-level worked example, nothing to download; its text is noise).
"""
import sys
from typing import List

from folio import LLM, SamplingParams

PROMPTS = ["The capital of France is", "def add(a, b):\n    return", "Water boils at"]


def main(argv: List[str]) -> int:
    llm = LLM(argv[1] if len(argv) > 1 else "builtin")
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    for out in llm.generate(PROMPTS, greedy):
        completion = out.outputs[0]
        print(f"{out.prompt!r} -> {completion.text!r} ({completion.finish_reason})")
    # Sampling with a seed repeats exactly; log-probs come with it.
    sampled = SamplingParams(temperature=0.8, top_p=0.95, seed=7, max_tokens=8, logprobs=2)
    first = llm.generate(PROMPTS[0], sampled, use_tqdm=False)[0].outputs[0]
    again = llm.generate(PROMPTS[0], sampled, use_tqdm=False)[0].outputs[0]
    assert first.token_ids == again.token_ids and first.cumulative_logprob == again.cumulative_logprob
    print(f"sampled: {first.text!r}, cumulative log-prob {first.cumulative_logprob:.4f}")
    stats = llm.stats()
    print(f"engine: {stats['steps']} steps, {stats['pages_held_by_requests']} pages held by "
          f"requests, {stats['pages_cached']} cached")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
