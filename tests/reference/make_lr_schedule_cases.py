#!/usr/bin/env python3
"""Write Hugging Face Trainer's step-wise learning rates for fixed cases to tests/fixtures/lr_schedules.json.

tests/engine/test_lr_schedule.cpp checks engine/lr_schedule.cpp against this file. For each case the
script builds transformers.get_scheduler(name, optimizer, num_warmup_steps, num_training_steps) on a
torch.optim.SGD over one dummy parameter with lr = base_lr, and records optimizer.param_groups[0]["lr"]
before every optimizer.step() / scheduler.step() pair: lrs[k] is the learning rate that optimizer
update k (0-based) runs with. Each case runs total_steps + extra_steps updates, so the values past the
end of training (linear 0, cosine climbing back) are checked too.

bertrain kind -> transformers scheduler: linear -> "linear", cosine -> "cosine" (num_cycles 0.5),
constant -> "constant_with_warmup" when warmup > 0 and "constant" otherwise (transformers' "constant"
ignores num_warmup_steps; bertrain's constant warms up like "constant_with_warmup"; with no warmup the
script checks that both give the same lrs).

Cases using a warmup ratio get their warmup from TrainingArguments(warmup_steps=ratio)
.get_warmup_steps(total_steps) (transformers 5 takes a ratio as a warmup_steps < 1; 4.x's warmup_ratio
computed the same ceil(total * ratio)). "warmup" lists more of those (steps, ratio, total) ->
get_warmup_steps results for warmup_steps_for().

The file:

    {"generator", "transformers_version", "torch_version",
     "warmup": [{"warmup_steps", "warmup_ratio", "total_steps", "result"}, ...],
     "cases": [{"name", "kind", "hf_scheduler", "base_lr", "warmup_steps", "warmup_ratio" (0 when the
                warmup is given in steps), "total_steps", "extra_steps", "lrs": [...]}, ...]}

with floats in Python's repr (shortest round-trip form). Run from the repository root:

    python tests/reference/make_lr_schedule_cases.py [--out PATH]

Deterministic: the same versions (requirements.txt) write the same bytes.
"""

import argparse
import json
import tempfile
import warnings
from pathlib import Path

import torch
import transformers
from transformers import TrainingArguments, get_scheduler


def hf_warmup_steps(warmup_steps, warmup_ratio, total_steps):
    """Trainer's get_warmup_steps for bertrain's (--warmup-steps, --warmup-ratio) pair."""
    with tempfile.TemporaryDirectory() as tmp:
        value = warmup_steps if warmup_steps > 0 else warmup_ratio
        args = TrainingArguments(output_dir=tmp, warmup_steps=value, report_to="none")
        return args.get_warmup_steps(total_steps)


def hf_lrs(hf_name, base_lr, warmup_steps, total_steps, num_updates):
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=base_lr)
    scheduler = get_scheduler(hf_name, optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)
    lrs = []
    for _ in range(num_updates):
        lr = optimizer.param_groups[0]["lr"]
        assert isinstance(lr, float), type(lr)
        lrs.append(lr)
        optimizer.step()  # no gradient: a no-op, but the order torch expects before scheduler.step()
        scheduler.step()
    return lrs


def hf_name_for(kind, warmup_steps):
    if kind == "constant":
        return "constant_with_warmup" if warmup_steps > 0 else "constant"
    return kind


def make_case(kind, base_lr, warmup_steps, total_steps, extra_steps, warmup_ratio=0.0, name=None):
    if warmup_ratio > 0:
        warmup_steps = hf_warmup_steps(0, warmup_ratio, total_steps)
    hf_name = hf_name_for(kind, warmup_steps)
    num_updates = total_steps + extra_steps
    lrs = hf_lrs(hf_name, base_lr, warmup_steps, total_steps, num_updates)
    if kind == "constant" and warmup_steps == 0:
        assert lrs == hf_lrs("constant_with_warmup", base_lr, 0, total_steps, num_updates)
    if name is None:
        name = f"{kind}_lr{base_lr!r}_warmup{warmup_steps}_total{total_steps}"
    return {"name": name, "kind": kind, "hf_scheduler": hf_name, "base_lr": base_lr, "warmup_steps": warmup_steps,
            "warmup_ratio": warmup_ratio, "total_steps": total_steps, "extra_steps": extra_steps, "lrs": lrs}


def make_cases():
    cases = []
    for kind in ("linear", "cosine", "constant"):
        for base_lr in (1e-4, 5e-5):
            # (warmup, total, extra): none, some (run to 2 * total: cosine climbs back), = total, > total,
            # a one-step run with and without warmup, an odd length.
            for warmup, total, extra in ((0, 10, 5), (3, 10, 10), (10, 10, 5), (15, 10, 10), (0, 1, 3), (1, 1, 3),
                                         (2, 7, 9)):
                cases.append(make_case(kind, base_lr, warmup, total, extra))
        # Made-With-ML's shape: 10 epochs of 3 batches, warmup ratio 0.1 (3 steps).
        cases.append(make_case(kind, 1e-4, 0, 30, 5, warmup_ratio=0.1, name=f"{kind}_mwml_ratio0.1_total30"))
    # Long runs: SciBERT-sized step counts, where k / N and cos lose the low bits.
    for kind in ("linear", "cosine"):
        cases.append(make_case(kind, 5e-5, 0, 1000, 20, warmup_ratio=0.06, name=f"{kind}_ratio0.06_total1000"))
        cases.append(make_case(kind, 1e-4, 37, 777, 0, name=f"{kind}_warmup37_total777"))
    return cases


WARMUP_CASES = [
    # explicit steps win, also when longer than the run
    (5, 0.0, 30), (5, 0.5, 30), (40, 0.0, 30), (1, 0.0, 1),
    # ratios: exact products, products just above an integer (ceil goes up), tiny runs
    (0, 0.0, 30), (0, 0.1, 10), (0, 0.1, 30), (0, 0.1, 95), (0, 0.07, 100), (0, 0.3, 10), (0, 0.06, 1000),
    (0, 0.5, 1), (0, 0.01, 1), (0, 0.999, 1000), (0, 0.25, 4), (0, 0.2, 3),
]


def dump(doc):
    """JSON with one case per line (json.dumps writes floats with repr)."""
    head = {k: v for k, v in doc.items() if k not in ("warmup", "cases")}
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
    lines.append('  "warmup": [\n' + ",\n".join("    " + json.dumps(w) for w in doc["warmup"]) + "\n  ]")
    lines.append('  "cases": [\n' + ",\n".join("    " + json.dumps(c) for c in doc["cases"]) + "\n  ]")
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    assert json.loads(text) == doc
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "lr_schedules.json"
    parser.add_argument("--out", type=Path, default=default, help=f"output file (default {default})")
    args = parser.parse_args()

    # torch warns when scheduler.step() follows an optimizer.step() that had no gradient to apply.
    warnings.simplefilter("ignore", UserWarning)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    warmup = [{"warmup_steps": s, "warmup_ratio": r, "total_steps": t, "result": hf_warmup_steps(s, r, t)}
              for s, r, t in WARMUP_CASES]
    cases = make_cases()
    for c in cases:
        print(f"  {c['name']}: {c['hf_scheduler']}, warmup {c['warmup_steps']}, {len(c['lrs'])} lrs")
    doc = {"generator": "tests/reference/make_lr_schedule_cases.py", "transformers_version": transformers.__version__,
           "torch_version": torch.__version__, "warmup": warmup, "cases": cases}
    args.out.write_text(dump(doc))
    print(f"wrote {len(warmup)} warmup and {len(cases)} schedule cases to {args.out}")


if __name__ == "__main__":
    main()
