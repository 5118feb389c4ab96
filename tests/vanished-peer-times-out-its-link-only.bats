#!/usr/bin/env bats
# A peer node that vanishes (its network cut: nothing more arrives, not
# even a reset) is noticed by the hub within its documented timeout (soft
# transport: TCP keepalive after 5 s idle and 3 probes 1 s apart, or 10 s of
# unacknowledged data): the link is lost, and its connections wait for a
# new one, as a kernel TCP connection waits for a silent peer.  The server's
# idle connection asked for keepalives (1 s, 2 probes 1 s apart): once they
# would have gone unanswered it is closed (ETIMEDOUT), as kernel TCP's would
# be, and the hub has nothing of that peer left.  A link to another node is
# not disturbed.
# waits: a link timeout and keepalives, 13 s (tests/run runs it beside the others)

load lib

setup() {
	rs_require echo-server hub-death-client echo-client
	rs_setup
	rs_two_nodes nohubs
	rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	NS_C=rsC-$RS_SUF
	rs_netns "$NS_C"
	ip link add "wa$RS_SUF" netns "$NS_A" type veth peer name "wc$RS_SUF" netns "$NS_C"
	ip -n "$NS_A" addr add 10.199.1.1/24 dev "wa$RS_SUF"
	ip -n "$NS_C" addr add 10.199.1.3/24 dev "wc$RS_SUF"
	ip -n "$NS_A" link set "wa$RS_SUF" up
	ip -n "$NS_C" link set "wc$RS_SUF" up
	rs_hub_start "$NS_C"
}

teardown() {
	rs_teardown
}

@test "a vanished peer's link is lost within the timeout, its idle connection closed once its keepalives would go unanswered; other links are not touched" {
	local t0 gone=0
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 2 -k 1 7701
	rs_wait_ready server
	# B: one idle connection blocked in recv; C: a long transfer across the cut
	rs_bg client "$NS_B" --rshare "$RS_BIN/hub-death-client" $ADDR_A 7701
	rs_wait_file "$RS_TMP/client.out" '^blocked$'
	rs_bg other "$NS_C" --rshare "$RS_BIN/echo-client" -t 20 -c 2 -s 5 -m 65536 10.199.1.1 7701
	sleep 1
	[[ $(rs_stat "$NS_A" | jq '[.links[] | select(.state == "up")] | length') -eq 2 ]] ||
		rs_fail "not two links on A: $(rs_stat "$NS_A" | jq -c .links)"
	# cut B off: its interface goes down, nothing reaches A any more
	ip -n "$NS_B" link set "vb$RS_SUF" down
	t0=$SECONDS
	for i in $(seq 300); do
		if rs_stat "$NS_A" | jq -e --arg b "$ADDR_B" '
			([.links[] | select(.peer | startswith($b))] | length == 0) and
			([.sockets[] | select(.peer | startswith($b))] | length == 0)' >/dev/null; then
			gone=1
			break
		fi
		sleep 0.1
	done
	[[ $gone -eq 1 ]] || rs_fail "A still has B's link or sockets after $((SECONDS - t0)) s"
	echo "B's link and connection gone from A after $((SECONDS - t0)) s"
	((SECONDS - t0 <= 25)) || rs_fail "took $((SECONDS - t0)) s, documented: about 10 s, then 3 s"
	grep -q 'dropped' "$RS_TMP/hub-$NS_A.err" || rs_fail "A did not log the dropped link"
	rs_stat "$NS_A" | jq -e '.counters.links_lost >= 1 and .counters.conns_expired >= 1 and
		.counters.conns_waiting == 0' >/dev/null ||
		rs_fail "A's counters: $(rs_stat "$NS_A" | jq -c .counters)"
	# C's link carried on: its transfer completes with every byte checked
	rs_wait_pid "$(pgrep -f "echo-client -t 20 -c 2 -s 5" | head -n1)" 60 || true
	rs_wait_file "$RS_TMP/other.out" 'verified=2 resets=0 errors=0' 1 40 ||
		rs_fail "C's connections: $(cat "$RS_TMP/other.out" "$RS_TMP/other.err")"
}
