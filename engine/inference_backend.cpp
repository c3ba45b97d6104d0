#include "engine/inference_backend.h"

#include <omp.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "core/build_config.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "engine/memory_fit.h"
#include "kernels/packed.h"

namespace bertrain {

namespace {

int round_up_to_power_of_two(int n) {
  int p = 1;
  while (p < n && p < (1 << 30)) p *= 2;
  return p;
}

// The CPU engine's forward pass (BertClassifier<float>), rebuilt larger when a batch exceeds its limits.
class CpuInference final : public InferenceBackend {
 public:
  CpuInference(const BertConfig& config, int num_labels, std::vector<float> params)
      : config_(config), num_labels_(num_labels), params_(std::move(params)), threads_(omp_get_max_threads()) {}

  std::string description() const override { return cpu_engine_description(threads_); }

  void logits(const BertBatch& batch, float* out) override {
    if (batch.batch == 0) return;
    if (!model_ || !batch_fits(limits_, batch)) {
      const BatchLimits grown = grown_limits(limits_, batch, config_);
      model_.reset();  // free the old activations before allocating the larger ones
      // (limits_ changes only once they fit: after a refused batch, a smaller one is built for as before.)
      if (const std::optional<HostMemory> memory = host_memory()) {
        check_inference_host_memory(
            BertClassifier<float>::activation_bytes(config_, num_labels_, grown, BertUse::kInference), grown, *memory);
      }
      limits_ = grown;
      model_.emplace(config_, num_labels_, limits_, BertUse::kInference);
      BERTRAIN_CHECK(model_->layout().total() == params_.size(), "inference: the parameter buffer has "
                                                                    << params_.size() << " elements, the model needs "
                                                                    << model_->layout().total());
    }
    model_->forward(params_.data(), batch, DropoutSetting{});
    std::copy(model_->logits(), model_->logits() + static_cast<std::size_t>(batch.batch) * num_labels_, out);
  }

 private:
  BertConfig config_;
  int num_labels_;
  std::vector<float> params_;
  BatchLimits limits_{0, 0, 0};
  std::optional<BertClassifier<float>> model_;
  int threads_;  // OpenMP's count on the thread that built (and runs) the engine: serve's engine thread
};

}  // namespace

bool batch_fits(const BatchLimits& limits, const BertBatch& batch) {
  return batch.batch <= limits.rows && batch.tokens <= limits.tokens && batch.longest <= limits.longest;
}

BatchLimits grown_limits(const BatchLimits& current, const BertBatch& batch, const BertConfig& config) {
  check_row_offsets(batch.cu_seqlens, batch.batch, batch.tokens, config.max_sequence_length(), "inference batch");
  BatchLimits limits;
  limits.rows = std::max(current.rows, round_up_to_power_of_two(batch.batch));
  // A row can be as long as the position table: sizing for it at once avoids regrowing on every longer text.
  limits.longest = std::max(current.longest, config.max_sequence_length());
  limits.tokens = std::max(current.tokens, round_up_to_power_of_two(batch.tokens));
  limits.tokens = std::min(limits.tokens, limits.rows * limits.longest);
  limits.tokens = std::max(limits.tokens, batch.tokens);
  return limits;
}

std::unique_ptr<InferenceBackend> make_inference_backend(const BackendChoice& choice, const BertConfig& config,
                                                         int num_labels, std::vector<float> params) {
  if (choice.cuda) return make_cuda_inference_backend(choice.device, choice.bf16, config, num_labels, params);
  return std::make_unique<CpuInference>(config, num_labels, std::move(params));
}

#if !BERTRAIN_HAS_CUDA
std::unique_ptr<InferenceBackend> make_cuda_inference_backend(int, bool, const BertConfig&, int,
                                                              const std::vector<float>&) {
  BERTRAIN_FAIL("this build has no CUDA support (configure with -DBERTRAIN_CUDA=ON on a machine with nvcc)");
}
#endif

}  // namespace bertrain
