#!/usr/bin/env python3
"""Print torch.optim.lr_scheduler.ReduceLROnPlateau reference cases as C++ for
tests/engine/test_lr_scheduler.cpp.

Each case is (options, initial lr, metric sequence); after every scheduler.step(metric) the
script records the optimizer's lr and the scheduler's num_bad_epochs, cooldown_counter and
best. The output is pasted into the test between the "BEGIN/END GENERATED" markers:

    python tests/reference/make_scheduler_cases.py

Floats are printed with repr() (shortest round-trip form), so the C++ literals are the exact
doubles torch produced; NaN and infinities use the test's kNaN / kInf constants.
"""

import math

import torch

NAN = float("nan")
INF = float("inf")

# name, options, initial lr, metrics
CASES = [
    # The Made-With-ML run: ReduceLROnPlateau(mode="min", factor=0.8, patience=3), lr 1e-4,
    # val_loss once per epoch for 10 epochs. A steadily falling loss (best at epoch 7, like the
    # reference run) never reduces; a loss that stalls reduces once 4 epochs in a row are bad.
    ("mwml_falling", dict(mode="min", factor=0.8, patience=3), 1e-4,
     [0.49, 0.31, 0.22, 0.17, 0.13, 0.11, 0.09, 0.095, 0.1, 0.098]),
    ("mwml_stalling", dict(mode="min", factor=0.8, patience=3), 1e-4,
     [0.5, 0.4, 0.41, 0.42, 0.43, 0.44, 0.45, 0.39, 0.4, 0.41]),
    # A long plateau: one reduction every patience + 1 epochs.
    ("plateau_repeated", dict(mode="min", factor=0.5, patience=2), 1.0,
     [1.0] * 12),
    # Relative threshold 1e-4: 0.99995 is not an improvement on 1.0, 0.9999 (= 1.0 * (1 - 1e-4)
    # exactly) is not either (strict <), 0.99989 is; then relative to the new best.
    ("threshold_rel_min", dict(mode="min", factor=0.1, patience=1), 0.01,
     [1.0, 0.99995, 0.9999, 0.99989, 0.9998, 0.99979, 0.5, 0.49996, 0.49994]),
    # Absolute threshold.
    ("threshold_abs_min", dict(mode="min", factor=0.5, patience=1, threshold=0.01,
                               threshold_mode="abs"), 0.1,
     [1.0, 0.995, 0.99, 0.989, 0.98, 0.975, 0.97, 0.5, 0.495]),
    # Exact ties with the threshold (0.25 is exact in binary): a == best -/+ threshold is no improvement.
    ("threshold_abs_min_exact", dict(mode="min", factor=0.5, patience=0, threshold=0.25,
                                     threshold_mode="abs"), 1.0,
     [1.0, 0.75, 0.7499999999999999, 0.5, 0.25]),
    ("threshold_abs_max_exact", dict(mode="max", factor=0.5, patience=0, threshold=0.25,
                                     threshold_mode="abs"), 1.0,
     [0.5, 0.75, 0.7500000000000001, 1.0, 1.25]),
    # Threshold 0: any strict decrease is an improvement, equality is not.
    ("threshold_zero", dict(mode="min", factor=0.5, patience=0, threshold=0.0), 1.0,
     [3.0, 2.0, 2.0, 1.9999999999999998, 1.9999999999999998, 5.0]),
    # mode "max" (e.g. an F1 score), relative and absolute thresholds.
    ("max_rel", dict(mode="max", factor=0.5, patience=1), 0.2,
     [0.5, 0.50004, 0.5, 0.6, 0.60007, 0.61, 0.3, 0.2, 0.1]),
    # Exactly best * (threshold + 1) is no improvement; the next double above it is.
    ("max_rel_exact", dict(mode="max", factor=0.5, patience=0), 1.0,
     [0.5, 0.5 * (1e-4 + 1.0), math.nextafter(0.5 * (1e-4 + 1.0), 1.0)]),
    ("max_abs", dict(mode="max", factor=0.5, patience=0, threshold=0.05,
                     threshold_mode="abs"), 0.2,
     [0.5, 0.54, 0.56, 0.6, 0.65, 0.7, 0.71]),
    # NaN never improves (every comparison with NaN is false), so it is a bad epoch, also as the
    # very first metric; +inf is not better than the initial best (+inf) either.
    ("nan_min", dict(mode="min", factor=0.5, patience=1), 1.0,
     [NAN, NAN, 1.0, NAN, 0.5, NAN, NAN, NAN, 0.25]),
    ("inf_min", dict(mode="min", factor=0.5, patience=0), 1.0,
     [INF, INF, 2.0, INF, -INF, -INF, 1.0]),
    ("nan_max", dict(mode="max", factor=0.5, patience=1), 1.0,
     [NAN, 0.5, NAN, NAN, 0.6]),
    # Cooldown: after a reduction, `cooldown` epochs count no bad epochs.
    ("cooldown_2", dict(mode="min", factor=0.5, patience=1, cooldown=2), 1.0,
     [1.0] * 14),
    ("cooldown_with_improvement", dict(mode="min", factor=0.5, patience=0, cooldown=3), 1.0,
     [5.0, 5.0, 4.0, 6.0, 6.0, 6.0, 6.0, 3.0, 7.0, 7.0]),
    # min_lr clamps the reduced lr.
    ("min_lr_clamp", dict(mode="min", factor=0.1, patience=0, min_lr=2e-5), 1e-3,
     [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
    # eps: a reduction smaller than eps (1e-8) is not applied, so the lr sticks at 1.25e-8.
    ("eps_rule", dict(mode="min", factor=0.5, patience=0), 1e-7,
     [1.0] * 7),
    # eps with min_lr just below the lr: the clamped step (5e-9) is below eps.
    ("eps_min_lr", dict(mode="min", factor=0.5, patience=0, min_lr=0.995e-6), 1e-6,
     [1.0, 1.0, 1.0]),
    # A reduction of exactly eps is not applied (strict >): 1 -> 0.5, then 0.5 - 0.25 = eps.
    ("eps_equal", dict(mode="min", factor=0.5, patience=0, eps=0.25), 1.0,
     [1.0, 1.0, 1.0, 1.0]),
    # Larger eps.
    ("eps_large", dict(mode="min", factor=0.9, patience=0, eps=0.05), 1.0,
     [1.0] * 12),
    # Negative losses with a relative threshold: best * (1 - threshold) is then *above* best, so
    # a slightly *worse* loss counts as an improvement (torch's quirk, kept); -0.5 is bad.
    ("negative_rel_min", dict(mode="min", factor=0.5, patience=0), 1.0,
     [-1.0, -0.99995, -0.9999, -1.00001, -1.00011, -0.5]),
    # factor 0 (torch allows it): the lr drops straight to min_lr.
    ("factor_zero", dict(mode="min", factor=0.0, patience=0, min_lr=1e-6), 0.1,
     [1.0, 1.0, 1.0]),
]


def fmt(x):
    if math.isnan(x):
        return "kNaN"
    if math.isinf(x):
        return "kInf" if x > 0 else "-kInf"
    return repr(float(x))


def run_case(options, lr, metrics):
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=lr)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **options)
    steps = []
    for m in metrics:
        sched.step(m)
        steps.append((opt.param_groups[0]["lr"], sched.num_bad_epochs,
                      sched.cooldown_counter, sched.best))
    assert sched.last_epoch == len(metrics)
    return steps


def cpp_options(o):
    parts = [
        "PlateauMode::k" + o.get("mode", "min").capitalize(),
        fmt(o.get("factor", 0.1)),
        str(o.get("patience", 10)),
        fmt(o.get("threshold", 1e-4)),
        "ThresholdMode::k" + o.get("threshold_mode", "rel").capitalize(),
        str(o.get("cooldown", 0)),
        fmt(o.get("min_lr", 0.0)),
        fmt(o.get("eps", 1e-8)),
    ]
    return "{" + ", ".join(parts) + "}"


def main():
    print(f"// Generated by tests/reference/make_scheduler_cases.py with torch {torch.__version__}.")
    print("// Per step: {metric, lr after the step, num_bad_epochs, cooldown_counter, best}.")
    print("const std::vector<SchedulerCase> kTorchCases = {")
    for name, options, lr, metrics in CASES:
        steps = run_case(options, lr, metrics)
        print(f'    {{"{name}", {cpp_options(options)}, {fmt(lr)},')
        print("     {")
        for m, (l, bad, cool, best) in zip(metrics, steps):
            print(f"         {{{fmt(m)}, {fmt(l)}, {bad}, {cool}, {fmt(best)}}},")
        print("     }},")
    print("};")


if __name__ == "__main__":
    main()
