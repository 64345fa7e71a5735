"""The measuring half of tools/bench-serve: time to first token of `handset chat` against the same request through
`handset serve`, in alternating pairs, on the route the handsets are set to now.

chat: `handset chat --json PROMPT`, its `timing.first_text_ms` (the device's own clock, from the call to the first
non-empty text: what inference-bench measures for its client). serve: a minimal HTTP/1.1 client on a raw socket,
from just before the request is written to the first SSE chunk with non-empty `delta.content` (the same point, seen
by an app), so the difference is what serve adds (HTTP, JSON, SSE, the socket) and not what a client library costs.

Prints one JSON object: {"chat": [ms…], "serve": [ms…], "added": [ms…], "errors": […]}.
"""
import argparse
import json
import socket
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--handset", required=True, help="the chat handset command (a shell word list)")
p.add_argument("--serve", required=True, help="serve base URL of the other handset, same route")
p.add_argument("--model", required=True)
p.add_argument("--pairs", type=int, default=30)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--route", required=True, help="the route both sides must report")
args = p.parse_args()

host, port = args.serve.split("//", 1)[1].rsplit(":", 1)
port = int(port)


def serve_ttft(prompt):
    """(ms to the first content, provider header) for one streamed request on a fresh connection."""
    body = json.dumps({"model": args.model, "stream": True,
                       "messages": [{"role": "user", "content": prompt}]}).encode()
    req = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    s = socket.create_connection((host, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        t0 = time.perf_counter()
        s.sendall(req)
        buf = b""
        first = None
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            if first is None:
                # The first `data:` event whose delta carries text (the role-only first chunk does not count).
                for line in buf.split(b"\n"):
                    if line.startswith(b"data: {") and b'"content":"' in line and b'"content":""' not in line:
                        first = time.perf_counter()
                        break
            if first is not None and b"data: [DONE]" in buf:
                break
        head = buf.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
        route = next((l.split(":", 1)[1].strip() for l in head.split("\r\n") if l.startswith("x-homebase-route:")), "")
        if first is None:
            raise RuntimeError(f"no content in {buf[:300]!r}")
        return (first - t0) * 1000, route
    finally:
        s.close()


def chat_ttft(prompt):
    out = subprocess.run(args.handset.split() + ["chat", "--json", prompt], capture_output=True, text=True,
                         timeout=60)
    d = json.loads(out.stdout)
    if d.get("fallback"):
        raise RuntimeError(f"chat fell back: {d['fallback']}")
    return d["timing"]["first_text_ms"], d["route"]


chat, serve, added, errors = [], [], [], []
for i in range(args.warmup + args.pairs):
    prompt = f"Pair {i}: tell me something about lighthouses"
    try:
        # Alternate which side goes first, so a drift of the machine weighs on both alike.
        if i % 2 == 0:
            c, cr = chat_ttft(prompt)
            s, sr = serve_ttft(prompt)
        else:
            s, sr = serve_ttft(prompt)
            c, cr = chat_ttft(prompt)
        if cr != args.route or sr != args.route:
            raise RuntimeError(f"route chat={cr} serve={sr}, expected {args.route}")
    except Exception as e:  # noqa: BLE001 - counted and reported
        errors.append(f"pair {i}: {type(e).__name__}: {e}"[:300])
        continue
    if i >= args.warmup:
        chat.append(c)
        serve.append(s)
        added.append(s - c)
json.dump({"chat": chat, "serve": serve, "added": added, "errors": errors}, sys.stdout)
