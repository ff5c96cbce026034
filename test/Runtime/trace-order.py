#!/usr/bin/env python3
"""Checks that a rank run's --trace puts each message after it was sent.

Every receive (RECV_F, RECV_B) is matched with the send of the same kind
and micro-batch from its peer, in order, and must not complete before that
send began (SLACK microseconds allowed for the clock reads; default 20). A
blocking receive completes at the end of its event; an asynchronous one
(its event is the post) at the end of the WAIT of its token, which names it
(args "of", stage, mb, peer); one posted in a transfer group (its event is
the post) at the end of the group's WAIT that follows it on its actor: the
later of the two is taken. Prints a count (asynchronous ones apart) and
exits 1 if any receive completes too early.

Usage: trace-order.py TRACE.json [SLACK_US]
"""

import json
import sys
from collections import defaultdict, deque


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    slack = float(sys.argv[2]) if len(sys.argv) == 3 else 20.0
    with open(sys.argv[1]) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    events.sort(key=lambda e: e["ts"])
    sends = defaultdict(deque)
    for e in events:
        if e["cat"] in ("SEND_F", "SEND_B"):
            key = (e["pid"], e["tid"], e["args"]["peer"], e["cat"][-1],
                   e["args"]["mb"])
            sends[key].append(e["ts"])
    # Per actor, the ends of its group WAIT events, in order; per
    # asynchronous transfer, the ends of its token's WAITs, in order.
    waits = defaultdict(list)
    tokens = defaultdict(deque)
    for e in events:
        if e["cat"] == "WAIT":
            end = e["ts"] + e["dur"]
            of = e["args"].get("of")
            if of:
                a = e["args"]
                tokens[(e["pid"], e["tid"], of, a["stage"], a["mb"],
                        a["peer"])].append(end)
            else:
                waits[(e["pid"], e["tid"])].append(end)
    receives = early = asynchronous = 0
    worst = 0.0
    for e in events:
        if e["cat"] not in ("RECV_F", "RECV_B"):
            continue
        done = e["ts"] + e["dur"]
        a = e["args"]
        token = tokens[(e["pid"], e["tid"], e["cat"], a["stage"], a["mb"],
                        a["peer"])]
        if token:
            done = max(done, token.popleft())
            asynchronous += 1
        else:
            later = [w for w in waits[(e["pid"], e["tid"])] if w >= done]
            if later:
                done = later[0]
        key = (e["pid"], e["args"]["peer"], e["tid"], e["cat"][-1],
               e["args"]["mb"])
        if not sends[key]:
            print(f"no send for {e['name']} on actor {e['tid']}")
            return 1
        sent = sends[key].popleft()
        receives += 1
        gap = sent - done
        if gap > slack:
            early += 1
            worst = max(worst, gap)
    print(f"{receives} receives ({asynchronous} asynchronous), {early} "
          "complete before their send begins"
          + (f" (worst by {worst:.0f} us)" if early else ""))
    return 1 if early else 0


if __name__ == "__main__":
    sys.exit(main())
