#!/usr/bin/env python3
"""The soak with faults (issue 23), run by tools/soak: a relay, a Homebase, the Ollama emulator and 20 devices (12
handsets of the owner's account, 8 granted guests) asking continuously for MINUTES, while faults are injected on
a schedule. Every answer is checked, and the relay's promises about stored frames are checked by a separate
peer (frame_checker.py). Exits 1 on any loss. Loopback only; everything it starts is in its own temporary
directory and is stopped and removed on exit or Ctrl-C.

An answer is:
- complete: served remotely (`fallback` null) with exactly the text the emulator gives for that prompt and model
  (asked of an "oracle" emulator: the same binary and answer settings, at full speed, never faulted);
- a fallback: `chat --json` names a reason (watchdogs that fire under CPU contention land here, as they should);
- lost: anything else. A remote answer whose text differs (cut, garbled), a client that exits non-zero or
  prints no JSON, or one still running after BOUND seconds.

The run: set-up; a warm-up; phase A, where the faults include kill -9 and restart of the relay, the Homebase
and the emulator (with streams in flight); phase B (the second half), where the three processes run unbroken
while the other faults go on (network stalls, slow readers, stopped clients, faulting prompts), so their memory
and descriptors are compared from the start of phase B to the end (load paused at both readings).

Usage: soak.py --bin DIR --minutes N [--out DIR] (run tools/soak, which builds first)."""
import argparse, json, os, random, re, shutil, signal, statistics, subprocess, sys, tempfile, threading, time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rawws import RawRelayClient  # noqa: E402

HANDSETS, GUESTS = 12, 8
# Clients whose relay connection goes through the client stall proxy (the first of each kind).
PROXIED_HANDSETS, PROXIED_GUESTS = 4, 3
MODELS = ["qwen2.5:7b", "llama3.2:3b"]
# The inference watchdog ladder of every client (accept, first output, stall), shorter than the spec's
# 10/90/30 s so a Homebase killed mid-stream costs a client 15 s, not 30.
WATCHDOG_MS = "10000,30000,15000"
# A client still running this long after it started is a lost answer (the ladder's worst case is ~45 s).
BOUND_S = 120
STALL_S = 6.0
SIGSTOP_S = 5.0
# How long a slow reader may take to be closed 4002 and let go. By the relay's defaults its queue must stand
# still for outbound_stall_ms (10 s), seen by the sweep (every second), and the close frame then waits
# close_flush_timeout_ms (5 s): about 10 s and 15 s after the flood (measured 10.4-10.8 and 15.4-15.8 s). The
# wait leaves room for a loaded machine; a relay that never closes or never lets go still fails.
SLOW_READER_WAIT_S = 60
EMULATOR_ARGS = ["--tokens-per-s", "80", "--first-token-ms", "40", "--answer-tokens", "12-48"]
# Faulting prompts (the emulator's [[fault:]] markers), about one request in 16: each must end in a fallback.
FAULT_MARKERS = ["disconnect-after=3", "disconnect-after=8", "http-500", "stall-after=4"]
FAULT_PROMPT_SHARE = 1 / 16
WORDS = ("garden relay river answer signal window paper steady model phone light stone token system "
         "network local remote friend share weather question simple clear bright").split()

PHASE_A_FAULTS = ["relay_kill", "client_stall", "emulator_kill", "slow_reader", "homebase_kill", "sigstop",
                  "homebase_stall"]
PHASE_B_FAULTS = ["client_stall", "slow_reader", "sigstop", "homebase_stall"]


def log(msg):
    print(msg, flush=True)


# MARK: Processes

class Stack:
    """The long-running processes, by role, each restartable on the port it first got."""

    def __init__(self, bin_dir, work):
        self.bin = bin_dir
        self.work = work
        self.procs = {}
        self.ports = {}
        self.starts = {}
        self.lock = threading.Lock()

    def command(self, role, port):
        py = sys.executable
        if role == "relay":
            return [f"{self.bin}/relay", "--listen", f"127.0.0.1:{port}", "--data", f"{self.work}/relay-data",
                    "--log-level", "notice"]
        if role == "emulator":
            return [f"{self.bin}/ollama-emulator", "--listen", f"127.0.0.1:{port}"] + EMULATOR_ARGS
        if role == "oracle":
            return [f"{self.bin}/ollama-emulator", "--listen", f"127.0.0.1:{port}", "--tokens-per-s", "1000000",
                    "--answer-tokens", EMULATOR_ARGS[-1]]
        if role in ("client_proxy", "homebase_proxy"):
            return [py, f"{HERE}/stall_proxy.py", "--target", f"127.0.0.1:{self.ports['relay']}",
                    "--listen-port", str(port), "--stall-seconds", str(STALL_S)]
        if role == "homebase":
            return [f"{self.bin}/homebase", "--state", f"{self.work}/homebase", "run"]
        raise ValueError(role)

    def start(self, role, wait_listening=True):
        with self.lock:
            n = self.starts.get(role, 0) + 1
            self.starts[role] = n
            out = open(f"{self.work}/{role}.{n}.log", "wb")
            proc = subprocess.Popen(self.command(role, self.ports.get(role, 0)), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            out.close()
            self.procs[role] = proc
        if wait_listening and role != "homebase":
            port = wait_listening_line(f"{self.work}/{role}.{n}.log", proc)
            self.ports.setdefault(role, port)
        return proc

    def kill9(self, role):
        with self.lock:
            proc = self.procs.get(role)
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def signal(self, role, sig):
        proc = self.procs.get(role)
        if proc and proc.poll() is None:
            proc.send_signal(sig)

    def pid(self, role):
        proc = self.procs.get(role)
        return proc.pid if proc and proc.poll() is None else None

    def stop_all(self):
        procs = list(self.procs.values())
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def wait_listening_line(path, proc, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, "rb") as f:
            m = re.search(rb"listening on [^ \n]+:(\d+)", f.read())
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    with open(path, "rb") as f:
        raise RuntimeError(f"no 'listening on' line from {path}:\n{f.read().decode(errors='replace')[-2000:]}")


def run(cmd, timeout=30, check=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       timeout=timeout, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return p.stdout


def poll(what, predicate, timeout=30, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            pass
        time.sleep(every)
    raise RuntimeError(f"timed out waiting for {what}")


def process_reading(pid, data_dir=None):
    """{"pid", "rss_kib", "fds"} of a live process (and "disk_kib", its data directory's size), or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
        reading = {"pid": pid, "rss_kib": rss, "fds": len(os.listdir(f"/proc/{pid}/fd"))}
    except (OSError, AttributeError):
        return None
    if data_dir:
        reading["disk_kib"] = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(data_dir)
                                  for n in names) // 1024
    return reading


def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def relay_holds_connection(relay_pid, relay_port, peer_port):
    """Whether the relay still has a descriptor for its end of the TCP connection to 127.0.0.1:peer_port."""
    want_local, want_remote = f"0100007F:{relay_port:04X}", f"0100007F:{peer_port:04X}"
    inodes = socket_inodes(relay_pid)
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == want_local and fields[2] == want_remote:
                return fields[9] in inodes
    return False


def relay_metric(port, name):
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return None
    total = 0
    for line in body.splitlines():
        if line.startswith(name):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


# MARK: Answers

class Oracle:
    """What the emulator answers for a prompt and model, asked once of the oracle emulator."""

    def __init__(self, port):
        self.port = port
        self.cache = {}
        self.lock = threading.Lock()

    def text(self, prompt, model):
        key = (prompt, model)
        with self.lock:
            if key in self.cache:
                return self.cache[key]
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                           "stream": False}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/chat", data=body,
                                         headers={"Content-Type": "application/json"})
        text = json.loads(urllib.request.urlopen(request, timeout=10).read())["message"]["content"]
        with self.lock:
            self.cache[key] = text
        return text


class Client:
    def __init__(self, index, tool, state, model, relay_url, proxied):
        self.name = f"{tool}{index}"
        self.tool = tool
        self.state = state
        self.model = model
        self.relay_url = relay_url
        self.proxied = proxied
        self.public_key = None


class Results:
    def __init__(self, out_dir):
        self.lock = threading.Lock()
        self.requests = 0
        self.complete = 0
        self.fallbacks = {}
        self.lost = []
        self.by_tool = {}
        self.fault_prompts = {"sent": 0, "fallback": 0}
        self.losses_path = os.path.join(out_dir, "soak-losses.jsonl")
        open(self.losses_path, "w").close()

    def record(self, client, outcome, reason, detail):
        with self.lock:
            self.requests += 1
            tool = self.by_tool.setdefault(client.tool, {"requests": 0, "complete": 0, "fallback": 0, "lost": 0})
            tool["requests"] += 1
            if outcome == "complete":
                self.complete += 1
                tool["complete"] += 1
            elif outcome == "fallback":
                self.fallbacks[reason] = self.fallbacks.get(reason, 0) + 1
                tool["fallback"] += 1
            else:
                self.lost.append(dict(detail, kind=reason, client=client.name))
                tool["lost"] += 1
                with open(self.losses_path, "a") as f:
                    f.write(json.dumps(dict(detail, kind=reason, client=client.name)) + "\n")
            if detail.get("fault_prompt"):
                self.fault_prompts["sent"] += 1
                self.fault_prompts["fallback"] += outcome == "fallback"


def classify(stdout, rc, timed_out, expected, model, fault_prompt):
    """(outcome, reason): ("complete", None), ("fallback", reason) or ("lost", why)."""
    if timed_out:
        return "lost", "hang"
    if rc != 0:
        return "lost", f"exit_{rc}"
    try:
        answer = json.loads(stdout)
    except ValueError:
        return "lost", "no_json"
    fallback = answer.get("fallback")
    if fallback:
        return "fallback", fallback.get("reason", "?")
    if answer.get("provider") not in ("remote", "cross-account"):
        return "lost", "not_remote_without_fallback"
    if fault_prompt:
        return "lost", "fault_prompt_served"
    if answer.get("model") != model:
        return "lost", "wrong_model"
    if answer.get("text") != expected():
        return "lost", "text_differs"
    return "complete", None


class Load:
    """One thread per client: ask, check, pause, again. `gate` pauses the load between requests."""

    def __init__(self, soak):
        self.soak = soak
        self.stop = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.running = {}  # client name -> (Popen, start time)
        self.lock = threading.Lock()
        self.threads = []
        self.prompts = [f"soak {i}: " + " ".join(random.Random(i).choice(WORDS) for _ in range(6))
                        for i in range(400)]

    def start(self, clients):
        for c in clients:
            t = threading.Thread(target=self.loop, args=(c,), daemon=True)
            t.start()
            self.threads.append(t)

    def loop(self, client):
        rng = random.Random(client.name)
        env = dict(os.environ, HOMEBASE_WATCHDOG_MS=WATCHDOG_MS)
        while not self.stop.is_set():
            self.gate.wait()
            if self.stop.is_set():
                break
            prompt = rng.choice(self.prompts)
            fault = rng.random() < FAULT_PROMPT_SHARE
            asked = prompt + f" [[fault:{rng.choice(FAULT_MARKERS)}]]" if fault else prompt
            cmd = [f"{self.soak.bin}/{client.tool}", "--state", client.state, "chat", "--json"]
            if client.tool == "guest":
                cmd += ["--model", client.model]
            cmd.append(asked)
            started = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
            with self.lock:
                self.running[client.name] = (proc, started)
            timed_out = False
            try:
                out, err = proc.communicate(timeout=BOUND_S)
            except subprocess.TimeoutExpired:
                timed_out = True
                proc.kill()
                out, err = proc.communicate()
            finally:
                with self.lock:
                    self.running.pop(client.name, None)
            elapsed = time.monotonic() - started
            out, err = out.decode(errors="replace"), err.decode(errors="replace")
            expected = lambda: self.soak.oracle.text(prompt, client.model)  # noqa: E731
            outcome, reason = classify(out, proc.returncode, timed_out, expected, client.model, fault)
            detail = {"t": round(started - self.soak.t0, 1), "elapsed_s": round(elapsed, 2), "prompt": asked,
                      "model": client.model, "rc": proc.returncode, "fault_prompt": fault}
            if outcome == "lost":
                detail.update(stdout=out[-2000:], stderr=err[-2000:], expected=expected(),
                              recent_faults=self.soak.recent_events(started - 60))
            self.soak.results.record(client, outcome, reason, detail)
            # Guests stay under their grant's 20 requests a minute; handsets ask at a phone user's pace.
            self.stop.wait(rng.uniform(3.0, 4.5) if client.tool == "guest" else rng.uniform(0.3, 2.0))

    def in_flight(self, min_age=0.0):
        now = time.monotonic()
        with self.lock:
            return [(name, p) for name, (p, t) in self.running.items() if now - t >= min_age and p.poll() is None]

    def quiesce(self, timeout=BOUND_S + 10):
        """Pauses the load and waits until no request is running."""
        self.gate.clear()
        deadline = time.monotonic() + timeout
        while self.in_flight() and time.monotonic() < deadline:
            time.sleep(0.2)

    def resume(self):
        self.gate.set()

    def finish(self):
        self.stop.set()
        self.gate.set()
        for t in self.threads:
            t.join(BOUND_S + 10)


# MARK: The soak

class Soak:
    def __init__(self, bin_dir, minutes, out_dir):
        self.bin = bin_dir
        self.minutes = minutes
        self.duration = minutes * 60
        self.out_dir = out_dir
        self.work = tempfile.mkdtemp(prefix="homebase-soak.")
        self.stack = Stack(bin_dir, self.work)
        self.results = Results(out_dir)
        self.events = []
        self.events_lock = threading.Lock()
        self.samples = []
        self.readings = {}
        self.slow_readers = []
        self.watchers = []  # threads watching slow readers until the relay closes and lets go of them
        self.held = []  # slow readers' sockets, kept open (and unread) until the end
        self.checker = None
        self.frames = None
        self.failures = []
        self.t0 = time.monotonic()
        self.load = Load(self)

    def event(self, kind, **detail):
        with self.events_lock:
            self.events.append(dict(t=round(time.monotonic() - self.t0, 1), kind=kind, **detail))
        log(f"[{time.monotonic() - self.t0:6.0f}s] fault {kind} " + " ".join(f"{k}={v}" for k, v in detail.items()))

    def recent_events(self, since):
        since -= self.t0
        with self.events_lock:
            return [e for e in self.events if e["t"] >= since]

    # MARK: Set-up

    def relay_url(self, role):
        return f"ws://127.0.0.1:{self.stack.ports[role]}/v1/relay"

    def set_up(self):
        s = self.stack
        s.start("relay")
        s.start("emulator")
        s.start("oracle")
        self.oracle = Oracle(s.ports["oracle"])
        s.start("client_proxy")
        s.start("homebase_proxy")
        hb = [f"{self.bin}/homebase", "--state", f"{self.work}/homebase"]
        self.homebase_key = run(hb + ["init", "--relay", self.relay_url("homebase_proxy"), "--ollama",
                                      f"http://127.0.0.1:{s.ports['emulator']}", "--name", "soak"]).strip()
        # The emulator runs any number of requests at once (no --parallel): so may the Homebase.
        run(hb + ["config", "--max-concurrent", "8", "--max-queued", "32", "--runtime-parallel", "8"])
        s.start("homebase")

        def ready():
            st = json.loads(run(hb + ["status", "--json"]))
            return st["relay_connected"] and st["runtime"]["available"]
        poll("the Homebase to connect and verify the emulator", ready)

        self.clients = []
        for i in range(HANDSETS):
            proxied = i < PROXIED_HANDSETS
            c = Client(i, "handset", f"{self.work}/handset{i}", MODELS[i % 2],
                       self.relay_url("client_proxy" if proxied else "relay"), proxied)
            tool = [f"{self.bin}/handset", "--state", c.state]
            run(tool + ["init", "--relay", c.relay_url, "--name", c.name])
            code = run(hb + ["pair"]).strip().splitlines()[-1]
            # The code names the Homebase's relay URL (its proxy); this handset reaches the same relay its own way.
            # The Homebase examines 10 pairing requests a minute: past that, wait for the bucket and retry.
            poll(f"{c.name}'s pairing", lambda: self.pair(tool, code.split("@", 1)[0] + "@" + c.relay_url),
                 timeout=90, every=3)
            run(tool + ["config", "source", "external"])
            run(tool + ["config", "model", c.model])
            self.clients.append(c)
        for i in range(GUESTS):
            proxied = i < PROXIED_GUESTS
            c = Client(i, "guest", f"{self.work}/guest{i}", MODELS[i % 2],
                       self.relay_url("client_proxy" if proxied else "relay"), proxied)
            tool = [f"{self.bin}/guest", "--state", c.state]
            c.public_key = run(tool + ["init", "--relay", c.relay_url, "--name", c.name]).strip()
            run(tool + ["join", self.homebase_key])
            poll(f"{c.name}'s join", lambda: c.public_key in run(hb + ["guests", "--json"]))
            run(hb + ["grant", c.public_key, "--models", ",".join(MODELS), "--expires", "7d"])
            poll(f"{c.name}'s grant",
                 lambda: any(h["state"] == "joined" for h in json.loads(run(tool + ["status", "--json"]))["hosts"]))
            self.clients.append(c)
        log(f"set up: relay :{s.ports['relay']}, Homebase {self.homebase_key[:8]} (through a stall proxy), "
            f"emulator :{s.ports['emulator']}, {HANDSETS} handsets and {GUESTS} guests "
            f"({PROXIED_HANDSETS + PROXIED_GUESTS} through the client stall proxy)")
        self.checker_status = f"{self.work}/frames-status.json"
        self.checker = subprocess.Popen([sys.executable, f"{HERE}/frame_checker.py", self.relay_url("relay"),
                                         self.checker_status], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(f"{self.work}/frame-checker.log", "wb"), start_new_session=True,
                                        text=True)

    @staticmethod
    def pair(tool, code):
        p = subprocess.run(tool + ["pair", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=30, text=True)
        if p.returncode != 0 and "rate_limited" not in p.stderr:
            raise RuntimeError(f"pairing failed: {p.stderr.strip()}")
        return p.returncode == 0

    # MARK: Faults

    def restart_after(self, role, low, high):
        down = random.uniform(low, high)
        self.stack.kill9(role)
        time.sleep(down)
        self.stack.start(role)
        return round(down, 1)

    def fault(self, kind):
        if kind == "relay_kill":
            self.event(kind, down_s=self.restart_after("relay", 0.5, 2.5), in_flight=len(self.load.in_flight()))
        elif kind == "homebase_kill":
            self.event(kind, down_s=self.restart_after("homebase", 0.5, 2.0), in_flight=len(self.load.in_flight()))
        elif kind == "emulator_kill":
            # With streams in flight: wait (a little) until a few requests have been running for a moment.
            deadline = time.monotonic() + 10
            while len(self.load.in_flight(min_age=0.3)) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            in_flight = len(self.load.in_flight())
            self.event(kind, down_s=self.restart_after("emulator", 1.0, 3.0), in_flight=in_flight)
        elif kind == "client_stall":
            self.stack.signal("client_proxy", signal.SIGUSR1)
            self.event(kind, seconds=STALL_S)
        elif kind == "homebase_stall":
            self.stack.signal("homebase_proxy", signal.SIGUSR1)
            self.event(kind, seconds=STALL_S)
        elif kind == "sigstop":
            victims = [p for _, p in self.load.in_flight(min_age=0.2)][:2]
            for p in victims:
                p.send_signal(signal.SIGSTOP)
            time.sleep(SIGSTOP_S)
            for p in victims:
                p.send_signal(signal.SIGCONT)
            self.event(kind, clients=len(victims), seconds=SIGSTOP_S)
        elif kind == "slow_reader":
            self.slow_reader()

    def slow_reader(self):
        """A client that logs in and never reads, flooded by another: the relay drops the frames past its queue
        (the flooder's RECEIPT says offline), closes it 4002 once its queue has stood still for the stall time,
        and then lets go of it, though it never reads its close frame. The flood is synchronous; the close and
        the release are watched on a thread of their own (up to SLOW_READER_WAIT_S), and the report waits for it."""
        port = self.stack.ports["relay"]
        before = relay_metric(port, 'relay_closes_total{reason="too_slow"}') or 0
        record = {"t": round(time.monotonic() - self.t0, 1), "offline_receipt": False, "closed_4002": False,
                  "closed_s": None, "released_s": None, "interrupted": None}
        try:
            reader = RawRelayClient("127.0.0.1", port, rcvbuf=4096)
            flooder = RawRelayClient("127.0.0.1", port)
        except (OSError, ConnectionError) as e:
            record["error"] = f"could not connect: {e}"
            self.slow_readers.append(record)
            self.event("slow_reader", error=record["error"])
            return
        self.held.append(reader)
        statuses = []

        def read_receipts():
            try:
                while True:
                    m = flooder.recv_message()
                    if m[0] == 0x13:
                        statuses.append(m[5])
            except (OSError, ConnectionError):
                pass
        threading.Thread(target=read_receipts, daemon=True).start()
        payload, sent, started = os.urandom(60 * 1024), 0, time.monotonic()
        try:
            # Frames go one at a time, each waiting for its RECEIPT: the flooder stays far inside its rate limit.
            while sent < 64 * 1024 * 1024 and 2 not in statuses:
                n = len(statuses)
                flooder.send(len(statuses) + 1, reader.public, payload)
                sent += len(payload)
                deadline = time.monotonic() + 5
                while len(statuses) == n and time.monotonic() < deadline:
                    time.sleep(0.001)
        except (OSError, ConnectionError) as e:
            record["error"] = f"flooder: {e}"
        flooder.close()
        record["flood_bytes"] = sent
        record["flood_s"] = round(time.monotonic() - started, 2)
        record["offline_receipt"] = 2 in statuses
        self.slow_readers.append(record)
        self.event("slow_reader", offline_receipt=record["offline_receipt"], flood_mib=round(sent / 2**20, 1))
        watcher = threading.Thread(target=self.watch_slow_reader, args=(record, reader, port, before), daemon=True)
        self.watchers.append(watcher)
        watcher.start()

    def watch_slow_reader(self, record, reader, port, before):
        """Waits for the relay to close the reader (its too_slow count rises) and then to hold its socket no more."""
        pid = self.stack.pid("relay")
        flooded = time.monotonic()
        while time.monotonic() - flooded < SLOW_READER_WAIT_S:
            if self.stack.pid("relay") != pid:
                record["interrupted"] = "the relay was restarted"
                break
            if record["closed_s"] is None and (relay_metric(port, 'relay_closes_total{reason="too_slow"}') or 0) > before:
                record["closed_s"] = round(time.monotonic() - flooded, 1)
                record["closed_4002"] = record["offline_receipt"]
            if record["closed_s"] is not None and pid and not relay_holds_connection(pid, port, reader.local_port):
                record["released_s"] = round(time.monotonic() - flooded, 1)
                break
            time.sleep(0.2)
        log(f"[{time.monotonic() - self.t0:6.0f}s] slow reader of {record['t']} s: closed 4002 after "
            f"{record['closed_s']} s, let go after {record['released_s']} s"
            + (f" ({record['interrupted']})" if record["interrupted"] else ""))

    # MARK: Readings

    def read_processes(self, label):
        # The data directories too: the relay's mailbox and the Homebase's state (replay ids, usage) grow with
        # the load, and SQLite's page cache with them.
        dirs = {"relay": f"{self.work}/relay-data", "homebase": f"{self.work}/homebase"}
        reading = {role: process_reading(self.stack.pid(role), dirs.get(role))
                   for role in ("relay", "homebase", "emulator")}
        self.readings[label] = reading
        log(f"[{time.monotonic() - self.t0:6.0f}s] reading '{label}': " + "  ".join(
            f"{r} {v['rss_kib'] / 1024:.1f} MiB {v['fds']} fds"
            + (f" (data {v['disk_kib'] / 1024:.1f} MiB)" if "disk_kib" in v else "") if v else f"{r} -"
            for r, v in reading.items()))

    def quiet_reading(self, label):
        self.load.quiesce()
        time.sleep(3)
        self.read_processes(label)
        self.load.resume()

    def sampler(self, stop):
        while not stop.wait(10):
            sample = {"t": round(time.monotonic() - self.t0, 1)}
            for role in ("relay", "homebase", "emulator"):
                sample[role] = process_reading(self.stack.pid(role))
            self.samples.append(sample)

    def progress(self, stop):
        while not stop.wait(15):
            r = self.results
            try:
                with open(self.checker_status) as f:
                    fr = json.load(f)
            except (OSError, ValueError):
                fr = {}
            res = "  ".join(f"{role[:5]} {v['rss_kib'] / 1024:.0f}M/{v['fds']}fd" for role in ("relay", "homebase", "emulator")
                            if (v := process_reading(self.stack.pid(role))))
            log(f"[{time.monotonic() - self.t0:6.0f}s] requests {r.requests}  complete {r.complete}  "
                f"fallbacks {sum(r.fallbacks.values())}  lost {len(r.lost)}  |  frames promised "
                f"{fr.get('promised', 0)} delivered {fr.get('delivered', 0)}  |  {res}")

    # MARK: Run

    def schedule(self):
        """The warm-up, and phase A's faults: every kind at least once, cycling until half-time."""
        warmup = 20 if self.duration < 600 else 30
        interval = min(25.0, max(5.0, (self.duration / 2 - warmup) / len(PHASE_A_FAULTS)))
        count = max(len(PHASE_A_FAULTS), int((self.duration / 2 - warmup) / interval))
        return warmup, [PHASE_A_FAULTS[i % len(PHASE_A_FAULTS)] for i in range(count)], interval

    def run(self):
        self.set_up()
        self.t0 = time.monotonic()
        stop = threading.Event()
        for target in (self.sampler, self.progress):
            threading.Thread(target=target, args=(stop,), daemon=True).start()
        self.load.start(self.clients)
        warmup, phase_a, interval = self.schedule()
        log(f"soak: {self.minutes} min; warm-up {warmup} s; phase A: {len(phase_a)} faults every {interval:.0f} s "
            f"(with kill -9 of the relay, the Homebase and the emulator); phase B: no restarts")
        time.sleep(warmup)
        self.quiet_reading("start")
        a_start = time.monotonic()
        for i, kind in enumerate(phase_a):
            time.sleep(max(0, a_start + (i + 1) * interval - time.monotonic()))
            self.fault(kind)
        # Phase B: the processes started last in phase A settle, then run unbroken to the end.
        time.sleep(20)
        self.quiet_reading("phase_b_start")
        i = 0
        while time.monotonic() + interval < self.t0 + self.duration - 10:
            time.sleep(interval)
            self.fault(PHASE_B_FAULTS[i % len(PHASE_B_FAULTS)])
            i += 1
        time.sleep(max(0, self.t0 + self.duration - time.monotonic()))
        log(f"[{time.monotonic() - self.t0:6.0f}s] stopping the load")
        self.load.finish()
        for watcher in self.watchers:
            watcher.join()
        time.sleep(3)
        self.read_processes("end")
        stop.set()
        self.finish_checker()

    def finish_checker(self):
        try:
            out, _ = self.checker.communicate("finish\n", timeout=180)
            self.frames = json.loads(out.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
            self.frames = None
            self.failures.append(f"the frame checker gave no result ({type(e).__name__})")

    # MARK: Report

    def growth(self):
        """Per process, phase B start against end (the same process, load paused at both)."""
        out = {}
        for role in ("relay", "homebase", "emulator"):
            a = (self.readings.get("phase_b_start") or {}).get(role)
            b = (self.readings.get("end") or {}).get(role)
            if not a or not b or a["pid"] != b["pid"]:
                out[role] = {"ok": False, "why": "no readings of one process at both points"}
                continue
            rss = b["rss_kib"] - a["rss_kib"]
            fds = b["fds"] - a["fds"]
            # Allocators keep some of what a busy hour used; a leak of a connection or a stream per request
            # grows with the requests (thousands) and shows far above these margins. The Homebase keeps idle
            # HTTP connections to the emulator for reuse (as many as ran at once, up to its 8 streams), so
            # its count and the emulator's move with the last burst; the relay's idle count is exact.
            rss_ok = rss <= max(8 * 1024, a["rss_kib"] * 0.25)
            fds_ok = fds <= (2 if role == "relay" else 8)
            series = [(s["t"], s[role]["rss_kib"]) for s in self.samples
                      if s.get(role) and s[role]["pid"] == a["pid"]]
            slope = None
            if len(series) >= 3:
                ts, vs = zip(*series)
                slope = statistics.linear_regression(ts, vs).slope * 60 / 1024 if len(set(ts)) > 1 else None
            out[role] = {"rss_growth_kib": rss, "fds_growth": fds, "ok": rss_ok and fds_ok,
                         "rss_slope_mib_per_min": round(slope, 3) if slope is not None else None}
        return out

    def report(self, interrupted=False):
        r = self.results
        growth = self.growth() if not interrupted else {}
        faults = {}
        for e in self.events:
            faults[e["kind"]] = faults.get(e["kind"], 0) + 1
        failures = list(self.failures)
        if r.lost:
            failures.append(f"{len(r.lost)} answers lost without a fallback")
        fr = self.frames or {}
        if fr:
            if fr["store"]["lost"]:
                failures.append(f"{fr['store']['lost']} stored frames lost")
            if fr["live"]["lost"]:
                failures.append(f"{fr['live']['lost']} live frames (RECEIPT 0) lost")
            if fr["corrupt"] or fr["misdelivered"]:
                failures.append(f"{fr['corrupt']} corrupt and {fr['misdelivered']} misdelivered frames")
        for s in self.slow_readers:
            if s.get("interrupted"):
                continue
            if not s["closed_4002"] or s["released_s"] is None:
                failures.append(f"slow reader at {s['t']} s: offline receipt {s['offline_receipt']}, closed 4002 "
                                f"after {s['closed_s']} s, released after {s['released_s']} s "
                                f"(waited {SLOW_READER_WAIT_S} s)")
        for role, g in growth.items():
            if not g["ok"]:
                failures.append(f"{role} grew: {g}")
        self.failures = failures
        report = {
            "command": f"tools/soak {self.minutes}", "minutes": self.minutes, "interrupted": interrupted,
            "clients": {"handsets": HANDSETS, "guests": GUESTS,
                        "through_stall_proxy": PROXIED_HANDSETS + PROXIED_GUESTS, "watchdog_ms": WATCHDOG_MS,
                        "bound_s": BOUND_S},
            "requests": r.requests, "answers_complete": r.complete,
            "fallbacks": dict(sorted(r.fallbacks.items(), key=lambda kv: -kv[1])),
            "fallbacks_total": sum(r.fallbacks.values()), "answers_lost": len(r.lost),
            "lost": r.lost[:50], "by_tool": r.by_tool, "fault_prompts": r.fault_prompts,
            "faults": faults, "events": self.events, "slow_readers": self.slow_readers,
            "frames": fr, "readings": self.readings, "growth": growth, "samples": self.samples,
            "failures": failures, "ok": not failures and not interrupted,
        }
        with open(os.path.join(self.out_dir, "soak.json"), "w") as f:
            json.dump(report, f, indent=1)
        self.print_table(report)
        return report

    def print_table(self, rep):
        rows = [("requests", rep["requests"]), ("answers complete (text checked)", rep["answers_complete"]),
                ("fallbacks", rep["fallbacks_total"])]
        rows += [(f"  {k}", v) for k, v in rep["fallbacks"].items()]
        rows += [("answers lost without a fallback", rep["answers_lost"]),
                 ("faulting prompts (all must fall back)",
                  f"{rep['fault_prompts']['fallback']}/{rep['fault_prompts']['sent']}")]
        fr = rep["frames"]
        if fr:
            rows += [("stored frames sent / promised", f"{fr['store']['sent']} / {fr['store']['promised']}"),
                     ("stored frames delivered / redelivered",
                      f"{fr['store']['delivered']} / {fr['store']['redeliveries']}"),
                     ("stored frames lost", fr["store"]["lost"]),
                     ("live frames RECEIPT 0 / delivered", f"{fr['live']['receipt_0']} / {fr['live']['delivered']}"),
                     ("  missing across a connection loss", fr["live"]["missing_across_connection_loss"]),
                     ("live frames lost", fr["live"]["lost"]),
                     ("corrupt / misdelivered frames", f"{fr['corrupt']} / {fr['misdelivered']}")]
        ok_readers = [s for s in self.slow_readers if s["closed_4002"] and s["released_s"] is not None]
        interrupted = sum(1 for s in self.slow_readers if s.get("interrupted"))
        rows.append(("slow readers closed 4002 and let go",
                     f"{len(ok_readers)}/{len(self.slow_readers) - interrupted}"
                     + (f" ({interrupted} cut short by a relay restart)" if interrupted else "")
                     + (f", closed after {min(s['closed_s'] for s in ok_readers)}-{max(s['closed_s'] for s in ok_readers)} s, "
                        f"let go after {min(s['released_s'] for s in ok_readers)}-{max(s['released_s'] for s in ok_readers)} s"
                        if ok_readers else "")))
        rows.append(("faults", ", ".join(f"{k} {v}" for k, v in rep["faults"].items())))
        width = max(len(k) for k, _ in rows)
        print()
        for k, v in rows:
            print(f"{k.ljust(width)}  {v}")
        print()
        head = ("process", "start", "phase B start", "end", "growth (B start → end)")
        lines = []
        for role in ("relay", "homebase", "emulator"):
            cells = [role]
            for label in ("start", "phase_b_start", "end"):
                v = (rep["readings"].get(label) or {}).get(role)
                cells.append(f"{v['rss_kib'] / 1024:.1f} MiB {v['fds']} fd" if v else "-")
            g = rep["growth"].get(role)
            cells.append(f"{g['rss_growth_kib'] / 1024:+.1f} MiB {g['fds_growth']:+d} fd "
                         f"{'ok' if g['ok'] else 'GREW'}" if g and "rss_growth_kib" in g else "-")
            lines.append(cells)
        widths = [max(len(x) for x in col) for col in zip(head, *lines)]
        for cells in [head] + lines:
            print("  ".join(c.ljust(w) for c, w in zip(cells, widths)))
        print()
        if rep["failures"]:
            print("FAILED:")
            for f in rep["failures"]:
                print(f"  - {f}")
        else:
            print("no loss")
        print(f"wrote {os.path.relpath(os.path.join(self.out_dir, 'soak.json'))}")

    def clean_up(self):
        self.load.stop.set()
        self.load.gate.set()
        for _, p in self.load.in_flight():
            p.send_signal(signal.SIGCONT)
            p.kill()
        for r in self.held:
            r.close()
        if self.checker and self.checker.poll() is None:
            self.checker.kill()
            self.checker.wait()
        self.stack.stop_all()
        if os.environ.get("SOAK_KEEP"):
            log(f"kept {self.work}")
            return
        if self.failures or self.results.lost:
            # The processes' logs, for finding the cause.
            logs = os.path.join(self.out_dir, "soak-logs")
            shutil.rmtree(logs, ignore_errors=True)
            shutil.copytree(self.work, logs, ignore=lambda d, names: [n for n in names if not n.endswith(".log")])
            log(f"logs in {os.path.relpath(logs)}")
        shutil.rmtree(self.work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--out", default="soak-out")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    shutil.rmtree(os.path.join(args.out, "soak-logs"), ignore_errors=True)  # an earlier run's
    soak = Soak(os.path.abspath(args.bin), args.minutes, os.path.abspath(args.out))

    def interrupted(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    ok = False
    try:
        soak.run()
        ok = soak.report()["ok"]
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
    finally:
        soak.clean_up()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
