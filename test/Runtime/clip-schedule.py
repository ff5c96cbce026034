#!/usr/bin/env python3
"""Writes a schedule-level program of a two-tower (CLIP-style) model for the
runtime tests (docs/Runtime.md): each tower is one pipeline on its actors
(the towers' actors may overlap, their last actors differ), and a registered
sync stage's all-gather joins the towers' last stages after each
micro-batch's forward.

A tower "NAME LAYERS ACTORS CHUNKS" has len(ACTORS) x CHUNKS stages of equal
layers, stage j on ACTORS[j mod len(ACTORS)] (one_to_one for 1 chunk,
circular otherwise). Stage ids: the first tower's, then the second's, then
the sync stage. The order is a greedy list schedule over all actors, one step
per actor and round: a ready backward first, else the forward of the oldest
ready micro-batch, at most CHUNKS x len(ACTORS) - j micro-batches in flight
at stage j. A micro-batch's all-gather runs on both last actors as soon as
both towers' last forwards are done. The programs are that one global
sequence cut per actor, with every transfer's send before its receive and
each all-gather at one point of it on both actors: they cannot deadlock.

--split-backward: igrad and wgrad instead of bwd; a tower's last stage
defers its weight gradients to the end of the program. --async-gather: the
all-gather returns a token, waited for just before the stage's backward.
--async-p2p: receives are posted (with a token) when the matching send runs
and waited for just before their use; sends return tokens waited for at the
end of the program.

Usage: clip-schedule.py --tower image 4 0,1 2 --tower text 2 2,3 1
           [--microbatches M] [--name NAME] [--split-backward]
           [--async-gather] [--async-p2p]
"""

import argparse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tower", nargs=4, action="append", required=True,
                        metavar=("NAME", "LAYERS", "ACTORS", "CHUNKS"))
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--name", default="clip")
    parser.add_argument("--split-backward", action="store_true")
    parser.add_argument("--async-gather", action="store_true")
    parser.add_argument("--async-p2p", action="store_true")
    args = parser.parse_args()
    assert len(args.tower) == 2, "two towers"

    towers = []
    base = 0
    for name, layers, actors, chunks in args.tower:
        actors = [int(a) for a in actors.split(",")]
        stages = len(actors) * int(chunks)
        assert int(layers) % stages == 0, "layers must split evenly"
        towers.append({"name": name, "actors": actors, "stages": stages,
                       "layers": int(layers) // stages, "base": base})
        base += stages
    sync = base
    num_stages = base + 1
    num_actors = max(a for t in towers for a in t["actors"]) + 1
    m = args.microbatches

    def actor(t, j):
        tower = towers[t]
        return tower["actors"][j % len(tower["actors"])]

    def stage(t, j):
        return towers[t]["base"] + j

    last_actors = [actor(t, towers[t]["stages"] - 1) for t in range(2)]
    group = ", ".join(map(str, sorted(last_actors)))

    programs = {a: [] for a in range(num_actors)}
    deferred = {a: [] for a in range(num_actors)}  # weight gradients, waits
    counter = [0]
    posted = {}  # (kind, stage, mb) -> receive token
    gather_tokens = {}  # (actor, mb) -> token

    def token(prefix):
        counter[0] += 1
        return f"%{prefix}{counter[0]}"

    def emit(a, line):
        programs[a].append(line)

    def send(kind, a, s, mb, peer, peer_stage):
        if args.async_p2p:
            t = token("s")
            emit(a, f"{t} = flexpipe.send_{kind} stage {s} mb {mb} to {peer} "
                    f": !flexpipe.token")
            deferred[a].append(f"flexpipe.wait {t}")
            r = token("r")
            emit(peer, f"{r} = flexpipe.recv_{kind} stage {peer_stage} mb {mb} "
                       f"from {a} : !flexpipe.token")
            posted[(kind, peer_stage, mb)] = r
        else:
            emit(a, f"flexpipe.send_{kind} stage {s} mb {mb} to {peer}")

    def receive(kind, a, s, mb, peer):
        if args.async_p2p:
            emit(a, f"flexpipe.wait {posted.pop((kind, s, mb))}")
        else:
            emit(a, f"flexpipe.recv_{kind} stage {s} mb {mb} from {peer}")

    done = set()

    def all_gather(mb):
        for a in sorted(last_actors):
            if args.async_gather:
                t = token("g")
                emit(a, f"{t} = flexpipe.all_gather stage {sync} mb {mb} "
                        f"group [{group}] : !flexpipe.token")
                gather_tokens[(a, mb)] = t
            else:
                emit(a, f"flexpipe.all_gather stage {sync} mb {mb} "
                        f"group [{group}]")

    def forward(t, j, mb):
        a, s = actor(t, j), stage(t, j)
        if j > 0 and actor(t, j - 1) != a:
            receive("act", a, s, mb, actor(t, j - 1))
        emit(a, f"flexpipe.fwd stage {s} mb {mb}")
        last = towers[t]["stages"] - 1
        if j < last and actor(t, j + 1) != a:
            send("act", a, s, mb, actor(t, j + 1), s + 1)
        if j == last and ("F", 1 - t, towers[1 - t]["stages"] - 1, mb) in done:
            all_gather(mb)

    def backward(t, j, mb):
        a, s = actor(t, j), stage(t, j)
        last = towers[t]["stages"] - 1
        if j < last and actor(t, j + 1) != a:
            receive("grad", a, s, mb, actor(t, j + 1))
        if j == last and args.async_gather:
            emit(a, f"flexpipe.wait {gather_tokens.pop((a, mb))}")
        if args.split_backward:
            emit(a, f"flexpipe.igrad stage {s} mb {mb}")
            wgrad = f"flexpipe.wgrad stage {s} mb {mb}"
            (deferred[a] if j == last else programs[a]).append(wgrad)
        else:
            emit(a, f"flexpipe.bwd stage {s} mb {mb}")
        if j > 0 and actor(t, j - 1) != a:
            send("grad", a, s, mb, actor(t, j - 1), s - 1)

    remaining = {(kind, t, j, mb) for t in range(2)
                 for j in range(towers[t]["stages"]) for mb in range(m)
                 for kind in "FB"}
    in_flight = {}
    while remaining:
        progressed = False
        for a in range(num_actors):
            ready = []
            for (kind, t, j, mb) in remaining:
                if actor(t, j) != a:
                    continue
                last = towers[t]["stages"] - 1
                if kind == "F":
                    if j > 0 and ("F", t, j - 1, mb) not in done:
                        continue
                    if in_flight.get((t, j), 0) >= towers[t]["stages"] - j:
                        continue
                    if any(("F", t, j, x) not in done for x in range(mb)):
                        continue
                else:
                    if ("F", t, j, mb) not in done:
                        continue
                    if j == last and \
                            ("F", 1 - t, towers[1 - t]["stages"] - 1, mb) \
                            not in done:
                        continue
                    if j < last and ("B", t, j + 1, mb) not in done:
                        continue
                ready.append((kind != "B", mb, -j, t, kind))
            if not ready:
                continue
            _, mb, negj, t, kind = min(ready)
            j = -negj
            remaining.remove((kind, t, j, mb))
            done.add((kind, t, j, mb))
            in_flight[(t, j)] = in_flight.get((t, j), 0) + \
                (1 if kind == "F" else -1)
            (forward if kind == "F" else backward)(t, j, mb)
            progressed = True
        assert progressed, "the greedy order is stuck"

    edges = ", ".join(f"{stage(t, j)} -> {stage(t, j + 1)}" for t in range(2)
                      for j in range(towers[t]["stages"] - 1))
    info = []
    for t in range(2):
        n = towers[t]["stages"]
        for j in range(n):
            flags = (", first" if j == 0 else "") + \
                (", last" if j == n - 1 else "")
            info.append(f'#flexpipe.stage_info<"{towers[t]["name"]}", '
                        f'{towers[t]["layers"]}{flags}>')
    info.append('#flexpipe.stage_info<"sync", 0>')
    print(f"flexpipe.schedule @{args.name} actors({num_actors}) "
          f"stages({num_stages}) microbatches({m})")
    print(f"    edges [{edges}]")
    print(f"    stage_info [{', '.join(info)}] {{")
    for a in range(num_actors):
        print(f"  flexpipe.actor {a} {{")
        for line in programs[a] + deferred[a]:
            print(f"    {line}")
        print("  }")
    print("}")


if __name__ == "__main__":
    main()
