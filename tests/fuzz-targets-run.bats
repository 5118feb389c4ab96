#!/usr/bin/env bats
# The libFuzzer targets of tests/fuzz/ (make fuzz-build: clang, into
# build/fuzz/) each run 5 s from their checked-in corpus and must not
# crash: no sanitizer report, no broken invariant, no timeout.  New inputs
# go to a scratch corpus, so the checked-in one does not grow; a crash input
# is kept in build/fuzz/ (crash-<target>-*).  Each test prints the number of
# executions of its run.  `make fuzz` runs them longer (FUZZ_SECS).

bats_require_minimum_version 1.5.0

ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
FUZZ=$ROOT/build/fuzz

setup_file() {
	command -v clang >/dev/null || return 0
	make -s -j"$(nproc)" -C "$ROOT" fuzz-build >&2
}

fuzz_run() {
	local t=$1 log
	command -v clang >/dev/null || skip "needs clang (tools/deps.sh installs it)"
	[[ -x $FUZZ/$t ]] || skip "$FUZZ/$t not built"
	log=$BATS_TEST_TMPDIR/$t.log
	mkdir -p "$BATS_TEST_TMPDIR/corpus"
	run timeout -k 10 120 "$FUZZ/$t" -max_total_time=5 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
		-artifact_prefix="$FUZZ/crash-$t-" "$BATS_TEST_TMPDIR/corpus" "$ROOT/tests/fuzz/corpus/$t"
	echo "$output" >"$log"
	echo "# $t: $(grep -h 'stat::number_of_executed_units' "$log" | tr -s ' ')" >&3
	if [[ $status -ne 0 ]]; then
		grep -E -A40 'ERROR|invariant|deadly signal|Test unit written' "$log" | head -n 80
		return 1
	fi
	grep -q 'stat::number_of_executed_units' "$log"
}

@test "fuzz-frame runs 5 s without a crash" {
	fuzz_run fuzz-frame
}

@test "fuzz-hub-requests runs 5 s without a crash" {
	fuzz_run fuzz-hub-requests
}

@test "fuzz-arena runs 5 s without a crash" {
	fuzz_run fuzz-arena
}

@test "inputs that once crashed the hub replay cleanly" {
	local f t
	command -v clang >/dev/null || skip "needs clang (tools/deps.sh installs it)"
	for f in "$ROOT"/tests/fuzz/crashes/*; do
		case ${f##*/} in
		fuzz-arena-*) t=fuzz-arena ;;
		fuzz-hub-requests-*) t=fuzz-hub-requests ;;
		fuzz-frame-*) t=fuzz-frame ;;
		esac
		run timeout -k 10 60 "$FUZZ/$t" "$f"
		[[ $status -eq 0 ]] || { echo "$output" | tail -n 40; echo "replay of ${f##*/} failed"; return 1; }
	done
}
