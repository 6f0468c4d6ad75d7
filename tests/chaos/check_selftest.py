#!/usr/bin/env python3
"""check_selftest.py -- the chaos checker must be able to fail.

Feeds tests/chaos/check.py small hand-made logs: a clean one must pass, and
each kind of violation (two holders of the mutex, three permits of the
semaphore, a fence that goes backwards, a fence granted twice, a hold that
comes back to life after its deadline, a fault never followed by a grant, a
recovery longer than --recovery-ms) must fail. A killed holder (no end record)
must be capped at its last deadline, so a grant after that deadline is no
violation; a holder the driver killed with -9 (a K record) is capped at the kill.
Prints "N passed, N failed".
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MS = 1000000


def A(c, pid, seq, name, fence, permits, cap, start, until):
    return "A %s %d %d %s %d %d %d %d %d" % (c, pid, seq, name, fence, permits, cap, start * MS, until * MS)


def V(c, pid, seq, name, fence, now, until):
    return "V %s %d %d %s %d %d %d" % (c, pid, seq, name, fence, now * MS, until * MS)


def E(c, pid, seq, name, fence, end, why="release"):
    return "E %s %d %d %s %d %d %s" % (c, pid, seq, name, fence, end * MS, why)


def K(pid, t):
    return "K %d %d" % (pid, t * MS)


def F(kind, s, e):
    return "F %s %d %d" % (kind, s * MS, e * MS)


# a clean history: the mutex handed over, the semaphore shared within capacity,
# a killed holder (no E) whose deadline passed before the next grant
BASE = [
    A("c1", 1, 1, "m", 10, 1, 1, 1000, 2500), E("c1", 1, 1, "m", 10, 1200),
    A("c2", 2, 1, "m", 11, 1, 1, 1300, 2800), V("c2", 2, 1, "m", 11, 1800, 3300),
    A("c1", 1, 2, "s", 5, 1, 2, 1000, 2500), A("c3", 3, 1, "s", 6, 1, 2, 1010, 2510),
    E("c1", 1, 2, "s", 5, 1100), E("c3", 3, 1, "s", 6, 1150),
    A("c4", 4, 1, "s", 7, 2, 2, 1200, 2700), E("c4", 4, 1, "s", 7, 1250),
    F("kill9", 3000, 3100),
    A("c5", 5, 1, "m", 12, 1, 1, 3400, 4900), E("c5", 5, 1, "m", 12, 3500),
    A("c5", 5, 2, "s", 8, 1, 2, 3600, 5100), E("c5", 5, 2, "s", 8, 3700),
]

# a holder killed with -9 (K) at 6100, its deadline at 7500: a grant after
# the kill is no violation (a killed process believes nothing: sqlite grants
# at once), one before the kill is
KILLED = [A("c6", 6, 1, "m", 20, 1, 1, 6000, 7500), K(6, 6100), F("kill9", 6100, 6110),
          A("c8", 8, 1, "s", 9, 1, 2, 6300, 7800), E("c8", 8, 1, "s", 9, 6310)]

CASES = [
    ("clean history", BASE, 0),
    ("a grant after a holder was killed (K)",
     BASE + KILLED + [A("c7", 7, 1, "m", 21, 1, 1, 6120, 7620), E("c7", 7, 1, "m", 21, 6200)], 0),
    ("a grant before a holder was killed (K)",
     BASE + KILLED + [A("c7", 7, 1, "m", 21, 1, 1, 6050, 7550), E("c7", 7, 1, "m", 21, 6200)], 1),
    ("two holders of the mutex", BASE + [A("c6", 6, 1, "m", 13, 1, 1, 3450, 4950), E("c6", 6, 1, "m", 13, 3460)], 1),
    ("three permits of a capacity-2 semaphore",
     BASE + [A("c6", 6, 1, "s", 9, 2, 2, 3650, 5150), E("c6", 6, 1, "s", 9, 3660)], 1),
    ("mutex fence going backwards", BASE + [A("c6", 6, 1, "m", 3, 1, 1, 3600, 5100), E("c6", 6, 1, "m", 3, 3610)], 1),
    ("semaphore fence granted twice", BASE + [A("c6", 6, 1, "s", 8, 1, 2, 9000, 10500), E("c6", 6, 1, "s", 8, 9010)], 1),
    ("semaphore fence lower a lease later", BASE + [A("c6", 6, 1, "s", 2, 1, 2, 9000, 10500), E("c6", 6, 1, "s", 2, 9010)], 1),
    ("a hold valid again after it expired",
     BASE + [A("c6", 6, 1, "m", 20, 1, 1, 6000, 7500), E("c6", 6, 1, "m", 20, 7510, "expired"),
             V("c6", 6, 1, "m", 20, 7600, 9100), E("c6", 6, 1, "m", 20, 7700)], 1),
    ("a renewal written late (a long tick) is no violation by itself",
     BASE + [A("c6", 6, 1, "m", 20, 1, 1, 6000, 7500), V("c6", 6, 1, "m", 20, 7600, 9100),
             E("c6", 6, 1, "m", 20, 7700)], 0),
    ("a killed holder believed past a later grant",
     BASE + [A("c6", 6, 1, "m", 20, 1, 1, 6000, 7500), V("c6", 6, 1, "m", 20, 7000, 8500),
             A("c7", 7, 1, "m", 21, 1, 1, 8000, 9500), E("c7", 7, 1, "m", 21, 8100)], 1),
    ("a killed holder capped at its deadline",
     BASE + [A("c6", 6, 1, "m", 20, 1, 1, 6000, 7500),
             A("c7", 7, 1, "m", 21, 1, 1, 7600, 9100), E("c7", 7, 1, "m", 21, 7700)], 0),
    ("a fault with no grant after it", BASE + [F("restart", 20000, 21000)], 1),
    ("a client that died by itself", BASE + ["X c1 1 - EXITED 0 5000000000"], 1),
    ("a request that ended in ERROR under a transient fault", BASE + ["X c1 1 m ERROR -10 5000000000"], 1),
    # kill9 ends at 3100; m is granted again at 3400, s at 3600: a recovery of 500 ms
    ("a recovery within --recovery-ms", BASE, 0, ["--recovery-ms", "600"]),
    ("a recovery longer than --recovery-ms", BASE, 1, ["--recovery-ms", "400"]),
]


def main():
    passed = failed = 0
    for case in CASES:
        title, lines, want = case[:3]
        extra = case[3] if len(case) > 3 else []
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write("\n".join(lines) + "\n")
            path = f.name
        try:
            r = subprocess.run([sys.executable, os.path.join(HERE, "check.py"), path, "selftest"] + extra,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        finally:
            os.unlink(path)
        got = 0 if r.returncode == 0 else 1
        if got == want:
            passed += 1
            print("ok - %s" % title)
        else:
            failed += 1
            print("not ok - %s: checker exit %d, wanted %s" % (title, r.returncode, "pass" if want == 0 else "fail"))
            print("\n".join("  # " + x for x in r.stdout.splitlines()))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
