# Helpers of the tests that hand a node's connections to another hub
# (hub-restart-keeps-every-connection.bats, hub-killed-is-succeeded-
# keeping-every-connection.bats): the same clients on kernel TCP and on
# rshare while something happens to the hubs.

# summary NAME: echo-client's verdict in $RS_TMP/NAME.out
summary() {
	sed -n 's/^echo-client: \(conns=[0-9]* verified=[0-9]* resets=[0-9]* errors=[0-9]*\).*/\1/p' "$RS_TMP/$1.out"
}

# stall_of NAME: its longest pause (ms)
stall_of() {
	sed -n 's/^echo-client: .* stall_ms=\([0-9]*\).*/\1/p' "$RS_TMP/$1.out"
}

# streams NAME PORT [--rshare]: an echo server on A, 4 streams from A and
# 4 from B for 7 s
streams() {
	local name=$1 port=$2 pre=${3:-}
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/echo-server" -w 2 "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name-a" "$NS_A" $pre "$RS_BIN/echo-client" -S -c 4 -s 21 -t 7 -m 262144 $ADDR_A "$port"
	rs_bg "$name-b" "$NS_B" $pre "$RS_BIN/echo-client" -S -c 4 -s 22 -t 7 -m 262144 $ADDR_A "$port"
}

# streams_through WHAT PORT CMD ARGS...: streams on kernel TCP (PORT) and
# on rshare (PORT+1) at once, CMD run twice 2 s apart meanwhile; every
# stream must end verified with no reset; the longest pauses go to the
# TAP output, as what WHAT causes
streams_through() {
	local what=$1 port=$2 ok="conns=4 verified=4 resets=0 errors=0" n
	shift 2
	streams kernel "$port"
	streams rshare $((port + 1)) --rshare
	sleep 2
	"$@"
	sleep 2
	"$@"
	for n in kernel-a kernel-b rshare-a rshare-b; do
		rs_wait_file "$RS_TMP/$n.out" '^echo-client:' 1 60
	done
	echo "kernel TCP: $(summary kernel-a); $(summary kernel-b)"
	echo "rshare: $(summary rshare-a); $(summary rshare-b)"
	echo "# $what, longest pause: same node $(stall_of rshare-a) ms (kernel TCP $(stall_of kernel-a) ms), across nodes $(stall_of rshare-b) ms (kernel TCP $(stall_of kernel-b) ms)" >&3
	[[ $(summary kernel-a) == "$ok" && $(summary kernel-b) == "$ok" ]] || rs_fail "kernel TCP: $(summary kernel-a); $(summary kernel-b)"
	[[ $(summary rshare-a) == "$ok" ]] || rs_fail "rshare, same node: $(summary rshare-a) $(cat "$RS_TMP/rshare-a.err")"
	[[ $(summary rshare-b) == "$ok" ]] || rs_fail "rshare, across nodes: $(summary rshare-b) $(cat "$RS_TMP/rshare-b.err")"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
}

# held NAME PORT [--rshare] [CMD ARGS...]: tests/held-connections.py on B
# holds 4 connections to A's echo server; CMD runs while they are held;
# its transcript, lines joined by |
held() {
	local name=$1 port=$2 pre=
	shift 2
	[[ ${1:-} != --rshare ]] || { pre=--rshare; shift; }
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/echo-server" -w 2 "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name" "$NS_B" $pre python3 -u "$BATS_TEST_DIRNAME/held-connections.py" $ADDR_A "$port" \
		"$RS_TMP/$name.release"
	rs_wait_file "$RS_TMP/$name.out" '^held$' 1 30
	(($# == 0)) || "$@"
	sleep 1
	touch "$RS_TMP/$name.release"
	rs_wait_file "$RS_TMP/$name.out" '^end$' 1 90
	tr '\n' '|' <"$RS_TMP/$name.out"
}

# what held prints on kernel TCP
HELD_KERNEL="before 0|before 1|before 2|before 3|held|after 0|after 1|after 2|blocked recv got [b'wake\n']|end|"
