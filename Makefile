# rshare: make builds everything into build/; make test runs every test.
CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -Wall -Wextra -Werror -std=gnu11 -fPIC -D_GNU_SOURCE -pthread -Icore
LDLIBS  += -pthread
B       := build
SAN     ?=
ifeq ($(SAN),1)
B       := build-san
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
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
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/rshare: $(B)/tools/rshare.o $(B)/libcore.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/%: tests/%.c $(B)/libcore.a $(wildcard tests/*.h core/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(B)/libcore.a $(LDLIBS)

test: all
	bash tests/run

clean:
	rm -rf build build-san

.PHONY: all test clean
