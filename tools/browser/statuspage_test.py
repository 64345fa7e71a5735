"""The status page in a real browser against a running demo stack (started by tools/test-statuspage-browser).

Opens the page in headless Chromium: sees the pending joins counted in the title, copies the device key and the
`guest join` line, declines one join, grants the other pending guest one model through the page, sees its stream
appear live, pins a model warm, edits the grant to two models, revokes the guest through the page while it
streams and sees it fall back on-device, and saves a screenshot; checks that a guest named with 64 unbroken
characters does not widen the page; then at 400 px as a phone, checks nothing is cut off and saves a second
screenshot. Each action goes through the page's confirmation dialog, with real mouse clicks. Fails on any
exception, console error or refused load (CSP) in the page.

Environment: UI_URL, GUEST and HANDSET (command prefixes, shell words), GUEST_PK, HANDSET_PK, MODEL, PIN_MODEL,
DEVICE_PK, LONG_NAME and LONG_PK (a granted guest with a 64-character name), DECLINE_PK (a pending guest to
decline), SCREENSHOT and SCREENSHOT_PHONE (where to save the PNGs).
"""
import json
import os
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from cdp import Browser  # noqa: E402

url = os.environ["UI_URL"]
guest = shlex.split(os.environ["GUEST"])
handset = shlex.split(os.environ["HANDSET"])
guest_pk = os.environ["GUEST_PK"]
handset_pk = os.environ["HANDSET_PK"]
model = os.environ["MODEL"]
pin_model = os.environ["PIN_MODEL"]
screenshot = os.environ["SCREENSHOT"]
screenshot_phone = os.environ["SCREENSHOT_PHONE"]
device_pk = os.environ["DEVICE_PK"]
long_name = os.environ["LONG_NAME"]
long_pk = os.environ["LONG_PK"]
decline_pk = os.environ["DECLINE_PK"]
handset2 = shlex.split(os.environ["HANDSET2"])
started = time.time()


def step(text):
    print(f"  [{time.time() - started:5.1f} s] {text}", flush=True)


def chat(cmd, prompt):
    return subprocess.Popen(cmd + ["chat", "--json", prompt], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def answer(process):
    out, err = process.communicate(timeout=60)
    if process.returncode != 0:
        raise AssertionError(f"chat failed ({process.returncode}): {err}")
    return json.loads(out)


row = lambda table, attr, key: f'#{table} tbody tr[{attr}="{key}"]'


def cell_text(selector):
    return f"(document.querySelector({json.dumps(selector)}) || {{textContent: ''}}).textContent"


def streaming(pk):
    # Live: the row is there and its token count (4th cell) is above zero.
    sel = row("streams", "data-peer", pk)
    return (f"(() => {{ const r = document.querySelector({json.dumps(sel)}); "
            f"return r && r.classList.contains('streaming') && Number(r.cells[3].textContent) > 0 "
            f"&& Number(r.cells[3].textContent); }})()")


def confirm(expected_title_part):
    b.wait_for("document.getElementById('confirm').open", "the confirmation dialog")
    title = b.evaluate("document.getElementById('confirm-title').textContent")
    assert expected_title_part in title, f"dialog says {title!r}"
    b.click("#confirm-ok")
    b.wait_for("!document.getElementById('confirm').open", "the dialog to close")


def fits(width):
    """Nothing sticks out of a `width` px window: the page does not scroll sideways, and every card, button,
    the live marker and each guest's name lie inside it. Returns what does not."""
    return b.evaluate(f"""(() => {{
        const out = [];
        const w = {width};
        if (document.documentElement.scrollWidth > w) out.push('page ' + document.documentElement.scrollWidth + ' px wide');
        for (const e of document.querySelectorAll('.card, #live, header, .panel, main button, td .name')) {{
            const r = e.getBoundingClientRect();
            if (r.width && (r.right > w + 0.5 || r.left < -0.5)) out.push((e.id || e.className || e.tagName) + ' ' + e.textContent.slice(0, 30) + ' at ' + Math.round(r.left) + '..' + Math.round(r.right));
        }}
        return out;
    }})()""")


def pick_models(models):
    """Ticks exactly `models` among the grant form's model boxes, with real clicks."""
    for value in [model, pin_model, "*"]:
        selector = f'#grant-models input[value="{value}"]'
        checked = b.evaluate(f"document.querySelector({json.dumps(selector)}).checked")
        if checked != (value in models):
            b.click(selector)
    ticked = b.evaluate("[...document.querySelectorAll('#grant-models input:checked')].map((i) => i.value)")
    assert sorted(ticked) == sorted(models), ticked


b = Browser(width=1280, height=1000)
try:
    b.grant_clipboard(url.rstrip("/"))
    b.navigate(url)
    b.wait_for("document.getElementById('live-text').textContent === 'live'", "the live event stream")
    assert b.evaluate(cell_text("#relay-state")) == "Connected"
    assert b.evaluate(cell_text("#runtime-state")) == "Available"
    step("page live: relay connected, runtime available")

    # Two joins wait: the title counts them.
    b.wait_for("document.title.startsWith('(2) Homebase')", "two pending joins in the title")
    # The chart's scale when idle: HTML labels (SVG text would stretch with the drawing), not "1 tok/s" twice.
    labels = b.evaluate("[...document.querySelectorAll('#chart-labels span')].map((s) => s.textContent)")
    assert labels == ["0.5 tok/s", "1 tok/s"], labels
    assert b.evaluate("document.querySelectorAll('#chart text').length") == 0
    step(f"title {b.evaluate('document.title')!r}; idle chart scale {labels}")

    # The device key and the line to send a friend, each with a copy button.
    assert b.evaluate(cell_text("#device")) == device_pk
    assert b.evaluate(cell_text("#join-line")) == "guest join " + device_pk
    for button, expected, notice in [("#copy-key", device_pk, "the device key copied"),
                                     ("#copy-join", "guest join " + device_pk, "the join line copied")]:
        b.click(button)
        b.wait_for(f"document.getElementById('toast').textContent === {json.dumps(notice)}", notice)
        copied = b.evaluate("navigator.clipboard.readText()")
        assert copied == expected, copied
    step("device key and join line copied")

    # A pairing code and its QR code from the page; a second handset pairs with the code shown.
    b.click("#pair-button")
    b.wait_for("document.getElementById('pair').open", "the pairing dialog")
    line = b.evaluate(cell_text("#pair-line"))
    code = b.evaluate("document.getElementById('pair-line').dataset.code")
    assert line == f"handset pair '{code}'" and code.startswith("hb1:" + device_pk + ":"), line
    size = int(b.evaluate("document.getElementById('pair-qr').dataset.size"))
    drawn = b.evaluate("(document.querySelector('#pair-qr path').getAttribute('d').match(/M/g) || []).length")
    box = b.evaluate("(() => { const r = document.getElementById('pair-qr').getBoundingClientRect(); return [r.width, r.height]; })()")
    assert size >= 21 and (size - 17) % 4 == 0 and drawn > size * size // 4 and box[0] >= 200 and box[0] == box[1], (size, drawn, box)
    paired = subprocess.run(handset2 + ["pair", code], capture_output=True, text=True, timeout=30)
    assert paired.returncode == 0, paired.stderr
    b.wait_for(f"{cell_text('#siblings tbody')}.includes('kitchen-tablet')", "the paired tablet among the siblings")
    b.click("#pair-close")
    b.wait_for("!document.getElementById('pair').open", "the pairing dialog to close")
    step(f"paired a second handset with the page's code (QR {size}×{size}, {drawn} dark modules)")

    # Decline one pending join.
    b.wait_for(f"{cell_text(row('guests', 'data-guest', decline_pk))}.includes('pending')", "the join to decline")
    b.click(row("guests", "data-guest", decline_pk) + " button.decline")
    confirm("Decline")
    b.wait_for(f"!document.querySelector({json.dumps(row('guests', 'data-guest', decline_pk))})", "the join gone")
    b.wait_for("document.title.startsWith('(1) Homebase')", "one pending join in the title")
    step("a pending join declined through the page")

    # A 64-character unbroken name does not widen the page, and its Revoke button stays in the window.
    b.wait_for(f"{cell_text(row('guests', 'data-guest', long_pk))}.includes({json.dumps(long_name)})",
               "the long-named guest")
    problems = fits(1280)
    assert not problems, problems
    step("a 64-character name keeps the page 1280 px wide")

    # The guest has joined: pending. Grant it one model through the form, with a confirmation.
    b.wait_for(f"{cell_text(row('guests', 'data-guest', guest_pk))}.includes('pending')", "the pending guest")
    b.click(row("guests", "data-guest", guest_pk) + " button.grant")
    assert b.evaluate("document.getElementById('grant-guest').value") == guest_pk
    pick_models([model])
    b.click("#grant-form button[type=submit]")
    confirm("Grant")
    b.wait_for(f"{cell_text(row('guests', 'data-guest', guest_pk))}.includes('granted')", "the guest granted")
    step("guest granted through the page")
    for _ in range(100):  # the guest receives the signed grant (stored send) within a moment
        status = subprocess.run(guest + ["status", "--json"], capture_output=True, text=True).stdout
        if '"joined"' in status:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the guest never received its grant")

    # A guest's stream appears live, with a sibling's beside it.
    g = chat(guest, "Tell me a long story about a relay")
    h = chat(handset, "And one about a garden")
    tokens = b.wait_for(streaming(guest_pk), "the guest's stream, live", timeout=20)
    b.wait_for(streaming(handset_pk), "the handset's stream, live", timeout=20)
    later = b.wait_for(f"(() => {{ const n = {streaming(guest_pk)}; return n > {tokens} && n; }})()",
                       "the guest's token count to grow", timeout=10)
    step(f"streams live: the guest's grew from {tokens} to {later} tokens")
    guest_row = json.dumps(row("guests", "data-guest", guest_pk))
    today = b.wait_for(f"(() => {{ const r = document.querySelector({guest_row}); "
                       f"return r && /^1 req · [1-9]/.test(r.cells[4].textContent) && r.cells[4].textContent; }})()",
                       "the guest's usage counted while it streams")
    ttft = b.evaluate(f"document.querySelector({json.dumps(row('streams', 'data-peer', guest_pk))}).cells[5].textContent")
    assert ttft.endswith(" ms") or ttft.endswith(" s"), f"time to first token: {ttft!r}"
    step(f"while it streams: today {today!r}, first token after {ttft}")
    first = answer(g)
    answer(h)
    assert first["provider"] == "cross-account" and first["fallback"] is None, first
    step(f"guest answered by the Homebase ({first['provider']}, {first['model']})")
    relay = b.wait_for(f"/round trip \\d+ ms/.test({cell_text('#relay-detail')}) && {cell_text('#relay-detail')}",
                       "the relay's round trip")
    assert "stored at login" in relay, relay
    step(f"relay: {relay!r}")

    # Pin a model warm.
    b.click(row("models", "data-model", pin_model) + " button")
    confirm("warm")
    b.wait_for(f"{cell_text(row('models', 'data-model', pin_model))}.includes('pinned')", "the model pinned")
    step(f"{pin_model} pinned warm through the page")

    # Edit the grant: two models.
    b.click(row("guests", "data-guest", guest_pk) + " button.edit")
    assert b.evaluate("document.getElementById('grant-guest').value") == guest_pk
    assert "Edit the grant" in b.evaluate(cell_text("#grant-title"))
    ticked = b.evaluate("[...document.querySelectorAll('#grant-models input:checked')].map((i) => i.value)")
    assert ticked == [model], f"the form shows the grant's models: {ticked}"
    pick_models([model, pin_model])
    b.click("#grant-form button[type=submit]")
    confirm("Grant")
    both = f"{cell_text(row('guests', 'data-guest', guest_pk))}"
    b.wait_for(f"{both}.includes({json.dumps(model)}) && {both}.includes({json.dumps(pin_model)})",
               "the grant with two models")
    step(f"grant edited to {model} and {pin_model}")

    # Stop one answer from the page: the guest falls back on-device and stays granted.
    g = chat(guest, "A story to stop halfway")
    b.wait_for(streaming(guest_pk), "the guest's stream to stop", timeout=20)
    b.click(row("streams", "data-peer", guest_pk) + " button.stop")
    confirm("Stop")
    stopped = answer(g)
    assert stopped["provider"] == "on-device" and stopped["fallback"], stopped
    b.wait_for(f"{cell_text('#finished tbody')}.includes('stopped')", "the stopped request among recent requests")
    assert "done" in b.evaluate(cell_text("#finished tbody"))
    assert "granted" in b.evaluate(cell_text(row("guests", "data-guest", guest_pk)))
    step(f"one answer stopped from the page ({stopped['fallback']['reason']}); the guest stays granted")

    # Revoke the guest through the page while it streams: its stream stops and it falls back on-device.
    g = chat(guest, "One more long story, please")
    b.wait_for(streaming(guest_pk), "the guest's second stream", timeout=20)
    b.click(row("guests", "data-guest", guest_pk) + " button.danger")
    confirm("Revoke")
    b.wait_for(f"{cell_text(row('guests', 'data-guest', guest_pk))}.includes('revoked')", "the guest revoked")
    fallback = answer(g)
    assert fallback["provider"] == "on-device" and fallback["fallback"], fallback
    step(f"guest fell back: {fallback['fallback']['reason']} from {fallback['fallback']['from']}")
    b.wait_for(f"{cell_text('#events tbody')}.includes('not_granted')", "the refusal among recent errors")
    b.wait_for(f"!document.querySelector({json.dumps(row('streams', 'data-peer', guest_pk))})",
               "the guest's stream gone")
    step("the page shows the refusal and no guest stream")

    # Memory per loaded model and when its keep-alive unloads it (the runtime is probed every 30 s).
    memory = b.wait_for(f"(() => {{ const t = {cell_text(row('models', 'data-model', model))}; "
                        f"return /loaded/.test(t) && /[0-9.]+ [GM]B on the GPU · unloads in \\d+ (min|s)/.test(t) && t; }})()",
                        "the loaded model's memory and keep-alive", timeout=40)
    pinned = b.wait_for(f"(() => {{ const t = {cell_text(row('models', 'data-model', pin_model))}; "
                        f"return /GB on the GPU · (kept loaded|unloads in)/.test(t) && t; }})()", "the pinned model's memory",
                        timeout=40)
    step(f"models: {memory!r}, {pinned!r}")
    # The picture for the README: a sibling streaming beside the revoked guest and the last hour's chart.
    h = chat(handset, "A last story for the picture")
    b.wait_for(streaming(handset_pk), "the handset's stream for the picture", timeout=20)
    b.wait_for("!document.getElementById('toast').classList.contains('show')", "the action's notice to fade")
    time.sleep(0.5)  # its fade-out
    b.wait_for(f"(() => {{ const n = {streaming(handset_pk)}; return n > 40 && n; }})()", "a longer stream")
    b.screenshot(screenshot)
    problems = fits(1280)
    assert not problems, problems
    answer(h)
    step(f"screenshot saved: {screenshot}")

    # A phone: 400 px wide. Nothing cut off, no sideways scrolling; tables become stacked rows.
    b.resize(400, 860, mobile=True)
    b.wait_for("window.innerWidth === 400", "the phone's width")
    time.sleep(0.3)
    problems = fits(400)
    assert not problems, problems
    assert b.evaluate("getComputedStyle(document.querySelector('#guests thead')).display") == "none"
    # The top of the page, down to the guests (the long name wrapped): a phone's first two screens.
    b.evaluate("document.getElementById('guests').scrollIntoView({block: 'start'})")
    guests_bottom = b.evaluate("document.querySelector('#guests').getBoundingClientRect().bottom + window.scrollY")
    b.evaluate("window.scrollTo(0, 0)")
    b.screenshot(screenshot_phone, max_height=int(guests_bottom) + 24)
    step(f"400 px: nothing cut off; screenshot saved: {screenshot_phone}")

    problems = b.problems()
    assert not problems, "the page reported problems:\n" + "\n".join(problems)
    print(f"status page browser test passed in {time.time() - started:.1f} s")
except Exception:
    # What the page showed when it failed.
    try:
        print("--- the page: notice", repr(b.evaluate("document.getElementById('toast').textContent")), flush=True)
        for table in ("models", "guests", "streams"):
            print(f"--- {table}:", repr(b.evaluate(cell_text(f'#{table} tbody'))), flush=True)
        print("--- problems:", b.problems(), flush=True)
    except Exception as e:  # noqa: BLE001 - the page itself may be gone
        print("--- the page cannot be read:", e)
    raise
finally:
    b.close()
