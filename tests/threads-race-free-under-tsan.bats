#!/usr/bin/env bats
# ThreadSanitizer where rshare has threads: build-tsan/ (make TSAN=1:
# -fsanitize=thread) holds the library, hub, command and the test programs
# used here.  The ring unit test (one producer and one consumer thread on
# acquire/release counters) runs under TSan; then a pre-forked echo server
# (4 workers, a thread per connection) on node A and 2 clients of 24 and 8
# connections on node B (a reader and a writer thread on each socket, every
# byte checked), all preloaded with the TSan-built library, talk through the
# TSan-built hubs.  Every process writes its TSan reports to a file of its
# own ($RS_TMP/tsan/tsan.EXE.PID); any ThreadSanitizer report of any of
# them fails the test, and is shown.  Suppressions: none.
#
# Left out of the ASan/UBSan pass (tests/san/exclude): it is a sanitizer
# build of its own.

ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
# lib.bash takes its binaries from here: the hubs, `rshare run` and the
# library it preloads are the TSan-built ones
RSHARE_BUILD=$ROOT/build-tsan
TSAN_PROGRAMS=(echo-server echo-client ring-spsc-threads-move-bytes-in-order)

load lib

# can cc build and run a -fsanitize=thread program at all? ($TSAN_CANNOT:
# empty, link or run; why in $BATS_FILE_TMPDIR/t.err)
setup_file() {
	local d=$BATS_FILE_TMPDIR
	echo 'int main(void) { return 0; }' >"$d/t.c"
	TSAN_CANNOT=
	if ! "${CC:-cc}" -fsanitize=thread -o "$d/t" "$d/t.c" 2>"$d/t.err"; then
		TSAN_CANNOT=link
	elif ! "$d/t" 2>"$d/t.err"; then
		TSAN_CANNOT=run
	fi
	export TSAN_CANNOT
}

# a kernel whose mmap randomization the runtime cannot live with (it says
# "unexpected memory mapping") is no failure of rshare
tsan_runs() {
	[[ $TSAN_CANNOT != run ]] ||
		skip "the ThreadSanitizer runtime does not run here: $(grep -m1 . "$BATS_FILE_TMPDIR/t.err")"
}

setup() {
	rs_setup
	mkdir -p "$RS_TMP/tsan"
	# halt_on_error=0: every report of a run, not just the first
	export TSAN_OPTIONS="log_path=$RS_TMP/tsan/tsan log_exe_name=1 halt_on_error=0 exitcode=66 history_size=4 second_deadlock_stack=1"
}

teardown() {
	# a test that failed early (a program that exited 66) shows the reports too
	[[ ${BATS_TEST_COMPLETED:-} == 1 || ${TSAN_SHOWN:-0} == 1 ]] || tsan_reports >/dev/null || true
	rs_teardown
}

# tsan_reports: show every ThreadSanitizer report of this test, in the
# per-process files or, should one have missed its log_path, in a
# program's or hub's stderr; print how many files had one
tsan_reports() {
	local f n=0
	for f in "$RS_TMP"/tsan/* "$RS_TMP"/*.err; do
		[[ -f $f ]] && grep -q 'ThreadSanitizer' "$f" || continue
		n=$((n + 1))
		echo "--- ${f##*/}" >&2
		grep -v '^$' "$f" | head -n 150 >&2
	done
	echo "$n"
	((n == 0))
}

# tsan_clean: fail when any process of this test had a report
tsan_clean() {
	local n
	TSAN_SHOWN=1
	n=$(tsan_reports) || rs_fail "ThreadSanitizer reports from $n process(es): above"
}

@test "TSan build: library, hub, command and test programs build with -fsanitize=thread" {
	local t targets=("$RSHARE_BUILD/librshare.so" "$RSHARE_BUILD/rshared" "$RSHARE_BUILD/rshare")
	for t in "${TSAN_PROGRAMS[@]}"; do
		targets+=("$RSHARE_BUILD/tests/$t")
	done
	[[ $TSAN_CANNOT != link ]] ||
		rs_fail "${CC:-cc} cannot link -fsanitize=thread (libtsan2; tools/deps.sh installs it):" \
			"$(head -n 3 "$BATS_FILE_TMPDIR/t.err")"
	# a compile per core, and nothing of an outer make's flags
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -j"$(nproc)" -C "$ROOT" TSAN=1 \
		"${targets[@]#"$ROOT"/}" >"$RS_TMP/make.log" 2>&1 ||
		{ tail -n 30 "$RS_TMP/make.log" >&2; rs_fail "make TSAN=1 failed"; }
}

@test "TSan: ring SPSC producer and consumer threads race on nothing" {
	local bin=$RS_BIN/ring-spsc-threads-move-bytes-in-order
	tsan_runs
	[[ -x $bin ]] || rs_fail "$bin not built"
	run timeout -k 5 120 "$bin"
	echo "$output"
	tsan_clean
	[[ $status -eq 0 ]] || rs_fail "exit $status (66: ThreadSanitizer reports)"
}

@test "TSan: two-node prefork echo, reader and writer threads per socket, no race in any process" {
	local port=7601 i c pids=() b
	tsan_runs
	rs_require "${TSAN_PROGRAMS[@]}"
	rs_two_nodes
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 4 $port
	rs_wait_ready server 60
	# client 1: 24 connections of 2 small messages each, so that readers
	# wait in poll() while their writers send and shut down; client 2: 8
	# connections of 8 messages up to 256 KiB, so that rings fill and
	# writers block
	rs_bg client1 "$NS_B" --rshare "$RS_BIN/echo-client" -c 24 -s 1 -n 2 -m 1024 $ADDR_A $port
	pids+=("$RS_LASTPID")
	rs_bg client2 "$NS_B" --rshare "$RS_BIN/echo-client" -c 8 -s 2 -n 8 -m 262144 $ADDR_A $port
	pids+=("$RS_LASTPID")
	for i in 1 2; do
		c=$((i == 1 ? 24 : 8))
		rs_wait_pid "${pids[$((i - 1))]}" 150 ||
			rs_fail "client$i exit $? (66: ThreadSanitizer reports): $(cat "$RS_TMP/client$i.out")"
		b=$(sed -n "s/.*conns=$c verified=$c resets=0 errors=0 bytes=\\([0-9]*\\).*/\\1/p" "$RS_TMP/client$i.out")
		[[ -n $b && $b -gt 0 ]] || rs_fail "client$i: $(cat "$RS_TMP/client$i.out")"
	done
	# the connections went through rshare, not a fallback to kernel TCP
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "32 connections over the one link, none on kernel TCP" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail($B.links|length == 1; "node B has \($B.links|length) links, want 1"),
		fail(($B.links[0].connections_total // 0) >= 32; "link connections_total \($B.links[0].connections_total)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
	# the server's workers and the hubs end, and write what they found
	rs_teardown
	tsan_clean
}
