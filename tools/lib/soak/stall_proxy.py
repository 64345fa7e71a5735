#!/usr/bin/env python3
"""A TCP proxy for the soak's network stall (stdlib only): forwards 127.0.0.1:LISTEN to a target, and on
SIGUSR1 stops moving bytes on every open connection, both ways, for --stall-seconds. Nothing is closed or
reset: the peers see a path that has gone quiet, their kernel buffers fill, then everything resumes, as after a
Wi-Fi drop-out. A connection the target closes (a relay killed) is closed on the client side too.

Usage: stall_proxy.py --target HOST:PORT [--listen-port N] [--stall-seconds S]
Prints "stall-proxy listening on 127.0.0.1:PORT", then one line per stall."""
import argparse, asyncio, signal, sys, time


class Proxy:
    def __init__(self, target, stall_seconds):
        self.target = target
        self.stall_seconds = stall_seconds
        self.resume_at = 0.0
        self.open = 0
        self.stalls = 0

    async def gate(self):
        # Waits out a stall that is under way; a pump here neither reads nor writes.
        while (left := self.resume_at - time.monotonic()) > 0:
            await asyncio.sleep(left)

    async def pump(self, reader, writer):
        try:
            while True:
                await self.gate()
                data = await reader.read(65536)
                if not data:
                    break
                await self.gate()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def handle(self, client_reader, client_writer):
        host, port = self.target
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        self.open += 1
        try:
            await asyncio.gather(self.pump(client_reader, up_writer), self.pump(up_reader, client_writer))
        finally:
            self.open -= 1

    def stall(self):
        self.stalls += 1
        self.resume_at = time.monotonic() + self.stall_seconds
        print("stall %d: %d connections for %.1f s" % (self.stalls, self.open, self.stall_seconds), flush=True)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--listen-port", type=int, default=0)
    parser.add_argument("--stall-seconds", type=float, default=6.0)
    args = parser.parse_args()
    host, port = args.target.rsplit(":", 1)
    proxy = Proxy((host, int(port)), args.stall_seconds)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", args.listen_port)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, proxy.stall)
    done = asyncio.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, done.set)
    print("stall-proxy listening on 127.0.0.1:%d" % server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await done.wait()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
