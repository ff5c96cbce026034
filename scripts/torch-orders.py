#!/usr/bin/env python3
"""Regenerates PyTorch's reference pipeline orders and the differential table.

Instantiates the schedule classes of torch.distributed.pipelining.schedules
(PyTorch 2.15) with stand-in stage objects, without any process group, and
reads the per-rank orders they build. Every class computes the orders of all
ranks when it is constructed, so one instance per (class, P, M) suffices; it
is built for rank 0. The stand-in stage carries what the constructors read:
stage_index, num_stages, group_size, group_rank and submod (None, which skips
the torch.compile check); the schedule sets stage_index_to_group_rank on it.

Where the orders come from, under the names used in the grid layout:
  GPipe                  ScheduleGPipe, 1 stage per rank.
  1F1B                   Schedule1F1B, 1 stage per rank.
  Interleaved1F1B        ScheduleInterleaved1F1B, 2 stages per rank, loop
                         placement (stage s on rank s mod P).
  LoopedBFS              ScheduleLoopedBFS, 2 stages per rank, loop placement.
  InterleavedZeroBubble  ScheduleInterleavedZeroBubble, 2 stages per rank,
                         loop placement.
  ZB1P                   ScheduleInterleavedZeroBubble with 1 stage per rank.
  ZBVZeroBubble          ScheduleZBVZeroBubble, 2 stages per rank, V placement
                         (stages 0..P-1 on ranks 0..P-1, P..2P-1 on P-1..0).
  DualPipeV              ScheduleDualPipeV, 2 stages per rank, V placement.
Every order is the class's own `pipeline_order` attribute; the script
builds none itself. The multi-stage classes compute it in their constructor
(compute_only, None for an idle slot of PyTorch's lock-step grid). The
single-stage classes have one too: PipelineScheduleSingle's constructor sets
it from _get_pipeline_order(), which ScheduleGPipe and Schedule1F1B implement
from their definition for every rank (idle slots dropped, REDUCE_GRAD and
WAIT_REDUCE_GRAD appended after a stage's last backward).

PyTorch's 1F1B numbering bug: Schedule1F1B numbers the last rank's forwards
1..M instead of 0..M-1 (the last rank has no warm-up forward, and the
steady-state loop increments the micro-batch index before its first use), so
its order cannot be replayed (the last stage never runs F0 and runs an F<M>
no other stage has). This script renumbers the last rank's forwards to
0..M-1 before any use; --pytorch-1f1b writes PyTorch's own order instead
(what the committed grid/ holds).

A class that raises for a size (e.g. Schedule1F1B for M < P, the interleaved
classes for M not a multiple of their number of rounds max(1, M // P),
DualPipeV for M < 2P) has no order there: no file, no table row.

Outputs:
  --out DIR     writes DIR/ppP_mM/NAME.csv for every size given with --size
                (default: the sizes of the committed reference grid/),
                exactly as PyTorch's own _dump_csv does (csv module, `\\r\\n`
                line ends, empty cell for an idle slot): byte-for-byte the
                files of the reference grid/, except 1F1B's numbering fix.
  --table FILE  writes the differential test's reference table, `family,pp,m,
                makespan,peak`, replayed by test/Differential/replay.py (its
                rules; exact numbers) for the families GPipe, 1F1B,
                Interleaved1F1B, LoopedBFS, ZB1P, ZBVZeroBubble at pp in 2..8
                and m in 1..4*pp, pp=16 at m in {16, 24, 32, 48, 64} and
                pp=32 at m in {32, 64}. Prints every (family, pp, m) PyTorch
                refuses, and every order that fails to replay (none does with
                PyTorch 2.15 and the 1F1B fix).

With PyTorch 2.15, of the table's 6 x 147 (family, pp, m), 780 give a row
and 102 are refused; none deadlocks or otherwise fails to replay (PyTorch's
unfixed 1F1B would fail at every size). Refused:
  1F1B             m < pp (28 sizes): "must be greater than or equal to the
                   number of stages".
  Interleaved1F1B  M not a multiple of max(1, M // P) (37 sizes each, the
  and ZB1P         same ones): pp=2: m 5 7; pp=3: 7 10 11; pp=4: 9 11 13 14;
                   pp=5: 11 13 16 17 19; pp=6: 13 15 17 19 20 22 23;
                   pp=7: 15 17 19 22 23 25 26; pp=8: 17 19 21 23 25 26 28 29
                   31. Nothing at pp=16 or pp=32.
GPipe, LoopedBFS and ZBVZeroBubble accept every size (ZBVZeroBubble builds
for max(2P-1, M) micro-batches and blanks those >= M).

Usage:
  torch-orders.py --out DIR [--size PxM ...] [--pytorch-1f1b]
  torch-orders.py --table FILE
Run it with a Python that has torch 2.15, e.g. /work/torch-venv/bin/python.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.distributed.pipelining import schedules

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent / "test" / "Differential")
)
import replay  # noqa: E402

EXPECTED_TORCH = "2.15"

# The sizes of the committed reference grid (shared/reference/peer-orders/grid).
GRID_SIZES = [(2, 4), (2, 5), (3, 3), (3, 9), (4, 4), (4, 5), (4, 12), (5, 5), (5, 16)]

# The families of the reference table, in its row order.
TABLE_FAMILIES = [
    "GPipe",
    "1F1B",
    "Interleaved1F1B",
    "LoopedBFS",
    "ZB1P",
    "ZBVZeroBubble",
]


def table_sizes() -> Iterator[tuple[int, int]]:
    """(pp, m) of the reference table."""
    for pp in range(2, 9):
        for m in range(1, 4 * pp + 1):
            yield pp, m
    for m in (16, 24, 32, 48, 64):
        yield 16, m
    for m in (32, 64):
        yield 32, m


@dataclass
class StandInStage:
    """What the schedule constructors read from a pipeline stage."""

    stage_index: int
    num_stages: int
    group_size: int
    group_rank: int
    submod: object = None
    stage_index_to_group_rank: dict[int, int] = field(default_factory=dict)

    @property
    def is_first(self) -> bool:
        return self.stage_index == 0

    @property
    def is_last(self) -> bool:
        return self.stage_index == self.num_stages - 1


@dataclass(frozen=True)
class Family:
    """A schedule class with its stages per rank and stage placement."""

    name: str
    cls: Callable
    stages_per_rank: int
    v_shape: bool = False

    def rank0_stages(self, pp: int) -> list[StandInStage]:
        """The stand-in stages of rank 0 (the constructors build every rank)."""
        num_stages = pp * self.stages_per_rank
        if self.stages_per_rank == 1:
            indices = [0]
        elif self.v_shape:
            indices = [0, num_stages - 1]
        else:
            indices = [pp * i for i in range(self.stages_per_rank)]
        return [StandInStage(i, num_stages, pp, 0) for i in indices]

    def build(self, pp: int, m: int) -> object:
        """Constructs the schedule; raises whatever PyTorch raises."""
        stages = self.rank0_stages(pp)
        if issubclass(self.cls, schedules.PipelineScheduleSingle):
            return self.cls(stages[0], m)
        return self.cls(stages, m)


FAMILIES = {
    f.name: f
    for f in [
        Family("GPipe", schedules.ScheduleGPipe, 1),
        Family("1F1B", schedules.Schedule1F1B, 1),
        Family("Interleaved1F1B", schedules.ScheduleInterleaved1F1B, 2),
        Family("LoopedBFS", schedules.ScheduleLoopedBFS, 2),
        Family("InterleavedZeroBubble", schedules.ScheduleInterleavedZeroBubble, 2),
        Family("ZB1P", schedules.ScheduleInterleavedZeroBubble, 1),
        Family("ZBVZeroBubble", schedules.ScheduleZBVZeroBubble, 2, v_shape=True),
        Family("DualPipeV", schedules.ScheduleDualPipeV, 2, v_shape=True),
    ]
}

Order = list[list[object]]  # rank -> actions (PyTorch _Action or None)


def fix_1f1b_numbering(order: Order, m: int) -> Order:
    """Renumbers the last rank's forwards of Schedule1F1B from 1..M to 0..M-1.

    Leaves an order already numbered 0..M-1 alone (a fixed PyTorch) and
    raises for any other numbering.
    """
    last = order[-1]
    forwards = [
        a.microbatch_index
        for a in last
        if a is not None and a.computation_type == schedules.F
    ]
    if forwards == list(range(m)):
        return order
    if forwards != list(range(1, m + 1)):
        raise RuntimeError(f"unexpected 1F1B last-rank forwards {forwards}")
    fixed = [
        (
            a._replace(microbatch_index=a.microbatch_index - 1)
            if a is not None and a.computation_type == schedules.F
            else a
        )
        for a in last
    ]
    return order[:-1] + [fixed]


class Refused(Exception):
    """PyTorch's schedule class raises for this size: it has no order there."""


def pytorch_order(name: str, pp: int, m: int, fix_1f1b: bool = True) -> Order:
    """PyTorch's per-rank order of family `name`; raises Refused if it has none."""
    try:
        schedule = FAMILIES[name].build(pp, m)
    except Exception as error:  # Whatever the constructor raises.
        text = str(error).splitlines()[0] if str(error) else ""
        raise Refused(f"{type(error).__name__}: {text}") from error
    table = schedule.pipeline_order
    order = [list(table[rank]) for rank in range(pp)]
    if name == "1F1B" and fix_1f1b:
        order = fix_1f1b_numbering(order, m)
    return order


def write_csv(path: Path, order: Order) -> None:
    """Writes an order as PyTorch's _dump_csv does (None -> empty cell)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        for row in order:
            writer.writerow(row)


def replay_order(name: str, order: Order) -> replay.ReplayResult:
    """Replays an order through its CSV cells, as replay.py reads a file."""
    rows = [
        [replay.parse_cell("" if a is None else str(a)) for a in row] for row in order
    ]
    rows = [[c for c in row if c] for row in rows]
    return replay.replay(rows, FAMILIES[name].stages_per_rank)


def write_outputs(out: Path, sizes: list[tuple[int, int]], fix_1f1b: bool) -> None:
    """Writes out/ppP_mM/NAME.csv for every family PyTorch has an order of."""
    for pp, m in sizes:
        for name in FAMILIES:
            try:
                order = pytorch_order(name, pp, m, fix_1f1b)
            except Refused as error:
                print(f"refused: {name} pp={pp} m={m}: {error}")
                continue
            write_csv(out / f"pp{pp}_m{m}" / f"{name}.csv", order)


def write_table(path: Path) -> int:
    """Writes the reference table; returns the number of orders that fail."""
    refused, failed, rows = [], [], []
    for name in TABLE_FAMILIES:
        for pp, m in table_sizes():
            try:
                order = pytorch_order(name, pp, m)
            except Refused as error:
                refused.append(f"{name} pp={pp} m={m}: {error}")
                continue
            try:
                result = replay_order(name, order)
            except replay.ReplayError as error:
                failed.append(f"{name} pp={pp} m={m}: {error}")
                continue
            rows.append(
                [
                    name,
                    pp,
                    m,
                    replay.format_number(result.makespan),
                    replay.format_number(result.peak),
                ]
            )
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["family", "pp", "m", "makespan", "peak"])
        writer.writerows(rows)
    for line in refused:
        print(f"refused: {line}")
    for line in failed:
        print(f"does not replay: {line}")
    print(
        f"{path}: {len(rows)} rows; {len(refused)} refused; {len(failed)} do not replay"
    )
    return len(failed)


def parse_size(text: str) -> tuple[int, int]:
    """Reads a --size argument, PxM."""
    pp, _, m = text.lower().partition("x")
    try:
        size = int(pp), int(m)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected PxM (e.g. 4x8), got {text!r}"
        ) from None
    if min(size) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {text!r}")
    return size


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Regenerate PyTorch's pipeline orders and the differential table "
        "(details: module docstring)."
    )
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="write DIR/ppP_mM/NAME.csv"
    )
    parser.add_argument(
        "--size",
        type=parse_size,
        action="append",
        metavar="PxM",
        help="a size for --out (repeatable; default: the reference grid's sizes)",
    )
    parser.add_argument(
        "--pytorch-1f1b",
        action="store_true",
        help="with --out, write PyTorch's own 1F1B (last-rank forwards numbered 1..M)",
    )
    parser.add_argument(
        "--table", type=Path, metavar="FILE", help="write the reference table"
    )
    args = parser.parse_args()
    if not args.out and not args.table:
        parser.error("give --out DIR, --table FILE, or both")
    if not torch.__version__.startswith(EXPECTED_TORCH):
        print(
            f"warning: torch {torch.__version__}, the references are from {EXPECTED_TORCH}",
            file=sys.stderr,
        )
    if args.out:
        write_outputs(args.out, args.size or GRID_SIZES, fix_1f1b=not args.pytorch_1f1b)
    if args.table:
        return 1 if write_table(args.table) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
