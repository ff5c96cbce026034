#!/usr/bin/env python3
"""Trains FlexPipe's built-in GPT in PyTorch: the speed and numerics yardstick.

    torch-gpt.py [--weights INIT --batches BATCHES] --hidden H --heads A
                 --seq S --vocab V --layers L --microbatches M
                 [--micro-batch-size B] [--ranks 1|2] [--iterations N]
                 [--device cpu|cuda] [--math fp32|tf32|bf16]
                 [--losses FLEXPIPE_LOSSES]

Builds the same model as runtime/lib/Model.cpp (token + position embedding;
pre-LayerNorm blocks with causal multi-head attention and a tanh-GELU MLP;
final LayerNorm; LM head without bias; mean cross-entropy) from the initial
weights and batches that `flexpipe-reference --initial-weights --batches`
writes, in PyTorch's own idioms (F.layer_norm, scaled_dot_product_attention,
F.gelu, F.cross_entropy). With --ranks 2 it splits the layers into two
stages and runs torch.distributed.pipelining's Schedule1F1B over gloo, one
thread per rank; with --ranks 1 it accumulates the micro-batches' gradients
in one process. Adam as FlexPipe's (lr 1e-3, betas 0.9/0.999, eps 1e-8).

Without --weights and --batches it draws random weights (normal, 0.02) and
tokens: speed only (models whose weight files would be too large to carry).
--device cuda runs --ranks 1 on the GPU (scripts/gpu-test.sh): --math tf32
lets the products use TF32 tensor cores, bf16 runs them under autocast
(bf16 products, fp32 master weights and Adam: FlexPipe's
FLEXPIPE_CUDA_MATH=bf16); it also prints the peak of allocated device memory.

Prints the mean iteration time over the iterations after the first and, with
--losses, the largest difference from FlexPipe's per-iteration losses.
"""

import argparse
import datetime
import json
import os
import socket
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-5


def read_weights(path):
    weights = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            weights[parts[0]] = torch.tensor([float(x) for x in parts[2:]], dtype=torch.float32)
    return weights


def random_weights(args, device):
    """Weights of FlexPipe's names and sizes: gains 1, biases 0, the rest
    normal with standard deviation 0.02."""
    h, v, s = args.hidden, args.vocab, args.seq
    g = torch.Generator(device=device).manual_seed(1)
    normal = lambda n: torch.randn(n, generator=g, device=device) * 0.02
    ones = lambda n: torch.ones(n, device=device)
    zeros = lambda n: torch.zeros(n, device=device)
    w = {"embedding.token": normal(v * h), "embedding.position": normal(s * h),
         "head.ln.gain": ones(h), "head.ln.bias": zeros(h), "head.weight": normal(h * v)}
    for i in range(args.layers):
        p = f"block{i}."
        w.update({p + "ln1.gain": ones(h), p + "ln1.bias": zeros(h),
                  p + "attn.qkv.weight": normal(h * 3 * h), p + "attn.qkv.bias": zeros(3 * h),
                  p + "attn.out.weight": normal(h * h), p + "attn.out.bias": zeros(h),
                  p + "ln2.gain": ones(h), p + "ln2.bias": zeros(h),
                  p + "mlp.fc1.weight": normal(h * 4 * h), p + "mlp.fc1.bias": zeros(4 * h),
                  p + "mlp.fc2.weight": normal(4 * h * h), p + "mlp.fc2.bias": zeros(h)})
    return w


def random_batches(args, device):
    g = torch.Generator(device=device).manual_seed(2)
    shape = (args.micro_batch_size, args.seq)
    draw = lambda: torch.randint(args.vocab, shape, generator=g, device=device)
    return {(it, mb): (draw(), draw())
            for it in range(args.iterations) for mb in range(args.microbatches)}


def read_batches(path, seq):
    """{(iteration, micro-batch): (tokens, targets)} as [1, seq] tensors."""
    batches = {}
    with open(path) as f:
        for line in f:
            head, tail = line.split("/")
            nums = [int(x) for x in head.split()]
            it, mb, tokens = nums[0], nums[1], nums[2:]
            targets = [int(x) for x in tail.split()]
            batches[(it, mb)] = (
                torch.tensor(tokens).view(-1, seq),
                torch.tensor(targets).view(-1, seq),
            )
    return batches


class Block(nn.Module):
    def __init__(self, w, i, hidden, heads):
        super().__init__()
        p = f"block{i}."
        self.heads = heads
        self.hidden = hidden
        P = lambda name, *shape: nn.Parameter(w[p + name].view(*shape).clone())
        self.ln1g, self.ln1b = P("ln1.gain", hidden), P("ln1.bias", hidden)
        # FlexPipe stores x W with W [in, out]; nn.functional.linear wants
        # [out, in].
        self.wqkv = nn.Parameter(w[p + "attn.qkv.weight"].view(hidden, 3 * hidden).t().contiguous())
        self.bqkv = P("attn.qkv.bias", 3 * hidden)
        self.wo = nn.Parameter(w[p + "attn.out.weight"].view(hidden, hidden).t().contiguous())
        self.bo = P("attn.out.bias", hidden)
        self.ln2g, self.ln2b = P("ln2.gain", hidden), P("ln2.bias", hidden)
        self.w1 = nn.Parameter(w[p + "mlp.fc1.weight"].view(hidden, 4 * hidden).t().contiguous())
        self.b1 = P("mlp.fc1.bias", 4 * hidden)
        self.w2 = nn.Parameter(w[p + "mlp.fc2.weight"].view(4 * hidden, hidden).t().contiguous())
        self.b2 = P("mlp.fc2.bias", hidden)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        qkv = F.linear(F.layer_norm(x, (h,), self.ln1g, self.ln1b, EPS), self.wqkv, self.bqkv)
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in qkv.split(h, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + F.linear(a.transpose(1, 2).reshape(b, s, h), self.wo, self.bo)
        m = F.gelu(F.linear(F.layer_norm(x, (h,), self.ln2g, self.ln2b, EPS), self.w1, self.b1), approximate="tanh")
        return x + F.linear(m, self.w2, self.b2)


class Embedding(nn.Module):
    def __init__(self, w, vocab, seq, hidden):
        super().__init__()
        self.token = nn.Parameter(w["embedding.token"].view(vocab, hidden).clone())
        self.position = nn.Parameter(w["embedding.position"].view(seq, hidden).clone())

    def forward(self, tokens):
        return F.embedding(tokens, self.token) + self.position[: tokens.shape[1]]


class Head(nn.Module):
    def __init__(self, w, vocab, hidden):
        super().__init__()
        self.gain = nn.Parameter(w["head.ln.gain"].clone())
        self.bias = nn.Parameter(w["head.ln.bias"].clone())
        self.weight = nn.Parameter(w["head.weight"].view(hidden, vocab).t().contiguous())

    def forward(self, x):
        return F.linear(F.layer_norm(x, (x.shape[-1],), self.gain, self.bias, EPS), self.weight)


def build(args, w, first, last, blocks):
    layers = []
    if first:
        layers.append(Embedding(w, args.vocab, args.seq, args.hidden))
    layers += [Block(w, i, args.hidden, args.heads) for i in blocks]
    if last:
        layers.append(Head(w, args.vocab, args.hidden))
    return nn.Sequential(*layers)


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def adam(params):
    return torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)


def run_single(args, w, batches):
    torch.set_num_threads(1)
    device = torch.device(args.device)
    model = build(args, w, True, True, range(args.layers)).to(device)
    opt = adam(model.parameters())
    cuda = device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda and args.math == "bf16")
    times, losses = [], []
    for it in range(args.iterations):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        total = torch.zeros((), device=device)
        for mb in range(args.microbatches):
            tokens, targets = (t.to(device) for t in batches[(it, mb)])
            with autocast:
                loss = loss_fn(model(tokens), targets) / args.microbatches
            loss.backward()
            total += loss.detach()
        opt.step()
        opt.zero_grad()
        losses.append(total.item())  # waits for the GPU
        times.append(time.perf_counter() - start)
    return times, losses


def rank_main(rank, args, w, batches, port, out):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2, init_method=f"tcp://127.0.0.1:{port}",
                            timeout=datetime.timedelta(seconds=600))
    half = args.layers // 2
    blocks = range(0, half) if rank == 0 else range(half, args.layers)
    module = build(args, w, rank == 0, rank == 1, blocks)
    # One micro-batch's input: PipelineStage checks every micro-batch's
    # shape against it.
    b = args.micro_batch_size
    example = (torch.zeros(b, args.seq, dtype=torch.long) if rank == 0
               else torch.zeros(b, args.seq, args.hidden))
    stage = PipelineStage(module, rank, 2, torch.device("cpu"), input_args=example)
    schedule = Schedule1F1B(stage, n_microbatches=args.microbatches, loss_fn=loss_fn)
    opt = adam(module.parameters())
    times, losses = [], []
    for it in range(args.iterations):
        tokens = torch.cat([batches[(it, mb)][0] for mb in range(args.microbatches)])
        targets = torch.cat([batches[(it, mb)][1] for mb in range(args.microbatches)])
        dist.barrier()
        start = time.perf_counter()
        mb_losses = []
        if rank == 0:
            schedule.step(tokens)
        else:
            schedule.step(target=targets, losses=mb_losses)
        opt.step()
        opt.zero_grad()
        dist.barrier()
        times.append(time.perf_counter() - start)
        if rank == 1:
            losses.append(torch.stack(mb_losses).mean().item())
    if rank == 1:
        with open(out, "w") as f:
            json.dump({"times": times, "losses": losses}, f)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("hidden", "heads", "seq", "vocab", "layers", "microbatches"):
        parser.add_argument("--" + name, type=int, required=True)
    parser.add_argument("--weights", help="flexpipe-reference --initial-weights (else random)")
    parser.add_argument("--batches", help="flexpipe-reference --batches (else random)")
    parser.add_argument("--micro-batch-size", type=int, default=1)
    parser.add_argument("--ranks", type=int, choices=[1, 2], default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--math", choices=["fp32", "tf32", "bf16"], default="fp32")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--losses", help="FlexPipe's losses, one per iteration")
    args = parser.parse_args()
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    if (args.weights is None) != (args.batches is None):
        parser.error("give both --weights and --batches, or neither (random)")
    if args.weights is None and args.losses:
        parser.error("--losses needs FlexPipe's initial weights (--weights, --batches)")
    if args.device == "cuda":
        if args.ranks != 1:
            parser.error("--device cuda runs --ranks 1")
        if not torch.cuda.is_available():
            parser.error("--device cuda: this PyTorch sees no GPU")
        tf32 = args.math == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    elif args.math != "fp32":
        parser.error("--math tf32 and bf16 need --device cuda")

    if args.weights is None:
        w = random_weights(args, args.device)
        batches = random_batches(args, args.device)
    else:
        w = read_weights(args.weights)
        batches = read_batches(args.batches, args.seq)
    if args.ranks == 1:
        times, losses = run_single(args, w, batches)
    else:
        import torch.multiprocessing as mp

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "result.json")
            mp.start_processes(rank_main, args=(args, w, batches, port, out), nprocs=2,
                               start_method="fork")
            with open(out) as f:
                result = json.load(f)
        times, losses = result["times"], result["losses"]
    later = times[1:] if len(times) > 1 else times
    print(f"pytorch {torch.__version__} ranks {args.ranks} on {args.device} ({args.math}): "
          f"mean iteration time {1e3 * sum(later) / len(later):.3f} ms (iterations after the first)")
    if args.device == "cuda":
        print(f"peak allocated device memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")
    if args.losses:
        with open(args.losses) as f:
            theirs = [float(x) for x in f if x.strip()]
        n = min(len(theirs), len(losses))
        worst = max(abs(a - b) for a, b in zip(losses[:n], theirs[:n]))
        print(f"losses: pytorch {losses[0]:.6f} -> {losses[n - 1]:.6f}, flexpipe "
              f"{theirs[0]:.6f} -> {theirs[n - 1]:.6f}, worst difference {worst:.2e} over {n} iterations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
