#!/usr/bin/env python3
"""bench/peers/peer_lock.py -- the peers of `make bench-scale` (issue #15):
mutex hand-off latency with Q waiters, measured the same way as
bench/bench_scale.c measures simba, for comparison in the same run.

    peer_lock.py kazoo|redis|getlock Q1,Q2,... [rounds]

  kazoo    kazoo's Lock recipe, Q waiters as threads of ONE KazooClient session
           (SIMBA_ZK_HOSTS)
  redis    redis-py's Lock (SET NX PX + polling with its default sleep 0.1 s),
           Q waiter threads sharing one connection pool (SIMBA_REDIS_HOST/PORT)
  getlock  MySQL GET_LOCK/RELEASE_LOCK, one pymysql connection per waiter
           (SIMBA_MYSQL_HOST/PORT/USER/PASSWORD)

One round: the holder notes t0 and releases; the next thread that returns
from acquire notes t1; t1 - t0 is one hand-off. The old holder queues again
only after that (as in bench_scale.c), so Q stays Q and a non-FIFO lock
cannot hand the lock back to its own releaser. Prints one line per Q:
    Q <q> p50_us <x> p99_us <y> n <rounds>
or  Q <q> skip <reason>
(PEER_DEBUG=1: the waiters' tracebacks on stderr.)
"""
import os
import queue
import subprocess
import sys
import threading
import time
import traceback


def p(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(q * (len(v) - 1) + 0.5)))]


def make_factory(kind, q):
    """Returns (make_lock(i) -> lock, waiting() -> number queued or None, close)."""
    tag = "peer-%d-%d" % (os.getpid(), q)
    if kind == "kazoo":
        from kazoo.client import KazooClient
        import logging
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        zk = KazooClient(hosts=os.environ["SIMBA_ZK_HOSTS"], timeout=30)
        zk.start(timeout=30)
        path = "/" + tag

        def make(i):
            return zk.Lock(path, "w%d" % i)

        def waiting():
            try:
                return len(zk.get_children(path))
            except Exception:
                return 0

        return make, waiting, zk.stop
    if kind == "redis":
        import redis
        r = redis.Redis(host=os.environ.get("SIMBA_REDIS_HOST", "127.0.0.1"),
                        port=int(os.environ["SIMBA_REDIS_PORT"]), max_connections=q + 8)

        class L:
            def __init__(self):
                self.l = r.lock(tag, timeout=60)

            def acquire(self):
                self.l.acquire(blocking=True)

            def release(self):
                self.l.release()

        return (lambda i: L()), (lambda: None), r.close
    if kind == "getlock":
        import pymysql
        conns = []

        class G:
            def __init__(self):
                for attempt in range(20):   # a burst of 1000 connects overruns the listen backlog
                    try:
                        self.c = pymysql.connect(host=os.environ.get("SIMBA_MYSQL_HOST", "127.0.0.1"),
                                                 port=int(os.environ["SIMBA_MYSQL_PORT"]),
                                                 user=os.environ.get("SIMBA_MYSQL_USER", "root"),
                                                 password=os.environ.get("SIMBA_MYSQL_PASSWORD", ""),
                                                 autocommit=True, connect_timeout=30)
                        break
                    except pymysql.err.OperationalError:
                        if attempt == 19:
                            raise
                        time.sleep(0.05 * (attempt + 1))
                conns.append(self.c)

            def acquire(self):
                with self.c.cursor() as cur:
                    cur.execute("SELECT GET_LOCK(%s, 120)", (tag,))
                    if cur.fetchone()[0] != 1:
                        raise RuntimeError("GET_LOCK failed")

            def release(self):
                with self.c.cursor() as cur:
                    cur.execute("SELECT RELEASE_LOCK(%s)", (tag,))

        def close():
            for c in conns:
                try:
                    c.close()
                except Exception:
                    pass

        return (lambda i: G()), (lambda: None), close
    raise SystemExit("unknown peer " + kind)


def one_q(kind, q, rounds):
    make, waiting, close = make_factory(kind, q)
    acquired = queue.Queue()
    release_go = [threading.Event() for _ in range(q + 1)]
    requeue_go = [threading.Event() for _ in range(q + 1)]
    released_at = [0.0] * (q + 1)
    stop = [False]
    errors = []

    def worker(i, lk):
        try:
            while True:
                lk.acquire()
                acquired.put((time.monotonic(), i))
                release_go[i].wait()
                release_go[i].clear()
                released_at[i] = time.monotonic()
                lk.release()
                if stop[0]:
                    return
                requeue_go[i].wait()
                requeue_go[i].clear()
                if stop[0]:
                    return
        except Exception as e:  # noqa: BLE001 -- report and stop this waiter
            errors.append(repr(e))
            if os.environ.get("PEER_DEBUG"):
                traceback.print_exc()
            acquired.put((time.monotonic(), -1))

    locks = [make(i) for i in range(q + 1)]
    threads = []
    t = threading.Thread(target=worker, args=(0, locks[0]), daemon=True)
    t.start()
    threads.append(t)
    _, holder = acquired.get(timeout=30)
    for i in range(1, q + 1):
        t = threading.Thread(target=worker, args=(i, locks[i]), daemon=True)
        t.start()
        threads.append(t)
    # let every waiter queue (the recipe's queue length where it has one)
    end = time.monotonic() + 30 + q * 0.02
    while time.monotonic() < end:
        w = waiting()
        if w is None:
            time.sleep(0.2 + q * 0.001)
            break
        if w >= q + 1:
            break
        time.sleep(0.02)
    lat = []
    for _ in range(rounds):
        if errors:
            break
        time.sleep(0.01)
        release_go[holder].set()
        t1, nxt = acquired.get(timeout=120)
        if nxt < 0:
            break
        lat.append((t1 - released_at[holder]) * 1e6)
        requeue_go[holder].set()
        holder = nxt
    stop[0] = True
    for e in release_go + requeue_go:
        e.set()
    for t in threads:
        t.join(timeout=0.05)
    try:
        close()
    except Exception:
        pass
    if errors or not lat:
        return "Q %d skip %s" % (q, (errors[0] if errors else "no round finished")[:120])
    return "Q %d p50_us %.0f p99_us %.0f n %d" % (q, p(lat, 0.5), p(lat, 0.99), len(lat))


def main():
    kind = sys.argv[1]
    qs = [int(x) for x in sys.argv[2].split(",")]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    if len(sys.argv) > 4 and sys.argv[4] == "--one":
        # one Q per process: waiters left blocked in their client library
        # (GET_LOCK, kazoo watches) die with it, their sockets are not reused
        try:
            line = one_q(kind, qs[0], rounds)
        except Exception as e:  # noqa: BLE001
            line = "Q %d skip %s" % (qs[0], repr(e)[:120])
        print(line, flush=True)
        os._exit(0)
    for q in qs:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), kind, str(q),
                            str(rounds if q < 1000 else max(5, rounds // 2)), "--one"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        lines = [x for x in r.stdout.splitlines() if x.startswith("Q ")]
        if lines:
            print(lines[-1], flush=True)
        else:
            tail = (r.stdout.strip().splitlines() or ["exit %d" % r.returncode])[-1]
            print("Q %d skip %s" % (q, tail[:120]), flush=True)


if __name__ == "__main__":
    main()
