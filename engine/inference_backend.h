// Batched inference for `bertrain evaluate` and `bertrain predict`: the logits of packed batches, on the CPU
// engine or a CUDA device, without gradients or optimizer state. The model's activations are sized by the
// largest batch seen so far and grow when a larger one arrives, so a stream of batches of unknown sizes (a
// file read in chunks) needs no limits up front and stops allocating once the largest batch has been seen.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/training_backend.h"
#include "model/bert_classifier.h"

namespace bertrain {

class InferenceBackend {
 public:
  virtual ~InferenceBackend() = default;
  // "cpu (2 threads, fp32, OpenBLAS)", "cuda:0 NVIDIA H100 80GB HBM3, bf16", ... for logs (core/cpu_threads.h).
  virtual std::string description() const = 0;
  // Writes (=) the logits of `batch` (host arrays, checked here) into out [batch.batch, num_labels] (float,
  // host, row-major), without dropout. Waits for the result.
  virtual void logits(const BertBatch& batch, float* out) = 0;
};

// The engine for `choice` (choose_backend) with the model `config` and its parameters `params` (layout of
// bert_classifier_layout(config, num_labels)). bf16 keeps bf16 weights and activations as training does. The CPU
// engine keeps `params` (moved in, a caller done with them holds no second copy); the CUDA engine uploads them.
// Either engine's activations are those of one layer (BertUse::kInference), whatever the model's depth.
std::unique_ptr<InferenceBackend> make_inference_backend(const BackendChoice& choice, const BertConfig& config,
                                                         int num_labels, std::vector<float> params);

// The CUDA engine (engine/cuda/gpu_inference.cpp; builds with CUDA only).
std::unique_ptr<InferenceBackend> make_cuda_inference_backend(int device, bool bf16, const BertConfig& config,
                                                              int num_labels, const std::vector<float>& params);

// Whether a model built for `limits` takes `batch` (rows, tokens and longest row within them).
bool batch_fits(const BatchLimits& limits, const BertBatch& batch);

// Limits at least `current` and covering `batch`, with headroom (rows and tokens rounded up to powers of two,
// the longest row to the position table) so that growing batches reallocate a handful of times, not every time.
BatchLimits grown_limits(const BatchLimits& current, const BertBatch& batch, const BertConfig& config);

}  // namespace bertrain
