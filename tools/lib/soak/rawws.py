"""A minimal relay client on a plain socket (RFC 6455 by hand, Protocol/relay.md §1-§3), for the soak's
hostile peers: a reader that logs in and then never reads (its receive buffer shrunk so the relay's queue
fills), and the sender that floods it. A library client would read for us in the background; this one reads
only when asked. Needs pynacl (the repo's .venv)."""
import base64, os, socket, struct

from nacl.signing import SigningKey

CONTEXT = b"homebase-relay-auth-v1"


class RawRelayClient:
    def __init__(self, host, port, key=None, rcvbuf=None, timeout=5.0):
        self.key = key or SigningKey.generate()
        self.public = bytes(self.key.verify_key)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            # Set before connect, so the window the relay sees is small from the start.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.buffer = b""
        self._handshake(host, port)
        challenge = self.recv_message()
        if len(challenge) != 42 or challenge[0] != 0x01:
            raise ConnectionError("expected CHALLENGE, got %r" % challenge[:8])
        self.send_message(b"\x02" + self.public + self.key.sign(CONTEXT + challenge[2:34]).signature)
        ready = self.recv_message()
        if len(ready) != 9 or ready[0] != 0x03:
            raise ConnectionError("expected READY, got %r" % ready[:8])
        self.stored, self.max_payload = struct.unpack(">II", ready[1:9])

    @property
    def local_port(self):
        return self.sock.getsockname()[1]

    def _handshake(self, host, port):
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            "GET /v1/relay HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: homebase-relay.v1\r\n\r\n"
            % (host, port, key)).encode())
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError("upgrade refused: %r" % head[:40])

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed by the relay")
        self.buffer += data

    def _take(self, n):
        while len(self.buffer) < n:
            self._fill()
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def recv_frame(self):
        """(opcode, payload) of the next WebSocket frame (the relay never fragments or masks)."""
        b0, b1 = self._take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._take(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._take(8))[0]
        return b0 & 0x0F, self._take(n)

    def recv_message(self):
        """The next binary message; answers pings; raises ConnectionError on a close (its code in .close_code)."""
        while True:
            opcode, payload = self.recv_frame()
            if opcode == 0x2:
                return payload
            if opcode == 0x9:
                self._send_frame(0xA, payload)
            elif opcode == 0x8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
                err = ConnectionError("closed by the relay with %s" % code)
                err.close_code = code
                raise err

    def _send_frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack(">BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            head = struct.pack(">BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if n < 4096 else _mask(payload, mask)
        self.sock.sendall(head + mask + masked)

    def send_message(self, payload):
        self._send_frame(0x2, payload)

    def send(self, send_id, recipient, payload, store=False):
        self.send_message(b"\x10" + struct.pack(">I", send_id) + recipient + bytes([1 if store else 0]) + payload)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _mask(payload, mask):
    # XOR with the mask repeated, done on big integers: fast enough for the flood's 64 KiB frames.
    n = len(payload)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
