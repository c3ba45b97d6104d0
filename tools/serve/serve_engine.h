// The inference side of `bertrain serve`: one engine thread that owns the model (its Predictor, on the CPU or one
// CUDA device), loads and warms it up, then runs the rows that HTTP threads submit in token-bounded batches
// (engine/request_batcher.h: what has arrived, up to --max-batch-tokens real tokens and --max-batch-size rows, or
// what has arrived --max-wait-ms after the oldest row) and hands every request its rows' results once all are done.
// Why one thread: the engine's forward pass already uses every core (OpenMP) or the whole GPU; one pass over many
// requests' rows beats many small passes competing for the same device.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "data/batcher.h"
#include "engine/predictor.h"
#include "engine/request_batcher.h"
#include "tools/serve/serve_metrics.h"

namespace bertrain {

// One request's rows on their way through the engine, shared by the HTTP thread that waits for it and the engine
// thread that fills it in.
class PendingRows {
 public:
  explicit PendingRows(std::vector<Example> rows) : rows_(std::move(rows)) {}
  const std::vector<Example>& rows() const { return rows_; }
  // Blocks until every row has its result or the engine failed; true when all succeeded.
  bool wait();
  const std::vector<float>& probabilities() const { return probs_; }  // [rows, labels], row-major
  const std::vector<float>& logits() const { return logits_; }
  const std::string& error() const { return error_; }

 private:
  friend class ServeEngine;
  std::vector<Example> rows_;
  std::vector<float> probs_, logits_;
  std::string error_;
  bool done_ = false;
  std::mutex mutex_;
  std::condition_variable cv_;
};

struct ServeEngineOptions {
  std::string model;              // what Predictor loads (RUN_DIR, model directory)
  InferenceOptions inference;
  int threads = 0;                // CPU threads (0: every core), set on the engine thread (OpenMP's are per thread)
  RequestBatcherOptions batching;
  bool no_clean = false;          // --no-clean: texts as they are, whatever the model's config.json records
};

class ServeEngine {
 public:
  ServeEngine(ServeEngineOptions options, ServeMetrics* metrics);
  ~ServeEngine();  // stops and joins the thread (answering what was queued)

  // Starts the engine thread, which loads the model and runs one warm-up pass of a full batch (so that the first
  // requests neither allocate nor capture anything). Returns at once.
  void start();
  // Whether loading ended: ready(), or it failed and load_error() says why.
  bool loading_finished() const { return loading_done_.load(); }
  bool ready() const { return ready_.load(); }
  std::string load_error() const;
  // After ready(): the loaded model, read-only (labels, tokenizer, dataset options are safe from any thread).
  const Predictor& predictor() const { return *predictor_; }
  // After ready(): how the model reads text (predictor().dataset_options(), computed once).
  const DatasetOptions& dataset_options() const { return dataset_options_; }

  enum class Admission { kAccepted, kNotReady, kStopping, kQueueFull, kTooManyRows, kRowTooLong };
  // Queues `pending`'s rows (all or none); its result arrives through pending->wait().
  Admission submit(const std::shared_ptr<PendingRows>& pending);
  // Answers every queued row, then ends the thread; submit refuses from now on. Idempotent.
  void stop();

  // A forward pass that threw (a CUDA error, out of memory): the requests in it fail with this message and the
  // engine stops taking work; the server shuts down (exit 1).
  bool failed() const { return failed_.load(); }
  std::string failure() const;

  ServeMetrics::Gauges gauges() const;  // queue depth for /metrics (ready, in flight: the caller's)
  const RequestBatcherOptions& batching() const { return options_.batching; }

 private:
  void run();
  void load_and_warm_up();
  void serve_batches();
  void run_batch(const std::vector<QueuedRow>& batch, std::unique_lock<std::mutex>& lock);

  ServeEngineOptions options_;
  ServeMetrics* metrics_;
  std::unique_ptr<Predictor> predictor_;
  DatasetOptions dataset_options_;
  std::thread thread_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;    // the engine thread waits here for rows or stop
  RequestBatcher batcher_;
  std::unordered_map<std::uint64_t, std::shared_ptr<PendingRows>> open_;
  std::uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::string load_error_, failure_;
  std::atomic<bool> loading_done_{false}, ready_{false}, failed_{false};

  // The engine thread's batch buffers, reused.
  std::vector<Example> batch_rows_;
  std::vector<float> batch_probs_, batch_logits_;
};

}  // namespace bertrain
