#!/usr/bin/env python3
"""check.py -- the checker of `make chaos`.

    tests/chaos/check.py LOGFILE LABEL [--ttl-ms N] [--lease-ms N] [--expect "KIND..."]
                         [--recovery-ms N]

Reads the shared log written by the chaos clients (A/V/E/X records, see
chaos_client.c) and by the fault driver (F records: "F kind start_ns end_ns"),
and reports:

  - overlaps beyond capacity: at no instant may the permits of the holds
    believed on a name add up to more than its capacity. A hold is believed
    from its ACQUIRED (A) to the first of its end (E) and its last written
    validity deadline (A or V), so a process killed or stopped still has a
    bounded belief;
  - a hold valid again after the client saw its validity reach 0 (a hold
    that came back to life);
  - fences: no two grants of a name share a fence, and fences strictly
    increase in grant order. Grant order is taken from the ACQUIRED times:
    for the mutex every pair counts (its holds cannot overlap); for the
    semaphore two holders may see their grants in either order, so only
    grants seen more than a lease apart are compared;
  - a hold of a process the driver killed with -9 (K records: "K pid ns",
    written just before the kill) is believed until the kill at most;
  - client processes that died by themselves (EXITED records of the driver):
    a library must not kill its host, so any is a failure;
  - totals: grants per name, faults per kind, violations, errors, and the
    recovery time of each fault (fault end to the next grant on every name);
    with --recovery-ms N, a recovery longer than N ms is a failure too.

Exit status 0 when there is no violation, every fault was followed by a grant
on every name, every --expect kind was injected at least once, and there were
grants at all; 1 otherwise.
"""
import sys
import statistics


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    path, label = args[0], args[1]
    ttl_ms = 1500
    lease_ms = 2500
    kills = {}          # pid -> when the driver sent it SIGKILL (K records)
    expect = []         # fault kinds the driver meant to inject
    recovery_ms = None  # the longest recovery allowed (None: any)
    i = 2
    while i < len(args):
        if args[i] == "--ttl-ms":
            ttl_ms = int(args[i + 1]); i += 2
        elif args[i] == "--lease-ms":
            lease_ms = int(args[i + 1]); i += 2
        elif args[i] == "--expect":
            expect = args[i + 1].split(); i += 2
        elif args[i] == "--recovery-ms":
            recovery_ms = int(args[i + 1]); i += 2
        else:
            print("check.py: unknown argument", args[i]); return 2

    holds = {}          # (pid, seq) -> dict
    faults = []         # (kind, start, end)
    errors = {}         # event name -> count
    violations = []
    bad_lines = 0

    with open(path, "r", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            p = line.split()
            if not p:
                continue
            try:
                t = p[0]
                if t == "A":
                    key = (p[2], p[3])
                    if key in holds:
                        violations.append("line %d: a second ACQUIRED for hold %s" % (lineno, key))
                        continue
                    holds[key] = dict(client=p[1], pid=p[2], seq=p[3], name=p[4], fence=int(p[5]),
                                      permits=int(p[6]), cap=int(p[7]), start=int(p[8]),
                                      until=int(p[9]), end=None, why=None)
                elif t == "V":
                    h = holds.get((p[2], p[3]))
                    if h is None:
                        bad_lines += 1
                        continue
                    now, until = int(p[6]), int(p[7])
                    # Only a hold the client itself saw expire (valid_ms 0,
                    # an E "expired") and then valid again is a resurrection.
                    # A V later than the last written deadline alone can be
                    # a renewal done inside a tick that outlasted it: the
                    # hold is then taken as believed all along (conservative).
                    if h["why"] == "expired" and now > h["until"]:
                        violations.append("%s %s fence %d: validity renewed at %.3f s, %.0f ms after "
                                          "its deadline had passed (a hold came back)"
                                          % (h["client"], h["name"], h["fence"], now / 1e9,
                                             (now - h["until"]) / 1e6))
                    h["until"] = until
                elif t == "E":
                    h = holds.get((p[2], p[3]))
                    if h is None:
                        bad_lines += 1
                        continue
                    h["end"] = int(p[6])
                    h["why"] = p[7]
                elif t == "X":
                    errors[p[4]] = errors.get(p[4], 0) + 1
                elif t == "K":
                    kills[p[1]] = int(p[2])
                elif t == "F":
                    faults.append((p[1], int(p[2]), int(p[3])))
                else:
                    bad_lines += 1
            except (IndexError, ValueError):
                bad_lines += 1

    names = {}
    for h in holds.values():
        h["bend"] = min(h["until"], h["end"]) if h["end"] is not None else h["until"]
        # a process killed with -9 runs no code of its own once the signal
        # is sent: its holds are believed until the kill at most
        if h["pid"] in kills and h["start"] <= kills[h["pid"]] < h["bend"]:
            h["bend"] = kills[h["pid"]]
        if h["bend"] < h["start"]:
            h["bend"] = h["start"]
        names.setdefault(h["name"], []).append(h)

    # overlaps beyond capacity: a sweep over starts and ends (ends first at a tie)
    for name, hs in sorted(names.items()):
        cap = min(h["cap"] for h in hs)
        evs = []
        for h in hs:
            evs.append((h["start"], 1, h))
            evs.append((h["bend"], 0, h))
        evs.sort(key=lambda e: (e[0], e[1]))
        live = {}
        load = 0
        reported = set()
        for tm, kind, h in evs:
            k = (h["pid"], h["seq"])
            if kind == 1:
                live[k] = h
                load += h["permits"]
                if load > cap:
                    ids = tuple(sorted(live))
                    if ids not in reported:
                        reported.add(ids)
                        desc = ", ".join("%s(pid %s fence %d, %d permit(s), %.3f-%.3f s, ended by %s)"
                                         % (x["client"], x["pid"], x["fence"], x["permits"],
                                            x["start"] / 1e9, x["bend"] / 1e9, x["why"] or "deadline")
                                         for x in live.values())
                        violations.append("%s: %d permits believed, capacity %d, at %.3f s: %s"
                                          % (name, load, cap, tm / 1e9, desc))
            else:
                if k in live:
                    del live[k]
                    load -= h["permits"]

    # fences
    lease_ns = lease_ms * 1000000
    for name, hs in sorted(names.items()):
        seen = {}
        for h in hs:
            if h["fence"] in seen:
                o = seen[h["fence"]]
                violations.append("%s: fence %d granted twice (%s pid %s and %s pid %s)"
                                  % (name, h["fence"], o["client"], o["pid"], h["client"], h["pid"]))
            seen[h["fence"]] = h
            if h["fence"] <= 0:
                violations.append("%s: fence %d is not positive (%s pid %s)" % (name, h["fence"], h["client"], h["pid"]))
        order = sorted(hs, key=lambda x: x["start"])
        cap = min(h["cap"] for h in hs)
        if cap == 1:
            for a, b in zip(order, order[1:]):
                if b["fence"] <= a["fence"]:
                    violations.append("%s: fence went from %d (%s at %.3f s) to %d (%s at %.3f s)"
                                      % (name, a["fence"], a["client"], a["start"] / 1e9,
                                         b["fence"], b["client"], b["start"] / 1e9))
        else:
            # the largest fence seen up to a lease before each grant must be below it
            j = 0
            best = None
            for b in order:
                while j < len(order) and order[j]["start"] + lease_ns < b["start"]:
                    if best is None or order[j]["fence"] > best["fence"]:
                        best = order[j]
                    j += 1
                if best is not None and best["fence"] >= b["fence"]:
                    violations.append("%s: fence %d (%s at %.3f s) after fence %d (%s at %.3f s)"
                                      % (name, b["fence"], b["client"], b["start"] / 1e9,
                                         best["fence"], best["client"], best["start"] / 1e9))

    # recovery after each fault: fault end to the next grant on every name
    starts = {n: sorted(h["start"] for h in hs) for n, hs in names.items()}
    kinds = {}
    unrecovered = []
    slow = []
    import bisect
    for kind, fs, fe in faults:
        worst = 0
        ok = True
        for n in ("m", "s"):
            st = starts.get(n, [])
            idx = bisect.bisect_right(st, fe)
            if idx >= len(st):
                ok = False
                break
            worst = max(worst, st[idx] - fe)
        kinds.setdefault(kind, []).append(worst / 1e6 if ok else None)
        if not ok:
            unrecovered.append("%s (ended at %.3f s)" % (kind, fe / 1e9))
        elif recovery_ms is not None and worst / 1e6 > recovery_ms:
            slow.append("%s (ended at %.3f s): %.0f ms, more than %d" % (kind, fe / 1e9, worst / 1e6, recovery_ms))

    ngrants = len(holds)
    lost = sum(1 for h in holds.values() if h["why"] == "lost")
    expired = sum(1 for h in holds.values() if h["why"] == "expired" or
                  (h["end"] is not None and h["until"] < h["end"]) or h["end"] is None)
    print("chaos %s: %d grants (%s), %d faults, %d violations"
          % (label, ngrants, ", ".join("%s %d" % (n, len(hs)) for n, hs in sorted(names.items())),
             len(faults), len(violations)))
    print("chaos %s: holds ended by LOST %d, by the local deadline or a kill %d; events %s"
          % (label, lost, expired,
             ", ".join("%s %d" % kv for kv in sorted(errors.items())) or "none"))
    for kind in sorted(kinds):
        rs = kinds[kind]
        good = [r for r in rs if r is not None]
        if good:
            print("chaos %s:   fault %-18s %2d injected, recovery median %6.0f ms, max %6.0f ms%s"
                  % (label, kind, len(rs), statistics.median(good), max(good),
                     "" if len(good) == len(rs) else ", %d without recovery" % (len(rs) - len(good))))
        else:
            print("chaos %s:   fault %-18s %2d injected, no grant after it" % (label, kind, len(rs)))
    if bad_lines:
        print("chaos %s: %d unreadable or orphan log lines" % (label, bad_lines))
    for v in violations[:30]:
        print("chaos %s: VIOLATION %s" % (label, v))
    if len(violations) > 30:
        print("chaos %s: ... %d more violations" % (label, len(violations) - 30))
    for u in unrecovered:
        print("chaos %s: NO RECOVERY after %s" % (label, u))
    for u in slow:
        print("chaos %s: SLOW RECOVERY after %s" % (label, u))
    died = errors.get("EXITED", 0)
    if died:
        print("chaos %s: %d client process(es) died by themselves (crash, signal or exit): "
              "see the client stderr above" % (label, died))
    # every fault here is transient: a request that ends in ERROR is the library
    # giving up where it must retry (issue #9 item 8 was -LOADING doing that)
    gave_up = errors.get("ERROR", 0)
    if gave_up:
        print("chaos %s: %d request(s) ended in an ERROR event under transient faults" % (label, gave_up))
    missing = [k for k in expect if k not in kinds]
    for k in missing:
        print("chaos %s: fault %s was never injected" % (label, k))
    ok = not violations and not unrecovered and not slow and not missing and not died and not gave_up and ngrants > 0 and set(names) >= {"m", "s"}
    print("chaos %s: %s" % (label, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
