"""Made-With-ML's own server (madewithml/serve.py: Ray Serve + FastAPI) on a bertrain model directory.

The peer that `bertrain serve` is benchmarked against (tests/reference/bench_serve.py, issue 27). It runs
Made-With-ML's `ModelDeployment` class, imported unchanged from a Made-With-ML source tree (--mwml-src), so its
FastAPI routes (GET /, GET /run_id/, POST /predict/, POST /evaluate/), its per-request Ray Dataset, its
preprocessing (clean_text + BertTokenizer), `predict_proba` (softmax) and the "other" threshold all run as
Made-With-ML wrote them. Test-only tooling: never needed to build, test or run bertrain.

What is changed, and why (every change is made from outside Made-With-ML's files, by monkeypatching in every Ray
worker process through `worker_process_setup_hook`, because Ray Data and Serve run that code in other processes):

1. `predict.get_best_checkpoint(run_id)` looks the best checkpoint up in MLflow + Ray Tune results. It is replaced
   by a function that returns a `TorchCheckpoint` directory built here from the bertrain model directory in
   Made-With-ML's own format: `FinetunedLLM(llm=BertModel, dropout, fc1=Linear)` saved with its own `save()`
   (`args.json` + `model.pt`), checkpoint metadata `{"class_to_index": label2id}` as its TorchTrainer writes it.
   bertrain's `bert.*` weights go to `llm.*` and `classifier.*` to `fc1.*` (same pooled-output -> dropout ->
   linear head as BertForSequenceClassification).
2. Made-With-ML loads "allenai/scibert_scivocab_uncased" from the Hugging Face hub twice: the tokenizer in
   `data.tokenize` (on every batch) and the encoder in `FinetunedLLM.load`. There is no network here, and the
   model is not SciBERT: both loads of that name are redirected to --model DIR (its vocab.txt and config.json;
   the encoder weights are then overwritten by model.pt, as in Made-With-ML). Every other line is unchanged,
   so the tokenizer is still loaded once per request as Made-With-ML's code does.
3. `@serve.deployment(ray_actor_options={"num_cpus": 8, ...})` cannot be scheduled on a 2-core machine: the
   deployment is started with `.options(ray_actor_options={"num_cpus": --replica-cpus (1), "num_gpus": 0})`.
   Ray Data's per-request tasks get the remaining logical CPUs (`ray.init(num_cpus=--ray-cpus)`, default nproc).
4. Ray Serve 2.7's default HTTP path streams every answer through a Ray streaming generator; on this machine
   the replica crashed with SIGSEGV in `report_streaming_generator_output` (a Ray bug, not Made-With-ML's) when
   wrk closed connections with requests in flight, and on Python 3.11 that path fails on every request
   ("Passing coroutines is forbidden"). The script sets Serve 2.7's own switch
   RAY_SERVE_ENABLE_EXPERIMENTAL_STREAMING=0 (the non-streaming proxy of Ray <= 2.6; --serve-streaming keeps
   the default) and runs on Python 3.10, the version of Made-With-ML's cluster image (anyscale/ray:2.7.0
   optimized-py310).
5. Its `__main__` block (ray.init with a GITHUB_USERNAME runtime env, serve.run on Ray's default port 8000) is
   replaced by this script's: `serve.start(http_options={"host", "port"})` + `serve.run`, and /run_id/ answers
   --run-id (default: the model directory, what `bertrain serve --model DIR` answers).

Set up (outside the repository; Python 3.10 and Made-With-ML's own pins from its requirements.txt, plus
snorkel (imported by madewithml/evaluate.py), protobuf < 5 and async-timeout that Ray 2.7 needs):

    python3.10 -m venv /work/venv-ray
    /work/venv-ray/bin/pip install 'ray[air,serve]==2.7.0' torch==2.0.0 transformers==4.28.1 fastapi==0.95.2 \
        mlflow==2.3.1 numpy==1.24.3 pandas==2.0.1 scikit-learn==1.2.2 numpyencoder==0.3.0 typer==0.9.0 \
        SQLAlchemy==1.4.48 python-dotenv==1.0.0 snorkel==0.9.9 protobuf==4.25.9 async-timeout==5.0.1 \
        safetensors==0.8.0
    git -C <Made-With-ML git dir> archive HEAD | tar -x -C /work/mwml-src

Run (prints `serve_peer_mwml: ready on http://HOST:PORT` on stderr once /predict/ has answered; Ctrl-C or
SIGTERM stops Serve and Ray):

    /work/venv-ray/bin/python tests/reference/serve_peer_mwml.py --mwml-src /work/mwml-src \
        --model runs/<run>/best --port 8124
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HUB_ID = "allenai/scibert_scivocab_uncased"
ENV_MODEL = "MWML_PEER_MODEL_DIR"
ENV_CHECKPOINT = "MWML_PEER_CHECKPOINT_DIR"


def _apply_patches():
    """Changes 1 and 2 of the docstring; runs in the driver and, as Ray's worker_process_setup_hook, in every
    Ray worker (the Serve replica and Ray Data's tasks import madewithml on their own)."""
    model_dir = os.environ.get(ENV_MODEL)
    checkpoint_dir = os.environ.get(ENV_CHECKPOINT)
    if not model_dir or not checkpoint_dir:
        return
    try:
        import madewithml.data as mwml_data
        import madewithml.models as mwml_models
        import madewithml.predict as mwml_predict
    except ImportError:
        return  # a Ray process without the Made-With-ML tree on its path (none is expected)
    from ray.train.torch.torch_checkpoint import TorchCheckpoint

    class _HubRedirect:
        """Stands in for a transformers class: from_pretrained(HUB_ID) loads --model DIR instead."""

        def __init__(self, cls):
            self._cls = cls

        def from_pretrained(self, name, *args, **kwargs):
            return self._cls.from_pretrained(model_dir if name == HUB_ID else name, *args, **kwargs)

    if not hasattr(mwml_data.BertTokenizer, "_cls"):  # once per process
        mwml_data.BertTokenizer = _HubRedirect(mwml_data.BertTokenizer)
    if not hasattr(mwml_models.BertModel, "_cls"):
        mwml_models.BertModel = _HubRedirect(mwml_models.BertModel)

    def get_best_checkpoint(run_id):
        return TorchCheckpoint.from_directory(checkpoint_dir)

    mwml_predict.get_best_checkpoint = get_best_checkpoint


def build_checkpoint(model_dir: Path, checkpoint_dir: Path) -> dict:
    """Writes a Made-With-ML TorchCheckpoint directory from a bertrain model directory; returns class_to_index."""
    import torch
    from madewithml.models import FinetunedLLM
    from ray.train.torch.torch_checkpoint import TorchCheckpoint
    from safetensors.torch import load_file
    from transformers import BertModel

    config = json.loads((model_dir / "config.json").read_text())
    id2label = {int(k): v for k, v in config["id2label"].items()}
    class_to_index = {label: index for index, label in sorted(id2label.items())}
    if config.get("problem_type") == "multi_label_classification":
        sys.exit("serve_peer_mwml: Made-With-ML's predict_proba is a softmax; a multi-label model would be misread")

    llm, info = BertModel.from_pretrained(str(model_dir), return_dict=False, output_loading_info=True)
    if info["missing_keys"] or info["mismatched_keys"]:
        sys.exit(f"serve_peer_mwml: {model_dir} is not a full BertForSequenceClassification: {info}")
    dropout_p = config.get("classifier_dropout")
    if dropout_p is None:
        dropout_p = config.get("hidden_dropout_prob", 0.1)
    model = FinetunedLLM(llm=llm, dropout_p=dropout_p, embedding_dim=llm.config.hidden_size,
                         num_classes=len(class_to_index))
    weights = load_file(str(model_dir / "model.safetensors"))
    with torch.no_grad():
        model.fc1.weight.copy_(weights["classifier.weight"])
        model.fc1.bias.copy_(weights["classifier.bias"])
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    model.save(dp=str(checkpoint_dir))  # Made-With-ML's own writer: args.json + model.pt
    TorchCheckpoint.from_directory(str(checkpoint_dir)).set_metadata({"class_to_index": class_to_index})
    return class_to_index


def _wait_ready(url: str, body: dict, timeout_s: float) -> dict:
    """Polls POST /predict/ until the replica answers (Serve's proxy answers 404/503 before the app is up)."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            request = urllib.request.Request(url + "/predict/", data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())
        except Exception as error:  # noqa: BLE001 - any failure means not ready yet
            last_error = error
            time.sleep(1)
    sys.exit(f"serve_peer_mwml: no answer from {url}/predict/ within {timeout_s} s: {last_error}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mwml-src", required=True, type=Path, help="Made-With-ML source tree (holds madewithml/)")
    parser.add_argument("--model", required=True, type=Path,
                        help="bertrain model directory (config.json, model.safetensors, vocab.txt) or a run "
                             "directory holding best/")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8124)
    parser.add_argument("--threshold", type=float, default=0.9, help="Made-With-ML's 'other' threshold")
    parser.add_argument("--run-id", help="what GET /run_id/ answers (default: the model directory)")
    parser.add_argument("--replica-cpus", type=float, default=1,
                        help="ray_actor_options num_cpus of the replica (Made-With-ML: 8)")
    parser.add_argument("--ray-cpus", type=int, default=os.cpu_count(), help="ray.init(num_cpus=...)")
    parser.add_argument("--serve-streaming", action="store_true",
                        help="keep Ray Serve 2.7's streaming HTTP path (crashes under client disconnects here)")
    parser.add_argument("--workdir", type=Path, help="where the checkpoint is written (default: a temp dir)")
    parser.add_argument("--ready-timeout", type=float, default=600)
    args = parser.parse_args()

    model_dir = args.model.resolve()
    if not (model_dir / "config.json").exists() and (model_dir / "best" / "config.json").exists():
        model_dir = model_dir / "best"
    mwml_src = args.mwml_src.resolve()
    if not (mwml_src / "madewithml" / "serve.py").exists():
        sys.exit(f"serve_peer_mwml: {mwml_src}/madewithml/serve.py not found")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mwml-peer-"))
    checkpoint_dir = workdir.resolve() / "checkpoint"

    if not args.serve_streaming:
        # Read when ray.serve is first imported, here and in the Serve controller, proxy and replica processes,
        # which inherit the environment of the local cluster that ray.init starts from this process.
        os.environ["RAY_SERVE_ENABLE_EXPERIMENTAL_STREAMING"] = "0"
    sys.path.insert(0, str(mwml_src))
    os.environ[ENV_MODEL] = str(model_dir)
    os.environ[ENV_CHECKPOINT] = str(checkpoint_dir)
    class_to_index = build_checkpoint(model_dir, checkpoint_dir)
    print(f"serve_peer_mwml: checkpoint {checkpoint_dir} class_to_index {class_to_index}", file=sys.stderr)

    import ray
    from ray import serve

    python_path = os.pathsep.join(p for p in [str(mwml_src), os.environ.get("PYTHONPATH", "")] if p)
    env_vars = {"PYTHONPATH": python_path, ENV_MODEL: str(model_dir), ENV_CHECKPOINT: str(checkpoint_dir)}
    if not args.serve_streaming:
        env_vars["RAY_SERVE_ENABLE_EXPERIMENTAL_STREAMING"] = "0"
    ray.init(num_cpus=args.ray_cpus, include_dashboard=False, runtime_env={
        "env_vars": env_vars,
        "worker_process_setup_hook": _apply_patches,
    })
    _apply_patches()
    from madewithml.serve import ModelDeployment  # Made-With-ML's class, unchanged

    serve.start(detached=False, http_options={"host": args.host, "port": args.port})
    deployment = ModelDeployment.options(ray_actor_options={"num_cpus": args.replica_cpus, "num_gpus": 0})
    serve.run(deployment.bind(run_id=args.run_id or str(model_dir), threshold=args.threshold),
              host=args.host, port=args.port)

    url = f"http://{args.host}:{args.port}"
    answer = _wait_ready(url, {"title": "Transfer learning with transformers",
                               "description": "Using transformers for transfer learning on text classification tasks."},
                         args.ready_timeout)
    print(f"serve_peer_mwml: first answer {json.dumps(answer)}", file=sys.stderr)
    print(f"serve_peer_mwml: ready on {url} (Ray Serve {ray.__version__}, replica num_cpus {args.replica_cpus}, "
          f"ray num_cpus {args.ray_cpus}, streaming {args.serve_streaming})", file=sys.stderr, flush=True)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
