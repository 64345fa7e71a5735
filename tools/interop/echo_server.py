#!/usr/bin/env python3
"""Python `websockets` as a server for our WebSocketClient (Tests/RelayServiceTests/InteropTests.swift).

Usage: echo_server.py [--cert CERT.pem --key KEY.pem]
Listens on 127.0.0.1 port 0 (wss:// with the certificate, else ws://), prints "listening PORT", then for each
connection:
- a binary message is echoed as is;
- text "ping": the server pings with payload "srv-ping", waits (bounded) for the pong and answers text
  "pong-ok" or "pong-missing";
- text "close CODE REASON": the server closes with that code and reason;
- anything else as text is echoed.
When a connection ends it prints "closed CODE" (the close code the client sent, or "none").
"""
import asyncio, ssl, sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


async def handler(ws):
    try:
        async for msg in ws:
            if isinstance(msg, bytes):
                await ws.send(msg)
            elif msg == "ping":
                waiter = await ws.ping(b"srv-ping")
                try:
                    await asyncio.wait_for(waiter, 5)
                    await ws.send("pong-ok")
                except asyncio.TimeoutError:
                    await ws.send("pong-missing")
            elif msg.startswith("close "):
                _, code, reason = msg.split(" ", 2)
                await ws.close(int(code), reason)
            else:
                await ws.send(msg)
    except ConnectionClosed:
        pass
    rcvd = ws.protocol.close_rcvd
    print(f"closed {rcvd.code if rcvd else 'none'}", flush=True)


async def main():
    context = None
    if "--cert" in sys.argv:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[sys.argv.index("--cert") + 1], sys.argv[sys.argv.index("--key") + 1])
    async with serve(handler, "127.0.0.1", 0, ssl=context, max_size=1024 * 1024, compression=None,
                     ping_interval=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening {port}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
