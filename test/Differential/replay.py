#!/usr/bin/env python3
"""Replays a per-rank pipeline order and reports its makespan and peak memory.

This is the reference side of the differential test between FlexPipe's
schedules and PyTorch's generators. It shares no code with FlexPipe's own
simulator: it implements the rules below directly, in exact arithmetic
(fractions.Fraction), so that ties and halves compare exactly. Standard
library only.

Input
-----
PyTorch's `compute_only` CSV layout: row r is rank r, its cells are the rank's
actions in execution order. A compute cell is `<stage><T><mb>`, T one of F
(forward), B (full backward), I (backward for inputs), W (backward for
weights). Empty cells (idle slots of PyTorch's lock-step grid), `\\r`, and
every other cell (REDUCE_GRAD, WAIT_REDUCE_GRAD, UNSHARD, SEND_F, RECV_B, ...)
are ignored. One extension: an overlapped cell such as `(0F7;7B3)OVERLAP_F_B`
(DualPipeV) is one unit of work holding its compute sub-actions; see below.

Costs
-----
Per micro-batch a rank spends F=1, B=2, I=1, W=1 on its share of the model.
A rank holding V stages spends 1/V of that on each stage: one stage's F costs
1/V, B 2/V, I 1/V and W 1/V. Communication is free.

Timing
------
S = V * P stages on P ranks (P = number of rows). Dependencies:
  - F(s, k) after F(s-1, k), for s > 0;
  - B(s, k) and I(s, k) after F(s, k) and, for s < S-1, after the backward
    (B or I, whichever the order has) of (s+1, k);
  - W(s, k) after I(s, k).
Each rank runs its cells strictly in row order, one at a time; a cell starts
at max(its rank is free, its dependencies are done) and ends a cost later.
An overlapped cell is atomic: it starts once every dependency of its
sub-actions outside the cell is done, lasts the sum of their costs, and all of
its sub-actions end with it. (This is what reproduces the published DualPipeV
figure, 27 at P=4, M=8; running the sub-actions one after the other would give
25.5.) The makespan is the latest end. When actions remain but no rank can
start its next cell, the order deadlocks: DeadlockError names what each stuck
rank waits for.

The order must be complete and consistent, else ReplayError: every stage s < S
and micro-batch k < M (M = 1 + the largest micro-batch index) has exactly one
F and either one B or one I and one W, no action appears twice, and all
actions of a stage are on one rank.

Peak activation memory
----------------------
The activation of (s, k) is alive on the rank holding s from the start of
F(s, k) until the end of B(s, k), or the end of W(s, k) when the backward is
split. Lifetimes are half-open, [start, end): memory freed at time t is free
before memory allocated at t is counted. A rank's peak is the largest number
of activations alive at once; the reported `peak` is the maximum over ranks,
in stage-micro-batch units (one unit = one stage's activation of one
micro-batch, whatever V is).

Unit weight, not 1/V: weighting each activation 1/V (the stage's share of its
rank's layers) gives 5 for PyTorch's ZBVZeroBubble at P=5, M=16, while the
published figure is 10; counting each activation as 1 gives 10, and also the
"peak in-flight" figures of FlexPipe's docs/Schedules.md at P=4, M=8
(1F1B 4, GPipe 8, Interleaved1F1B 11, LoopedBFS 16). The closed-interval
count (an activation freed at t still counted at t) would give 11 there.
`peak_share` = peak / V is the same peak in rank-share units (FlexPipe's
docs/Results.md: activation memory 1 per micro-batch and share).

Numbers are written exactly: a decimal when the value has a finite decimal
expansion (`33`, `28.5`), else a fraction (`57/7`); parse_number() reads both.

Usage (prints `makespan=X peak=Y`; exits 1 on a deadlock or a bad order):
  replay.py FILE.csv [--stages-per-rank V]
Without --stages-per-rank, V = (largest stage index + 1) / number of ranks.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

# Cost of one micro-batch on a rank's whole share; one stage costs 1/V of it.
RANK_COST = {"F": 1, "B": 2, "I": 1, "W": 1}

_COMPUTE_CELL = re.compile(r"(\d+)([FBIW])(\d+)")
_OVERLAP_CELL = re.compile(r"\((.*)\)OVERLAP_F_B")


class ReplayError(Exception):
    """The order cannot be replayed: malformed, incomplete or inconsistent."""


class DeadlockError(ReplayError):
    """Actions remain but no rank can start its next cell."""


@dataclass(frozen=True, order=True)
class Action:
    """One compute action: `kind` (F, B, I, W) of `microbatch` on `stage`."""

    stage: int
    kind: str
    microbatch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"


# A cell of a row: one action, or the sub-actions of an overlapped cell.
Cell = tuple[Action, ...]


@dataclass(frozen=True)
class ReplayResult:
    """Exact figures of a replay and the timeline behind them."""

    makespan: Fraction
    # Peak alive activations over ranks, in stage-micro-batch units.
    peak: Fraction
    # The same peak in rank-share units (peak / V).
    peak_share: Fraction
    # Peak of each rank, in stage-micro-batch units, indexed by rank.
    rank_peaks: tuple[Fraction, ...]
    start: dict[Action, Fraction]
    end: dict[Action, Fraction]


def parse_cell(text: str) -> Cell:
    """Returns the compute actions of one CSV cell (none for other cells)."""
    text = text.strip()
    overlap = _OVERLAP_CELL.fullmatch(text)
    if overlap:
        return tuple(
            a for part in overlap.group(1).split(";") for a in parse_cell(part)
        )
    match = _COMPUTE_CELL.fullmatch(text)
    if not match:
        return ()
    return (Action(int(match.group(1)), match.group(2), int(match.group(3))),)


def parse_rows(lines: Iterable[str]) -> list[list[Cell]]:
    """Parses compute_only CSV lines into each rank's compute cells.

    Trailing blank lines are not ranks; a blank line before a non-blank one
    is a rank without actions.
    """
    rows = [line.replace("\r", "").rstrip("\n") for line in lines]
    while rows and not rows[-1].strip():
        rows.pop()
    return [[c for c in map(parse_cell, row.split(",")) if c] for row in rows]


def load(path: str) -> list[list[Cell]]:
    """Reads a compute_only CSV file; see parse_rows()."""
    with open(path, encoding="utf-8", newline="") as f:
        return parse_rows(f.read().split("\n"))


def format_number(value: Fraction | int) -> str:
    """Writes a value exactly: a finite decimal if there is one, else p/q."""
    value = Fraction(value)
    rest, digits = value.denominator, 0
    for prime in (2, 5):
        count = 0
        while rest % prime == 0:
            rest //= prime
            count += 1
        digits = max(digits, count)
    if rest != 1:
        return f"{value.numerator}/{value.denominator}"
    if digits == 0:
        return str(value.numerator)
    whole, frac = divmod(
        abs(value.numerator) * 10**digits // value.denominator, 10**digits
    )
    sign = "-" if value < 0 else ""
    return f"{sign}{whole}.{frac:0{digits}d}".rstrip("0")


def parse_number(text: str) -> Fraction:
    """Reads a value written by format_number() (`33`, `28.5`, `57/7`)."""
    return Fraction(text.strip())


def _normalize(rows: Sequence[Sequence[Action | Cell]]) -> list[list[Cell]]:
    """Accepts rows of Actions, of Cells, or of both."""
    return [[c if isinstance(c, tuple) else (c,) for c in row] for row in rows]


def _validate(rows: list[list[Cell]], num_stages: int) -> set[Action]:
    """Checks completeness and consistency; returns the set of actions."""
    seen: set[Action] = set()
    stage_rank: dict[int, int] = {}
    for rank, row in enumerate(rows):
        for action in (a for cell in row for a in cell):
            if action.stage >= num_stages:
                raise ReplayError(
                    f"rank {rank}: {action} names stage {action.stage} of "
                    f"{num_stages}"
                )
            if action in seen:
                raise ReplayError(f"rank {rank}: {action} appears twice")
            seen.add(action)
            other = stage_rank.setdefault(action.stage, rank)
            if other != rank:
                raise ReplayError(
                    f"stage {action.stage} has actions on ranks {other} and {rank}"
                )
    if not seen:
        raise ReplayError("the order has no compute action")
    num_microbatches = 1 + max(a.microbatch for a in seen)
    for stage in range(num_stages):
        for mb in range(num_microbatches):
            kinds = {k for k in "FBIW" if Action(stage, k, mb) in seen}
            if kinds not in ({"F", "B"}, {"F", "I", "W"}):
                found = ", ".join(sorted(kinds, key="FBIW".index)) or "no action"
                raise ReplayError(
                    f"stage {stage}, micro-batch {mb} of {num_microbatches} has "
                    f"{found}; expected F and either B or I and W"
                )
    return seen


def _dependencies(
    action: Action, num_stages: int, actions: set[Action]
) -> list[Action]:
    """The actions that must end before `action` starts."""
    s, k = action.stage, action.microbatch
    if action.kind == "F":
        return [Action(s - 1, "F", k)] if s > 0 else []
    if action.kind == "W":
        return [Action(s, "I", k)]
    deps = [Action(s, "F", k)]
    if s < num_stages - 1:
        later = Action(s + 1, "B", k)
        deps.append(later if later in actions else Action(s + 1, "I", k))
    return deps


def _cell_dependencies(
    cell: Cell, num_stages: int, actions: set[Action]
) -> list[Action]:
    """Dependencies of a cell's sub-actions; those inside the cell block it."""
    return [d for a in cell for d in _dependencies(a, num_stages, actions)]


def _peak(lifetimes: list[tuple[Fraction, Fraction]]) -> int:
    """Most half-open [start, end) lifetimes alive at one time."""
    # At equal times a release (-1) sorts before an allocation (+1).
    events = sorted([(s, 1) for s, _ in lifetimes] + [(e, -1) for _, e in lifetimes])
    alive = best = 0
    for _, delta in events:
        alive += delta
        best = max(best, alive)
    return best


def replay(
    rows: Sequence[Sequence[Action | Cell]], stages_per_rank: int
) -> ReplayResult:
    """Replays the rows (rank r = rows[r]) with V = stages_per_rank.

    Raises ReplayError for an inconsistent order, DeadlockError when it
    cannot complete.
    """
    if stages_per_rank < 1:
        raise ReplayError(f"stages per rank must be positive, got {stages_per_rank}")
    cells = _normalize(rows)
    if not cells:
        raise ReplayError("the order has no rank")
    num_stages = stages_per_rank * len(cells)
    actions = _validate(cells, num_stages)
    cost = {kind: Fraction(c, stages_per_rank) for kind, c in RANK_COST.items()}

    start: dict[Action, Fraction] = {}
    end: dict[Action, Fraction] = {}
    position = [0] * len(cells)
    free = [Fraction(0)] * len(cells)
    remaining = sum(map(len, cells))
    while remaining:
        progressed = False
        for rank, row in enumerate(cells):
            while position[rank] < len(row):
                cell = row[position[rank]]
                deps = _cell_dependencies(cell, num_stages, actions)
                if any(d not in end for d in deps):
                    break
                begin = max([free[rank]] + [end[d] for d in deps])
                finish = begin + sum(cost[a.kind] for a in cell)
                for action in cell:
                    start[action], end[action] = begin, finish
                free[rank] = finish
                position[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise DeadlockError(
                _describe_deadlock(cells, position, num_stages, actions, end)
            )

    rank_peaks = []
    for row in cells:
        lifetimes = []
        for action in (a for cell in row for a in cell if a.kind == "F"):
            release = Action(action.stage, "B", action.microbatch)
            if release not in actions:
                release = Action(action.stage, "W", action.microbatch)
            lifetimes.append((start[action], end[release]))
        rank_peaks.append(Fraction(_peak(lifetimes)))
    peak = max(rank_peaks)
    return ReplayResult(
        makespan=max(end.values()),
        peak=peak,
        peak_share=peak / stages_per_rank,
        rank_peaks=tuple(rank_peaks),
        start=start,
        end=end,
    )


def _describe_deadlock(cells, position, num_stages, actions, end) -> str:
    stuck = []
    for rank, row in enumerate(cells):
        if position[rank] < len(row):
            cell = row[position[rank]]
            waits = [
                d for d in _cell_dependencies(cell, num_stages, actions) if d not in end
            ]
            stuck.append(
                f"rank {rank} at {';'.join(map(str, cell))} waits for "
                f"{', '.join(map(str, waits))}"
            )
    return "deadlock: " + "; ".join(stuck)


def infer_stages_per_rank(rows: Sequence[Sequence[Action | Cell]]) -> int:
    """V = (largest stage index + 1) / number of ranks, which must divide."""
    cells = _normalize(rows)
    stages = 1 + max((a.stage for row in cells for c in row for a in c), default=-1)
    if not cells or stages == 0 or stages % len(cells):
        raise ReplayError(
            f"cannot infer the stages per rank: {stages} stages on {len(cells)} ranks"
        )
    return stages // len(cells)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Replay a compute_only pipeline order (rules: module docstring)."
    )
    parser.add_argument("file", help="compute_only CSV, row r = rank r")
    parser.add_argument(
        "--stages-per-rank",
        type=int,
        metavar="V",
        help="stages each rank holds (default: inferred from the stage indices)",
    )
    args = parser.parse_args(argv)
    try:
        rows = load(args.file)
        v = args.stages_per_rank
        result = replay(rows, infer_stages_per_rank(rows) if v is None else v)
    except (OSError, ReplayError) as error:
        print(f"{args.file}: error: {error}", file=sys.stderr)
        return 1
    print(
        f"makespan={format_number(result.makespan)} peak={format_number(result.peak)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
