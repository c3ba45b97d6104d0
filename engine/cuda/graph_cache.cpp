#include "engine/cuda/graph_cache.h"

#include "core/cuda/cuda_check.h"
#include "core/error.h"

namespace bertrain {

GraphCache::GraphCache(std::size_t max_graphs) : max_graphs_(cuda_sync_debugging() ? 0 : max_graphs) {}

GraphCache::~GraphCache() {
  for (const auto& entry : graphs_) cudaGraphExecDestroy(entry.second);
}

void GraphCache::run(const Key& key, cudaStream_t stream, const std::function<void()>& enqueue) {
  const auto found = graphs_.find(key);
  if (found != graphs_.end()) {
    BERTRAIN_CUDA_CHECK(cudaGraphLaunch(found->second, stream));
    ++replays_;
    return;
  }
  if (graphs_.size() >= max_graphs_ || seen_.insert(key).second) {
    enqueue();  // first sight of this shape, or no room: eagerly
    return;
  }
  // Second sight: capture. Thread-local mode, so that another thread's unrelated CUDA calls cannot invalidate
  // the capture. An exception from `enqueue` ends the capture and drops the partial graph, leaving the stream
  // usable.
  BERTRAIN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  BERTRAIN_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  BERTRAIN_CUDA_CHECK(instantiated);
  graphs_.emplace(key, exec);
  seen_.erase(key);
  BERTRAIN_CUDA_CHECK(cudaGraphLaunch(exec, stream));
}

}  // namespace bertrain
