# Sourced by tools/bench-relay --fleet (issue 24): the single relay against a fleet of two edges over a three-node
# NATS JetStream cluster (replicas 3), in one run, on this machine. Needs bench-relay's bin, py, work, load,
# start_server, stop_server, server_pid, url, seconds, rtt_count, repeats.
#   forward  256-B frames, 4 pairs, no receipts: the single relay's CPU per frame; across edges (senders on edge 1,
#            receivers on edge 2) both edges' CPU per frame and the three NATS servers' apart;
#   rtt      one pair ping-pong, p50/p99 per round trip; across edges A on edge 1, B on edge 2;
#   store    STORE frames to offline recipients, 2 senders with 256 awaiting RECEIPT 1 each: frames/s and CPU per
#            frame (single: SQLite, synchronous=full; fleet: JetStream file storage, replicas 3).
# Servers on CPU 0 (all five processes of the fleet), the load on CPU 1. Best of `repeats` per figure.
bench_fleet() {
    source tools/lib/nats-cluster.sh
    local out="$root/bench-out/relay-fleet.json"
    mkdir -p "$root/bench-out"
    : >"$work/fleet.jsonl"
    # A load that failed (its error is on stderr) is kept as such, not left out.
    record() {
        local result=${3:-'{"error":"no result"}'}
        echo "{\"setup\":\"$1\",\"test\":\"$2\",\"result\":$result}" >>"$work/fleet.jsonl"
        echo "  $1 $2: $result"
    }

    echo "== single relay (SQLite)"
    for r in $(seq 1 "$repeats"); do
        start_server ours
        record single forward "$(load throughput --url "$url" --pairs 4 --seconds "$seconds" --server-pid "$server_pid")"
        record single rtt "$(load rtt --url "$url" --count "$rtt_count")"
        record single store "$(load store --url "$url" --seconds "$seconds" --server-pid "$server_pid")"
        stop_server
    done

    echo "== fleet: 2 edges over 3 NATS nodes (JetStream, replicas 3)"
    local base; base=$(nats_pick_base)
    NATS_TASKSET="taskset -c 0" nats_cluster_start "$work/nats" "$base" 3
    local npids; npids=$(cat "$work"/nats/n*.pid | paste -sd,)
    local e pids=() urls=()
    for e in 1 2; do
        local port=$((base + 300 + e))
        taskset -c 0 "${RELAY_BIN:-$bin/relay}" --listen "127.0.0.1:$port" --nats "$NATS_URLS" --edge-id "bench-$e" \
            --log-level warning --send-frames-per-second 100000000 --send-frames-burst 100000000 \
            --send-bytes-per-second 100000000000 --send-bytes-burst 100000000000 >"$work/edge$e.log" 2>&1 &
        pids+=($!)
        urls+=("ws://127.0.0.1:$port/v1/relay")
        for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
    done
    local epids; epids=$(IFS=,; echo "${pids[*]}")
    for r in $(seq 1 "$repeats"); do
        record fleet forward "$(load throughput --url "${urls[0]}" --peer-url "${urls[1]}" --pairs 4 \
            --seconds "$seconds" --server-pid "$epids" --other-pid "$npids")"
        record fleet rtt "$(load rtt --url "${urls[0]}" --peer-url "${urls[1]}" --count "$rtt_count")"
        record fleet store "$(load store --url "${urls[0]}" --seconds "$seconds" --server-pid "$epids" --other-pid "$npids")"
    done
    kill "${pids[@]}" 2>/dev/null || true
    nats_cluster_stop

    "$py" - "$work/fleet.jsonl" "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def best(setup, test, key, pick):
    vals = [r["result"][key] for r in rows if r["setup"] == setup and r["test"] == test and key in r["result"]]
    return pick(vals) if vals else float("nan")
fig = {}
for s in ("single", "fleet"):
    fig[s] = {
        "forward_cpu_us_per_frame": best(s, "forward", "server_cpu_us_per_frame", min),
        "forward_nats_cpu_us_per_frame": best(s, "forward", "other_cpu_us_per_frame", min),
        "forward_frames_per_second": best(s, "forward", "frames_per_second", max),
        "rtt_p50_us": best(s, "rtt", "p50_us", min),
        "rtt_p99_us": best(s, "rtt", "p99_us", min),
        "store_frames_per_second": best(s, "store", "frames_per_second", max),
        "store_cpu_us_per_frame": best(s, "store", "server_cpu_us_per_frame", min),
        "store_nats_cpu_us_per_frame": best(s, "store", "other_cpu_us_per_frame", min),
    }
a, b = fig["single"], fig["fleet"]
fig["ratios"] = {
    "forward_edge_cpu_over_single": b["forward_cpu_us_per_frame"] / a["forward_cpu_us_per_frame"],
    "forward_edge_plus_nats_cpu_over_single":
        (b["forward_cpu_us_per_frame"] + b["forward_nats_cpu_us_per_frame"]) / a["forward_cpu_us_per_frame"],
    "rtt_p50_over_single": b["rtt_p50_us"] / a["rtt_p50_us"],
}
json.dump({"figures": fig, "runs": rows}, open(sys.argv[2], "w"), indent=1)
print(f"{'':34}{'single':>12}{'fleet':>12}")
for k in a:
    print(f"{k:34}{a[k]:12.2f}{b[k]:12.2f}")
for k, v in fig["ratios"].items():
    print(f"{k:44}{v:8.2f}x")
print(f"(written to {sys.argv[2]})")
PY
}
