# simba -- build, tests, benchmarks. `make help` lists the targets.
CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=c99 -Wall -Wextra -Werror -pedantic
INC     := -I. -I/usr/include/hiredis -I/usr/include/mariadb -I/usr/include/zookeeper
B       := build
PREFIX  ?= /usr/local

REDIS_LIBS := -lhiredis
MYSQL_LIBS := -lmariadb
ZK_LIBS    := -lzookeeper_st

HDR_CORE  := simba.h
TEST_DEPS := tests/harness.h tests/conformance.h tests/conformance.c $(HDR_CORE)

.PHONY: all examples bench test test-mem test-redis test-mysql test-zk test-compile \
        asan asan-mem asan-sim asan-backends asan-redis asan-mysql asan-zk valgrind valgrind-mem valgrind-sim deps install clean help bench-mem bench-redis bench-mysql bench-zk demo \
        chaos chaos-ci

all: examples bench

help:
	@echo "make            examples and benchmarks"
	@echo "make demo       leader election on the in-memory backend (no server needed)"
	@echo "make test       every test suite (starts its own servers on 127.0.0.1)"
	@echo "make test-mem | test-redis | test-mysql | test-zk | test-compile"
	@echo "make asan       the mem suites under ASan+UBSan; make valgrind: under valgrind"
	@echo "make asan-backends | asan-redis | asan-mysql | asan-zk: the backend suites under ASan+UBSan"
	@echo "make bench-mem | bench-redis | bench-mysql | bench-zk"
	@echo "make chaos      real servers + client processes under faults, checked (CHAOS_SECONDS=120 per backend)"
	@echo "make chaos-ci   the same, short (one round of every fault, 30 s or more per backend)"
	@echo "make deps       apt-get install what building and the servers need (root)"
	@echo "make install PREFIX=/usr/local"

$(B):
	@mkdir -p $(B)

# ---- examples ----
EXAMPLES := $(B)/leader_poll $(B)/semaphore_pool $(B)/epoll_loop
examples: $(EXAMPLES)
$(B)/%: examples/%.c $(HDR_CORE) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ $< $(LDFLAGS)
demo: $(B)/leader_poll
	./$(B)/leader_poll

# ---- tests ----
$(B)/test_mem: tests/test_mem.c $(TEST_DEPS) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ tests/test_mem.c tests/conformance.c $(LDFLAGS)
$(B)/test_sim: tests/test_sim.c tests/harness.h $(HDR_CORE) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ tests/test_sim.c $(LDFLAGS)
$(B)/test_redis: tests/test_redis.c $(TEST_DEPS) simba_redis.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ tests/test_redis.c tests/conformance.c $(REDIS_LIBS) $(LDFLAGS)
$(B)/test_mysql: tests/test_mysql.c $(TEST_DEPS) simba_mysql.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ tests/test_mysql.c tests/conformance.c $(MYSQL_LIBS) $(LDFLAGS)
$(B)/test_zk: tests/test_zk.c $(TEST_DEPS) simba_zk.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ tests/test_zk.c tests/conformance.c $(ZK_LIBS) $(LDFLAGS)
# A user-space TCP proxy that can freeze its links (network partitions in tests).
$(B)/tcp_proxy: tests/tools/tcp_proxy.c | $(B)
	$(CC) $(WARN) $(CFLAGS) -o $@ tests/tools/tcp_proxy.c $(LDFLAGS)

test-mem: $(B)/test_mem $(B)/test_sim
	./$(B)/test_mem
	./$(B)/test_sim
test-redis: $(B)/test_redis
	tests/servers/redis.sh run ./$(B)/test_redis
test-mysql: $(B)/test_mysql
	tests/servers/mysql.sh run ./$(B)/test_mysql
test-zk: $(B)/test_zk $(B)/tcp_proxy
	SIMBA_ZK_PROXY=./$(B)/tcp_proxy tests/servers/zk.sh run ./$(B)/test_zk
test-compile:
	tests/compile_matrix.sh

# Everything available; the last line is the total "N passed, N failed".
test:
	tests/run_all.sh

# ASan+UBSan builds live in build/asan so they never mix with the normal ones.
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
$(B)/asan/test_mem: tests/test_mem.c $(TEST_DEPS)
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) -o $@ tests/test_mem.c tests/conformance.c
$(B)/asan/test_sim: tests/test_sim.c tests/harness.h $(HDR_CORE)
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) -o $@ tests/test_sim.c
$(B)/asan/test_redis: tests/test_redis.c $(TEST_DEPS) simba_redis.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) -o $@ tests/test_redis.c tests/conformance.c $(REDIS_LIBS)
$(B)/asan/test_mysql: tests/test_mysql.c $(TEST_DEPS) simba_mysql.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) -o $@ tests/test_mysql.c tests/conformance.c $(MYSQL_LIBS)
$(B)/asan/test_zk: tests/test_zk.c $(TEST_DEPS) simba_zk.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) -o $@ tests/test_zk.c tests/conformance.c $(ZK_LIBS)
asan: asan-mem asan-sim
asan-backends: asan-redis asan-mysql asan-zk
asan-redis: $(B)/asan/test_redis
	ASAN_OPTIONS=detect_leaks=1 tests/servers/redis.sh run ./$(B)/asan/test_redis
asan-mysql: $(B)/asan/test_mysql
	ASAN_OPTIONS=detect_leaks=1 tests/servers/mysql.sh run ./$(B)/asan/test_mysql
asan-zk: $(B)/asan/test_zk $(B)/tcp_proxy
	ASAN_OPTIONS=detect_leaks=1 SIMBA_ZK_PROXY=./$(B)/tcp_proxy tests/servers/zk.sh run ./$(B)/asan/test_zk
asan-mem: $(B)/asan/test_mem
	ASAN_OPTIONS=detect_leaks=1 ./$(B)/asan/test_mem
asan-sim: $(B)/asan/test_sim
	ASAN_OPTIONS=detect_leaks=1 ./$(B)/asan/test_sim --quick

VALGRIND := valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite,indirect
valgrind: valgrind-mem valgrind-sim
valgrind-mem: $(B)/test_mem
	$(VALGRIND) ./$(B)/test_mem
valgrind-sim: $(B)/test_sim
	$(VALGRIND) ./$(B)/test_sim --quick

# ---- chaos: real server and client processes under faults (tests/chaos/) ----
CHAOS_SECONDS ?= 120
$(B)/chaos_client: tests/chaos/chaos_client.c $(HDR_CORE) simba_redis.h simba_mysql.h simba_zk.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ tests/chaos/chaos_client.c $(REDIS_LIBS) $(MYSQL_LIBS) $(ZK_LIBS) $(LDFLAGS)
$(B)/asan/chaos_client: tests/chaos/chaos_client.c $(HDR_CORE) simba_redis.h simba_mysql.h simba_zk.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) -o $@ tests/chaos/chaos_client.c $(REDIS_LIBS) $(MYSQL_LIBS) $(ZK_LIBS)
chaos: $(B)/chaos_client $(B)/tcp_proxy
	tests/chaos/all.sh $(CHAOS_SECONDS)
chaos-ci: $(B)/chaos_client $(B)/tcp_proxy
	tests/chaos/all.sh 30

# ---- benchmarks (programs that print ratios, not tests) ----
BENCH := $(B)/bench_mem
bench: $(BENCH)
$(B)/bench_mem: bench/bench_mem.c bench/bench_util.h $(HDR_CORE) | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(LDFLAGS)
$(B)/bench_redis: bench/bench_redis.c bench/bench_util.h $(HDR_CORE) simba_redis.h | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(REDIS_LIBS) $(LDFLAGS)
$(B)/bench_mysql: bench/bench_mysql.c bench/bench_util.h $(HDR_CORE) simba_mysql.h | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(MYSQL_LIBS) $(LDFLAGS)
$(B)/bench_zk: bench/bench_zk.c bench/bench_util.h $(HDR_CORE) simba_zk.h | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(ZK_LIBS) $(LDFLAGS)
bench-mem: $(B)/bench_mem
	./$(B)/bench_mem
bench-redis: $(B)/bench_redis
	tests/servers/redis.sh run ./$(B)/bench_redis
bench-mysql: $(B)/bench_mysql
	tests/servers/mysql.sh run ./$(B)/bench_mysql
bench-zk: $(B)/bench_zk
	tests/servers/zk.sh run ./$(B)/bench_zk

# ---- setup and install ----
DEPS := build-essential clang pkg-config valgrind libhiredis-dev redis-server \
        libmariadb-dev mariadb-server libzookeeper-st-dev zookeeper default-jre-headless \
        python3 iproute2
deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEPS)

install:
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 simba.h simba_redis.h simba_mysql.h simba_zk.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(PREFIX)/share/simba
	install -m 644 simba_mysql.sql $(DESTDIR)$(PREFIX)/share/simba/
	sed -e 's|@PREFIX@|$(PREFIX)|' simba.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/simba.pc

clean:
	rm -rf $(B)
