"""The cluster's router: which replica gets a request.

A replica's engine caches the K/V of whole prompt pages under chained page
hashes (hash i names pages 0..i; folio._folio.page_hashes computes the same
ones). The router keeps, per replica, the hashes of the pages it sent there
recently (bounded by the replica's pool, least recently routed dropped
first): its view of what that replica's prefix cache may hold, as SGLang's
cache-aware router keeps an approximate tree of routed prompts. A request
goes to the replica holding the longest run of its leading pages, unless
that replica is loaded well beyond the least loaded one; with no page held
anywhere, to the least loaded replica (ties: the one holding the fewest
pages, so distinct prefixes spread over the caches; then the lowest index).

The view is a prediction, never trusted for correctness: a replica that
evicted a page just recomputes it, and the engines' results do not depend
on where a prefix was cached. The replicas' own hit rates are in their
stats (prefix_hit_tokens / prefix_query_tokens).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, List, Sequence

from folio import _folio


@dataclass(frozen=True)
class Route:
    """One routing decision: the replica, the leading pages it is believed
    to hold, the prompt's whole pages, and why ("prefix": its cache,
    "least_loaded": no replica held a page, "balance": the replica holding
    the prefix was too loaded)."""

    replica: int
    hit_pages: int
    prompt_pages: int
    reason: str


class PrefixRouter:
    """Routes by prompt prefix over a fixed set of replica slots.

    page_size: the replicas' KV page size (tokens). capacity_pages: pages
    remembered per replica (its pool's size is the natural bound).
    balance_slack: a prefix replica is skipped when it has more than this
    many requests beyond the least loaded candidate.
    """

    def __init__(self, num_replicas: int, page_size: int, capacity_pages: int,
                 balance_slack: int = 4) -> None:
        if num_replicas < 1:
            raise ValueError(f"num_replicas must be >= 1 (got {num_replicas})")
        if page_size < 1 or capacity_pages < 1:
            raise ValueError("page_size and capacity_pages must be >= 1 "
                             f"(got {page_size}, {capacity_pages})")
        self.page_size = page_size
        self.capacity_pages = capacity_pages
        self.balance_slack = balance_slack
        self._held: List["OrderedDict[int, None]"] = [OrderedDict() for _ in range(num_replicas)]
        self.decisions: Dict[str, int] = {"prefix": 0, "least_loaded": 0, "balance": 0}
        self.routed_pages = 0  # whole prompt pages routed
        self.predicted_hit_pages = 0  # of those, believed cached where they went

    def hashes(self, token_ids: Sequence[int]) -> List[int]:
        return list(_folio.page_hashes([int(t) for t in token_ids], self.page_size))

    def route(self, token_ids: Sequence[int], loads: Sequence[int],
              candidates: Sequence[int]) -> Route:
        """Picks one of candidates (replica indices, e.g. the live ones with
        room) for a prompt; loads[i] is replica i's requests in flight.
        Records the prompt's pages as held by the one picked."""
        if not candidates:
            raise ValueError("no candidate replica")
        hashes = self.hashes(token_ids)
        # Ties in load: the replica holding the fewest pages, so distinct
        # prefixes spread over the replicas' caches.
        least = min(candidates, key=lambda i: (loads[i], len(self._held[i]), i))
        best, best_hits = least, 0
        for i in candidates:
            hits = self._leading_hits(i, hashes)
            if hits > best_hits or (hits == best_hits and hits > 0 and
                                    (loads[i], i) < (loads[best], best)):
                best, best_hits = i, hits
        if best_hits == 0:
            route = Route(least, 0, len(hashes), "least_loaded")
        elif loads[best] > loads[least] + self.balance_slack:
            route = Route(least, self._leading_hits(least, hashes), len(hashes), "balance")
        else:
            route = Route(best, best_hits, len(hashes), "prefix")
        self.decisions[route.reason] += 1
        self.routed_pages += route.prompt_pages
        self.predicted_hit_pages += route.hit_pages
        self.remember(route.replica, hashes)
        return route

    def remember(self, replica: int, hashes: Sequence[int]) -> None:
        held = self._held[replica]
        for h in hashes:
            held[h] = None
            held.move_to_end(h)
        while len(held) > self.capacity_pages:
            held.popitem(last=False)

    def forget(self, replica: int) -> None:
        """A replica restarted (its cache is empty) or left."""
        self._held[replica].clear()

    def held_pages(self, replica: int) -> int:
        return len(self._held[replica])

    def _leading_hits(self, replica: int, hashes: Sequence[int]) -> int:
        held = self._held[replica]
        n = 0
        for h in hashes:
            if h not in held:
                break
            n += 1
        return n

    def metrics(self) -> Dict[str, float]:
        out: Dict[str, float] = {f"route_{k}": float(v) for k, v in self.decisions.items()}
        out["routed_prompt_pages"] = float(self.routed_pages)
        out["predicted_hit_pages"] = float(self.predicted_hit_pages)
        out["predicted_hit_rate"] = (self.predicted_hit_pages / self.routed_pages
                                     if self.routed_pages else 0.0)
        out["router_held_pages"] = float(sum(len(h) for h in self._held))
        return out
