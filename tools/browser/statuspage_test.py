"""The status page in a real browser against a running demo stack (started by tools/test-statuspage-browser).

Opens the page in headless Chromium, grants the pending guest through the page, sees its stream appear live,
pins a model warm, revokes the guest through the page while it streams and sees it fall back on-device, and
saves a screenshot. Each action goes through the page's confirmation dialog, with real mouse clicks. Fails on
any exception, console error or refused load (CSP) in the page.

Environment: UI_URL, GUEST and HANDSET (command prefixes, shell words), GUEST_PK, HANDSET_PK, MODEL, PIN_MODEL,
SCREENSHOT (where to save the PNG).
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


b = Browser(width=1280, height=1000)
try:
    b.navigate(url)
    b.wait_for("document.getElementById('live-text').textContent === 'live'", "the live event stream")
    assert b.evaluate(cell_text("#relay-state")) == "Connected"
    assert b.evaluate(cell_text("#runtime-state")) == "Available"
    step("page live: relay connected, runtime available")

    # The guest has joined: pending. Grant it through the form, with a confirmation.
    b.wait_for(f"{cell_text(row('guests', 'data-guest', guest_pk))}.includes('pending')", "the pending guest")
    b.click(row("guests", "data-guest", guest_pk) + " button")
    assert b.evaluate("document.getElementById('grant-guest').value") == guest_pk
    b.evaluate(f"document.getElementById('grant-models').value = {json.dumps(model)}")
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
    first = answer(g)
    answer(h)
    assert first["provider"] == "cross-account" and first["fallback"] is None, first
    step(f"guest answered by the Homebase ({first['provider']}, {first['model']})")

    # Pin a model warm.
    b.click(row("models", "data-model", pin_model) + " button")
    confirm("warm")
    b.wait_for(f"{cell_text(row('models', 'data-model', pin_model))}.includes('pinned')", "the model pinned")
    step(f"{pin_model} pinned warm through the page")

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

    # The picture for the README: a sibling streaming beside the revoked guest and the last hour's chart.
    h = chat(handset, "A last story for the picture")
    b.wait_for(streaming(handset_pk), "the handset's stream for the picture", timeout=20)
    b.wait_for("!document.getElementById('toast').classList.contains('show')", "the action's notice to fade")
    time.sleep(0.5)  # its fade-out
    b.wait_for(f"(() => {{ const n = {streaming(handset_pk)}; return n > 40 && n; }})()", "a longer stream")
    b.screenshot(screenshot)
    answer(h)
    step(f"screenshot saved: {screenshot}")

    problems = b.problems()
    assert not problems, "the page reported problems:\n" + "\n".join(problems)
    print(f"status page browser test passed in {time.time() - started:.1f} s")
finally:
    b.close()
