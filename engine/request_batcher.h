// The queue between `bertrain serve`'s HTTP threads and its one engine thread: rows of many requests wait here
// and leave as batches sized by real tokens, as Hugging Face text-embeddings-inference batches (a forward pass
// holds at most max_batch_tokens tokens and max_batch_size rows, and runs at the latest max_wait_s after its
// oldest row arrived, full or not). Plain logic with no lock, no thread and no clock: the server holds a mutex
// around it and passes the time in, so tests drive it deterministically.
//
// Rows leave in arrival order (FIFO), so no request waits behind later ones; a request's rows may be split over
// several batches, and the request is done when its last row is. Each row is counted by its real tokens (packed
// batches have no padding), so one long row never makes a batch of short ones expensive.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <unordered_map>
#include <vector>

namespace bertrain {

// One row (one text) of a request, as it waits and as a batch holds it.
struct QueuedRow {
  std::uint64_t request = 0;
  int row = 0;     // index within its request
  int tokens = 0;  // real tokens, [CLS] and [SEP] included
};

struct RequestBatcherOptions {
  int max_batch_tokens = 16384;  // real tokens per forward pass (no padding)
  int max_batch_size = 64;       // rows per forward pass
  double max_wait_s = 0.005;     // a batch runs at most this long after its oldest row arrived, full or not
  int max_queue_rows = 4096;     // rows waiting (not counting the batch running)
};

enum class SubmitResult {
  kAccepted,
  kQueueFull,    // try again later (503 with Retry-After)
  kTooManyRows,  // more rows than max_queue_rows can ever hold
  kRowTooLong,   // a row with more tokens than max_batch_tokens: no batch could ever hold it
};

class RequestBatcher {
 public:
  // Every option >= 1 (max_wait_s finite and >= 0); else Error naming the flag (--max-batch-tokens,
  // --max-batch-size, --max-wait-ms, --max-queue).
  explicit RequestBatcher(const RequestBatcherOptions& options);

  // Queues every row of one request (its real token counts, >= 1 each, at least one row), all or none, arriving
  // at `now` (seconds). `request` must not be open: the server counts ids up and never reuses one, so a row of a
  // cancelled request that finishes late cannot be mistaken for a new request's. Arrival times are kept
  // non-decreasing (an earlier `now` than the last arrival counts as that arrival: two HTTP threads may read the
  // clock in one order and take the lock in the other), so the queue's front is always its oldest row.
  // Refusals (anything but kAccepted) change nothing; kTooManyRows and kRowTooLong are checked before kQueueFull
  // because they are permanent, whatever the queue holds.
  SubmitResult submit(std::uint64_t request, const std::vector<int>& row_tokens, double now);

  // Whether a batch should run now: the queued rows fill a batch (max_batch_size rows, or the next row would not
  // fit in max_batch_tokens; max_batch_tokens reached exactly counts as full since every row has a token), or
  // the oldest queued row arrived max_wait_s or more before `now` (now >= deadline()). False when empty.
  bool batch_ready(double now) const;

  // When the oldest queued row's wait ends (its arrival + max_wait_s); +infinity when empty. The engine thread
  // sleeps until then (or until a submit wakes it).
  double deadline() const;

  // Removes and returns the next batch: queued rows in arrival order up to max_batch_size rows and
  // max_batch_tokens tokens; never empty when rows are queued (no row is longer than max_batch_tokens), empty
  // when none are.
  std::vector<QueuedRow> take_batch();

  // Marks taken rows done; returns the requests all of whose rows are now done, in the order they completed
  // (each once; it is then no longer open). Rows of cancelled requests are ignored. Error for a row of an open
  // request that is not running (never taken, or finished twice).
  std::vector<std::uint64_t> finish(const std::vector<QueuedRow>& rows);

  // Forgets a request: its queued rows leave the queue; rows already taken are ignored by finish (a client went
  // away, or the batch failed). Nothing happens for a request that is not open.
  void cancel(std::uint64_t request);

  int queued_rows() const { return static_cast<int>(queue_.size()); }
  int queued_requests() const { return queued_requests_; }  // requests with at least one queued row
  int open_requests() const { return static_cast<int>(requests_.size()); }  // accepted, not finished or cancelled
  bool empty() const { return queued_rows() == 0; }
  const RequestBatcherOptions& options() const { return options_; }

 private:
  struct Waiting {
    QueuedRow row;
    double arrival;
  };
  enum class RowState : std::uint8_t { kQueued, kRunning, kDone };
  struct RequestState {
    std::vector<RowState> rows;  // by row index: finish() tells a running row from one never taken or done twice
    int queued = 0;              // rows still in queue_
    int unfinished = 0;          // rows queued or running
  };

  RequestBatcherOptions options_;
  std::deque<Waiting> queue_;
  std::unordered_map<std::uint64_t, RequestState> requests_;  // the open requests
  int queued_requests_ = 0;
  double last_arrival_ = -std::numeric_limits<double>::infinity();
};

}  // namespace bertrain
