#!/usr/bin/env python3
"""Reads a `bertrain tune --mlflow-dir STORE` study back with the real `mlflow` package (MlflowClient on the file
store) and checks it against the study directory; exits 1 on any difference.

    pip install "mlflow<3"
    python tests/reference/check_mlflow_study.py --mlflow-dir STORE --study DIR [--experiment bertrain]

Checks: study.json's mlflow_run_id is a FINISHED run of the experiment (the study's, the parent), with the study's
settings as params, a trial_best_<metric> value per finished trial (step = trial number) equal to study.json's,
best_<metric> equal to the best trial's, and study.json and results.json as artifacts; the runs whose tag
mlflow.parentRunId is the parent's (found with search_runs' filter, as MLflow's UI nests them) are exactly the
trials' runs (study.json's mlflow_run_id per trial), each named <study run name>-trial-NNN, with its trial's
parameters as params and its val_loss per epoch as metrics; results.json's run_id is the best trial's run.
"""
import argparse
import json
import math
import os
import sys

from mlflow.tracking import MlflowClient


def close(a, b):
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mlflow-dir", required=True)
    ap.add_argument("--study", required=True)
    ap.add_argument("--experiment", default="bertrain")
    args = ap.parse_args()
    store = args.mlflow_dir if args.mlflow_dir.startswith("file:") else "file:" + os.path.abspath(args.mlflow_dir)
    client = MlflowClient(tracking_uri=store)
    study = json.load(open(os.path.join(args.study, "study.json")))
    results = json.load(open(os.path.join(args.study, "results.json")))
    metric = study["metric"]
    problems = []

    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        sys.exit(f"no experiment '{args.experiment}' in {store}")
    parent = client.get_run(study["mlflow_run_id"])
    if parent.info.status != "FINISHED":
        problems.append(f"the study's run is {parent.info.status}, not FINISHED")
    for key in ("search", "scheduler", "metric", "mode", "seed"):
        if parent.data.params.get(key) != str(study["settings"][key]):
            problems.append(f"param {key}: {parent.data.params.get(key)!r} != {study['settings'][key]!r}")
    history = {int(m.step): m.value for m in client.get_metric_history(parent.info.run_id, "trial_best_" + metric)}
    finished = [t for t in study["trials"] if t["status"] in ("completed", "stopped") and t["best_metric"] is not None]
    for t in finished:
        if int(t["id"]) not in history or not close(history[int(t["id"])], t["best_metric"]):
            problems.append(f"trial_best_{metric} of trial {t['id']}: {history.get(int(t['id']))} != {t['best_metric']}")
    best = next(t for t in study["trials"] if t["id"] == study["best_trial"])
    if not close(parent.data.metrics.get("best_" + metric, float("nan")), best["best_metric"]):
        problems.append(f"best_{metric} {parent.data.metrics.get('best_' + metric)} != {best['best_metric']}")
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    for name in ("study.json", "results.json"):
        if name not in artifacts:
            problems.append(f"the study's run has no artifact {name} ({sorted(artifacts)})")

    children = client.search_runs([experiment.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    by_id = {r.info.run_id: r for r in children}
    expected = {t["mlflow_run_id"]: t for t in study["trials"] if t.get("mlflow_run_id")}
    if set(by_id) != set(expected) or len(expected) != len(study["trials"]):
        problems.append(f"child runs {sorted(by_id)} != the trials' runs {sorted(expected)} "
                        f"({len(study['trials'])} trials)")
    for run_id, t in expected.items():
        run = by_id.get(run_id)
        if run is None:
            continue
        if run.info.run_name != f"{parent.info.run_name}-trial-{t['id']}":
            problems.append(f"trial {t['id']}'s run is named {run.info.run_name!r}")
        for key, value in t["params"].items():
            logged = run.data.params.get(key.replace("-", "_"))
            if logged is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                  and not math.isclose(float(logged), float(value), rel_tol=1e-6)
                                  and float(logged) != math.trunc(float(value))):
                problems.append(f"trial {t['id']}: param {key} logged {logged!r}, searched {value!r}")
        losses = client.get_metric_history(run_id, "val_loss")
        if len(losses) != t["epochs"]:
            problems.append(f"trial {t['id']}: {len(losses)} val_loss values for {t['epochs']} epochs")
    if results["run_id"] != best.get("mlflow_run_id"):
        problems.append(f"results.json's run_id {results['run_id']} is not the best trial's {best.get('mlflow_run_id')}")

    for p in problems:
        print("MISMATCH:", p)
    print(f"{'OK' if not problems else 'FAILED'}: study run {parent.info.run_id} ({parent.info.status}), "
          f"{len(by_id)} child runs of {len(study['trials'])} trials, best trial {study['best_trial']} "
          f"({metric} {best['best_metric']:.5f}, run {best.get('mlflow_run_id')})")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
