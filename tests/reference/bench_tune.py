#!/usr/bin/env python3
"""The tune benchmark: Made-With-ML's study run by `bertrain tune` and by Made-With-ML's own tune.py (Ray Tune,
tests/reference/tune_peer_mwml.py) one after the other on the same machine, and both results in one table.

    python3 tests/reference/bench_tune.py --model models/all-MiniLM-L6-v2 --out /tmp/bench-tune \
        [--peer-python /work/venv-mwml-tune/bin/python] [--trials 10] [--epochs 10] [--seed 0]

The study, as Made-With-ML's: its space (examples/tune/space.json), its initial point first
(examples/tune/initial_params.json), `--trials` trials of `--epochs` epochs at batch 256, ASHA (grace period 1,
Ray's reduction factor 4) on val_loss, 2 trials at once, each logged to MLflow. bertrain: `build/bertrain tune
--parallel 2` on the CPU (each trial one core). The peer: tune_peer_mwml.py (2 trials at once, one Ray Train
worker of 1 CPU each). Wall time: bertrain's whole command; the peer's `tune_models` call (its `wall_s`, without
`ray.init`). Best val_loss: the lowest val_loss of any trial at any epoch (each side's best model is that epoch's
checkpoint), and Made-With-ML's own pick (get_best_result's last-epoch val_loss). Prints a table and one JSON line.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_bertrain(args, out):
    cmd = [str(args.bertrain), "tune", "--space", str(ROOT / "examples/tune/space.json"),
           "--initial-params", str(ROOT / "examples/tune/initial_params.json"), "--trials", str(args.trials),
           "--parallel", "2", "--seed", str(args.seed), "--out", str(out / "study"), "--mlflow-dir",
           str(out / "mlruns"), "--experiment", "tune-bench", "--quiet", "--",
           "--model", str(args.model), "--train-data", str(args.dataset), "--epochs", str(args.epochs),
           "--batch-size", "256", "--device", "cpu"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=open(out / "bertrain.log", "w"), stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    study = json.load(open(out / "study" / "study.json"))
    best = next(t for t in study["trials"] if t["id"] == study["best_trial"])
    return {"wall_s": round(wall, 1), "best_val_loss": best["best_metric"], "best_params": best["params"],
            "epochs_per_trial": [t["epochs"] for t in study["trials"]],
            "stopped_by_asha": sum(t["status"] == "stopped" for t in study["trials"]),
            "failed": sum(t["status"] == "failed" for t in study["trials"])}


def run_peer(args, out):
    cmd = [args.peer_python, str(ROOT / "tests/reference/tune_peer_mwml.py"), "--model", str(args.model),
           "--dataset", str(args.dataset), "--out", str(out / "peer"), "--num-runs", str(args.trials),
           "--num-epochs", str(args.epochs), "--batch-size", "256"]
    subprocess.run(cmd, check=True, stdout=open(out / "peer.log", "w"), stderr=subprocess.STDOUT)
    summary = json.load(open(out / "peer" / "peer_summary.json"))
    return {"wall_s": summary["wall_s"], "best_val_loss": summary["best_any_epoch"]["val_loss"],
            "mwml_pick_val_loss": summary["best"]["val_loss_last_epoch"], "best_params": summary["best"]["params"],
            "epochs_per_trial": summary["epochs_per_trial"], "stopped_by_asha": summary["stopped_by_asha"],
            "failed": summary["trials_errored"], "versions": summary["versions"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared/data/madewithml/dataset.csv")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--bertrain", type=Path, default=ROOT / "build/bertrain")
    ap.add_argument("--peer-python", default="/work/venv-mwml-tune/bin/python")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0, help="bertrain's search seed (Made-With-ML's is not seeded)")
    ap.add_argument("--skip-peer", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=False)
    result = {"machine": f"{os.cpu_count()} cores", "trials": args.trials, "epochs": args.epochs,
              "bertrain": run_bertrain(args, args.out)}
    if not args.skip_peer:
        result["made_with_ml"] = run_peer(args, args.out)
        result["speedup"] = round(result["made_with_ml"]["wall_s"] / result["bertrain"]["wall_s"], 2)
    print(f"{'':14} {'wall s':>8} {'best val_loss':>14} {'epochs per trial':>40}")
    for name in ("bertrain", "made_with_ml"):
        if name in result:
            r = result[name]
            print(f"{name:14} {r['wall_s']:8.1f} {r['best_val_loss']:14.5f} {str(r['epochs_per_trial']):>40}")
    if "speedup" in result:
        print(f"bertrain tune is {result['speedup']}x faster")
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
