#!/usr/bin/env python3
r"""PyTorch's own kernels for the operations `bertrain bench kernels` times, at the same BERT-base shape, so that a
kernel can be set beside the one PyTorch runs for the same work (one JSON line per operation).

Each row is the operation as a PyTorch BERT step runs it under torch.autocast(bfloat16) (or in fp32 with
--precision fp32): the embeddings' LayerNorm + dropout and every layer's dropout + residual add + LayerNorm on the
fp32 residual stream (several eager kernels each), scaled_dot_product_attention with dropout (the flash or
memory-efficient kernel PyTorch picks), the erf GELU, the three embedding tables' backward, the fused AdamW step
(fp32 weights: autocast keeps no bf16 copy) and the gradient norm over the whole model. The names are bench kernels' rows; a "_backward" row times the
gradients of the inputs and parameters of its "_forward" row from a kept graph (torch.autograd.grad with
retain_graph). Timing as bench kernels: before every timed run L2 is flushed (a 256 MB buffer is zeroed), CUDA events
around the operation alone, median of --repeat runs after --warmup. On --device cpu (a check of the script, small
shapes) wall-clock time instead.

Examples:
  python3 tests/reference/bench_torch_kernels.py --device cuda                # BERT-base, 256 x 128, bf16
  python3 tests/reference/bench_torch_kernels.py --device cuda --only attention
  python3 tests/reference/bench_torch_kernels.py --device cpu --batch 2 --seq 16 --hidden 64 --heads 2 \
      --intermediate 128 --vocab 500 --layers 2 --repeat 2 --warmup 1
"""

import argparse
import json
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

EPS = 1e-12  # BERT's layer_norm_eps


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16",
                   help="bf16: the tensors autocast gives each operation (default); fp32: everything fp32")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--intermediate", type=int, default=3072)
    p.add_argument("--vocab", type=int, default=31090)
    p.add_argument("--layers", type=int, default=12, help="sizes the parameters of the Adam and norm rows")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--only", default="", help="only operations whose name contains this text")
    a = p.parse_args()
    for name in ("batch", "seq", "hidden", "heads", "intermediate", "vocab", "layers", "repeat"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1")
    if a.warmup < 0:
        p.error("--warmup must not be negative")
    if a.hidden % a.heads:
        p.error(f"--hidden {a.hidden} is not a multiple of --heads {a.heads}")
    if a.seq > 512:
        p.error("--seq must be at most 512 (the position table)")
    if not 0.0 <= a.dropout < 1.0:
        p.error("--dropout must be in [0, 1)")
    if a.device == "cuda" and not torch.cuda.is_available():
        print("bench_torch_kernels.py: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        sys.exit(2)
    return a


class Timer:
    """Median time of fn() in microseconds: CUDA events around fn alone after an L2 flush, or wall clock on the CPU."""

    def __init__(self, device, repeat, warmup):
        self.device, self.repeat, self.warmup = device, repeat, warmup
        self.flush = torch.empty(256 << 20, dtype=torch.uint8, device=device) if device == "cuda" else None

    def median_us(self, fn):
        times = []
        for i in range(self.warmup + self.repeat):
            if self.device == "cuda":
                self.flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                elapsed_us = start.elapsed_time(end) * 1e3
            else:
                t0 = time.perf_counter()
                fn()
                elapsed_us = (time.perf_counter() - t0) * 1e6
            if i >= self.warmup:
                times.append(elapsed_us)
        return statistics.median(times)


def grads_of(outputs, inputs, grad_outputs):
    """A function computing d(outputs)/d(inputs) from the kept graph, every time it is called."""
    return lambda: torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph=True)


def operations(a, dev):
    """(name, shape label, function) for every operation, in bench kernels' order; tensors built lazily."""
    T, H, I, NH = a.batch * a.seq, a.hidden, a.intermediate, a.heads
    act = torch.bfloat16 if a.precision == "bf16" else torch.float32  # what autocast gives the GEMMs' outputs
    g = torch.Generator(device=dev).manual_seed(1)

    def rand(*shape, dtype=torch.float32, grad=False, lo=-1.0, hi=1.0):
        t = torch.rand(*shape, generator=g, device=dev, dtype=torch.float32) * (hi - lo) + lo
        return t.to(dtype).requires_grad_(grad)

    def layernorm_dropout():
        # The embeddings under autocast: their sum is fp32, LayerNorm runs in fp32, then dropout.
        x, gamma, beta = rand(T, H, grad=True), rand(H, grad=True, lo=0.5, hi=1.5), rand(H, grad=True)
        forward = lambda: F.dropout(F.layer_norm(x, (H,), gamma, beta, EPS), a.dropout, training=True)
        return forward, grads_of(forward(), (x, gamma, beta), rand(T, H))

    def dropout_residual_layernorm():
        # A layer's output: dropout of the GEMM output (autocast dtype) + the fp32 residual, LayerNorm in fp32.
        x, residual = rand(T, H, dtype=act, grad=True), rand(T, H, grad=True)
        gamma, beta = rand(H, grad=True, lo=0.5, hi=1.5), rand(H, grad=True)
        forward = lambda: F.layer_norm(F.dropout(x, a.dropout, training=True) + residual, (H,), gamma, beta, EPS)
        return forward, grads_of(forward(), (x, residual, gamma, beta), rand(T, H))

    def attention():
        q, k, v = (rand(a.batch, NH, a.seq, H // NH, dtype=act, grad=True) for _ in range(3))
        forward = lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=a.dropout)
        return forward, grads_of(forward(), (q, k, v), rand(a.batch, NH, a.seq, H // NH, dtype=act))

    def activation():
        x = rand(T, I, dtype=act, grad=True, lo=-3.0, hi=3.0)
        forward = lambda: F.gelu(x)
        return forward, grads_of(forward(), (x,), rand(T, I, dtype=act))

    def embedding():
        ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g, device=dev)
        positions = torch.arange(a.seq, device=dev).expand(a.batch, a.seq)
        types = torch.zeros_like(ids)
        word, pos, typ = rand(a.vocab, H, grad=True), rand(512, H, grad=True), rand(2, H, grad=True)
        out = F.embedding(ids, word) + F.embedding(positions, pos) + F.embedding(types, typ)
        return None, grads_of(out, (word, pos, typ), rand(a.batch, a.seq, H))

    # BERT's parameter count at this shape (embeddings and their LayerNorm, the layers, the pooler).
    n = (a.vocab + 512 + 2 + 2) * H + a.layers * (4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H) + H * H + H

    def model_parameters():
        # One flat fp32 tensor with a gradient.
        p = torch.nn.Parameter(rand(n, lo=-0.05, hi=0.05))
        p.grad = rand(n, lo=-1e-3, hi=1e-3)
        return p

    def adam():
        opt = torch.optim.AdamW([model_parameters()], lr=1e-4, fused=dev == "cuda")
        return opt.step

    def gradient_norm():
        grad = model_parameters().grad
        return lambda: torch.linalg.vector_norm(grad)

    shape = f"T={T} H={H}, p={a.dropout}"
    pairs = [("layernorm_dropout", shape, layernorm_dropout),
             ("dropout_residual_layernorm", shape, dropout_residual_layernorm),
             ("attention", f"B {a.batch}, S {a.seq}, NH {NH}, p={a.dropout}", attention),
             ("activation", f"T*I={T * I}, gelu", activation)]
    ops = []
    for name, label, make in pairs:
        ops.append((f"{name}_forward", label, lambda make=make: make()[0]))
        ops.append((f"{name}_backward", label, lambda make=make: make()[1]))
    ops.append(("embedding_backward", f"T={T} H={H} V={a.vocab}", lambda: embedding()[1]))
    params = f"N {n / 1e6:.1f} M"
    ops.append(("adam_update", params + ", fused AdamW (fp32, no bf16 copy)", adam))
    ops.append(("sum_of_squares", params + ", the gradient's norm", gradient_norm))
    return ops


def main():
    a = parse_args()
    dev = a.device
    timer = Timer(dev, a.repeat, a.warmup)
    common = {"impl": "pytorch", "torch": torch.__version__, "precision": a.precision, "device": dev,
              "device_name": torch.cuda.get_device_name() if dev == "cuda" else platform.processor() or "cpu"}
    ran = 0
    for name, label, make in operations(a, dev):
        if a.only and a.only not in name:
            continue
        fn = make()
        us = timer.median_us(fn)
        print(json.dumps({"record": "kernel", "kernel": name, "shape": label, "median_us": round(us, 2), **common}),
              flush=True)
        del fn
        if dev == "cuda":
            torch.cuda.empty_cache()
        ran += 1
    if ran == 0:
        print(f"bench_torch_kernels.py: no operation's name contains {a.only!r}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
