#!/usr/bin/env python3
"""PyTorch baseline for one BERT fine-tuning step (CPU, or CUDA with bf16 autocast), for comparison with bertrain.

One step = forward (BertForSequenceClassification) + BCEWithLogits loss + backward +
optimizer step + zero_grad, on a random batch. Default shape is BERT-mini
(4 layers, hidden 256, 4 heads, intermediate 1024) with a 31090-token vocab,
batch 32, seq 64, 4 labels. Prints one JSON line.

Examples:
  python tools/reference/bench_torch_step.py --threads 1 --steps 20 --warmup 3
  # BERT-base on a GPU with bf16 autocast, as `bertrain bench step --device cuda --precision bf16`:
  python tools/reference/bench_torch_step.py --device cuda --autocast-bf16 --layers 12 --hidden 768 \
      --heads 12 --intermediate 3072 --batch 256 --seq 128 --padding --attn sdpa
"""

import argparse
import json
import platform
import statistics
import time

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=31090)
    ap.add_argument("--labels", type=int, default=4)
    ap.add_argument("--no-dropout", action="store_true",
                    help="all dropout 0 (default: BERT defaults 0.1, classifier dropout 0.5)")
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"],
                    help="transformers attention implementation (default: %(default)s)")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw"])
    ap.add_argument("--padding", action="store_true",
                    help="random right padding (lengths in [seq/2, seq]) instead of full-length rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--autocast-bf16", action="store_true",
                    help="torch.autocast(dtype=bfloat16) around forward and loss (fp32 master weights)")
    ap.add_argument("--fused-adam", action="store_true", help="torch.optim.Adam(fused=True) (CUDA)")
    args = ap.parse_args()
    device = torch.device(args.device)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    drop = 0.0 if args.no_dropout else 0.1
    config = BertConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, intermediate_size=args.intermediate,
        hidden_dropout_prob=drop, attention_probs_dropout_prob=drop,
        classifier_dropout=0.0 if args.no_dropout else 0.5,
        max_position_embeddings=512, type_vocab_size=2, num_labels=args.labels,
        problem_type="multi_label_classification", attn_implementation=args.attn,
    )
    model = BertForSequenceClassification(config).to(device=device, dtype=torch.float32)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt_cls = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
    opt = opt_cls(params, lr=5e-5, **({"fused": True} if args.fused_adam else {}))
    loss_fn = torch.nn.BCEWithLogitsLoss()

    B, S = args.batch, args.seq
    input_ids = torch.randint(1, args.vocab, (B, S))
    attention_mask = torch.ones((B, S), dtype=torch.int64)
    if args.padding:
        lengths = torch.randint(S // 2, S + 1, (B,))
        for b in range(B):
            attention_mask[b, lengths[b]:] = 0
            input_ids[b, lengths[b]:] = 0
    token_type_ids = torch.zeros_like(input_ids)
    targets = torch.nn.functional.one_hot(torch.randint(0, args.labels, (B,)), args.labels).float()
    input_ids, attention_mask, token_type_ids, targets = (
        t.to(device) for t in (input_ids, attention_mask, token_type_ids, targets))

    def step():
        with torch.autocast(device_type=args.device, dtype=torch.bfloat16, enabled=args.autocast_bf16):
            logits = model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits
            loss = loss_fn(logits.float(), targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    sync()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        sync()  # each step timed whole, as bertrain bench step does
        times.append((time.perf_counter() - t0) * 1000.0)

    med = statistics.median(times)
    print(json.dumps({
        "bench": "torch_bert_step",
        "threads": args.threads,
        "steps": args.steps,
        "warmup": args.warmup,
        "batch": B, "seq": S, "layers": args.layers, "hidden": args.hidden, "heads": args.heads,
        "intermediate": args.intermediate, "vocab": args.vocab, "labels": args.labels,
        "dropout": not args.no_dropout, "attn": args.attn, "optimizer": args.optimizer,
        "padding": args.padding,
        "params": sum(p.numel() for p in params),
        "median_ms": round(med, 3),
        "mean_ms": round(statistics.fmean(times), 3),
        "min_ms": round(min(times), 3),
        "max_ms": round(max(times), 3),
        "samples_per_s": round(B * 1000.0 / med, 2),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "cpu": platform.processor() or platform.machine(),
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "autocast_bf16": args.autocast_bf16,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3) if args.device == "cuda" else None,
    }))


if __name__ == "__main__":
    main()
