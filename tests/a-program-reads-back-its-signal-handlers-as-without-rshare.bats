#!/usr/bin/env bats
# The library stands a trampoline in for every handler a program
# installs through the C library (preload/signal.c): sigaction, signal,
# bsd_signal, sysv_signal and sigset (with SIG_HOLD).  The program must
# not see it: tests/handlers-read-back.c installs SIGUSR1 handlers each
# way, reads them back, raises the signal, holds and releases it, ignores
# it with sigignore (past the library's sigaction), and makes bad calls; its transcript (dispositions returned, flags and mask
# read back, handlers run, blocked and pending, errors) under rshare must
# be the one without it.  Both runs are in a namespace of the test's own,
# so that the hub `rshare run` starts there ends with the test.

load lib

setup() {
	rs_require handlers-read-back
	rs_setup
	rs_netns "$NS_A"
}

teardown() {
	rs_teardown
}

@test "a program reads back the signal handlers it installed, every way, as without rshare" {
	local plain pre
	plain=$(ip netns exec "$NS_A" timeout 20 "$RS_BIN/handlers-read-back")
	pre=$(ip netns exec "$NS_A" timeout 20 "$RSHARE" run -- "$RS_BIN/handlers-read-back")
	echo "# $(grep -c . <<<"$plain") lines, e.g. '$(sed -n 2p <<<"$plain")'" >&3
	[[ $plain == *"end: handler SIG_DFL"* ]] || rs_fail "without rshare: '$plain'"
	[[ $pre == "$plain" ]] || rs_fail "under rshare: $(diff <(echo "$plain") <(echo "$pre"))"
}
