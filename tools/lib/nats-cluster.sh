# Starts and stops a loopback NATS JetStream cluster for tools/fleet-test and tools/bench-relay --fleet.
# Source it, then: nats_cluster_start DIR BASE_PORT [NODES] (BASE_PORT from nats_pick_base); nats_node_kill I;
# nats_node_start I; nats_cluster_stop.
# Node I (1-based) listens for clients on BASE_PORT+I-1, for routes on BASE_PORT+100+I-1, monitoring on
# BASE_PORT+200+I-1; JetStream file storage under DIR/nI. NATS_URLS is set to the client URLs, comma-separated.
# NATS_TASKSET (e.g. "taskset -c 0") prefixes each server's command.

# nats_pick_base: a random base for a block of 400 ports (clients, routes, monitoring, and the caller's own
# +300..), all below the kernel's ephemeral range (32768 unless /proc says otherwise). A port in that range can
# already be the local end of an outgoing connection (the nodes dial their routes), and then a node fails to bind.
nats_pick_base() {
    local low
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    local blocks=$(( (low - 400 - 20000) / 100 ))
    [ "$blocks" -ge 1 ] || blocks=1
    echo $(( 20000 + (RANDOM % blocks) * 100 ))
}

nats_cluster_start() {
    NATS_DIR=$1; NATS_BASE=$2; NATS_NODES=${3:-3}
    mkdir -p "$NATS_DIR"
    local routes="" i
    for i in $(seq 1 "$NATS_NODES"); do routes+="nats-route://127.0.0.1:$((NATS_BASE + 100 + i - 1)) "; done
    NATS_URLS=""
    for i in $(seq 1 "$NATS_NODES"); do
        mkdir -p "$NATS_DIR/n$i"
        cat >"$NATS_DIR/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:$((NATS_BASE + i - 1))
http: 127.0.0.1:$((NATS_BASE + 200 + i - 1))
jetstream { store_dir: "$NATS_DIR/n$i", max_file_store: 1G, max_memory_store: 64M }
cluster {
  name: homebase-test
  listen: 127.0.0.1:$((NATS_BASE + 100 + i - 1))
  routes: [ $(echo $routes | sed 's/ /, /g') ]
}
CONF
        NATS_URLS+="${NATS_URLS:+,}nats://127.0.0.1:$((NATS_BASE + i - 1))"
        nats_node_start "$i"
    done
    # JetStream is usable once a meta leader is elected: every node's /jsz answers with a meta cluster leader.
    local deadline=$((SECONDS + 30))
    for i in $(seq 1 "$NATS_NODES"); do
        until curl -fsS "http://127.0.0.1:$((NATS_BASE + 200 + i - 1))/jsz" 2>/dev/null | grep -q '"leader"'; do
            [ $SECONDS -lt $deadline ] || { echo "nats node n$i: no JetStream meta leader after 30 s" >&2; return 1; }
            sleep 0.2
        done
    done
}

nats_node_start() {
    local i=$1
    ${NATS_TASKSET:-} nats-server -c "$NATS_DIR/n$i.conf" >>"$NATS_DIR/n$i.log" 2>&1 &
    disown $! 2>/dev/null || true
    echo $! >"$NATS_DIR/n$i.pid"
}

nats_node_kill() { kill -9 "$(cat "$NATS_DIR/n$1.pid")" 2>/dev/null || true; }

nats_cluster_stop() {
    local i
    for i in $(seq 1 "${NATS_NODES:-0}"); do
        [ -f "$NATS_DIR/n$i.pid" ] && kill "$(cat "$NATS_DIR/n$i.pid")" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
