// RequestBatcher: token-based dynamic batching for bertrain serve (see the header).
#include "engine/request_batcher.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace bertrain {

RequestBatcher::RequestBatcher(const RequestBatcherOptions& options) : options_(options) {
  BERTRAIN_CHECK(options.max_batch_tokens >= 1, "--max-batch-tokens must be >= 1, got " << options.max_batch_tokens);
  BERTRAIN_CHECK(options.max_batch_size >= 1, "--max-batch-size must be >= 1, got " << options.max_batch_size);
  BERTRAIN_CHECK(std::isfinite(options.max_wait_s) && options.max_wait_s >= 0.0,
                 "--max-wait-ms must be finite and >= 0, got " << options.max_wait_s * 1000.0);
  BERTRAIN_CHECK(options.max_queue_rows >= 1, "--max-queue must be >= 1, got " << options.max_queue_rows);
}

SubmitResult RequestBatcher::submit(std::uint64_t request, const std::vector<int>& row_tokens, double now) {
  BERTRAIN_CHECK(!row_tokens.empty(), "request batcher: request " << request << " has no rows");
  BERTRAIN_CHECK(requests_.count(request) == 0, "request batcher: request " << request << " is already open");
  if (row_tokens.size() > static_cast<std::size_t>(options_.max_queue_rows)) return SubmitResult::kTooManyRows;
  for (std::size_t i = 0; i < row_tokens.size(); ++i) {
    BERTRAIN_CHECK(row_tokens[i] >= 1,
                   "request batcher: row " << i << " of request " << request << " has " << row_tokens[i] << " tokens");
    if (row_tokens[i] > options_.max_batch_tokens) return SubmitResult::kRowTooLong;
  }
  if (queue_.size() + row_tokens.size() > static_cast<std::size_t>(options_.max_queue_rows)) {
    return SubmitResult::kQueueFull;
  }
  last_arrival_ = std::max(last_arrival_, now);
  for (std::size_t i = 0; i < row_tokens.size(); ++i) {
    queue_.push_back({QueuedRow{request, static_cast<int>(i), row_tokens[i]}, last_arrival_});
  }
  RequestState& state = requests_[request];
  state.rows.assign(row_tokens.size(), RowState::kQueued);
  state.queued = static_cast<int>(row_tokens.size());
  state.unfinished = state.queued;
  ++queued_requests_;
  return SubmitResult::kAccepted;
}

bool RequestBatcher::batch_ready(double now) const {
  if (queue_.empty()) return false;
  if (now >= deadline()) return true;
  if (queue_.size() >= static_cast<std::size_t>(options_.max_batch_size)) return true;
  // Full by tokens: the rows a batch would take leave no room for the next one. Looks at most max_batch_size rows.
  long tokens = 0;
  for (const Waiting& waiting : queue_) {
    tokens += waiting.row.tokens;
    if (tokens >= options_.max_batch_tokens) return true;  // == : no row of >= 1 token fits any more
  }
  return false;
}

double RequestBatcher::deadline() const {
  if (queue_.empty()) return std::numeric_limits<double>::infinity();
  return queue_.front().arrival + options_.max_wait_s;
}

std::vector<QueuedRow> RequestBatcher::take_batch() {
  std::vector<QueuedRow> batch;
  long tokens = 0;
  while (!queue_.empty() && batch.size() < static_cast<std::size_t>(options_.max_batch_size) &&
         tokens + queue_.front().row.tokens <= options_.max_batch_tokens) {
    const QueuedRow row = queue_.front().row;
    queue_.pop_front();
    tokens += row.tokens;
    batch.push_back(row);
    RequestState& state = requests_.at(row.request);  // cancel() removes a request's queued rows with it
    state.rows[static_cast<std::size_t>(row.row)] = RowState::kRunning;
    --state.queued;
    if (state.queued == 0) --queued_requests_;
  }
  return batch;
}

std::vector<std::uint64_t> RequestBatcher::finish(const std::vector<QueuedRow>& rows) {
  std::vector<std::uint64_t> done;
  for (const QueuedRow& row : rows) {
    auto it = requests_.find(row.request);
    if (it == requests_.end()) continue;  // cancelled while its rows ran
    RequestState& state = it->second;
    BERTRAIN_CHECK(row.row >= 0 && row.row < static_cast<int>(state.rows.size()) &&
                       state.rows[static_cast<std::size_t>(row.row)] == RowState::kRunning,
                   "request batcher: row " << row.row << " of request " << row.request
                                           << " finished but was not running");
    state.rows[static_cast<std::size_t>(row.row)] = RowState::kDone;
    if (--state.unfinished == 0) {
      done.push_back(row.request);
      requests_.erase(it);
    }
  }
  return done;
}

void RequestBatcher::cancel(std::uint64_t request) {
  auto it = requests_.find(request);
  if (it == requests_.end()) return;
  if (it->second.queued > 0) {
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                [request](const Waiting& waiting) { return waiting.row.request == request; }),
                 queue_.end());
    --queued_requests_;
  }
  requests_.erase(it);
}

}  // namespace bertrain
