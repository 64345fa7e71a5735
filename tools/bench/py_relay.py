#!/usr/bin/env python3
"""A minimal relay in Python `websockets`, implementing the same frames as ours (Protocol/relay.md):
CHALLENGE/AUTH (Ed25519 via PyNaCl)/READY, SEND → DELIVER live with RECEIPT 0/2. No store, no limits.

It is the reference the relay benchmark compares against (tools/bench-relay), run under the same load.
Usage: py_relay.py PORT
"""
import asyncio, os, struct, sys, time

import websockets
from nacl.signing import VerifyKey
from nacl.exceptions import BadSignatureError

CONTEXT = b"homebase-relay-auth-v1"
clients = {}


async def handler(ws):
    nonce = os.urandom(32)
    await ws.send(b"\x01\x01" + nonce + struct.pack(">Q", int(time.time() * 1000)))
    auth = await asyncio.wait_for(ws.recv(), 10)
    if not isinstance(auth, bytes) or len(auth) != 97 or auth[0] != 0x02:
        await ws.close(1008)
        return
    pk, sig = auth[1:33], auth[33:]
    try:
        VerifyKey(pk).verify(CONTEXT + nonce, sig)
    except BadSignatureError:
        await ws.close(1008)
        return
    old = clients.get(pk)
    if old is not None:
        await old.close(4001)
    clients[pk] = ws
    await ws.send(b"\x03" + struct.pack(">II", 0, 262144))
    try:
        async for msg in ws:
            if isinstance(msg, str):
                await ws.close(1003)
                return
            if msg[0] == 0x10 and len(msg) >= 38:
                send_id = msg[1:5]
                recipient = msg[5:37]
                payload = msg[38:]
                dest = clients.get(recipient)
                status = 2
                if dest is not None:
                    try:
                        await dest.send(b"\x11" + pk + b"\x00" * 8 + payload)
                        status = 0
                    except websockets.ConnectionClosed:
                        pass
                if send_id != b"\x00\x00\x00\x00":
                    await ws.send(b"\x13" + send_id + bytes([status]))
    finally:
        if clients.get(pk) is ws:
            del clients[pk]


async def main(port):
    async with websockets.serve(handler, "127.0.0.1", port, subprotocols=["homebase-relay.v1"],
                                max_size=512 * 1024, compression=None):
        print(f"listening {port}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
