"""Disaggregated serving across a real network stack: a Ray head node in one
network namespace, a worker node in another, joined by a veth pair and
nothing else (each namespace has only its end of the link and its own
loopback). The prefill replica is placed on the first node and the decode
replica on the second, so the KV snapshot leaves one node's object store
and crosses TCP over the link to the other's. The request's tokens and
log-prob bits equal one engine alone's.

Needs root and `ip netns` (iproute2); skips, saying why, where namespaces
cannot be made. Everything it starts (namespaces, link, both Ray nodes) is
torn down afterwards."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("folio", reason="the folio extension is not built "
                    "(FOLIO_BUILD_PYTHON=OFF) or not on PYTHONPATH")
pytest.importorskip("ray", reason="folio.cluster needs Ray (tools/setup.sh installs it)")

from folio import LLM, SamplingParams  # noqa: E402

PACKAGE = str(Path(__import__("folio").__file__).parent.parent)
ENGINE = {"threads": 1, "page_size": 8, "num_pages": 256, "max_num_seqs": 8}
PROMPT = "a snapshot crosses the veth link " * 4
PARAMS = dict(temperature=0.8, top_k=40, seed=31, max_tokens=24, logprobs=2)


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_namespaces():
    """Namespaces A and B, 10.231.X.1 <-> 10.231.X.2 over a veth pair."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2's ip")
    tag = f"f{os.getpid() % 100000}"
    a, b = f"{tag}a", f"{tag}b"
    subnet = f"10.231.{os.getpid() % 250}"
    made = []
    try:
        for ns in (a, b):
            r = _ip("netns", "add", ns)
            if r.returncode != 0:
                pytest.skip(f"cannot create a network namespace here: {r.stderr.strip()}")
            made.append(ns)
        steps = [("link", "add", f"{tag}va", "type", "veth", "peer", "name", f"{tag}vb"),
                 ("link", "set", f"{tag}va", "netns", a), ("link", "set", f"{tag}vb", "netns", b),
                 ("-n", a, "addr", "add", f"{subnet}.1/24", "dev", f"{tag}va"),
                 ("-n", b, "addr", "add", f"{subnet}.2/24", "dev", f"{tag}vb"),
                 ("-n", a, "link", "set", f"{tag}va", "up"),
                 ("-n", b, "link", "set", f"{tag}vb", "up"),
                 ("-n", a, "link", "set", "lo", "up"), ("-n", b, "link", "set", "lo", "up")]
        for step in steps:
            r = _ip(*step)
            if r.returncode != 0:
                pytest.skip(f"cannot link the namespaces (ip {' '.join(step)}): {r.stderr.strip()}")
        yield a, b, f"{subnet}.1", f"{subnet}.2"
    finally:
        for ns in made:
            _ip("netns", "del", ns)  # takes its end of the veth pair with it


def _ray_node(ns, env, *args):
    """`ray start --block` in namespace ns, in a process group of its own."""
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "ray.scripts.scripts",
                             "start", "--block", "--disable-usage-stats", "--num-cpus=1", *args],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, text=True)


def _stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


DRIVER = textwrap.dedent("""
    import asyncio, json, sys, ray
    from folio import SamplingParams
    from folio.cluster import Cluster
    head, engine, params, prompt = sys.argv[1], *map(json.loads, sys.argv[2:4]), sys.argv[4]
    ray.init(address=head, log_to_driver=False, logging_level="ERROR")
    cluster = Cluster("builtin", mode="disaggregated", engine_options=engine, replica_cpus=0,
                      placement={"prefill": {"resources": {"node_a": 0.01}},
                                 "decode": {"resources": {"node_b": 0.01}}})

    async def main():
        async for last in cluster.generate(prompt, SamplingParams(**params)):
            pass
        return last, await cluster.metrics()

    out, metrics = asyncio.run(main())
    stats = [r["engine"] for r in metrics["replicas"]]
    c = out.outputs[0]
    print(json.dumps({"tokens": c.token_ids, "text": c.text, "finish": c.finish_reason,
                      "logprobs": [[[t, lp.logprob] for t, lp in sorted(p.items())]
                                   for p in c.logprobs],
                      "node_ips": cluster.node_ips, "handoffs": metrics["handoffs"],
                      "handoff_bytes": metrics["handoff_bytes"], "stats": stats}))
    cluster.shutdown()
""")


def test_disaggregated_hand_off_crosses_a_veth_link(two_namespaces, tmp_path):
    a, b, ip_a, ip_b = two_namespaces
    env = {**os.environ, "PYTHONPATH": PACKAGE, "RAY_AUTH_MODE": "disabled"}
    port = 20000 + os.getpid() % 20000
    temp_dir = tempfile.mkdtemp(prefix="folio_ray_", dir="/tmp")  # Ray wants a short path
    head = _ray_node(a, env, "--head", f"--node-ip-address={ip_a}", f"--port={port}",
                     "--include-dashboard=false", '--resources={"node_a": 1}',
                     f"--temp-dir={temp_dir}")
    worker = None
    try:
        time.sleep(2)
        worker = _ray_node(b, env, f"--address={ip_a}:{port}", f"--node-ip-address={ip_b}",
                           '--resources={"node_b": 1}')
        driver = tmp_path / "driver.py"
        driver.write_text(DRIVER)
        deadline = time.time() + 120
        while True:  # until the worker node has joined
            r = subprocess.run(["ip", "netns", "exec", a, sys.executable, str(driver),
                                f"{ip_a}:{port}", json.dumps(ENGINE), json.dumps(PARAMS), PROMPT],
                               env=env, capture_output=True, text=True, timeout=180)
            if r.returncode == 0 or time.time() > deadline:
                break
            time.sleep(2)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
        got = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        for proc in (worker, head):
            if proc is not None:
                _stop(proc)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert got["node_ips"] == [ip_a, ip_b]  # prefill on A, decode on B
    assert got["handoffs"] == 1 and got["handoff_bytes"] > 0
    assert all(s["pages_held_by_requests"] == 0 for s in got["stats"])
    want = LLM("builtin", **ENGINE).generate(PROMPT, SamplingParams(**PARAMS),
                                             use_tqdm=False)[0].outputs[0]
    assert got["tokens"] == want.token_ids and got["text"] == want.text
    assert got["finish"] == want.finish_reason
    assert got["logprobs"] == [[[t, lp.logprob] for t, lp in sorted(p.items())]
                               for p in want.logprobs]
