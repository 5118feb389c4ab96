#!/usr/bin/env bash
# demo.sh - rshare between two nodes, end to end.
#
# Builds rshare, makes two network namespaces joined by a veth pair (two
# nodes, each with its own hub), runs a 4-worker echo server under rshare on
# node A and 3 client processes of 8 connections each on node B, waits until
# every client has verified all its bytes, then prints `rshare stat` on both
# nodes: one link between the nodes, carrying all the connections.  It then
# releases the clients and removes everything it made.  Needs root.
#
# Environment: DEMO_PORT (echo port, default 7070), DEMO_TIMEOUT (seconds to
# wait for each step, default 60), RSHARE_LOG (hub log level, default info).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

NS_A=rsdemoA NS_B=rsdemoB
VETH_A=rsdemoA0 VETH_B=rsdemoB0
ADDR_A=10.198.0.1 ADDR_B=10.198.0.2
PORT=${DEMO_PORT:-7070}
TIMEOUT=${DEMO_TIMEOUT:-60}
WORKERS=4 CLIENTS=3 CONNS=8 MSGS=20
export RSHARE_LOG=${RSHARE_LOG:-info}

say() { printf '\n== %s\n' "$*"; }
die() {
	printf 'demo: %s\n' "$*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "needs root (it creates network namespaces): sudo $0"

say "dependencies"
tools/deps.sh
say "build"
make -s
for b in librshare.so rshared rshare tests/echo-server tests/echo-client; do
	[ -e "build/$b" ] || die "build/$b was not built"
done

tmp=$(mktemp -d /tmp/rshare-demo.XXXXXX)
chmod 755 "$tmp"
hold=$tmp/release
ok=0

in_ns() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}

# Kill, by pid, whatever still runs in our namespaces: the hubs, the server,
# the clients (and a hub the library may have started on its own).
stop_ns() {
	local ns=$1 pids
	ip netns list 2>/dev/null | grep -qw "^$ns" || return 0
	pids=$(ip netns pids "$ns" 2>/dev/null || true)
	# shellcheck disable=SC2086
	if [ -n "$pids" ]; then kill $pids 2>/dev/null || true; fi
	for _ in $(seq 50); do
		pids=$(ip netns pids "$ns" 2>/dev/null || true)
		[ -z "$pids" ] && break
		sleep 0.1
	done
	# shellcheck disable=SC2086
	if [ -n "$pids" ]; then kill -KILL $pids 2>/dev/null || true; fi
	ip netns del "$ns" 2>/dev/null || true
}

show_logs() {
	local f
	for f in "$tmp"/*.log; do
		[ -s "$f" ] || continue
		printf '\n-- %s (last lines)\n' "$(basename "$f")" >&2
		tail -n 20 "$f" >&2
	done
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	touch "$hold" 2>/dev/null || true
	if [ "$ok" != 1 ] && [ -d "$tmp" ]; then
		show_logs
	fi
	stop_ns "$NS_B"
	stop_ns "$NS_A"
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for DESCRIPTION COMMAND...: poll until COMMAND succeeds or TIMEOUT.
wait_for() {
	local what=$1 end=$((SECONDS + TIMEOUT))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || die "timed out waiting for $what"
		sleep 0.1
	done
}

alive() { kill -0 "$1" 2>/dev/null; }

# The hub of a namespace is up once its abstract socket listens.
hub_up() { in_ns "$1" ss -xlH 2>/dev/null | grep -q '@rshare-hub\b'; }

say "two nodes: $NS_A ($ADDR_A) and $NS_B ($ADDR_B)"
stop_ns "$NS_B"
stop_ns "$NS_A"
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add "$VETH_A" netns "$NS_A" type veth peer name "$VETH_B" netns "$NS_B"
in_ns "$NS_A" ip addr add "$ADDR_A/24" dev "$VETH_A"
in_ns "$NS_B" ip addr add "$ADDR_B/24" dev "$VETH_B"
for ns in "$NS_A" "$NS_B"; do
	in_ns "$ns" ip link set lo up
done
in_ns "$NS_A" ip link set "$VETH_A" up
in_ns "$NS_B" ip link set "$VETH_B" up
link_up() { in_ns "$1" ip -br link show "$2" | grep -q 'LOWER_UP'; }
wait_for "the veth link" link_up "$NS_A" "$VETH_A"
wait_for "the veth link" link_up "$NS_B" "$VETH_B"

say "one hub per node"
in_ns "$NS_A" build/rshared >"$tmp/hub-A.log" 2>&1 &
hub_a=$!
in_ns "$NS_B" build/rshared >"$tmp/hub-B.log" 2>&1 &
hub_b=$!
wait_for "the hub on $NS_A" hub_up "$NS_A"
wait_for "the hub on $NS_B" hub_up "$NS_B"
{ alive "$hub_a" && alive "$hub_b"; } || die "a hub exited"
echo "hubs: $NS_A pid $hub_a, $NS_B pid $hub_b"

say "echo server on $NS_A: $WORKERS workers, port $PORT"
in_ns "$NS_A" build/rshare run -- build/tests/echo-server -w "$WORKERS" "$PORT" \
	>"$tmp/server.log" 2>&1 &
server=$!
server_ready() {
	alive "$server" || die "the echo server exited"
	grep -q '^ready' "$tmp/server.log"
}
wait_for "the echo server" server_ready

say "$CLIENTS clients on $NS_B, $CONNS connections each, $MSGS messages a connection"
clients=()
for i in $(seq "$CLIENTS"); do
	in_ns "$NS_B" build/rshare run -- build/tests/echo-client -c "$CONNS" -s "$i" \
		-n "$MSGS" -w "$hold" "$ADDR_A" "$PORT" >"$tmp/client-$i.log" 2>&1 &
	clients+=($!)
done
clients_done() {
	local i
	for i in $(seq "$CLIENTS"); do
		grep -q '^done' "$tmp/client-$i.log" && continue
		alive "${clients[$((i - 1))]}" || die "client $i exited before it was done"
		return 1
	done
}
wait_for "the clients" clients_done
echo "all $CLIENTS clients verified every byte echoed back"

for ns in "$NS_B" "$NS_A"; do
	say "rshare stat on $ns"
	in_ns "$ns" build/rshare stat
done

# The claim, checked: each hub holds one link, and it carries all the
# connections (the clients still hold theirs open).
want=$((CLIENTS * CONNS))
for ns in "$NS_B" "$NS_A"; do
	json=$(in_ns "$ns" build/rshare stat --json) || die "$ns: rshare stat --json failed"
	links=$(jq '.links | length' <<<"$json") || die "$ns: rshare stat --json: not the JSON expected"
	conns=$(jq '[.links[].connections] | add // 0' <<<"$json") ||
		die "$ns: rshare stat --json: not the JSON expected"
	if [ "$links" != 1 ] || [ "$conns" != "$want" ]; then
		jq . <<<"$json" >&2 || printf '%s\n' "$json" >&2
		die "$ns: $links links carrying $conns connections, expected 1 link carrying $want"
	fi
done
echo
echo "checked: one link between the nodes on each side, carrying all $want connections"

say "release the clients"
touch "$hold"
for i in $(seq "$CLIENTS"); do
	wait "${clients[$((i - 1))]}" || die "client $i failed (exit $?)"
done
echo "clients closed their connections and exited cleanly"
ok=1
say "demo passed"
