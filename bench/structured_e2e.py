"""Structured output end to end on real schemas: `folio serve` on a model,
the `openai` client sending `response_format: json_schema` (strict) for
schemas of a MaskBench folder (github guidance-ai/jsonschemabench,
maskbench/data: one JSON file per schema, with `schema` and `tests`), at
temperature 0 and 0.8, and `jsonschema`'s validator, with format checking,
on every reply.

    python3 bench/structured_e2e.py --folio build/bin/folio --model M.gguf \\
        --maskbench DIR [--schemas 300] [--max-tokens 256] [--concurrency 16]

A schema is picked every len(folder)/N files in name order, so every split
is represented. For each request: a 400 must name `response_format` and
say what was refused; a reply that ends (`finish_reason` "stop") must parse
as JSON and validate; a reply cut by max_tokens ("length") is counted
apart (a small model can ramble inside a long string), as is a request the
server could not answer. Prints one JSON object: the counts per
temperature and every failure (there should be none).
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import threading
import time

import jsonschema
import openai


def start_server(folio, model, threads, max_num_seqs):
    proc = subprocess.Popen([folio, "serve", "--model", model, "--port", "0", "--threads",
                             str(threads), "--max-num-seqs", str(max_num_seqs)],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on (http://[\d.]+:\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, m.group(1)
    proc.kill()
    sys.exit("folio serve did not start")


def one(client, model, schema, temperature, max_tokens, seed):
    try:
        r = client.chat.completions.create(
            model=model, max_tokens=max_tokens, temperature=temperature, seed=seed,
            messages=[{"role": "user", "content": "Reply with one JSON value that fits the "
                       "schema. Keep strings short."}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "answer", "schema": schema, "strict": True}})
    except openai.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return {"kind": "refused", "param": body.get("param"), "message": body.get("message", "")}
    except openai.APIError as e:
        return {"kind": "error", "message": str(e)}
    choice = r.choices[0]
    text = choice.message.content or ""
    if choice.finish_reason == "length":
        return {"kind": "length", "tokens": r.usage.completion_tokens}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return {"kind": "invalid", "why": f"not JSON: {e}", "text": text[:400]}
    validator = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    errors = list(validator(schema, format_checker=validator.FORMAT_CHECKER).iter_errors(value))
    if errors:
        return {"kind": "invalid", "why": errors[0].message[:300], "text": text[:400]}
    return {"kind": "valid", "tokens": r.usage.completion_tokens}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folio", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--maskbench", required=True)
    ap.add_argument("--schemas", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--temperatures", default="0,0.8")
    a = ap.parse_args()
    files = sorted(f for f in os.listdir(a.maskbench) if f.endswith(".json"))
    step = max(1, len(files) // a.schemas)
    picked = files[::step][:a.schemas]
    schemas = [(f, json.load(open(os.path.join(a.maskbench, f)))["schema"]) for f in picked]
    proc, url = start_server(a.folio, a.model, a.threads, a.concurrency)
    try:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0,
                               timeout=3600)
        model = client.models.list().data[0].id
        report = {"benchmark": "structured_e2e", "model": os.path.basename(a.model),
                  "schemas": len(schemas), "max_tokens": a.max_tokens, "by_temperature": {}}
        t0 = time.time()
        for temp in [float(x) for x in a.temperatures.split(",")]:
            with concurrent.futures.ThreadPoolExecutor(a.concurrency) as pool:
                results = list(pool.map(
                    lambda i: one(client, model, schemas[i][1], temp, a.max_tokens, i),
                    range(len(schemas))))
            counts = {}
            failures = []
            for (name, _), r in zip(schemas, results):
                counts[r["kind"]] = counts.get(r["kind"], 0) + 1
                if r["kind"] == "refused" and (r["param"] != "response_format" or
                                               not r["message"]):
                    failures.append({"file": name, **r})
                if r["kind"] in ("invalid", "error"):
                    failures.append({"file": name, **r})
            refusals = {}
            for r in results:
                if r["kind"] == "refused":
                    m = re.search(r'"([^"]+)"|(\w+) at #', r["message"])
                    key = (m.group(1) or m.group(2)) if m else r["message"][:40]
                    refusals[key] = refusals.get(key, 0) + 1
            report["by_temperature"][str(temp)] = {
                "counts": counts, "refused_by": dict(sorted(refusals.items(),
                                                            key=lambda kv: -kv[1])[:15]),
                "failures": failures}
        report["wall_s"] = round(time.time() - t0, 1)
        print(json.dumps(report, indent=2))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
