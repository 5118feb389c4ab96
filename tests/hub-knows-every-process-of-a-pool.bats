#!/usr/bin/env bats
# The hub knows every process of a pool, a forked child that never touches
# a socket included, and notices its death: the child is listed (in the
# parent's pool, holding the listener it inherited) while it lives, and
# gone, with nothing held in its name, once it was killed.

load lib

setup() {
	rs_require fork-child
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "a forked child that never touches a socket is known to the hub until it dies" {
	local parent child pool
	rs_bg fc "$NS_A" --rshare "$RS_BIN/fork-child" 7401 "$RS_TMP/hold"
	rs_wait_ready fc
	parent=$(sed -n 's/^parent //p' "$RS_TMP/fc.out")
	child=$(sed -n 's/^child //p' "$RS_TMP/fc.out")
	[[ -n $parent && -n $child ]]
	rs_stat "$NS_A" >"$RS_TMP/s1.json"
	rs_jq_check "both processes in one pool, the child holding the listener" \
		--slurpfile s "$RS_TMP/s1.json" --argjson p "$parent" --argjson c "$child" '
		$s[0] as $S |
		([$S.processes[] | select(.pid == $p)] | first) as $P |
		([$S.processes[] | select(.pid == $c)] | first) as $C |
		if $P == null then "parent \($p) not known"
		elif $C == null then "child \($c) not known"
		elif $P.pool != $C.pool then "child in pool \($C.pool), parent in \($P.pool)"
		elif ($C.sockets | length) != 1 or $C.sockets != $P.sockets then
			"child holds \($C.sockets), parent \($P.sockets)"
		else empty end'
	kill -KILL "$child"
	rs_wait_file "$RS_TMP/fc.out" '^reaped$'
	for i in $(seq 50); do
		rs_stat "$NS_A" >"$RS_TMP/s2.json"
		jq -e --argjson c "$child" '[.processes[] | select(.pid == $c)] | length == 0' \
			"$RS_TMP/s2.json" >/dev/null && break
		sleep 0.1
	done
	rs_jq_check "the child is gone, the parent and its listener stay" \
		--slurpfile s "$RS_TMP/s2.json" --argjson p "$parent" --argjson c "$child" '
		$s[0] as $S |
		fail([$S.processes[] | select(.pid == $c)] | length == 0; "child \($c) still known"),
		fail([$S.processes[] | select(.pid == $p)] | length == 1; "parent \($p) not known"),
		fail([$S.sockets[] | select(.state == "listening" and .holders == [$p])] | length == 1;
			"the listener is not held by the parent alone: \([$S.sockets[] | {sid, state, holders}])")'
	touch "$RS_TMP/hold.parent"
}
