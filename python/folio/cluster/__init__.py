"""folio.cluster: folio engines as Ray actors behind one request API.

Needs Ray and aiohttp (the ``folio[ray]`` extra).

- Cluster: replicas (mixed) or prefill and decode replicas
  (disaggregated, KV snapshots through Ray's object store), a prefix-aware
  router, and streams that survive a replica's death exactly.
- PrefixRouter: the routing policy alone (no Ray needed).
- folio.cluster.http.ClusterServer: an OpenAI-compatible HTTP front end
  for a Cluster (aiohttp), with folio serve's request checks and replies.
- Overloaded (HTTP 429), Unavailable (HTTP 503).
"""
from folio.cluster.cluster import Cluster, Overloaded, Unavailable
from folio.cluster.router import PrefixRouter, Route

__all__ = ["Cluster", "Overloaded", "PrefixRouter", "Route", "Unavailable"]
