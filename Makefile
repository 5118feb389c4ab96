# rshare: make builds everything into build/; make test runs every test.
CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -Wall -Wextra -Werror -std=gnu11 -fPIC -D_GNU_SOURCE -pthread -Icore
LDLIBS  += -pthread
B       := build
SAN     ?=
TSAN    ?=
ifeq ($(SAN)$(TSAN),11)
$(error SAN=1 and TSAN=1 do not mix: ASan and TSan are separate builds)
endif
ifeq ($(SAN),1)
B       := build-san
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif
# TSAN=1: ThreadSanitizer (-fsanitize=thread) into build-tsan/
ifeq ($(TSAN),1)
B       := build-tsan
CFLAGS  += -O1 -g -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS += -fsanitize=thread
endif

CORE_SRC := $(wildcard core/*.c)
CORE_OBJ := $(patsubst core/%.c,$(B)/core/%.o,$(CORE_SRC))
PRE_OBJ  := $(patsubst preload/%.c,$(B)/preload/%.o,$(wildcard preload/*.c))
TEST_SRC := $(wildcard tests/*.c)
TEST_BIN := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))

all: $(B)/librshare.so $(B)/rshared $(B)/rshare $(TEST_BIN)

$(B)/core/%.o: core/%.c $(wildcard core/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<
$(B)/preload/%.o: preload/%.c $(wildcard core/*.h preload/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<
$(B)/tools/%.o: tools/%.c $(wildcard core/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(B)/libcore.a: $(CORE_OBJ)
	ar rcs $@ $^

$(B)/librshare.so: $(PRE_OBJ) $(B)/libcore.a
	$(CC) -shared $(LDFLAGS) -o $@ $(PRE_OBJ) $(B)/libcore.a -ldl $(LDLIBS)

$(B)/rshared: $(B)/tools/rshared.o $(B)/libcore.a
	$(CC) $(LDFLAGS) -o $@ $^ -libverbs -lrdmacm -lunwind $(LDLIBS)

$(B)/rshare: $(B)/tools/rshare.o $(B)/libcore.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/%: tests/%.c $(B)/libcore.a $(wildcard tests/*.h core/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(B)/libcore.a $(LDLIBS)

# installs what is missing first (tools/deps.sh: apt-get, as root)
test:
	bash tools/deps.sh
	$(MAKE) all
	bash tests/run

clean:
	rm -rf build build-san build-tsan

.PHONY: all test clean

# build-san/ alone; and the sanitizer pass of make test alone (tests/san/run:
# make SAN=1, then the unit tests and bats files on build-san/)
san:
	$(MAKE) SAN=1 all
test-san:
	bash tests/san/run
# build-tsan/ alone (make TSAN=1); make test builds what it needs of it and
# runs threaded programs there in tests/threads-race-free-under-tsan.bats
tsan:
	$(MAKE) TSAN=1 all

.PHONY: san test-san tsan

# ---- install: make install [PREFIX=/usr/local] [DESTDIR=] ----
# The library goes to a private directory, $(PREFIX)/lib/rshare: it is
# preloaded by path (rshare run), never linked; from there it starts the
# hub as ../../sbin/rshared, and rshare finds it as ../lib/rshare.
VERSION    := 0.1
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBDIR     ?= $(PREFIX)/lib
PKGLIBDIR  := $(LIBDIR)/rshare
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/rshare
UNITDIR    ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
PCDIR      ?= $(LIBDIR)/pkgconfig
INSTALL    ?= install
MAN_PAGES  := $(wildcard man/*.[1-8])

INSTALLED := $(BINDIR)/rshare $(SBINDIR)/rshared $(PKGLIBDIR)/librshare.so \
	$(PCDIR)/rshare.pc $(UNITDIR)/rshared.service $(BASHCOMPDIR)/rshare \
	$(DOCDIR)/rshare.conf.example $(DOCDIR)/README.md \
	$(foreach m,$(MAN_PAGES),$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)))

install: $(B)/librshare.so $(B)/rshared $(B)/rshare
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(PKGLIBDIR) \
		$(DESTDIR)$(PCDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(DOCDIR) \
		$(addprefix $(DESTDIR)$(MANDIR)/man,1 5 7 8)
	$(INSTALL) -m 755 $(B)/rshare $(DESTDIR)$(BINDIR)/rshare
	$(INSTALL) -m 755 $(B)/rshared $(DESTDIR)$(SBINDIR)/rshared
	$(INSTALL) -m 755 $(B)/librshare.so $(DESTDIR)$(PKGLIBDIR)/librshare.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(PKGLIBDIR)|g' -e 's|@SBINDIR@|$(SBINDIR)|g' \
		-e 's|@VERSION@|$(VERSION)|g' tools/rshare.pc.in >$(DESTDIR)$(PCDIR)/rshare.pc
	chmod 644 $(DESTDIR)$(PCDIR)/rshare.pc
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' tools/rshared.service >$(DESTDIR)$(UNITDIR)/rshared.service
	chmod 644 $(DESTDIR)$(UNITDIR)/rshared.service
	$(INSTALL) -m 644 tools/rshare.bash-completion $(DESTDIR)$(BASHCOMPDIR)/rshare
	$(INSTALL) -m 644 tools/rshare.conf.example README.md $(DESTDIR)$(DOCDIR)/
	for m in $(MAN_PAGES); do \
		s=$${m##*.}; $(INSTALL) -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/ || exit 1; \
	done

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(DOCDIR) 2>/dev/null

.PHONY: install uninstall

# ---- fuzz: make fuzz [FUZZ_SECS=300] (libFuzzer, clang; see tests/fuzz/*.c) ----
# The core is compiled again by clang with the fuzzer's coverage and
# ASan/UBSan into build/fuzz/core (build/libcore.a is gcc's).  Each target
# runs FUZZ_SECS seconds from tests/fuzz/corpus/<target>/; what it finds new
# goes to build/fuzz/corpus/<target>/ (a scratch corpus, listed first, so the
# checked-in one never grows), crashes to build/fuzz/crash-<target>-*.
FUZZ_CC      ?= clang
FUZZ_SECS    ?= 300
FUZZ_B       := build/fuzz
FUZZ_CFLAGS  := -O1 -g -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE -pthread -Icore -Wall -Wextra \
	-fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz-*.c)
FUZZ_BIN     := $(patsubst tests/fuzz/%.c,$(FUZZ_B)/%,$(FUZZ_SRC))
FUZZ_CORE    := $(patsubst core/%.c,$(FUZZ_B)/core/%.o,$(CORE_SRC))
# Comparison tracing costs the hub's scans of every socket id (hub_link_up,
# hub_link_gone: 2^20 each) 10x: edge coverage only, except in the decoders.
FUZZ_COV     := -fno-sanitize-coverage=trace-cmp
$(FUZZ_B)/core/frame.o: FUZZ_COV :=

$(FUZZ_B)/core/%.o: core/%.c $(wildcard core/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_COV) -c -o $@ $<
$(FUZZ_B)/fuzz-%: tests/fuzz/fuzz-%.c $(FUZZ_CORE) $(wildcard tests/fuzz/*.h core/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_CORE) -libverbs -lrdmacm -lunwind -pthread

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@fail=0; for t in $(FUZZ_BIN); do n=$${t##*/}; \
		rm -rf $(FUZZ_B)/corpus/$$n; mkdir -p $(FUZZ_B)/corpus/$$n; \
		echo "== $$n: $(FUZZ_SECS) s"; \
		$$t -max_total_time=$(FUZZ_SECS) -print_final_stats=1 -artifact_prefix=$(FUZZ_B)/crash-$$n- \
			$(FUZZ_B)/corpus/$$n tests/fuzz/corpus/$$n >$(FUZZ_B)/$$n.log 2>&1 || { fail=1; \
			echo "$$n: FAILED, see $(FUZZ_B)/$$n.log"; tail -n 40 $(FUZZ_B)/$$n.log; }; \
		echo "$$n: $$(grep -h 'stat::number_of_executed_units' $(FUZZ_B)/$$n.log | tr -s ' ')"; \
	done; exit $$fail

.PHONY: fuzz fuzz-build

# the soak (tests/soak.sh): 64 processes, 2000 connections, random worker
# kills, every byte checked, the hubs' RSS watched; SOAK_SECS etc. tune it
soak: all
	bash tests/soak.sh

.PHONY: soak
