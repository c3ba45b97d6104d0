// CUDA graphs for device work whose shape repeats: the same launches with the same arguments, e.g. the forward
// and loss of an evaluation batch of a given (rows, tokens, longest row). Replaying a graph costs one launch
// instead of one per kernel and GEMM (about a hundred at BERT-base), which is what small evaluation batches
// spend their time on. The first time a key is seen the work runs eagerly, which also warms what must not
// happen inside a capture (cuBLASLt's algorithm choice, kernel attributes); the second time it is captured,
// instantiated and launched; later it is replayed. Included by engine/cuda only (CUDA headers).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>

namespace bertrain {

class GraphCache {
 public:
  using Key = std::array<int64_t, 4>;

  // At most `max_graphs` graphs are kept (later keys run eagerly); 0 turns graphs off. Graphs are also off
  // under BERTRAIN_CUDA_SYNC=1, whose per-launch synchronisation a capture forbids.
  explicit GraphCache(std::size_t max_graphs);
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Enqueues the work of `enqueue` on `stream`, eagerly or as the graph of `key`. `enqueue` must only enqueue
  // device work on `stream` (no host synchronisation, no other stream) and everything it passes to the device
  // (pointers, sizes, scalars) must be a function of `key` alone: a replay repeats the captured arguments, the
  // contents of the buffers they point to may change.
  void run(const Key& key, cudaStream_t stream, const std::function<void()>& enqueue);

  std::size_t graphs() const { return graphs_.size(); }
  std::size_t replays() const { return replays_; }

 private:
  std::size_t max_graphs_;
  std::set<Key> seen_;                        // keys run once eagerly
  std::map<Key, cudaGraphExec_t> graphs_;     // keys captured
  std::size_t replays_ = 0;
};

}  // namespace bertrain
