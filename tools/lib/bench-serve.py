"""The measuring half of tools/bench-serve: time to first token of `handset chat` against the same request through
`handset serve`, in alternating pairs, on the route the handsets are set to now.

serve: a minimal HTTP/1.1 client on a raw socket, from just before the request is written to the first SSE chunk
with non-empty `delta.content`, so what is measured is serve (HTTP, JSON, SSE, the socket) and not a client library.
chat, two ways (--mode):
- json: `handset chat --json PROMPT`, one process a request, its own `timing.first_text_ms` (from the call to the
  first non-empty text, the device's clock: what inference-bench measures for its client). Each process is new
  (its relay login and its first request to the host are part of every call), serve's process is warm.
- interactive: one `handset chat` process reading prompts on stdin (warm, as serve is), timed from outside with
  the same clock as serve: from writing the prompt line to the first byte of the answer on stdout. It keeps a
  history, so serve is sent the same history (the same request, byte for byte in content).

Prints one JSON object: {"chat": [ms…], "serve": [ms…], "added": [ms…], "errors": […]}.
"""
import argparse
import json
import os
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
p.add_argument("--mode", choices=("json", "interactive"), default="json")
args = p.parse_args()

host, port = args.serve.split("//", 1)[1].rsplit(":", 1)
port = int(port)


def serve_ttft(messages):
    """(ms to the first content, route header, text) for one streamed request on a fresh connection."""
    body = json.dumps({"model": args.model, "stream": True, "messages": messages}).encode()
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
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        route = next((l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("x-homebase-route:")), "")
        if first is None:
            raise RuntimeError(f"no content in {buf[:300]!r}")
        text = ""
        for line in rest.split(b"\n"):
            if line.startswith(b"data: {"):
                for c in json.loads(line[6:]).get("choices") or []:
                    text += (c.get("delta") or {}).get("content") or ""
        return (first - t0) * 1000, route, text
    finally:
        s.close()


def chat_json(prompt):
    out = subprocess.run(args.handset.split() + ["chat", "--json", prompt], capture_output=True, text=True,
                         timeout=60)
    d = json.loads(out.stdout)
    if d.get("fallback"):
        raise RuntimeError(f"chat fell back: {d['fallback']}")
    return d["timing"]["first_text_ms"], d["route"], d["text"]


class Interactive:
    """One warm `handset chat` process: a prompt line in, the streamed answer line out."""

    def __init__(self):
        self.p = subprocess.Popen(args.handset.split() + ["chat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, bufsize=0)

    def ask(self, prompt):
        fd = self.p.stdout.fileno()
        t0 = time.perf_counter()
        self.p.stdin.write((prompt + "\n").encode())
        first, buf = None, b""
        while not buf.endswith(b"\n"):
            piece = os.read(fd, 65536)
            if not piece:
                raise RuntimeError("handset chat ended")
            if first is None and piece.strip():
                first = time.perf_counter()
            buf += piece
        return (first - t0) * 1000, args.route, buf.decode().strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait(10)


interactive = Interactive() if args.mode == "interactive" else None
history = []
chat, serve, added, errors = [], [], [], []
for i in range(args.warmup + args.pairs):
    prompt = f"Pair {i}: tell me something about lighthouses"
    messages = history + [{"role": "user", "content": prompt}]
    ask_chat = (lambda: interactive.ask(prompt)) if interactive else (lambda: chat_json(prompt))
    try:
        # Alternate which side goes first, so a drift of the machine weighs on both alike.
        if i % 2 == 0:
            c, cr, ct = ask_chat()
            s, sr, st = serve_ttft(messages)
        else:
            s, sr, st = serve_ttft(messages)
            c, cr, ct = ask_chat()
        if cr != args.route or sr != args.route:
            raise RuntimeError(f"route chat={cr} serve={sr}, expected {args.route}")
        if ct != st:
            raise RuntimeError(f"different answers: chat {ct[:60]!r}, serve {st[:60]!r}")
    except Exception as e:  # noqa: BLE001 - counted and reported
        errors.append(f"pair {i}: {type(e).__name__}: {e}"[:300])
        if interactive:
            break  # the history is no longer the same on both sides
        continue
    if interactive:  # what the chat process keeps: its prompt and the answer's text
        history = messages + [{"role": "assistant", "content": ct}]
    if i >= args.warmup:
        chat.append(c)
        serve.append(s)
        added.append(s - c)
if interactive:
    interactive.close()
json.dump({"chat": chat, "serve": serve, "added": added, "errors": errors}, sys.stdout)
