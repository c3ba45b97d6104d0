#!/usr/bin/env python3
"""Reads a bertrain run from an MLflow file store with the real `mlflow` package (MlflowClient on the file store)
and compares every param and metric with the run directory's results.json; exits 1 on any difference.

    pip install "mlflow<3"
    python tests/reference/check_mlflow_run.py --mlflow-dir STORE --run-dir RUN_DIR [--experiment bertrain]

Checks: the experiment is found by name; exactly one run has the run directory's run id (trainer_state.json's
mlflow_run_id); its status is FINISHED with an end time; every results.json param is an MLflow param with the
same text; the metrics train_loss, val_loss, lr, samples_per_s, elapsed_s have one value per epoch, step = epoch,
equal to results.json's per-epoch metrics; the artifacts hold results.json and best/ (config.json and
model.safetensors).
"""
import argparse
import json
import os
import sys

from mlflow.tracking import MlflowClient


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mlflow-dir", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--experiment", default="bertrain")
    args = ap.parse_args()
    client = MlflowClient(tracking_uri="file:" + os.path.abspath(args.mlflow_dir))
    errors = []
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        sys.exit("experiment %r not found" % args.experiment)
    state = json.load(open(os.path.join(args.run_dir, "last", "trainer_state.json")))
    results = json.load(open(os.path.join(args.run_dir, "results.json")))
    run = client.get_run(state["mlflow_run_id"])
    if run.info.experiment_id != experiment.experiment_id:
        errors.append("run in experiment %s, expected %s" % (run.info.experiment_id, experiment.experiment_id))
    if run.info.status != "FINISHED" or not run.info.end_time:
        errors.append("status %s, end_time %s" % (run.info.status, run.info.end_time))
    for key, value in results["params"].items():
        want = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        got = run.data.params.get(key)
        if got is None:
            errors.append("param %s missing" % key)
        elif got != want and not (isinstance(value, (int, float)) and float(got) == float(value)):
            errors.append("param %s = %r, results.json %r" % (key, got, want))
    for key in ("train_loss", "val_loss", "lr", "samples_per_s", "elapsed_s"):
        history = client.get_metric_history(run.info.run_id, key)
        steps = [(m.step, m.value) for m in sorted(history, key=lambda m: (m.step, m.timestamp))]
        want = [(m["epoch"], m[key]) for m in results["metrics"]]
        if steps != want:
            errors.append("metric %s: %s, results.json %s" % (key, steps, want))
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    best = {a.path for a in client.list_artifacts(run.info.run_id, "best")}
    if "results.json" not in artifacts or not {"best/config.json", "best/model.safetensors"} <= best:
        errors.append("artifacts %s, best/ %s" % (sorted(artifacts), sorted(best)))
    print("run %s (%s) in experiment %s: %d params, %d epochs of 5 metrics, artifacts %s"
          % (run.info.run_id, run.info.run_name, experiment.name, len(run.data.params), len(results["metrics"]),
             sorted(artifacts)))
    for e in errors:
        print("MISMATCH:", e)
    print("OK" if not errors else "FAILED")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
