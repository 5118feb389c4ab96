# san.bash - the sanitizer pass of tests/run, which sources it.
#
# After the normal suite (only when tests/run runs the whole suite: no file
# arguments), san_pass builds build-san/ (make SAN=1: librshare.so, rshared,
# rshare and every test program with -fsanitize=address,undefined) and runs
# tests/run again on it: RSHARE_SAN_PASS=1 RSHARE_BUILD=build-san, the unit
# tests and every tests/*.bats file but those listed in tests/san/exclude
# (valgrind, the fuzz targets' own build, soak and stress tests: time).
# Every TAP line of that pass gets " [asan+ubsan]" after the test's name,
# and its counts go into the one final line of tests/run.  RSHARE_NO_SAN=1
# leaves the pass out (one skip).
# `make test-san` (tests/san/run [BATS-FILES]) runs the pass alone.
#
# In the pass (san_env), every ASan/LSan report of every process - hubs the
# library started, preloaded programs whose exit status no test looks at -
# goes to a file of its own ($SAN_DIR/log/asan.EXE.PID), and san_check,
# after the unit tests and after each bats file, prints each report as a
# failure of its own.  UBSan ignores its log_path when ASan is linked too
# (gcc 12: its report path call lands in libasan), so its reports go to
# stderr: halt_on_error=1 ends the process (exit 1), and rs_teardown
# (tests/lib.bash) fails the test when a "runtime error:" is in one of its
# *.err or *.log files (the programs' and hubs' stderr).  The options:
#   UBSan: halt_on_error=1 print_stacktrace=1
#   ASan:  verify_asan_link_order=0, because an ASan-built program (test
#          programs, rshared, rshare) with the ASan-built library preloaded
#          loads librshare.so before libasan (and an uninstrumented program,
#          sh or env under `rshare run`, gets libasan only as the library's
#          dependency);
#          detect_leaks=0, but 1 for rshared and the unit tests (one options
#          file per program name, include_if_exists=$SAN_DIR/%b.asan): the
#          test programs and the rshare command free nothing at exit, on
#          purpose, and a leak report there ends them with exit 1 before
#          their buffered output is written.
# A hub the library starts finds build-san/rshared next to build-san/
# librshare.so, so it is the sanitized hub as well (the library passes the
# environment on, less LD_PRELOAD).

SAN_PASS=${RSHARE_SAN_PASS:-0}
SAN_SUFFIX=' [asan+ubsan]'

san_env() {
	local src name
	SAN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rshare-san.XXXXXX") || return
	mkdir -p "$SAN_DIR/log" "$SAN_DIR/seen"
	# shellcheck disable=SC2064
	trap "rm -rf '$SAN_DIR'" EXIT
	echo detect_leaks=1 >"$SAN_DIR/rshared.asan"
	for src in tests/*.c; do
		name=$(basename "$src" .c)
		[[ " ${PROGRAMS[*]} " == *" $name "* ]] && continue
		echo detect_leaks=1 >"$SAN_DIR/$name.asan"
	done
	export ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0:log_path=$SAN_DIR/log/asan:log_exe_name=1:include_if_exists=$SAN_DIR/%b.asan"
	export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
	unset LSAN_OPTIONS
}

# san_check WHAT: the reports written since the last check, each a failure.
san_check() {
	((SAN_PASS)) || return 0
	local f base
	for f in "$SAN_DIR"/log/*; do
		[[ -f $f ]] || continue
		base=${f##*/}
		base=${base#*.}
		if grep -qE 'ERROR: |runtime error:|SUMMARY: ' "$f"; then
			echo "not ok - $1: sanitizer report of ${base%.*} (pid ${base##*.})"
			fail=$((fail + 1))
		else
			echo "# $1: sanitizer output of ${base%.*} (pid ${base##*.})"
		fi
		grep -v '^$' "$f" | head -n 80 | sed 's/^/#   /'
		mv "$f" "$SAN_DIR/seen/"
	done
}

# san_files: the bats files of the pass, tests/*.bats less tests/san/exclude
san_files() {
	local f
	for f in tests/*.bats; do
		grep -qxF "$(basename "$f")" <(sed 's/[[:space:]]*#.*//' tests/san/exclude) || echo "$f"
	done
}

# san_pass [BATS-FILES]: in tests/run, after the whole suite (no files):
# build build-san/, run the pass, add its counts to pass, fail and skip.
san_pass() {
	local files=() start=$SECONDS log c rc p n s
	if ((SAN_PASS)); then
		return 0
	fi
	if [[ ${RSHARE_NO_SAN:-0} == 1 ]]; then
		echo "ok - sanitizer pass # skip RSHARE_NO_SAN=1"
		skip=$((skip + 1))
		return 0
	fi
	if (($# > 0)); then
		files=("$@")
	else
		mapfile -t files < <(san_files)
	fi
	echo "# sanitizer pass: make SAN=1 (build-san/), then the unit tests and ${#files[@]} bats files on it"
	log=$(mktemp)
	# a compile per core, and nothing of an outer make's flags
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -j"$(nproc)" SAN=1 all >"$log" 2>&1
	rc=$?
	if ((rc != 0)); then
		echo "not ok - make SAN=1$SAN_SUFFIX (exit $rc)"
		tail -n 30 "$log" | sed 's/^/#   /'
		fail=$((fail + 1))
		rm -f "$log"
		return 0
	fi
	echo "# build-san built in $((SECONDS - start)) s"
	RSHARE_SAN_PASS=1 RSHARE_BUILD=build-san bash tests/run "${files[@]}" 2>&1 |
		sed -u -E -e "s/^((not )?ok( [0-9]+)? .*[^ ])( # skip.*)$/\1$SAN_SUFFIX\4/;t" \
			-e "s/^((not )?ok( [0-9]+)? .*[^ ])$/\1$SAN_SUFFIX/" \
			-e "s/^([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/# sanitizer pass: &/" | tee "$log"
	c=$(sed -nE 's/^# sanitizer pass: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/p' "$log" | tail -n 1)
	if [[ -z $c ]]; then
		echo "not ok - sanitizer pass$SAN_SUFFIX (it printed no counts)"
		fail=$((fail + 1))
	else
		read -r p n s <<<"$c"
		pass=$((pass + p))
		fail=$((fail + n))
		skip=$((skip + s))
	fi
	rm -f "$log"
	echo "# sanitizer pass took $((SECONDS - start)) s"
}

if ((SAN_PASS)); then
	san_env
fi
