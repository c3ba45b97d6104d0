# The source files of bertrain's library and program, in one place: the top-level CMakeLists.txt builds them, and
# the CUDA emulation (tests/cuda_emulation/CMakeLists.txt) builds the same lists on its emulated runtime, so that a
# file added here is in both.

# The library: everything but main(), listed floor by floor (README: Layout).
set(BERTRAIN_CORE_SOURCES
  # core/: the ground floor
  core/error.cpp
  core/atomic_file.cpp
  core/file_hash.cpp
  core/files.cpp
  core/json_text.cpp
  core/param_store.cpp
  core/cpu_threads.cpp
  core/build_info.cpp
  core/progress.cpp
  core/timestamp.cpp
  core/utf8.cpp
  # kernels/ (CPU twins; the CUDA kernels are added below)
  kernels/cpu/embedding.cpp
  kernels/cpu/layernorm.cpp
  kernels/cpu/linear.cpp
  kernels/cpu/attention.cpp
  kernels/cpu/activation.cpp
  kernels/cpu/dropout.cpp
  kernels/cpu/loss.cpp
  kernels/cpu/adam.cpp
  kernels/cpu/tensor_ops.cpp
  kernels/cpu/packed.cpp
  # data/
  data/chunked_input.cpp
  data/csv_parser.cpp
  data/csv.cpp
  data/records.cpp
  data/labels.cpp
  data/label_checks.cpp
  data/split.cpp
  data/batcher.cpp
  data/text_clean.cpp
  data/byte_trie.cpp
  data/tokenizer.cpp
  data/base64.cpp
  data/hf_json.cpp
  data/hf_normalizers.cpp
  data/hf_pre_tokenizers.cpp
  data/hf_models.cpp
  data/hf_tokenizer.cpp
  data/tokenizer_loader.cpp
  data/sentencepiece_model.cpp
  data/tokenizer_files.cpp
  data/dataset.cpp
  # dist/
  dist/launcher.cpp
  dist/communicator.cpp
  dist/collective_deadline.cpp
  dist/device_communicator.cpp
  dist/staged_communicator.cpp
  dist/gradient_buckets.cpp
  # model/
  model/safetensors.cpp
  model/model_family.cpp
  model/bert_config.cpp
  model/bert_params.cpp
  model/hf_names.cpp
  model/bert_classifier.cpp
  model/model_dir.cpp
  model/torch_checkpoint.cpp
  # engine/
  engine/classifier_trainer.cpp
  engine/early_stopping.cpp
  engine/lr_schedule.cpp
  engine/lr_scheduler.cpp
  engine/state_json.cpp
  engine/metrics.cpp
  engine/mlflow_model.cpp
  engine/mlflow_run.cpp
  engine/mlflow_store.cpp
  engine/multilabel_metrics.cpp
  engine/checkpoint.cpp
  engine/adam.cpp
  engine/inference_backend.cpp
  engine/predictor.cpp
  engine/request_batcher.cpp
  engine/param_search.cpp
  engine/tpe_search.cpp
  engine/asha_scheduler.cpp
  engine/search_space.cpp
  engine/study.cpp
  engine/rank_agreement.cpp
  engine/resume_check.cpp
  engine/run_dir.cpp
  engine/stop_signals.cpp
  engine/train_args.cpp
  engine/trainer.cpp
  engine/training_data.cpp
  engine/training_backend.cpp
  engine/validation_metrics.cpp
)
# The library's CUDA part (BERTRAIN_CUDA): the device runtime's wrappers, the kernels, the GPU model and engine.
set(BERTRAIN_CORE_CUDA_SOURCES
  core/cuda/device_info.cu
  core/cuda/gpu_context.cpp
  kernels/cuda/activation.cu
  kernels/cuda/dropout.cu
  kernels/cuda/layernorm.cu
  kernels/cuda/tensor_ops.cu
  kernels/cuda/packed.cu
  kernels/cuda/linear.cu
  kernels/cuda/attention.cu
  kernels/cuda/attention_mma.cu
  kernels/cuda/embedding.cu
  kernels/cuda/loss.cu
  kernels/cuda/adam.cu
  model/bert_classifier_gpu.cpp
  engine/cuda/gpu_inference.cpp
  engine/cuda/gpu_trainer.cpp
  engine/cuda/graph_cache.cpp
)
# The run report's charts and page (bertrain report; the tests read them too).
set(BERTRAIN_REPORT_SOURCES
  tools/report/svg_text.cpp
  tools/report/axis.cpp
  tools/report/charts.cpp
  tools/report/run_report.cpp
  tools/report/study_report.cpp
)
# bertrain serve's parts (the HTTP server links them; the tests drive them without sockets).
set(BERTRAIN_SERVE_SOURCES
  tools/evaluation.cpp
  tools/serve/api_requests.cpp
  tools/serve/cors.cpp
  tools/serve/http_request_reader.cpp
  tools/serve/serve_engine.cpp
  tools/serve/serve_metrics.cpp
)
# The CLI: build/bertrain.
set(BERTRAIN_CLI_SOURCES
  tools/main.cpp
  tools/args.cpp
  tools/near_names.cpp
  tools/recorded_train_flags.cpp
  tools/data_flags.cpp
  tools/model_source.cpp
  tools/bench_step.cpp
  tools/bench_tokenize.cpp
  tools/bench_allreduce.cpp
  tools/train_command.cpp
  tools/evaluate_command.cpp
  tools/predict_command.cpp
  tools/tokenize_command.cpp
  tools/convert_command.cpp
  tools/launch_command.cpp
  tools/wait_status.cpp
  tools/tune/tune_command.cpp
  tools/tune/study_runner.cpp
  tools/tune/trial_process.cpp
  tools/report_command.cpp
  tools/serve/serve_command.cpp
)
# The HTTP server (POSIX sockets: tools/serve/http_server.h); BERTRAIN_HTTP=OFF leaves it out.
set(BERTRAIN_HTTP_SOURCES
  tools/serve/http_frontend.cpp
  tools/serve/http_server.cpp
)
# `bertrain bench kernels` (CUDA only; without CUDA, tools/bench_step.cpp answers that this build has no CUDA support).
set(BERTRAIN_BENCH_KERNELS_SOURCES
  tools/bench_kernels/bench_kernels.cpp
  tools/bench_kernels/harness.cpp
  tools/bench_kernels/embedding.cpp
  tools/bench_kernels/layernorm.cpp
  tools/bench_kernels/dropout.cpp
  tools/bench_kernels/linear.cpp
  tools/bench_kernels/attention.cpp
  tools/bench_kernels/activation.cpp
  tools/bench_kernels/loss.cpp
  tools/bench_kernels/optimizer.cpp
)
