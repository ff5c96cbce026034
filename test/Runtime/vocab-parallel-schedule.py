#!/usr/bin/env python3
"""Writes a schedule-level program with a vocabulary-parallel token embedding
and LM head (shared stages, docs/Runtime.md) for the runtime tests.

Each direction of the pipeline is E -> T1 -> ... -> Tn -> H: E and H are
shared by every actor (each holds a slice of the vocabulary), Ti holds
LAYERS / n transformer layers on one actor (actor i - 1 going down, n - i
going up). The transformer stages run in a 1F1B order (stage i keeps at most
n - i + 1 micro-batches in flight, backward first); E's forward for a
micro-batch runs on every actor just before T1's, H's forward, all-gather and
backward just after Tn's forward, E's backward just after T1's. The programs
are one global sequence of these steps cut per actor, so no actor can wait
for a message or an all-gather that another actor reaches only later: they
cannot deadlock.

Usage: vocab-parallel-schedule.py ACTORS MICROBATCHES [--layers L]
           [--bidirectional] [--split-backward] [--async-gather]
"""

import argparse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("actors", type=int)
    parser.add_argument("microbatches", type=int)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--bidirectional", action="store_true")
    parser.add_argument("--split-backward", action="store_true")
    parser.add_argument("--async-gather", action="store_true")
    args = parser.parse_args()
    n, m = args.actors, args.microbatches
    directions = 2 if args.bidirectional else 1
    assert args.layers % n == 0 and m % directions == 0

    # Stage ids per direction d: E = d (n + 2), Ti = E + i, H = E + n + 1.
    def embedding(d):
        return d * (n + 2)

    def head(d):
        return embedding(d) + n + 1

    def actor_of(d, i):  # actor of Ti
        return i - 1 if d == 0 else n - i

    everyone = list(range(n))
    programs = {a: [] for a in everyone}
    deferred = {a: [] for a in everyone}  # weight gradients of E and H
    tokens = [0]

    def emit(a, line):
        programs[a].append(line)

    def backward(a, stage, mb, later=False):
        if not args.split_backward:
            emit(a, f"flexpipe.bwd stage {stage} mb {mb}")
            return
        emit(a, f"flexpipe.igrad stage {stage} mb {mb}")
        target = deferred[a] if later else programs[a]
        target.append(f"flexpipe.wgrad stage {stage} mb {mb}")

    def forward(d, i, mb):
        a = actor_of(d, i)
        if i == 1:
            # E on every actor; the parts meet at T1's actor.
            for p in everyone:
                emit(p, f"flexpipe.fwd stage {embedding(d)} mb {mb}")
                if p != a:
                    emit(p, f"flexpipe.send_act stage {embedding(d)} mb {mb} to {a}")
            for p in everyone:
                if p != a:
                    emit(a, f"flexpipe.recv_act stage {embedding(d) + 1} mb {mb} from {p}")
        else:
            emit(a, f"flexpipe.recv_act stage {embedding(d) + i} mb {mb} from {actor_of(d, i - 1)}")
        emit(a, f"flexpipe.fwd stage {embedding(d) + i} mb {mb}")
        if i < n:
            emit(a, f"flexpipe.send_act stage {embedding(d) + i} mb {mb} to {actor_of(d, i + 1)}")
            return
        # H on every actor: forward, all-gather, backward, partial gradients
        # back to Tn's actor.
        h = head(d)
        for p in everyone:
            if p != a:
                emit(a, f"flexpipe.send_act stage {h - 1} mb {mb} to {p}")
        group = ", ".join(map(str, everyone))
        for p in everyone:
            if p != a:
                emit(p, f"flexpipe.recv_act stage {h} mb {mb} from {a}")
            emit(p, f"flexpipe.fwd stage {h} mb {mb}")
            if args.async_gather:
                token = f"%g{tokens[0]}"
                tokens[0] += 1
                emit(p, f"{token} = flexpipe.all_gather stage {h} mb {mb} "
                        f"group [{group}] : !flexpipe.token")
                emit(p, f"flexpipe.wait {token}")
            else:
                emit(p, f"flexpipe.all_gather stage {h} mb {mb} group [{group}]")
            backward(p, h, mb, later=True)
            if p != a:
                emit(p, f"flexpipe.send_grad stage {h} mb {mb} to {a}")

    def backward_step(d, i, mb):
        a = actor_of(d, i)
        if i == n:
            for p in everyone:
                if p != a:
                    emit(a, f"flexpipe.recv_grad stage {head(d) - 1} mb {mb} from {p}")
        else:
            emit(a, f"flexpipe.recv_grad stage {embedding(d) + i} mb {mb} from {actor_of(d, i + 1)}")
        backward(a, embedding(d) + i, mb)
        if i > 1:
            emit(a, f"flexpipe.send_grad stage {embedding(d) + i} mb {mb} to {actor_of(d, i - 1)}")
            return
        e = embedding(d)
        for p in everyone:
            if p != a:
                emit(a, f"flexpipe.send_grad stage {e + 1} mb {mb} to {p}")
        for p in everyone:
            if p != a:
                emit(p, f"flexpipe.recv_grad stage {e} mb {mb} from {a}")
            backward(p, e, mb, later=True)

    # Greedy list scheduling of the transformer stages, one step per actor and
    # round: a ready backward first, else a ready forward within the limit.
    per_direction = m // directions
    mbs = {d: list(range(d * per_direction, (d + 1) * per_direction))
           for d in range(directions)}
    done = set()
    in_flight = {}
    remaining = {(kind, d, i, mb) for d in range(directions)
                 for i in range(1, n + 1) for mb in mbs[d] for kind in "FB"}
    while remaining:
        progressed = False
        for a in everyone:
            ready = []
            for (kind, d, i, mb) in remaining:
                if actor_of(d, i) != a:
                    continue
                if kind == "F":
                    if (i > 1 and ("F", d, i - 1, mb) not in done) or \
                            in_flight.get((d, i), 0) >= n - i + 1:
                        continue
                    # Micro-batches enter each stage in order.
                    if any(("F", d, i, x) not in done for x in mbs[d] if x < mb):
                        continue
                else:
                    if ("F", d, i, mb) not in done or \
                            (i < n and ("B", d, i + 1, mb) not in done):
                        continue
                ready.append((kind != "B", mb, d, i))
            if not ready:
                continue
            not_backward, mb, d, i = min(ready)
            kind = "F" if not_backward else "B"
            remaining.remove((kind, d, i, mb))
            done.add((kind, d, i, mb))
            in_flight[(d, i)] = in_flight.get((d, i), 0) + (1 if kind == "F" else -1)
            (forward if kind == "F" else backward_step)(d, i, mb)
            progressed = True
        assert progressed, "the greedy order is stuck"

    stages = directions * (n + 2)
    edges = ", ".join(f"{s} -> {s + 1}" for d in range(directions)
                      for s in range(embedding(d), head(d)))
    shared = ", ".join(str(s) for d in range(directions)
                       for s in (embedding(d), head(d)))
    info = []
    for d in range(directions):
        info.append('#flexpipe.stage_info<"gpt", 0, first>')
        info += [f'#flexpipe.stage_info<"gpt", {args.layers // n}>'] * n
        info.append('#flexpipe.stage_info<"gpt", 0, last>')
    print(f"flexpipe.schedule @vocab_parallel actors({n}) stages({stages}) "
          f"microbatches({m}) edges [{edges}] shared [{shared}]")
    print(f"    stage_info [{', '.join(info)}] {{")
    for a in everyone:
        print(f"  flexpipe.actor {a} {{")
        for line in programs[a] + deferred[a]:
            print(f"    {line}")
        print("  }")
    print("}")


if __name__ == "__main__":
    main()
