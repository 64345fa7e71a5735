#!/usr/bin/env python3
"""The soak's stored-frame checker (Protocol/relay.md §4-§5): does the relay keep every promise it makes,
across kill -9 restarts?

A sender sends numbered frames, alternating:
- STORE frames to a recipient key that is offline (a fresh one every --per-recipient frames). RECEIPT 1 (or 0:
  delivered, written first) is the relay's promise that the frame is durable: each such frame must reach the
  recipient later, whatever happened to the relay meanwhile.
- live frames (no STORE) to a recipient that stays connected and reads. RECEIPT 0 says the relay handed the
  frame to that connection: it must arrive unless that connection (or the relay) was lost around the receipt.

Retired recipients are drained now and then during the run (sometimes leaving without ACKs, so frames are
delivered again); at the end every recipient is drained until the relay says nothing is left. Payloads carry
their number and a digest, so a frame that arrives corrupted or to the wrong key is counted too.

Usage: frame_checker.py URL STATUS_FILE. Runs until a line "finish" on stdin (or EOF), then prints one JSON
object of results on stdout. Writes its running counts to STATUS_FILE every few seconds. Needs the repo's .venv
(websockets, pynacl)."""
import asyncio, hashlib, json, os, random, struct, sys, time

from nacl.signing import SigningKey
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

CONTEXT = b"homebase-relay-auth-v1"
MAGIC = b"SOAK"
RECEIPT_TIMEOUT = 3.0
# A live frame not delivered is excused when the live recipient lost its connection this close to the receipt.
LIVE_EXCUSE_WINDOW = (-2.0, 5.0)


async def login(url, key):
    ws = await connect(url, subprotocols=["homebase-relay.v1"], proxy=None, compression=None, open_timeout=3,
                       ping_interval=None, close_timeout=1, max_size=2 * 1024 * 1024)
    try:
        challenge = await asyncio.wait_for(ws.recv(), 3)
        await ws.send(b"\x02" + bytes(key.verify_key) + key.sign(CONTEXT + challenge[2:34]).signature)
        ready = await asyncio.wait_for(ws.recv(), 3)
        if ready[0] != 0x03:
            raise ConnectionError("no READY")
        return ws, struct.unpack(">I", ready[1:5])[0]
    except BaseException:
        await ws.close()
        raise


def make_payload(kind, recipient_index, n):
    pad = os.urandom(random.randint(64, 1500))
    body = MAGIC + struct.pack(">BIQ", kind, recipient_index, n) + pad
    return body + hashlib.sha256(body).digest()[:16]


def parse_payload(payload):
    """(kind, recipient index, number), or None when the payload is not intact."""
    body, digest = payload[:-16], payload[-16:]
    if len(payload) < 33 or body[:4] != MAGIC or hashlib.sha256(body).digest()[:16] != digest:
        return None
    return struct.unpack(">BIQ", body[4:17])


STORE, LIVE = 1, 2


class Checker:
    def __init__(self, url, status_path, per_recipient=200, interval=0.1):
        self.url = url
        self.status_path = status_path
        self.per_recipient = per_recipient
        self.interval = interval
        self.sender_key = SigningKey.generate()
        self.live_key = SigningKey.generate()
        self.recipients = [SigningKey.generate()]
        self.sent_to_current = 0
        self.frames = {}  # n -> {"kind", "recipient", "status", "receipt_at"}
        self.receipts = {}  # send_id -> future
        self.stored_received = {}  # n -> times seen
        self.live_received = set()
        self.corrupt = 0
        self.misdelivered = 0
        self.live_disconnects = []  # monotonic times
        self.sender_connections = 0
        self.drains = 0
        self.drained_upto = 0  # recipients [0, drained_upto) retired and drained at least once
        self.finishing = asyncio.Event()

    # MARK: Sender

    async def sender(self):
        n = 0
        while not self.finishing.is_set():
            try:
                ws, _ = await login(self.url, self.sender_key)
            except (OSError, ConnectionError, InvalidHandshake, asyncio.TimeoutError, ConnectionClosed):
                await asyncio.sleep(0.3)
                continue
            self.sender_connections += 1
            reader = asyncio.create_task(self.read_receipts(ws))
            try:
                while not self.finishing.is_set():
                    n += 1
                    kind = STORE if n % 2 else LIVE
                    if kind == STORE:
                        if self.sent_to_current >= self.per_recipient:
                            self.recipients.append(SigningKey.generate())
                            self.sent_to_current = 0
                        index = len(self.recipients) - 1
                        recipient = bytes(self.recipients[index].verify_key)
                        self.sent_to_current += 1
                    else:
                        index, recipient = 0, bytes(self.live_key.verify_key)
                    frame = {"kind": kind, "recipient": index, "status": None, "receipt_at": None}
                    self.frames[n] = frame
                    future = asyncio.get_running_loop().create_future()
                    self.receipts[n] = future
                    payload = make_payload(kind, index, n)
                    await ws.send(b"\x10" + struct.pack(">I", n) + recipient + bytes([1 if kind == STORE else 0])
                                  + payload)
                    try:
                        status = await asyncio.wait_for(future, RECEIPT_TIMEOUT)
                    except asyncio.TimeoutError:
                        status = None
                    finally:
                        self.receipts.pop(n, None)
                    if status is None:
                        break  # the relay died with the frame in flight: no promise was made
                    frame["status"], frame["receipt_at"] = status, time.monotonic()
                    await asyncio.sleep(self.interval)
            except ConnectionClosed:
                pass
            finally:
                reader.cancel()
                await ws.close()

    async def read_receipts(self, ws):
        try:
            async for message in ws:
                if message[0] == 0x13 and len(message) == 6:
                    send_id, status = struct.unpack(">IB", message[1:6])
                    future = self.receipts.get(send_id)
                    if future and not future.done():
                        future.set_result(status)
        except ConnectionClosed:
            pass
        for future in self.receipts.values():
            if not future.done():
                future.set_result(None)

    # MARK: Live recipient

    async def live_recipient(self):
        while True:
            try:
                ws, _ = await login(self.url, self.live_key)
            except (OSError, ConnectionError, InvalidHandshake, asyncio.TimeoutError, ConnectionClosed):
                await asyncio.sleep(0.2)
                continue
            try:
                async for message in ws:
                    if message[0] != 0x11:
                        continue
                    parsed = parse_payload(message[41:])
                    if parsed is None:
                        self.corrupt += 1
                    elif parsed[0] != LIVE:
                        self.misdelivered += 1
                    else:
                        self.live_received.add(parsed[2])
            except ConnectionClosed:
                pass
            finally:
                self.live_disconnects.append(time.monotonic())
                await ws.close()

    # MARK: Draining stored frames

    async def drain(self, index, ack=True):
        """One connection as recipient `index`: reads what the relay holds for it. Returns how many frames the
        READY announced (0: the mailbox was empty), or None when the relay could not be reached."""
        try:
            ws, stored = await login(self.url, self.recipients[index])
        except (OSError, ConnectionError, InvalidHandshake, asyncio.TimeoutError, ConnectionClosed):
            return None
        self.drains += 1
        got = 0
        try:
            while True:
                try:
                    message = await asyncio.wait_for(ws.recv(), 1.0 if got >= stored else 3.0)
                except asyncio.TimeoutError:
                    break
                if message[0] != 0x11:
                    continue
                delivery_id = struct.unpack(">Q", message[33:41])[0]
                parsed = parse_payload(message[41:])
                if parsed is None:
                    self.corrupt += 1
                elif parsed[0] != STORE or parsed[1] != index:
                    self.misdelivered += 1
                else:
                    number = parsed[2]
                    self.stored_received[number] = self.stored_received.get(number, 0) + 1
                got += 1
                if ack and delivery_id:
                    await ws.send(b"\x12" + struct.pack(">Q", delivery_id))
        except ConnectionClosed:
            return None
        finally:
            await ws.close()
        return stored

    async def drainer(self):
        """Drains retired recipients during the run; one drain in four leaves without acknowledging."""
        while not self.finishing.is_set():
            try:
                await asyncio.wait_for(self.finishing.wait(), random.uniform(10, 25))
                return
            except asyncio.TimeoutError:
                pass
            retired = len(self.recipients) - 1
            if retired <= 0:
                continue
            index = random.randrange(max(0, retired - 3), retired)
            await self.drain(index, ack=random.random() >= 0.25)

    async def final_drain(self):
        """Every recipient until its READY says nothing is stored (ACKs are applied by the relay
        asynchronously, so a reconnect may see the last frames once more)."""
        for index in range(len(self.recipients)):
            for _ in range(40):
                stored = await self.drain(index)
                if stored == 0:
                    break
                if stored is None:
                    await asyncio.sleep(0.5)

    # MARK: Results

    def counts(self):
        store = [(n, f) for n, f in self.frames.items() if f["kind"] == STORE]
        live = [(n, f) for n, f in self.frames.items() if f["kind"] == LIVE]
        statuses = {}
        for _, f in self.frames.items():
            key = "none" if f["status"] is None else str(f["status"])
            statuses[key] = statuses.get(key, 0) + 1
        promised = [n for n, f in store if f["status"] in (0, 1)]
        lost = [n for n in promised if n not in self.stored_received]
        live_receipted = [(n, f) for n, f in live if f["status"] == 0]
        live_missing = [(n, f) for n, f in live_receipted if n not in self.live_received]
        lo, hi = LIVE_EXCUSE_WINDOW

        def excused(f):
            return any(lo <= d - f["receipt_at"] <= hi for d in self.live_disconnects)

        live_lost = [n for n, f in live_missing if not excused(f)]
        return {
            "store": {
                "sent": len(store), "promised": len(promised),
                "receipts": {k: v for k, v in sorted(statuses.items())},
                "delivered": sum(1 for n, _ in store if n in self.stored_received),
                "delivered_without_promise": sum(1 for n, f in store
                                                 if n in self.stored_received and f["status"] not in (0, 1)),
                "redeliveries": sum(c - 1 for c in self.stored_received.values()),
                "lost": len(lost), "lost_numbers": lost[:20],
                "recipients": len(self.recipients),
            },
            "live": {
                "sent": len(live), "receipt_0": len(live_receipted),
                "delivered": sum(1 for n, _ in live_receipted if n in self.live_received),
                "missing_across_connection_loss": len(live_missing) - len(live_lost),
                "lost": len(live_lost), "lost_numbers": live_lost[:20],
                "recipient_reconnects": len(self.live_disconnects),
            },
            "corrupt": self.corrupt, "misdelivered": self.misdelivered,
            "sender_connections": self.sender_connections, "drains": self.drains,
        }

    async def status_writer(self):
        while True:
            c = self.counts()
            tmp = self.status_path + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"sent": c["store"]["sent"] + c["live"]["sent"], "promised": c["store"]["promised"],
                           "delivered": c["store"]["delivered"], "sender_connections": c["sender_connections"]}, f)
            os.replace(tmp, self.status_path)
            await asyncio.sleep(3)

    async def run(self):
        tasks = [asyncio.create_task(t) for t in (self.sender(), self.live_recipient(), self.drainer(),
                                                  self.status_writer())]
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.readline)
        self.finishing.set()
        await asyncio.wait_for(asyncio.gather(tasks[0], tasks[2], return_exceptions=True), 15)
        await asyncio.sleep(2)  # live frames still on their way
        await self.final_drain()
        for t in tasks:
            t.cancel()
        print(json.dumps(self.counts()), flush=True)


if __name__ == "__main__":
    asyncio.run(Checker(sys.argv[1], sys.argv[2]).run())
