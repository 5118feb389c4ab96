# rshare: make builds everything into build/; make test runs every test.
CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -Wall -Wextra -Werror -std=gnu11 -fPIC -D_GNU_SOURCE -pthread -MMD -MP
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

# core/ is one folder per place its code runs (see README.md, "Layout"):
#   shared/  both sides: addresses, rings, arena layout, tags, frames, config, log
#   proc/    inside the application's process (librshare.so)
#   hub/     inside the hub (rshared)
#   xport/   the transports, driven by the hub
# Each folder is one static library, compiled with only the headers its side
# may see: a header of the other side is not on its include path.
INC_shared := -Icore/shared
INC_proc   := -Icore/shared -Icore/proc
INC_xport  := -Icore/shared -Icore/xport
INC_hub    := -Icore/shared -Icore/xport -Icore/hub
INC_all    := -Icore/shared -Icore/proc -Icore/xport -Icore/hub
SIDES      := shared proc xport hub
side_src    = $(wildcard core/$(1)/*.c)
side_obj    = $(patsubst core/%.c,$(B)/core/%.o,$(call side_src,$(1)))
CORE_SRC   := $(foreach s,$(SIDES),$(call side_src,$(s)))
CORE_OBJ   := $(foreach s,$(SIDES),$(call side_obj,$(s)))
PRE_OBJ    := $(patsubst preload/%.c,$(B)/preload/%.o,$(wildcard preload/*.c))
# the command: rshare.c (main) and one file per command, json.c its reader
RSHARE_CMD_OBJ := $(patsubst tools/%.c,$(B)/tools/%.o,tools/rshare.c tools/cmd_run.c tools/cmd_stat.c \
	tools/cmd_hub.c tools/json.c)
TOOL_OBJ   := $(RSHARE_CMD_OBJ) $(B)/tools/rshared.o
TEST_SRC   := $(wildcard tests/*.c)
TEST_BIN   := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
LIB_PROC   := $(B)/core/libproc.a $(B)/core/libshared.a
LIB_HUB    := $(B)/core/libhub.a $(B)/core/libxport.a $(B)/core/libshared.a

all: $(B)/librshare.so $(B)/rshared $(B)/rshare $(TEST_BIN)

# the hub's records as a restart hands them over (core/hub/image.c): only a
# hub built from the same definitions reads them
# (and speaks the same wire version: frame.h)
HUB_LAYOUT := $(shell cat core/hub/hub.h core/hub/image.c core/hub/arena_alloc.c core/shared/arena.h \
	core/shared/ring.h core/shared/addr.h core/shared/frame.h core/xport/xport.h core/xport/soft.h | cksum | cut -d' ' -f1)
$(B)/core/hub/image.o: CFLAGS += -DHUB_LAYOUT=$(HUB_LAYOUT)ULL

# build/core/<side>/x.o: compiled with that side's include path
$(B)/core/%.o: core/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_$(firstword $(subst /, ,$*))) -c -o $@ $<
$(B)/preload/%.o: preload/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ipreload $(INC_proc) -c -o $@ $<
$(B)/tools/rshared.o: INC_TOOL := $(INC_hub)
$(B)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools $(or $(INC_TOOL),$(INC_proc)) -c -o $@ $<

$(foreach s,$(SIDES),$(eval $(B)/core/lib$(s).a: $(call side_obj,$(s))))
$(B)/core/lib%.a:
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/librshare.so: $(PRE_OBJ) $(LIB_PROC)
	$(CC) -shared $(LDFLAGS) -o $@ $(PRE_OBJ) $(LIB_PROC) -ldl $(LDLIBS)

$(B)/rshared: $(B)/tools/rshared.o $(LIB_HUB)
	$(CC) $(LDFLAGS) -o $@ $^ -libverbs -lrdmacm -lunwind $(LDLIBS)

$(B)/rshare: $(RSHARE_CMD_OBJ) $(LIB_PROC)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# tests see every side; each links only what it calls
# nonblocking-and-readiness: main and harness here, its peer and checks in tests/readiness/
# (gcc -MMD writes one $(B)/tests/nonblocking-and-readiness.d, included below with
# the other tests'; the headers are named too, as it holds the last source's)
READINESS_SRC := tests/nonblocking-and-readiness.c $(wildcard tests/readiness/*.c)
$(B)/tests/nonblocking-and-readiness: $(READINESS_SRC) tests/readiness/readiness.h tests/helpers.h \
		$(B)/core/libhub.a $(B)/core/libxport.a $(LIB_PROC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Itests/readiness $(INC_all) $(LDFLAGS) -o $@ $(READINESS_SRC) $(B)/core/libhub.a \
		$(B)/core/libxport.a $(LIB_PROC) $(LDLIBS)
# its socket I/O is io_uring's (tools/deps.sh installs liburing-dev)
$(B)/tests/uring-echo-server: LDLIBS += -luring
# a whole hub, as rshared links it (its fake verbs transport beside the real one)
$(B)/tests/ring-shrink-credits-what-the-reader-took $(B)/tests/slot-reuse-gets-a-new-generation \
		$(B)/tests/slot-reuse-forgets-the-placed-tail: \
	LDLIBS += -libverbs -lrdmacm -lunwind
$(B)/tests/%: tests/%.c $(B)/core/libhub.a $(B)/core/libxport.a $(LIB_PROC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(INC_all) $(LDFLAGS) -o $@ $< $(B)/core/libhub.a $(B)/core/libxport.a \
		$(LIB_PROC) $(LDLIBS)

-include $(CORE_OBJ:.o=.d) $(PRE_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_BIN:=.d)

# installs what is missing first (tools/deps.sh: apt-get, as root)
test:
	bash tools/deps.sh
	$(MAKE) -j$$(nproc) all
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
FUZZ_CFLAGS  := -MMD -MP -O1 -g -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE -pthread $(INC_all) -Wall -Wextra \
	-fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz-*.c)
FUZZ_BIN     := $(patsubst tests/fuzz/%.c,$(FUZZ_B)/%,$(FUZZ_SRC))
FUZZ_CORE    := $(patsubst core/%.c,$(FUZZ_B)/core/%.o,$(CORE_SRC))
# Comparison tracing costs the hub's scans of every socket id (hub_link_up,
# hub_link_gone: 2^20 each) 10x: edge coverage only, except in the decoders.
FUZZ_COV     := -fno-sanitize-coverage=trace-cmp
$(FUZZ_B)/core/shared/frame.o: FUZZ_COV :=

$(FUZZ_B)/core/%.o: core/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_COV) -c -o $@ $<
$(FUZZ_B)/fuzz-%: tests/fuzz/fuzz-%.c $(FUZZ_CORE) $(wildcard tests/fuzz/*.h core/*/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_CORE) -libverbs -lrdmacm -lunwind -pthread

fuzz-build: $(FUZZ_BIN)
-include $(FUZZ_CORE:.o=.d) $(FUZZ_BIN:=.d)

# ... then the differential test against kernel TCP as long (tests/diff/run.sh)
fuzz: fuzz-build all
	@fail=0; for t in $(FUZZ_BIN); do n=$${t##*/}; \
		rm -rf $(FUZZ_B)/corpus/$$n; mkdir -p $(FUZZ_B)/corpus/$$n; \
		echo "== $$n: $(FUZZ_SECS) s"; \
		$$t -max_total_time=$(FUZZ_SECS) -print_final_stats=1 -artifact_prefix=$(FUZZ_B)/crash-$$n- \
			$(FUZZ_B)/corpus/$$n tests/fuzz/corpus/$$n >$(FUZZ_B)/$$n.log 2>&1 || { fail=1; \
			echo "$$n: FAILED, see $(FUZZ_B)/$$n.log"; tail -n 40 $(FUZZ_B)/$$n.log; }; \
		echo "$$n: $$(grep -h 'stat::number_of_executed_units' $(FUZZ_B)/$$n.log | tr -s ' ')"; \
	done; echo "== differential: $(FUZZ_SECS) s"; bash tests/diff/run.sh $(FUZZ_SECS) || fail=1; exit $$fail

.PHONY: fuzz fuzz-build

# the soak (tests/soak.sh): 64 processes, 2000 connections, random worker
# kills, every byte checked, the hubs' RSS watched; SOAK_SECS etc. tune it
soak: all
	bash tests/soak.sh

.PHONY: soak
