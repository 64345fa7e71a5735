# Sourced by tools/test-real-model, tools/demo --real-model and tools/bench-inference --real-model.
# Needs LLAMA_SERVER and REAL_MODEL_GGUF (from tools/real-model).
#
# llama_start LOG [EXTRA ARGS…]: starts llama-server on 127.0.0.1 at a free port below the ephemeral range, with
# the SmolLM2 GGUF, greedy sampling as the server's defaults (temperature 0, top-k 1, a fixed seed: every request
# that does not say otherwise gets the engine's one greedy answer), $LLAMA_N_PREDICT (128) tokens at most per answer, 2 slots of
# 2,048 tokens, no prompt cache (an answer never depends on what the slot held before). Waits until /health
# answers 200 (60 s at most). Sets llama_pid and llama_url.
llama_start() {
    local log=$1; shift
    local port tries
    for tries in 1 2 3 4 5; do
        port=$(python3 -c '
import random, socket
for _ in range(200):
    p = random.randint(20000, 30999)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        s.close()')
        "$LLAMA_SERVER" -m "$REAL_MODEL_GGUF" --host 127.0.0.1 --port "$port" -c 4096 --parallel 2 -n "${LLAMA_N_PREDICT:-128}" \
            --temp 0 --top-k 1 --seed 42 --no-cache-prompt --no-webui --alias SmolLM2-135M-Instruct.Q4_1.gguf -t "${LLAMA_THREADS:-2}" "$@" >"$log" 2>&1 &
        llama_pid=$!
        llama_url="http://127.0.0.1:$port"
        for _ in $(seq 1 600); do
            if curl -fsS --max-time 1 "$llama_url/health" >/dev/null 2>&1; then return 0; fi
            kill -0 "$llama_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -TERM "$llama_pid" 2>/dev/null || true
        wait "$llama_pid" 2>/dev/null || true
        # Lost the port to someone else: try another; anything else is a real failure.
        grep -qiE "bind|address already in use" "$log" || break
    done
    echo "llama-server did not come up (log $log):" >&2
    tail -n 20 "$log" >&2
    return 1
}

# llama_straight URL PROMPT: the engine's own answer to PROMPT, asked directly (non-streaming, greedy).
llama_straight() {
    python3 - "$1" "$2" <<'PY'
import json, sys, urllib.request
url, prompt = sys.argv[1], sys.argv[2]
model = json.load(urllib.request.urlopen(url + "/v1/models", timeout=10))["data"][0]["id"]
body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": False,
        "temperature": 0, "top_k": 1, "seed": 42}
req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]["message"]["content"], end="")
PY
}
