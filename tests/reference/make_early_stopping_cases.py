#!/usr/bin/env python3
"""Write Hugging Face Trainer's early-stopping decisions for fixed metric sequences to
tests/fixtures/early_stopping.json.

tests/engine/test_early_stopping.cpp checks engine/early_stopping.cpp against this file. Each case is
a TrainingArguments (metric_for_best_model, greater_is_better, eval and save every epoch), a
TrainerState, one TrainerControl kept for the whole run, and transformers.EarlyStoppingCallback(
early_stopping_patience, early_stopping_threshold) in a CallbackHandler. Per evaluation the script does
what Trainer does after an evaluation, in Trainer's order:

  1. Trainer.evaluate -> callback_handler.on_evaluate(args, state, control, metrics): the callback
     compares the metric with state.best_metric as it was BEFORE this evaluation;
  2. Trainer._maybe_log_save_evaluate -> Trainer._determine_best_metric(metrics): the real method, called
     on a stand-in `self` holding just args and state, updates state.best_metric (strictly better, no
     threshold).

and records {"metric", "bad_evaluations": callback.early_stopping_patience_counter, "best":
state.best_metric, "improved": _determine_best_metric's result, "stop": control.should_training_stop}.
Sequences go on past the first stop (Trainer would end there) to pin down the state afterwards:
should_training_stop stays true once set (only a new training resets it).

Metrics and bests that JSON cannot hold are the strings "nan", "inf", "-inf". The file:

    {"generator", "transformers_version", "torch_version",
     "cases": [{"name", "metric_for_best_model" (transformers' name), "bertrain_metric" (the
                --metric-for-best name whose direction is TrainingArguments' default for it, or null when
                the case overrides greater_is_better), "greater_is_better", "patience", "threshold",
                "evaluations": [{"metric", "bad_evaluations", "best", "improved", "stop"}, ...]}, ...]}

Patience is >= 1 in every case: transformers' patience 0 stops after the first evaluation
(counter >= 0), while bertrain's 0 means no early stopping (tested by hand in the C++ test).

    python tests/reference/make_early_stopping_cases.py [--out PATH]

Deterministic: the same versions (requirements.txt) write the same bytes.
"""

import argparse
import json
import math
import random
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch
import transformers
from transformers import DefaultFlowCallback, EarlyStoppingCallback, Trainer, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import CallbackHandler

NAN, INF = float("nan"), float("inf")
# bertrain's --metric-for-best names and transformers' metric names (eval_ is prepended by both).
BERTRAIN_METRICS = {"loss": "val_loss", "f1": "f1", "accuracy": "accuracy"}


def encode(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def run_case(tmp, metric, patience, threshold, metrics, greater_is_better=None):
    kwargs = {} if greater_is_better is None else {"greater_is_better": greater_is_better}
    args = TrainingArguments(output_dir=tmp, metric_for_best_model=metric, eval_strategy="epoch",
                             save_strategy="epoch", load_best_model_at_end=True, report_to="none", **kwargs)
    callback = EarlyStoppingCallback(early_stopping_patience=patience, early_stopping_threshold=threshold)
    # Trainer's callbacks: DefaultFlowCallback first (it has no on_evaluate), then the user's.
    handler = CallbackHandler([DefaultFlowCallback, callback], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    state, control = TrainerState(), TrainerControl()
    control = handler.on_train_begin(args, state, control)
    trainer = SimpleNamespace(args=args, state=state)
    evaluations = []
    for epoch, value in enumerate(metrics, start=1):
        state.global_step = epoch  # _determine_best_metric records it as best_global_step
        eval_metrics = {f"eval_{metric}": value, "epoch": float(epoch)}
        control = handler.on_evaluate(args, state, control, eval_metrics)
        improved = Trainer._determine_best_metric(trainer, metrics=eval_metrics, trial=None)
        evaluations.append({"metric": encode(value), "bad_evaluations": callback.early_stopping_patience_counter,
                            "best": encode(state.best_metric), "improved": improved,
                            "stop": control.should_training_stop})
    return args.greater_is_better, evaluations


def random_walk(seed, n, start, step, drift, decimals):
    """A noisy metric with a trend (training that improves, more and more slowly)."""
    rng = random.Random(seed)
    values, x = [], start
    for i in range(n):
        x += rng.uniform(-step, step) + drift / (1 + i / 10)
        values.append(round(x, decimals))
    return values


# (name, metric, patience, threshold, metrics, greater_is_better override)
CASES = [
    # Made-With-ML's shape: val_loss falls, then rises; patience 3.
    ("loss_falls_then_rises", "loss", 3, 0.0, [0.49, 0.31, 0.22, 0.17, 0.13, 0.11, 0.09, 0.095, 0.1, 0.098, 0.2], None),
    ("loss_patience1", "loss", 1, 0.0, [0.5, 0.4, 0.45, 0.3, 0.3], None),
    # A tie is no improvement, for the counter and for the best.
    ("loss_ties", "loss", 3, 0.0, [0.5, 0.5, 0.5, 0.4, 0.4, 0.4, 0.4], None),
    # Threshold: small improvements move the best (Trainer) but count as bad evaluations (callback), so
    # each comparison is against a best that crept down.
    ("loss_threshold_creeping", "loss", 3, 0.01, [1.0, 0.995, 0.99, 0.985, 0.98, 0.97, 0.9, 0.895, 0.89, 0.885], None),
    # |diff| == threshold is not > threshold; 0.4 - 0.5 is -0.09999999999999998 in doubles.
    ("loss_threshold_boundaries", "loss", 4, 0.25, [1.0, 0.75, 0.5, 0.25, 0.0, -0.25], None),
    ("loss_threshold_rounding", "loss", 2, 0.1, [0.5, 0.4, 0.3, 0.2], None),
    ("f1_rises_with_ties", "f1", 2, 0.0, [0.5, 0.6, 0.6, 0.7, 0.65, 0.7, 0.69], None),
    ("f1_threshold", "f1", 2, 0.02, [0.70, 0.71, 0.75, 0.76, 0.765, 0.80, 0.79], None),
    ("accuracy_plateau", "accuracy", 3, 0.0, [0.8, 0.85, 0.85, 0.84, 0.86, 0.86, 0.86, 0.86, 0.9], None),
    # NaN: never better. A NaN first evaluation still resets the counter (best_metric is None then) but
    # leaves the best at +-inf; a later NaN is a bad evaluation.
    ("loss_nan_first", "loss", 2, 0.0, [NAN, 0.5, NAN, NAN, 0.4], None),
    ("loss_nan_first_then_nan", "loss", 2, 0.0, [NAN, NAN, NAN], None),
    ("f1_nan_middle", "f1", 2, 0.0, [0.5, NAN, 0.6, NAN, NAN, 0.9], None),
    # Infinities: +inf loss is no improvement on +inf; -inf becomes the best and nothing beats it.
    ("loss_infinities", "loss", 2, 0.0, [INF, INF, 0.7, -INF, -INF, -1e300], None),
    ("loss_inf_first_threshold", "loss", 3, 0.5, [INF, 10.0, 9.0, 8.0, 7.4, 7.0], None),
    ("f1_infinities", "f1", 3, 0.0, [-INF, -INF, 0.1, INF, INF, 1e300], None),
    # greater_is_better given explicitly, against the metric's default direction.
    ("loss_greater_is_better_override", "loss", 2, 0.0, [0.1, 0.2, 0.15, 0.2, 0.3], True),
    ("accuracy_lower_is_better_override", "accuracy", 2, 0.05, [0.9, 0.8, 0.79, 0.7, 0.72, 0.6], False),
    # Negative values (a metric where lower is better may be negative, e.g. a log-likelihood).
    ("negative_loss", "loss", 2, 0.0, [-1.0, -1.5, -1.5, -1.4, -2.0], None),
    # Past the stop: an improvement resets the counter but the stop stays.
    ("stop_then_improve", "loss", 2, 0.0, [0.5, 0.6, 0.7, 0.2, 0.3, 0.4], None),
    ("patience_long", "f1", 6, 0.0, [0.1, 0.2, 0.19, 0.18, 0.2, 0.17, 0.16, 0.15, 0.21, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2],
     None),
    # Longer noisy sequences.
    ("loss_random_walk", "loss", 4, 0.0, random_walk(11, 40, 1.0, 0.05, -0.04, 4), None),
    ("loss_random_walk_threshold", "loss", 5, 0.01, random_walk(12, 40, 1.0, 0.05, -0.04, 4), None),
    ("f1_random_walk_threshold", "f1", 5, 0.005, random_walk(13, 40, 0.5, 0.04, 0.012, 3), None),
]


def dump(doc):
    """JSON with one evaluation per line (json.dumps writes floats with repr)."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
    cases = []
    for c in doc["cases"]:
        fields = [f"      {json.dumps(k)}: {json.dumps(v)}" for k, v in c.items() if k != "evaluations"]
        fields.append('      "evaluations": [\n' + ",\n".join("        " + json.dumps(e) for e in c["evaluations"])
                      + "\n      ]")
        cases.append("    {\n" + ",\n".join(fields) + "\n    }")
    lines.append('  "cases": [\n' + ",\n".join(cases) + "\n  ]")
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    assert json.loads(text) == doc
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "early_stopping.json"
    parser.add_argument("--out", type=Path, default=default, help=f"output file (default {default})")
    args = parser.parse_args()

    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, metric, patience, threshold, metrics, override in CASES:
            greater, evaluations = run_case(tmp, metric, patience, threshold, metrics, override)
            cases.append({"name": name, "metric_for_best_model": metric,
                          "bertrain_metric": None if override is not None else BERTRAIN_METRICS[metric],
                          "greater_is_better": greater, "patience": patience, "threshold": threshold,
                          "evaluations": evaluations})
            stops = [i + 1 for i, e in enumerate(evaluations) if e["stop"]]
            print(f"  {name}: {len(evaluations)} evaluations, stop at {stops[0] if stops else 'none'},"
                  f" best {evaluations[-1]['best']!r}")
    doc = {"generator": "tests/reference/make_early_stopping_cases.py",
           "transformers_version": transformers.__version__, "torch_version": torch.__version__, "cases": cases}
    args.out.write_text(dump(doc))
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main()
