"""A minimal Chrome DevTools Protocol client: starts Debian's headless Chromium and drives one page.

Standard library plus `websockets` (the repo's .venv). Chromium is started so that it fetches nothing from
outside loopback: every non-loopback request goes to a dead proxy on 127.0.0.1:9, and background services
(updates, sync, safe browsing, metrics) are off. Nothing is downloaded at run time.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

from websockets.sync.client import connect


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, width=1280, height=900):
        exe = find_chromium()
        if not exe:
            raise RuntimeError("no chromium on PATH (tools/bootstrap installs it)")
        self.profile = tempfile.mkdtemp(prefix="homebase-chromium-")
        args = [
            exe, "--headless=new", "--disable-gpu", "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1", f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}", "--hide-scrollbars", "--no-first-run", "--no-default-browser-check",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
            "--disable-client-side-phishing-detection", "--no-pings", "--metrics-recording-only",
            "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
            # Anything not on loopback goes to a port where nothing listens.
            "--proxy-server=http://127.0.0.1:9", "--font-render-hinting=none", "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root (CI containers)
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = None
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                url = m.group(1)
                break
        if not url:
            self.close()
            raise RuntimeError("chromium did not start its DevTools endpoint")
        # Keep reading stderr so Chromium never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()
        self.ws = connect(url, max_size=64 * 1024 * 1024, open_timeout=10)
        self.next_id = 0
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def resize(self, width, height, mobile=False):
        """The window's size as a page sees it; `mobile` also as a phone (viewport meta, touch)."""
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}, session=True)
        self.call("Emulation.setTouchEmulationEnabled", {"enabled": mobile}, session=True)

    def grant_clipboard(self, origin):
        """Lets the page at `origin` write and read the clipboard (a copy button can then be checked)."""
        self.call("Browser.grantPermissions",
                  {"origin": origin, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})

    def call(self, method, params=None, session=False, timeout=20):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(method)
            reply = json.loads(self.ws.recv(timeout=left))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def navigate(self, url):
        self.call("Page.navigate", {"url": url}, session=True)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate",
                           {"expression": expression, "returnByValue": True, "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, what, timeout=15):
        """Polls a JS expression until it is truthy; returns its value."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError:
                value = None  # the page is still loading: its elements are not there yet
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")

    def click(self, selector):
        """A real mouse click at the centre of the first element matching `selector`."""
        box = self.evaluate(
            "(() => { const e = document.querySelector(%s); if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
            % json.dumps(selector))
        if not box:
            raise AssertionError(f"nothing to click at {selector}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1}, session=True)

    def screenshot(self, path, max_height=None):
        """The whole page as a PNG, or its top `max_height` px."""
        metrics = self.call("Page.getLayoutMetrics", session=True)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        height = min(size["height"], max_height or size["height"])
        data = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": height, "scale": 1},
        }, session=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def problems(self):
        """Exceptions, console errors and refused loads (CSP) the page reported so far."""
        self.evaluate("1")  # drain pending events
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p["exceptionDetails"])[:300])
            elif m == "Runtime.consoleAPICalled" and p.get("type") == "error":
                out.append("console.error: " + json.dumps(p.get("args"))[:300])
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append("log: " + p["entry"].get("text", "")[:300])
        return out

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)
