"""Beam search written from Hugging Face transformers' definition, for
checking folio's: BeamSearchScorer / BeamHypotheses with num_beams,
length_penalty and early_stopping (True, False or "never"), no sampling."""
import numpy as np


def beam_search(next_logits, prompt, num_beams, max_tokens, ends, length_penalty=1.0,
                early_stopping=False, n=1):
    """max(2, 1 + len(ends)) * num_beams candidates a round; end tokens
    ranked below num_beams make hypotheses; scores are summed log-probs
    over length ** length_penalty (the length counting the end token); in
    float64 over the logits `next_logits(ids)` gives. Returns [(tokens,
    score, ended)], best first."""
    k = max(2, 1 + len(ends)) * num_beams
    beams = [([], 0.0)]
    kept = []  # [score, tokens, ended], in the order kept

    def add(tokens, sum_logprob, ended):
        score = sum_logprob / len(tokens) ** length_penalty
        if len(kept) < num_beams or score > min(h[0] for h in kept):
            kept.append((score, tokens, ended))
            if len(kept) > num_beams:
                del kept[min(range(len(kept)), key=lambda i: (kept[i][0], i))]

    while True:
        scores, beam_of, token_of = [], [], []
        for b, (tokens, s) in enumerate(beams):
            x = np.asarray(next_logits(prompt + tokens), dtype=np.float64)
            m = x.max()
            scores.append(s + (x - (m + np.log(np.exp(x - m).sum()))))
            beam_of.append(np.full(len(x), b))
            token_of.append(np.arange(len(x)))
        scores, beam_of, token_of = map(np.concatenate, (scores, beam_of, token_of))
        order = np.lexsort((token_of, beam_of, -scores))[:k]
        nxt = []
        for rank, i in enumerate(order):
            b, t, sc = int(beam_of[i]), int(token_of[i]), float(scores[i])
            if t in ends:
                if rank < num_beams:
                    add(beams[b][0] + [t], sc, True)
            else:
                nxt.append((beams[b][0] + [t], sc))
            if len(nxt) == num_beams:
                break
        length = len(beams[0][0]) + 1
        if len(kept) >= num_beams:
            worst, best = min(h[0] for h in kept), float(scores[order[0]])
            if early_stopping is True:
                break
            if early_stopping == "never" and length_penalty > 0:
                length = max_tokens
            if worst >= best / length ** length_penalty:
                break
        beams = nxt
        if len(beams[0][0]) == max_tokens:
            for tokens, s in beams:
                add(tokens, s, False)
            break
    ranked = sorted(range(len(kept)), key=lambda i: (-kept[i][0], -i))
    return [(kept[i][1], kept[i][0], kept[i][2]) for i in ranked[:n]]
