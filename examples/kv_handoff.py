"""Prefill on one engine, decode on another: a KV snapshot hand-off.

    python examples/kv_handoff.py [MODEL]

Engine A prefills the prompts and decodes two tokens, then exports their K/V
pages and request state as KV snapshot bytes (docs/spec/kv-snapshot.md);
engine B, over the same model, KV dtype and page size, imports them and
decodes to the end. The result equals running everything on one engine, bit
for bit, which the script checks. Exits 1 if it does not.
"""
import sys
from typing import List

from folio import LLM, SamplingParams

PROMPTS = ["paged attention", "a block table maps pages to slots", "kv"]


def main(argv: List[str]) -> int:
    model = argv[1] if len(argv) > 1 else "builtin"
    params = SamplingParams(temperature=0.7, top_k=50, seed=11, max_tokens=24)
    prefill = LLM(model, kv_dtype="bf16")
    decode = LLM(model, kv_dtype="bf16")
    snapshot = prefill.export_kv(PROMPTS, params, decode_tokens=2)
    print(f"snapshot: {len(snapshot)} bytes; engine A now holds "
          f"{prefill.stats()['pages_held_by_requests']} pages for requests")
    moved = decode.import_kv(snapshot)
    reference = prefill.generate(PROMPTS, params, use_tqdm=False)
    ok = True
    for m, r in zip(moved, reference):
        same = m.outputs[0].token_ids == r.outputs[0].token_ids
        ok = ok and same and m.prompt_token_ids == r.prompt_token_ids
        print(f"{m.outputs[0].text!r}: {'same' if same else 'DIFFERENT'} as on one engine")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
