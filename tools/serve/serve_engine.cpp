#include "tools/serve/serve_engine.h"

#include <algorithm>
#include <chrono>

#include "core/cpu_threads.h"
#include "core/error.h"

namespace bertrain {

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The largest batch the limits allow — max_batch_size rows, as many of them the model's longest as
// max_batch_tokens holds, the rest sharing what is left — so that warming up sizes every buffer for it.
std::vector<Example> warm_up_rows(const Tokenizer& tokenizer, int max_length, const RequestBatcherOptions& b) {
  const long rows = b.max_batch_size;
  long tokens = std::min<long>(b.max_batch_tokens, rows * max_length);
  tokens = std::max<long>(tokens, 2 * rows);  // a row is at least [CLS] [SEP]
  std::vector<Example> out;
  for (long r = 0; r < rows; ++r) {
    const long left_rows = rows - r;
    const long length = std::clamp<long>(tokens - 2 * (left_rows - 1), 2, max_length);
    Example e;
    // Any in-vocabulary id fills the row (a byte-level BPE may have no unknown token): only the shapes matter.
    e.ids.assign(static_cast<std::size_t>(length), tokenizer.unk_id() >= 0 ? tokenizer.unk_id() : tokenizer.cls_id());
    e.ids.front() = tokenizer.cls_id();
    e.ids.back() = tokenizer.sep_id();
    tokens -= length;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

bool PendingRows::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  return error_.empty();
}

ServeEngine::ServeEngine(ServeEngineOptions options, ServeMetrics* metrics)
    : options_(std::move(options)), metrics_(metrics), batcher_(options_.batching) {
  // One forward pass per batch: the predictor's own batching must not cut it again.
  options_.inference.batch_size = options_.batching.max_batch_size;
}

ServeEngine::~ServeEngine() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void ServeEngine::start() { thread_ = std::thread([this] { run(); }); }

std::string ServeEngine::load_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return load_error_;
}

std::string ServeEngine::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

ServeEngine::Admission ServeEngine::submit(const std::shared_ptr<PendingRows>& pending) {
  std::vector<int> tokens;
  tokens.reserve(pending->rows().size());
  for (const Example& e : pending->rows()) tokens.push_back(static_cast<int>(e.ids.size()));
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ready_.load()) return Admission::kNotReady;
  if (stopping_ || failed_.load()) return Admission::kStopping;
  const std::uint64_t id = next_id_++;
  switch (batcher_.submit(id, tokens, seconds_now())) {
    case SubmitResult::kAccepted:
      break;
    case SubmitResult::kQueueFull:
      return Admission::kQueueFull;
    case SubmitResult::kTooManyRows:
      return Admission::kTooManyRows;
    case SubmitResult::kRowTooLong:
      return Admission::kRowTooLong;
  }
  const int classes = predictor_->labels().size();
  pending->probs_.assign(pending->rows().size() * static_cast<std::size_t>(classes), 0.0f);
  pending->logits_.assign(pending->probs_.size(), 0.0f);
  open_.emplace(id, pending);
  work_cv_.notify_one();
  return Admission::kAccepted;
}

void ServeEngine::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  work_cv_.notify_one();
}

ServeMetrics::Gauges ServeEngine::gauges() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ServeMetrics::Gauges g;
  g.queue_rows = batcher_.queued_rows();
  g.queue_requests = batcher_.queued_requests();
  g.ready = ready_.load() && !stopping_ && !failed_.load();
  return g;
}

void ServeEngine::run() {
  try {
    load_and_warm_up();
  } catch (const std::bad_alloc&) {
    // The engine's buffers are sized for the largest batch: "std::bad_alloc" alone would not say which flag.
    std::lock_guard<std::mutex> lock(mutex_);
    load_error_ = "not enough memory for the model with batches of --max-batch-tokens " +
                  std::to_string(options_.batching.max_batch_tokens) + " and --max-batch-size " +
                  std::to_string(options_.batching.max_batch_size) + ": give smaller ones";
    loading_done_ = true;
    return;
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    load_error_ = e.what();
    loading_done_ = true;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_ = true;
    loading_done_ = true;
  }
  serve_batches();
}

void ServeEngine::load_and_warm_up() {
  // On this thread: OpenMP's thread count and pinning are per thread, and a CUDA device is current per thread.
  configure_cpu_threads(options_.threads);
  predictor_ = std::make_unique<Predictor>(options_.model, options_.inference);
  dataset_options_ = predictor_->dataset_options();
  if (options_.no_clean) dataset_options_.clean = false;
  const DatasetOptions& data = dataset_options_;
  BERTRAIN_CHECK(options_.batching.max_batch_tokens >= data.max_length,
                 "--max-batch-tokens " << options_.batching.max_batch_tokens << " is less than the model's max length "
                                       << data.max_length << ": a row of that length could never run");
  batch_rows_ = warm_up_rows(predictor_->tokenizer(), data.max_length, options_.batching);
  predictor_->predict(batch_rows_, &batch_probs_, &batch_logits_);
}

void ServeEngine::serve_batches() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !batcher_.empty(); });
    if (batcher_.empty()) break;  // stopping, and everything accepted has been answered
    // While stopping nothing more is coming: run what is queued at once.
    if (!stopping_ && !batcher_.batch_ready(seconds_now())) {
      const double wait = batcher_.deadline() - seconds_now();
      work_cv_.wait_for(lock, std::chrono::duration<double>(std::max(wait, 0.0)));
      continue;
    }
    run_batch(batcher_.take_batch(), lock);
    if (failed_.load()) break;
  }
  // A failed engine answers what is still queued with its failure.
  for (auto& [id, pending] : open_) {
    std::lock_guard<std::mutex> pending_lock(pending->mutex_);
    pending->error_ = failure_.empty() ? "the server stopped" : failure_;
    pending->done_ = true;
    pending->cv_.notify_all();
  }
  open_.clear();
}

// Runs one batch with the lock released (HTTP threads keep queueing meanwhile) and hands out its results.
void ServeEngine::run_batch(const std::vector<QueuedRow>& batch, std::unique_lock<std::mutex>& lock) {
  batch_rows_.clear();
  long tokens = 0;
  for (const QueuedRow& q : batch) {
    batch_rows_.push_back(open_.at(q.request)->rows()[static_cast<std::size_t>(q.row)]);
    tokens += q.tokens;
  }
  lock.unlock();
  const double start = seconds_now();
  std::string error;
  try {
    predictor_->predict(batch_rows_, &batch_probs_, &batch_logits_);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const double end = seconds_now();
  lock.lock();
  if (!error.empty()) {
    failure_ = "inference failed: " + error;
    failed_ = true;
    return;
  }
  metrics_->record_batch(static_cast<int>(batch.size()), static_cast<int>(tokens), end - start, end);
  const std::size_t classes = static_cast<std::size_t>(predictor_->labels().size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    PendingRows& pending = *open_.at(batch[i].request);
    const std::size_t at = static_cast<std::size_t>(batch[i].row) * classes;
    std::copy_n(batch_probs_.begin() + static_cast<long>(i * classes), classes, pending.probs_.begin() + static_cast<long>(at));
    std::copy_n(batch_logits_.begin() + static_cast<long>(i * classes), classes, pending.logits_.begin() + static_cast<long>(at));
  }
  for (std::uint64_t id : batcher_.finish(batch)) {
    const std::shared_ptr<PendingRows> pending = open_.at(id);
    open_.erase(id);
    std::lock_guard<std::mutex> pending_lock(pending->mutex_);
    pending->done_ = true;
    pending->cv_.notify_all();
  }
}

}  // namespace bertrain
