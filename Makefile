# simba -- build, tests, benchmarks. `make help` lists the targets.
CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=c99 -Wall -Wextra -Werror -pedantic
INC     := -I. -I/usr/include/hiredis -I/usr/include/mariadb -I/usr/include/zookeeper -I/usr/include/postgresql
B       := build
PREFIX  ?= /usr/local

REDIS_LIBS := -lhiredis
MYSQL_LIBS := -lmariadb
ZK_LIBS    := -lzookeeper_st
PG_LIBS    := -lpq
SQLITE_LIBS := -lsqlite3

# test and fuzz builds never send a name to a DNS resolver (simba_backend_resolve)
TEST_DEFS := -DSIMBA_NO_DNS
HDR_CORE  := simba.h simba_mem.h simba_url.h
TEST_DEPS := tests/harness.h tests/conformance.h tests/conformance.c $(HDR_CORE) tests/fake_server.h tests/zk_mntr.h

.PHONY: loop-examples test-loop test-loop-mem test-loop-redis test-loop-mysql test-loop-zk bench-loop
.PHONY: all examples bench test test-mem test-redis test-mysql test-zk test-sqlite test-sqlite-nowatch test-pg test-compile compile-programs \
        asan asan-mem asan-sim asan-backends asan-redis asan-mysql asan-zk asan-sqlite asan-pg bench-pg valgrind valgrind-mem valgrind-sim valgrind-sqlite valgrind-pg deps install clean help bench-mem bench-redis bench-mysql bench-zk bench-sqlite demo \
        chaos chaos-ci sim-long

all: examples bench cli

help:
	@echo "make            examples and benchmarks"
	@echo "make demo       leader election on the in-memory backend (no server needed)"
	@echo "make test       every test suite (starts its own servers on 127.0.0.1)"
	@echo "make test-mem | test-redis | test-mysql | test-zk | test-sqlite | test-sqlite-nowatch | test-pg | test-compile"
	@echo "make compile-programs   every test, bench, the CLI and examples with gcc and clang at every -O level"
	@echo "make test-loop  the adapters (epoll, libevent, libuv) with every backend; test-loop-mem|redis|mysql|zk"
	@echo "make sim-long   the seeded simulation over SIM_SEEDS schedules per profile (50000), from SIM_FIRST"
	@echo "make asan       the mem suites under ASan+UBSan; make valgrind: under valgrind (valgrind-sqlite, valgrind-pg: those suites)"
	@echo "make asan-backends | asan-redis | asan-mysql | asan-zk | asan-sqlite | asan-pg: the backend suites under ASan+UBSan"
	@echo "make chaos      real servers + client processes under faults, checked (CHAOS_SECONDS=120 per backend)"
	@echo "make chaos-ci   the same, short (one round of every fault, 30 s or more per backend)"
	@echo "make fuzz       libFuzzer harnesses, FUZZ_SECONDS each (300); fuzz-ci: 40 s each"
	@echo "make test-redis-cluster | asan-redis-cluster | bench-redis-cluster   Redis Cluster (3 masters + 3 replicas)"
	@echo "make bench-mem | bench-redis | bench-mysql | bench-zk | bench-sqlite | bench-pg | bench-loop"
	@echo "make bench-scale | test-scale   cost as the queue grows, with peers (issue #15); its acceptance test (fails until #15 is done)"
	@echo "make deps       apt-get install what building and the servers need (root)"
	@echo "make install PREFIX=/usr/local"
	@echo "make cli | test-cli | bench-cli | fuzz-url   the simba command-line tool, its tests, its figure, the URL fuzzer"

$(B):
	@mkdir -p $(B)

# ---- examples ----
EXAMPLES := $(B)/leader_poll $(B)/semaphore_pool $(B)/epoll_loop
examples: $(EXAMPLES) loop-examples
$(B)/%: examples/%.c $(HDR_CORE) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ $< $(LDFLAGS)
# services that hold a lock on their own loop through adapters/ (push mode)
LOOP_EXAMPLES := $(B)/epoll_service $(B)/libevent_service $(B)/libuv_service
loop-examples: $(LOOP_EXAMPLES)
$(B)/epoll_service $(B)/libevent_service $(B)/libuv_service: $(B)/%: examples/%.c $(HDR_CORE) adapters/simba_epoll.h adapters/simba_libevent.h adapters/simba_libuv.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ $< -levent -luv $(LDFLAGS)
demo: $(B)/leader_poll
	./$(B)/leader_poll

# ---- tests ----
$(B)/test_mem: tests/test_mem.c $(TEST_DEPS) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_mem.c tests/conformance.c $(LDFLAGS)
$(B)/test_sim: tests/test_sim.c tests/harness.h $(HDR_CORE) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_sim.c $(LDFLAGS)
$(B)/test_redis: tests/test_redis.c $(TEST_DEPS) simba_redis.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_redis.c tests/conformance.c $(REDIS_LIBS) $(LDFLAGS)
$(B)/test_redis_sentinel: tests/test_redis_sentinel.c $(TEST_DEPS) simba_redis.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_redis_sentinel.c tests/conformance.c $(REDIS_LIBS) $(LDFLAGS)
$(B)/test_mysql: tests/test_mysql.c $(TEST_DEPS) simba_mysql.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_mysql.c tests/conformance.c $(MYSQL_LIBS) $(LDFLAGS)
$(B)/test_zk: tests/test_zk.c $(TEST_DEPS) simba_zk.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_zk.c tests/conformance.c $(ZK_LIBS) $(LDFLAGS)
$(B)/test_sqlite: tests/test_sqlite.c $(TEST_DEPS) simba_sqlite.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_sqlite.c tests/conformance.c $(SQLITE_LIBS) $(LDFLAGS)
# the same tests with no watch of the file (SIMBA_SQLITE_NO_INOTIFY): every acquire checks it
$(B)/test_sqlite_nowatch: tests/test_sqlite.c $(TEST_DEPS) simba_sqlite.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -DSIMBA_SQLITE_NO_INOTIFY -o $@ tests/test_sqlite.c tests/conformance.c $(SQLITE_LIBS) $(LDFLAGS)
# A user-space TCP proxy that can freeze its links (network partitions in tests).
$(B)/tcp_proxy: tests/tools/tcp_proxy.c | $(B)
	$(CC) $(WARN) $(CFLAGS) -o $@ tests/tools/tcp_proxy.c $(LDFLAGS)

test-mem: $(B)/test_mem $(B)/test_sim
	./$(B)/test_mem
	./$(B)/test_sim
test-redis: $(B)/test_redis
	tests/servers/redis.sh run ./$(B)/test_redis
.PHONY: test-redis-sentinel
test-redis-sentinel: $(B)/test_redis_sentinel
	tests/servers/redis.sh sentinel ./$(B)/test_redis_sentinel
$(B)/test_redis_cluster: tests/test_redis_cluster.c $(TEST_DEPS) simba_redis.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_redis_cluster.c tests/conformance.c $(REDIS_LIBS) $(LDFLAGS)
test-redis-cluster: $(B)/test_redis_cluster
	tests/servers/redis.sh cluster ./$(B)/test_redis_cluster
test-mysql: $(B)/test_mysql
	tests/servers/mysql.sh run ./$(B)/test_mysql
test-zk: $(B)/test_zk $(B)/tcp_proxy
	SIMBA_ZK_PROXY=./$(B)/tcp_proxy tests/servers/zk.sh run ./$(B)/test_zk
$(B)/test_pg: tests/test_pg.c $(TEST_DEPS) simba_pg.h simba_pg.sql | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_pg.c tests/conformance.c $(PG_LIBS) $(LDFLAGS)
test-pg: $(B)/test_pg
	tests/servers/pg.sh run ./$(B)/test_pg
# no server: the database is a file in a temporary directory of the test's own
test-sqlite: $(B)/test_sqlite
	./$(B)/test_sqlite
test-sqlite-nowatch: $(B)/test_sqlite_nowatch
	./$(B)/test_sqlite_nowatch t_sqlite_file_
test-compile:
	tests/compile_matrix.sh
# every program (tests, benches, CLI, examples) with gcc and clang at every -O level
compile-programs:
	tests/compile_programs.sh

# ---- loop integration: push-mode hooks through adapters/ (epoll, libevent, libuv) ----
LOOP_LIBS := -levent -luv
LOOP_DEPS := tests/test_loop.c tests/harness.h $(HDR_CORE) adapters/simba_epoll.h adapters/simba_libevent.h adapters/simba_libuv.h
$(B)/test_loop_mem: $(LOOP_DEPS) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_loop.c $(LOOP_LIBS) $(LDFLAGS)
$(B)/test_loop_redis: $(LOOP_DEPS) simba_redis.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -DLOOP_REDIS -o $@ tests/test_loop.c $(REDIS_LIBS) $(LOOP_LIBS) $(LDFLAGS)
$(B)/test_loop_mysql: $(LOOP_DEPS) simba_mysql.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -DLOOP_MYSQL -o $@ tests/test_loop.c $(MYSQL_LIBS) $(LOOP_LIBS) $(LDFLAGS)
$(B)/test_loop_zk: $(LOOP_DEPS) simba_zk.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -DLOOP_ZK -o $@ tests/test_loop.c $(ZK_LIBS) $(LOOP_LIBS) $(LDFLAGS)
test-loop: test-loop-mem test-loop-redis test-loop-mysql test-loop-zk
test-loop-mem: $(B)/test_loop_mem
	./$(B)/test_loop_mem
test-loop-redis: $(B)/test_loop_redis
	tests/servers/redis.sh run ./$(B)/test_loop_redis
test-loop-mysql: $(B)/test_loop_mysql
	tests/servers/mysql.sh run ./$(B)/test_loop_mysql
test-loop-zk: $(B)/test_loop_zk
	tests/servers/zk.sh run ./$(B)/test_loop_zk

# Every binary `make test` runs, built up front (tests/run_all.sh runs the
# suites in parallel lanes that then never build at once).
TEST_BINS := $(B)/test_mem $(B)/test_sim $(B)/asan/test_mem $(B)/asan/test_sim \
	$(B)/test_redis $(B)/test_mysql $(B)/test_zk $(B)/tcp_proxy $(B)/test_redis_sentinel \
	$(B)/test_redis_cluster $(B)/test_scale \
	$(B)/asan/test_redis $(B)/asan/test_mysql $(B)/asan/test_zk \
	$(B)/test_pg $(B)/asan/test_pg \
	$(B)/test_sqlite $(B)/asan/test_sqlite \
	$(B)/test_loop_mem $(B)/test_loop_redis $(B)/test_loop_mysql $(B)/test_loop_zk \
	$(EXAMPLES) $(LOOP_EXAMPLES) $(B)/simba $(B)/test_url $(B)/asan/test_url $(B)/fuzz/fuzz_url
.PHONY: test-build test-redis-cluster bench-redis-cluster asan-redis-cluster
test-build: $(TEST_BINS)
# Everything available; the last line is the total "N passed, N failed".
test:
	tests/run_all.sh

# ASan+UBSan builds live in build/asan so they never mix with the normal ones.
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
$(B)/asan/test_mem: tests/test_mem.c $(TEST_DEPS)
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_mem.c tests/conformance.c
$(B)/asan/test_sim: tests/test_sim.c tests/harness.h $(HDR_CORE)
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_sim.c
$(B)/asan/test_redis: tests/test_redis.c $(TEST_DEPS) simba_redis.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_redis.c tests/conformance.c $(REDIS_LIBS)
$(B)/asan/test_mysql: tests/test_mysql.c $(TEST_DEPS) simba_mysql.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_mysql.c tests/conformance.c $(MYSQL_LIBS)
$(B)/asan/test_zk: tests/test_zk.c $(TEST_DEPS) simba_zk.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_zk.c tests/conformance.c $(ZK_LIBS)
$(B)/asan/test_pg: tests/test_pg.c $(TEST_DEPS) simba_pg.h simba_pg.sql
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_pg.c tests/conformance.c $(PG_LIBS)
$(B)/asan/test_sqlite: tests/test_sqlite.c $(TEST_DEPS) simba_sqlite.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_sqlite.c tests/conformance.c $(SQLITE_LIBS)
asan: asan-mem asan-sim
asan-backends: asan-redis asan-mysql asan-zk asan-sqlite asan-pg
asan-sqlite: $(B)/asan/test_sqlite
	ASAN_OPTIONS=detect_leaks=1 ./$(B)/asan/test_sqlite
asan-redis: $(B)/asan/test_redis
	ASAN_OPTIONS=detect_leaks=1 tests/servers/redis.sh run ./$(B)/asan/test_redis
$(B)/asan/test_redis_sentinel: tests/test_redis_sentinel.c $(TEST_DEPS) simba_redis.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_redis_sentinel.c tests/conformance.c $(REDIS_LIBS)
.PHONY: asan-redis-sentinel
asan-redis-sentinel: $(B)/asan/test_redis_sentinel
	ASAN_OPTIONS=detect_leaks=1 tests/servers/redis.sh sentinel ./$(B)/asan/test_redis_sentinel
$(B)/asan/test_redis_cluster: tests/test_redis_cluster.c $(TEST_DEPS) simba_redis.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_redis_cluster.c tests/conformance.c $(REDIS_LIBS)
asan-redis-cluster: $(B)/asan/test_redis_cluster
	ASAN_OPTIONS=detect_leaks=1 tests/servers/redis.sh cluster ./$(B)/asan/test_redis_cluster
asan-mysql: $(B)/asan/test_mysql
	ASAN_OPTIONS=detect_leaks=1 tests/servers/mysql.sh run ./$(B)/asan/test_mysql
asan-zk: $(B)/asan/test_zk $(B)/tcp_proxy
	ASAN_OPTIONS=detect_leaks=1 SIMBA_ZK_PROXY=./$(B)/tcp_proxy tests/servers/zk.sh run ./$(B)/asan/test_zk
asan-pg: $(B)/asan/test_pg
	ASAN_OPTIONS=detect_leaks=1 tests/servers/pg.sh run ./$(B)/asan/test_pg
asan-mem: $(B)/asan/test_mem
	ASAN_OPTIONS=detect_leaks=1 ./$(B)/asan/test_mem
asan-sim: $(B)/asan/test_sim
	ASAN_OPTIONS=detect_leaks=1 ./$(B)/asan/test_sim --quick

VALGRIND := valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite,indirect
# the simulation over many more schedules than test-mem's 500 per profile
SIM_SEEDS ?= 50000
SIM_FIRST ?= 1
sim-long: $(B)/test_sim
	./$(B)/test_sim --first $(SIM_FIRST) --seeds $(SIM_SEEDS)
valgrind: valgrind-mem valgrind-sim
valgrind-mem: $(B)/test_mem
	$(VALGRIND) ./$(B)/test_mem
valgrind-sim: $(B)/test_sim
	$(VALGRIND) ./$(B)/test_sim --quick
# the SQLite suite (no server; its forked processes are checked too). Not in
# `make valgrind` nor tests/run_all.sh: it takes minutes
valgrind-sqlite: $(B)/test_sqlite
	$(VALGRIND) ./$(B)/test_sqlite
# the PostgreSQL suite against a pg.sh server, leases 4 x longer. Not in
# `make valgrind` nor tests/run_all.sh: it takes minutes
valgrind-pg: $(B)/test_pg
	SIMBA_TEST_SLOW=4 tests/servers/pg.sh run $(VALGRIND) --suppressions=tests/valgrind_pg.supp ./$(B)/test_pg

# ---- chaos: real server and client processes under faults (tests/chaos/) ----
CHAOS_SECONDS ?= 120
$(B)/chaos_client: tests/chaos/chaos_client.c $(HDR_CORE) simba_redis.h simba_mysql.h simba_zk.h simba_sqlite.h simba_pg.h | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/chaos/chaos_client.c $(REDIS_LIBS) $(MYSQL_LIBS) $(ZK_LIBS) $(SQLITE_LIBS) $(PG_LIBS) $(LDFLAGS)
$(B)/asan/chaos_client: tests/chaos/chaos_client.c $(HDR_CORE) simba_redis.h simba_mysql.h simba_zk.h simba_sqlite.h simba_pg.h
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/chaos/chaos_client.c $(REDIS_LIBS) $(MYSQL_LIBS) $(ZK_LIBS) $(SQLITE_LIBS) $(PG_LIBS)
chaos: $(B)/chaos_client $(B)/tcp_proxy
	tests/chaos/all.sh $(CHAOS_SECONDS)
chaos-ci: $(B)/chaos_client $(B)/tcp_proxy
	tests/chaos/all.sh 30
# ---- fuzzing: clang libFuzzer + ASan + UBSan (tests/fuzz/README.md) ----
.PHONY: fuzz fuzz-ci fuzz-build fuzz-merge
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
FUZZ_HARNESSES := mem parse redis url
FUZZ_SECONDS ?= 300
$(B)/fuzz/fuzz_mem: tests/fuzz/fuzz_mem.c tests/fuzz/fuzz_input.h $(HDR_CORE)
	@mkdir -p $(B)/fuzz
	clang $(WARN) $(FUZZ_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/fuzz/fuzz_mem.c
$(B)/fuzz/fuzz_parse: tests/fuzz/fuzz_parse.c tests/fuzz/fuzz_input.h $(HDR_CORE) simba_redis.h simba_mysql.h simba_zk.h
	@mkdir -p $(B)/fuzz
	clang $(WARN) $(FUZZ_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/fuzz/fuzz_parse.c $(REDIS_LIBS) $(MYSQL_LIBS) $(ZK_LIBS)
$(B)/fuzz/fuzz_redis: tests/fuzz/fuzz_redis.c tests/fuzz/fuzz_input.h $(HDR_CORE) simba_redis.h
	@mkdir -p $(B)/fuzz
	clang $(WARN) $(FUZZ_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/fuzz/fuzz_redis.c $(REDIS_LIBS)
fuzz-build: $(addprefix $(B)/fuzz/fuzz_,$(FUZZ_HARNESSES))
# each harness FUZZ_SECONDS (default 300); fuzz-ci: 40 s each (< 4 min in all), for CI
fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_HARNESSES)
fuzz-ci: fuzz-build
	tests/fuzz/run.sh 40 $(FUZZ_HARNESSES)
# fold what `make fuzz` found back into the kept corpus, minimized (a fresh
# set covering everything both had)
fuzz-merge: fuzz-build
	for h in $(FUZZ_HARNESSES); do rm -rf $(B)/fuzz/min-$$h; mkdir -p $(B)/fuzz/min-$$h tests/fuzz/corpus/$$h $(B)/fuzz/corpus-$$h; \
	  $(B)/fuzz/fuzz_$$h -merge=1 -max_len=1024 $(B)/fuzz/min-$$h tests/fuzz/corpus/$$h $(B)/fuzz/corpus-$$h >/dev/null 2>&1 || exit 1; \
	  rm -f tests/fuzz/corpus/$$h/*; cp $(B)/fuzz/min-$$h/* tests/fuzz/corpus/$$h/; done

# ---- benchmarks (programs that print ratios, not tests) ----
# Each bench-* target runs through bench/record.sh, which writes what it
# prints into its section of docs/bench.md with date, machine and commit
# (BENCH_RECORD=0: only print).
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
	bench/record.sh $@ './$(B)/bench_mem'
bench-redis: $(B)/bench_redis $(B)/bench_redis_cluster
	bench/record.sh $@ 'tests/servers/redis.sh run ./$(B)/bench_redis' \
	  'tests/servers/redis.sh sentinel ./$(B)/bench_redis' \
	  'tests/servers/redis.sh cluster tests/servers/redis.sh run ./$(B)/bench_redis_cluster'
.PHONY: bench-redis-sentinel
bench-redis-sentinel: $(B)/bench_redis
	bench/record.sh $@ 'tests/servers/redis.sh sentinel ./$(B)/bench_redis'
$(B)/bench_redis_cluster: bench/bench_redis_cluster.c bench/bench_util.h $(HDR_CORE) simba_redis.h | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -DSIMBA_NO_DNS -o $@ $< $(REDIS_LIBS) $(LDFLAGS)
bench-redis-cluster: $(B)/bench_redis_cluster
	bench/record.sh $@ 'tests/servers/redis.sh cluster tests/servers/redis.sh run ./$(B)/bench_redis_cluster'
bench-mysql: $(B)/bench_mysql
	bench/record.sh $@ 'tests/servers/mysql.sh run ./$(B)/bench_mysql'
$(B)/bench_sqlite: bench/bench_sqlite.c bench/bench_util.h $(HDR_CORE) simba_sqlite.h | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(SQLITE_LIBS) $(LDFLAGS)
# no server: the floors (a write transaction, flock, a datagram) and simba on
# one file; simba-net (every backend linked) shows what the loader would cost
bench-sqlite: $(B)/bench_sqlite $(B)/simba $(B)/simba-net
	bench/record.sh $@ 'SIMBA_CLI=./$(B)/simba SIMBA_CLI_NET=./$(B)/simba-net ./$(B)/bench_sqlite'
bench-zk: $(B)/bench_zk
	bench/record.sh $@ 'tests/servers/zk.sh run ./$(B)/bench_zk'
$(B)/bench_pg: bench/bench_pg.c bench/bench_util.h $(HDR_CORE) simba_pg.h | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(PG_LIBS) $(LDFLAGS)
bench-pg: $(B)/bench_pg
	bench/record.sh $@ 'tests/servers/pg.sh run ./$(B)/bench_pg'
# push mode: hand-off from a foreign callback vs the poll loop, idle wake-ups (Redis)
$(B)/bench_loop: bench/bench_loop.c bench/bench_util.h $(HDR_CORE) simba_redis.h adapters/simba_epoll.h adapters/simba_libevent.h adapters/simba_libuv.h | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(REDIS_LIBS) -levent -luv $(LDFLAGS)
bench-loop: $(B)/bench_loop
	bench/record.sh $@ 'tests/servers/redis.sh run ./$(B)/bench_loop'

# ---- issue #15: cost as the queue grows (bench/bench_scale.c, tests/test_scale.c) ----
# bench-scale: the figures for mem and each backend, with the peers (redis-py
# Lock, MySQL GET_LOCK, kazoo Lock: bench/peers/) in the same run; a few
# minutes (SIMBA_BENCH_QUICK=1: Q <= 100). test-scale: the acceptance test of
# #15 (tests/run_all.sh runs it per backend in its lane).
.PHONY: bench-scale test-scale
SCALE_LIBS := $(REDIS_LIBS) $(MYSQL_LIBS) $(ZK_LIBS)
SCALE_HDRS := $(HDR_CORE) simba_redis.h simba_mysql.h simba_zk.h bench/scale.h bench/bench_util.h tests/zk_mntr.h
$(B)/bench_scale: bench/bench_scale.c $(SCALE_HDRS) | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(SCALE_LIBS) $(LDFLAGS)
$(B)/test_scale: tests/test_scale.c tests/harness.h $(SCALE_HDRS) | $(B)
	$(CC) $(WARN) -O2 -g $(INC) $(TEST_DEFS) -o $@ $< $(SCALE_LIBS) $(LDFLAGS)
$(B)/peer_getlock: bench/peers/peer_getlock.c | $(B)
	$(CC) $(WARN) -O2 -g $(INC) -o $@ $< $(MYSQL_LIBS) -lpthread $(LDFLAGS)
bench-scale: $(B)/bench_scale $(B)/peer_getlock
	bench/record.sh $@ './$(B)/bench_scale mem' \
	  'tests/servers/redis.sh run ./$(B)/bench_scale redis' \
	  'SIMBA_MYSQL_MAX_CONNECTIONS=2600 SIMBA_SCALE_MYSQL_MAX_CLIENTS=1001 tests/servers/mysql.sh run ./$(B)/bench_scale mysql' \
	  'tests/servers/zk.sh run ./$(B)/bench_scale zk'
test-scale: $(B)/test_scale
	./$(B)/test_scale mem; r1=$$?; \
	tests/servers/redis.sh run ./$(B)/test_scale redis; r2=$$?; \
	tests/servers/mysql.sh run ./$(B)/test_scale mysql; r3=$$?; \
	tests/servers/zk.sh run ./$(B)/test_scale zk; r4=$$?; \
	echo "test-scale: mem $$r1, redis $$r2, mysql $$r3, zk $$r4 (0 = passed)"; \
	[ $$r1$$r2$$r3$$r4 = 0000 ]

# ---- the `simba` command-line tool and the URL syntax (issue #13) ----
# build/simba: the SQLite and mem backends, so that its start maps no network
# client library; it execs build/simba-net (every backend compiled in, next to
# it; installed in PREFIX/libexec/simba) for the other schemes. test-cli
# starts its own servers (tests/test_cli.sh). fuzz-url: the libFuzzer
# harness of the URL parser for FUZZ_URL_SECONDS (clang).
.PHONY: cli test-cli asan-cli bench-cli fuzz-url install-cli
CLI_LIBS := $(REDIS_LIBS) $(MYSQL_LIBS) $(ZK_LIBS) $(SQLITE_LIBS) $(PG_LIBS)
CLI_HDRS := $(HDR_CORE) simba_redis.h simba_mysql.h simba_zk.h simba_sqlite.h simba_pg.h
FUZZ_URL_SECONDS ?= 60
CLI_LOCAL := -DSIMBA_CLI_EXEC_NET -DSIMBA_CLI_NO_REDIS -DSIMBA_CLI_NO_MYSQL -DSIMBA_CLI_NO_ZK -DSIMBA_CLI_NO_PG
cli: $(B)/simba $(B)/simba-net
$(B)/simba: cli/simba_cli.c $(CLI_HDRS) $(B)/simba-net | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(CLI_LOCAL) -o $@ cli/simba_cli.c $(SQLITE_LIBS) $(LDFLAGS)
$(B)/simba-net: cli/simba_cli.c $(CLI_HDRS) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) -o $@ cli/simba_cli.c $(CLI_LIBS) $(LDFLAGS)
$(B)/test_url: tests/test_url.c $(CLI_HDRS) | $(B)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_url.c $(CLI_LIBS) $(LDFLAGS)
$(B)/asan/simba: cli/simba_cli.c $(CLI_HDRS) $(B)/asan/simba-net
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(CLI_LOCAL) -o $@ cli/simba_cli.c $(SQLITE_LIBS)
$(B)/asan/simba-net: cli/simba_cli.c $(CLI_HDRS)
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) -o $@ cli/simba_cli.c $(CLI_LIBS)
$(B)/asan/test_url: tests/test_url.c $(CLI_HDRS)
	@mkdir -p $(B)/asan
	clang $(WARN) $(ASAN_FLAGS) $(INC) $(TEST_DEFS) -o $@ tests/test_url.c $(CLI_LIBS)
$(B)/fuzz/fuzz_url: tests/fuzz/fuzz_url.c $(CLI_HDRS)
	@mkdir -p $(B)/fuzz
	clang -std=c99 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $(INC) $(TEST_DEFS) -o $@ tests/fuzz/fuzz_url.c $(CLI_LIBS)
# an LD_PRELOAD shim: a signal in the child between fork and its handler reset
$(B)/signal_in_fork.so: tests/tools/signal_in_fork.c | $(B)
	$(CC) $(WARN) $(CFLAGS) -shared -fPIC -o $@ tests/tools/signal_in_fork.c -ldl
test-cli: $(B)/simba $(B)/test_url $(B)/asan/test_url $(B)/fuzz/fuzz_url $(B)/signal_in_fork.so
	tests/test_cli.sh
asan-cli: $(B)/asan/simba $(B)/signal_in_fork.so
	SIMBA_CLI=$(B)/asan/simba ASAN_OPTIONS=detect_leaks=1 tests/test_cli.sh
fuzz-url: $(B)/fuzz/fuzz_url
	@mkdir -p $(B)/fuzz/corpus-url
	./$(B)/fuzz/fuzz_url -max_total_time=$(FUZZ_URL_SECONDS) -max_len=1024 -dict=tests/fuzz/url.dict $(B)/fuzz/corpus-url
bench-cli: $(B)/simba
	bench/record.sh $@ 'tests/servers/redis.sh run bench/bench_cli.sh ./$(B)/simba'
install: install-cli
install-cli: $(B)/simba $(B)/simba-net
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/libexec/simba $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(B)/simba $(DESTDIR)$(PREFIX)/bin/simba
	install -m 755 $(B)/simba-net $(DESTDIR)$(PREFIX)/libexec/simba/simba-net
	install -m 644 docs/simba.1 $(DESTDIR)$(PREFIX)/share/man/man1/simba.1

# ---- setup and install ----
DEPS := build-essential clang pkg-config valgrind libhiredis-dev redis-server \
        libmariadb-dev mariadb-server libzookeeper-st-dev zookeeper default-jre-headless \
        python3 iproute2
DEPS += libpq-dev postgresql                 # the PostgreSQL backend and its test server
DEPS += libclang-rt-14-dev libclang-rt-dev   # libFuzzer and the sanitizer runtimes (make fuzz, test-cli)
DEPS += libevent-dev libuv1-dev              # the loop adapters
DEPS += gcc-multilib musl-tools qemu-user    # the compile matrix: -m32 (run under qemu-i386 where the kernel has no IA32) and musl
DEPS += python3-kazoo python3-redis python3-pymysql   # the peers of make bench-scale
DEPS += libsqlite3-dev sqlite3 util-linux           # the SQLite backend; flock(1) for its figures
DEPS += bindfs                                       # a real FUSE mount the SQLite backend refuses
deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEPS)

install:
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 simba.h simba_mem.h simba_url.h simba_redis.h simba_mysql.h simba_zk.h simba_sqlite.h simba_pg.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(PREFIX)/include/simba_adapters
	install -m 644 adapters/simba_epoll.h adapters/simba_libevent.h adapters/simba_libuv.h $(DESTDIR)$(PREFIX)/include/simba_adapters/
	install -d $(DESTDIR)$(PREFIX)/share/simba
	install -m 644 simba_mysql.sql simba_pg.sql $(DESTDIR)$(PREFIX)/share/simba/
	sed -e 's|@PREFIX@|$(PREFIX)|' simba.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/simba.pc

clean:
	rm -rf $(B)
