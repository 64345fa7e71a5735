# Sourced by tools/bench-inference and tools/bench-instructions: the relay, the emulator and a Homebase's state
# for an inference load on loopback. Expects `bin` (the build's bin directory) and a `pids` array that the
# caller's cleanup kills.

. tools/lib/wait-port.sh

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
    # The emulator runs any number of requests at once (no --parallel): so may the Homebase.
    "$bin/homebase" --state "$state" config --max-concurrent 64 --max-queued 128 --runtime-parallel 64 >/dev/null
}
