// The CUDA engine behind InferenceBackend: BertClassifierGpu<T> built for inference (one layer's activations, no
// backward scratch), forward only, over one device copy of the parameters in T (bf16 cast once from the fp32
// checkpoint) and an activation arena that grows with the largest batch seen. Per batch: ids and offsets up, the
// forward, the logits cast to fp32 and copied back.
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>

#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "engine/inference_backend.h"
#include "engine/memory_fit.h"
#include "kernels/tensor_ops.h"
#include "model/bert_classifier_gpu.h"

namespace bertrain {

namespace {

template <typename T>
class GpuInference final : public InferenceBackend {
 public:
  GpuInference(int device, const BertConfig& config, int num_labels, const std::vector<float>& params)
      : config_(config),
        num_labels_(num_labels),
        context_(device, gpu_reduction_workspace_elements(BertClassifierGpu<T>::widest_reduction(config))) {
    DeviceBuffer<float> master(params);
    if constexpr (std::is_same_v<T, float>) {
      params_ = std::move(master);
    } else {
      params_ = DeviceBuffer<T>(params.size());
      cast_cuda(params_.data(), master.data(), params.size(), context_.stream());
      context_.synchronize();  // `master` is freed when this block ends
    }
    description_ = "cuda:" + std::to_string(device) + " " + context_.device_name() +
                   (std::is_same_v<T, float> ? ", fp32" : ", bf16");
  }

  std::string description() const override { return description_; }

  void logits(const BertBatch& batch, float* out) override {
    if (batch.batch == 0) return;
    if (!model_ || !batch_fits(limits_, batch)) {
      grow(grown_limits(limits_, batch, config_));
    }
    check_batch_for_device(batch, limits_, config_.vocab_size, "GPU inference");
    const cudaStream_t stream = context_.stream();
    const std::size_t tokens = static_cast<std::size_t>(batch.tokens), rows = static_cast<std::size_t>(batch.batch);
    const std::size_t n_logits = rows * static_cast<std::size_t>(num_labels_);
    std::memcpy(staging_ids_.data(), batch.input_ids, tokens * sizeof(int32_t));
    std::memcpy(staging_offsets_.data(), batch.cu_seqlens, (rows + 1) * sizeof(int32_t));
    BERTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(ids_.data(), staging_ids_.data(), tokens * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(cu_seqlens_.data(), staging_offsets_.data(), (rows + 1) * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, stream));
    BertBatch device_batch = batch;
    device_batch.input_ids = ids_.data();
    device_batch.cu_seqlens = cu_seqlens_.data();
    model_->forward(params_.data(), device_batch, DropoutSetting{});
    const float* logits = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      logits = model_->logits();
    } else {
      cast_cuda(logits_.data(), model_->logits(), n_logits, stream);
      logits = logits_.data();
    }
    BERTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(staging_logits_.data(), logits, n_logits * sizeof(float), cudaMemcpyDeviceToHost, stream));
    context_.synchronize();
    std::memcpy(out, staging_logits_.data(), n_logits * sizeof(float));
  }

 private:
  // Rebuilds the model's arena and the batch buffers for `limits` (the old ones are freed first).
  void grow(const BatchLimits& limits) {
    context_.synchronize();
    model_.reset();
    arena_ = DeviceBuffer<char>();
    const std::size_t bytes = BertClassifierGpu<T>::arena_bytes(config_, num_labels_, limits, BertUse::kInference);
    std::size_t free = 0, total = 0;
    BERTRAIN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    check_inference_device_memory(bytes, limits, free, total, "cuda:" + std::to_string(context_.device()));
    arena_ = DeviceBuffer<char>(bytes);
    model_ = std::make_unique<BertClassifierGpu<T>>(config_, num_labels_, limits, context_.handles(), arena_.data(),
                                                    arena_.size(), BertUse::kInference);
    BERTRAIN_CHECK(model_->layout().total() == params_.size(), "GPU inference: the parameter buffer has "
                                                                  << params_.size() << " elements, the model needs "
                                                                  << model_->layout().total());
    const std::size_t rows = static_cast<std::size_t>(limits.rows), tokens = static_cast<std::size_t>(limits.tokens);
    ids_ = DeviceBuffer<int32_t>(tokens);
    cu_seqlens_ = DeviceBuffer<int32_t>(rows + 1);
    logits_ = DeviceBuffer<float>(rows * static_cast<std::size_t>(num_labels_));
    staging_ids_ = PinnedBuffer<int32_t>(tokens);
    staging_offsets_ = PinnedBuffer<int32_t>(rows + 1);
    staging_logits_ = PinnedBuffer<float>(rows * static_cast<std::size_t>(num_labels_));
    limits_ = limits;
  }

  BertConfig config_;
  int num_labels_;
  GpuContext context_;
  std::string description_;
  DeviceBuffer<T> params_;
  BatchLimits limits_{0, 0, 0};
  DeviceBuffer<char> arena_;
  std::unique_ptr<BertClassifierGpu<T>> model_;
  DeviceBuffer<int32_t> ids_, cu_seqlens_;
  DeviceBuffer<float> logits_;  // the fp32 cast of bf16 logits
  PinnedBuffer<int32_t> staging_ids_, staging_offsets_;
  PinnedBuffer<float> staging_logits_;
};

}  // namespace

std::unique_ptr<InferenceBackend> make_cuda_inference_backend(int device, bool bf16_mode, const BertConfig& config,
                                                              int num_labels, const std::vector<float>& params) {
  if (bf16_mode) return std::make_unique<GpuInference<bf16>>(device, config, num_labels, params);
  return std::make_unique<GpuInference<float>>(device, config, num_labels, params);
}

}  // namespace bertrain
