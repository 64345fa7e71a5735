# Sourced by tools/bench-inference and tools/bench-instructions: the relay, the emulator and a Homebase's state
# for an inference load on loopback. Expects `bin` (the build's bin directory) and a `pids` array that the
# caller's cleanup kills.

# wait_port LOG: the port from the "listening on HOST:PORT" line a server prints into LOG (10 s at most; on
# timeout the log goes to stderr).
wait_port() {
    local port
    for _ in $(seq 1 200); do
        port=$(grep -oE 'listening on [^ ]+:[0-9]+' "$1" 2>/dev/null | head -n 1 | grep -oE '[0-9]+$' || true)
        if [ -n "$port" ]; then echo "$port"; return 0; fi
        sleep 0.05
    done
    echo "no 'listening on' line in $1:" >&2
    cat "$1" >&2
    return 1
}

# start_stack DIR ANSWER_TOKENS: a relay and the emulator (100 tokens/s, first token after 50 ms, answers of
# ANSWER_TOKENS, MIN-MAX), logs in DIR, and a Homebase state in DIR/homebase initialised against them with
# admission raised to 64 streaming (the settings' ceiling) and 128 queued, so 100 streams are not answered
# `busy`. Sets relay_pid, emulator_pid, ollama_url and state.
start_stack() {
    local dir=$1 answer=$2
    mkdir -p "$dir"
    "$bin/relay" --listen 127.0.0.1:0 --data "$dir/relay-data" >"$dir/relay.out" 2>"$dir/relay.err" &
    relay_pid=$!; pids+=("$relay_pid")
    "$bin/ollama-emulator" --listen 127.0.0.1:0 --tokens-per-s 100 --first-token-ms 50 --answer-tokens "$answer" \
        >"$dir/emulator.out" 2>"$dir/emulator.err" &
    emulator_pid=$!; pids+=("$emulator_pid")
    local relay_port ollama_port
    relay_port=$(wait_port "$dir/relay.out")
    ollama_port=$(wait_port "$dir/emulator.out")
    ollama_url="http://127.0.0.1:$ollama_port"
    state="$dir/homebase"
    "$bin/homebase" --state "$state" init --relay "ws://127.0.0.1:$relay_port/v1/relay" --ollama "$ollama_url" \
        --name bench >/dev/null
    "$bin/homebase" --state "$state" config --max-concurrent 64 --max-queued 128 >/dev/null
}
