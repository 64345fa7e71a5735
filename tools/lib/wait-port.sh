# Sourced by tools/demo and tools/lib/bench-stack.sh.

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
