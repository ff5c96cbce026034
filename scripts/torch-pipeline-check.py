#!/usr/bin/env python3
"""Runs a FlexPipe-exported schedule in PyTorch and checks that it trains right.

    torch-pipeline-check.py SCHEDULE.csv --format compute_only|compute_comms

Starts one gloo process per row of the CSV (row r = rank r), builds a small
model of as many stages as the file names (stage s: Linear(D, D) + tanh, MSE
loss), places stage s on the rank whose row computes it, loads the file into
`torch.distributed.pipelining`'s `_PipelineScheduleRuntime` with `_load_csv`,
runs one training step, and compares the loss and every parameter gradient
with the same model and data run without pipelining. Prints one JSON line:
{"ok": ..., "loss_error": ..., "grad_error": ..., "error": ...}; exits 0 when
both errors are within --tolerance, 1 otherwise (or when a rank fails or the
run exceeds --timeout seconds).

Needs a Python with torch (e.g. the virtual environment scripts/test-torch.sh
makes); FlexPipe's default test suite does not.
"""

import argparse
import copy
import datetime
import json
import os
import re
import socket
import sys
import tempfile

CELL = re.compile(r"^(\d+)(F|B|I|W)(\d+)$")
WIDTH = 8  # features per layer
ROWS = 2  # samples per micro-batch


def layout(path):
    """(ranks, stage -> rank, micro-batches) from a schedule CSV."""
    with open(path) as f:
        rows = [line.rstrip("\n").split(",") for line in f]
    while rows and rows[-1] == [""]:
        rows.pop()
    rank_of, mbs = {}, 0
    for rank, row in enumerate(rows):
        for cell in row:
            for part in re.split(r"[();]", cell.strip()):
                m = CELL.match(part)
                if m:
                    rank_of[int(m.group(1))] = rank
                    mbs = max(mbs, int(m.group(3)) + 1)
    return len(rows), rank_of, mbs


def model(stages):
    import torch
    from torch import nn

    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(stages)]


def data(mbs):
    import torch

    g = torch.Generator().manual_seed(1)
    x = torch.randn(mbs * ROWS, WIDTH, generator=g)
    y = torch.randn(mbs * ROWS, WIDTH, generator=g)
    return x, y


def rank_main(rank, args, ranks, rank_of, mbs, port, out_dir):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    result = {"rank": rank}
    try:
        dist.init_process_group(
            "gloo",
            rank=rank,
            world_size=ranks,
            init_method=f"tcp://127.0.0.1:{port}",
            timeout=datetime.timedelta(seconds=args.timeout),
        )
        num_stages = max(rank_of) + 1
        modules = model(num_stages)
        x, y = data(mbs)
        mse = torch.nn.MSELoss()

        # The reference: the whole model, the loss averaged over micro-batches.
        reference = [copy.deepcopy(m) for m in modules]
        out = x
        for m in reference:
            out = m(out)
        losses = [mse(o, t) for o, t in zip(out.chunk(mbs), y.chunk(mbs))]
        total = torch.stack(losses).mean()
        total.backward()

        mine = sorted(s for s, r in rank_of.items() if r == rank)
        stages = [
            PipelineStage(
                copy.deepcopy(modules[s]),
                s,
                num_stages,
                torch.device("cpu"),
                input_args=torch.empty(ROWS, WIDTH),
            )
            for s in mine
        ]
        schedule = _PipelineScheduleRuntime(stages, n_microbatches=mbs, loss_fn=mse)
        schedule._load_csv(args.csv, format=args.format)
        step_losses = []
        inputs = (x,) if 0 in mine else ()
        target = y if num_stages - 1 in mine else None
        schedule.step(*inputs, target=target, losses=step_losses)

        grad_error = 0.0
        for stage in stages:
            ref = dict(reference[stage.stage_index].named_parameters())
            for name, p in stage.submod.named_parameters():
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                grad_error = max(grad_error, (g - ref[name].grad).abs().max().item())
        result["grad_error"] = grad_error
        if num_stages - 1 in mine:
            pipelined = torch.stack([l.detach() for l in step_losses]).mean()
            result["loss_error"] = abs(pipelined.item() - total.item())
        dist.barrier()
        dist.destroy_process_group()
    except Exception as e:  # reported to the parent, which fails the run
        result["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--format", choices=["compute_only", "compute_comms"], required=True)
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--timeout", type=int, default=120)
    args = parser.parse_args()

    # Imported once here: the ranks are forked from this process.
    import torch  # noqa: F401
    import torch.multiprocessing as mp
    from torch.distributed.pipelining import schedules  # noqa: F401

    ranks, rank_of, mbs = layout(args.csv)
    if not rank_of:
        print(json.dumps({"ok": False, "error": "no computations in the file"}))
        return 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as out_dir:
        ctx = mp.start_processes(
            rank_main,
            args=(args, ranks, rank_of, mbs, port, out_dir),
            nprocs=ranks,
            join=False,
            start_method="fork",
        )
        deadline = datetime.datetime.now() + datetime.timedelta(seconds=args.timeout + 30)
        error = None
        try:
            while not ctx.join(timeout=1):
                if datetime.datetime.now() > deadline:
                    error = f"no result after {args.timeout + 30} s (a hang)"
                    break
        except Exception as e:
            error = f"a rank died: {e}".splitlines()[0]
        if error:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
        results = []
        for r in range(ranks):
            path = os.path.join(out_dir, f"rank{r}.json")
            if os.path.exists(path):
                with open(path) as f:
                    results.append(json.load(f))
    errors = [f"rank {r['rank']}: {r['error']}" for r in results if "error" in r]
    if error:
        errors.insert(0, error)
    if len(results) < ranks and not errors:
        errors.append(f"only {len(results)} of {ranks} ranks reported")
    grad = max((r.get("grad_error", 0.0) for r in results), default=0.0)
    loss = max((r["loss_error"] for r in results if "loss_error" in r), default=None)
    ok = not errors and loss is not None and loss <= args.tolerance and grad <= args.tolerance
    print(
        json.dumps(
            {
                "ok": ok,
                "loss_error": loss,
                "grad_error": grad,
                "error": "; ".join(errors) if errors else None,
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
