"""A streaming completion server in a few lines: folio.AsyncLLM behind the
standard library's asyncio streams, speaking server-sent events.

    python examples/stream_server.py [--model MODEL] [--port PORT]
    curl -N localhost:PORT -d '{"prompt": "Hello", "max_tokens": 16}'

Each request streams `data: {"text": ..., "finish_reason": ...}` events (the
text since the previous event) and ends with `data: [DONE]`. A client that
hangs up aborts its request, which frees its KV pages at once. It prints
"listening on http://HOST:PORT" when ready (port 0 picks a free one).
"""
import argparse
import asyncio
import json
import uuid
from typing import Any, Dict

from folio import AsyncLLM, SamplingParams


async def read_request(reader: asyncio.StreamReader) -> Dict[str, Any]:
    headers: Dict[str, str] = {}
    await reader.readline()  # the request line: any method and path
    while (line := (await reader.readline()).decode().strip()):
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    request: Dict[str, Any] = json.loads(body or b"{}")
    return request


def serve(engine: AsyncLLM) -> Any:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            req = await read_request(reader)
            params = SamplingParams(max_tokens=int(req.get("max_tokens", 16)),
                                    temperature=float(req.get("temperature", 1.0)),
                                    seed=req.get("seed"))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n")
            sent = 0
            async for out in engine.generate(str(req.get("prompt", "")), params,
                                             request_id=uuid.uuid4().hex):
                text = out.outputs[0].text  # cumulative: send what is new
                event = {"text": text[sent:], "finish_reason": out.outputs[0].finish_reason}
                sent = len(text)
                writer.write(f"data: {json.dumps(event)}\n\n".encode())
                await writer.drain()  # raises once the client has gone: the request aborts
            writer.write(b"data: [DONE]\n\n")
        except (ValueError, KeyError) as e:
            writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n" +
                         str(e).encode() + b"\n")
        except ConnectionError:
            pass
        finally:
            writer.close()
    return handle


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    args = ap.parse_args()
    async with AsyncLLM(args.model) as engine:
        server = await asyncio.start_server(serve(engine), args.host, args.port)
        host, port = server.sockets[0].getsockname()[:2]
        print(f"listening on http://{host}:{port}", flush=True)
        async with server:
            await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
