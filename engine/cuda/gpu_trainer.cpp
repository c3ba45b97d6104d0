// The CUDA engine behind TrainingBackend: BertClassifierGpu<T> plus one allocation each for the fp32 master
// parameters, the bf16 compute copy (--precision bf16), the fp32 gradients and the Adam moments, one
// activation arena, double-buffered pinned staging for batches and losses, and pinned staging for evaluation's
// logits. A step is enqueued without host synchronisation or allocation; its loss is read back one step later
// (take_loss).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <thread>

#include "core/build_info.h"
#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "dist/device_communicator.h"
#include "dist/gradient_buckets.h"
#include "engine/adam.h"
#include "engine/checkpoint.h"
#include "engine/cuda/graph_cache.h"
#include "engine/training_backend.h"
#include "kernels/adam.h"
#include "kernels/loss.h"
#include "kernels/tensor_ops.h"
#include "model/bert_classifier_gpu.h"

namespace bertrain {

namespace {

// Gradients are reduced across ranks in buckets of at least this many bytes (PyTorch DDP's default),
// each as soon as the backward has produced it, on a second stream.
constexpr std::size_t kBucketBytes = 25u << 20;

// Evaluation batch shapes kept as CUDA graphs (engine/cuda/graph_cache.h): a validation set replays the same
// shapes every epoch; beyond this many distinct shapes, batches run eagerly.
constexpr std::size_t kMaxEvaluationGraphs = 64;


class CudaEvent {
 public:
  CudaEvent() { BERTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Host staging of one batch: page-locked, so the uploads are asynchronous.
struct Staging {
  PinnedBuffer<int32_t> ids, cu_seqlens;
  PinnedBuffer<float> targets, loss;
  CudaEvent done;  // recorded after the step that used this staging has finished with it
};

template <typename T>
class GpuBackend final : public TrainingBackend {
 public:
  GpuBackend(int device, const BertConfig& config, int num_labels, const BatchLimits& limits,
             const std::vector<float>& params, const TrainerOptions& options, Communicator& comm)
      : context_(device, gpu_reduction_workspace_elements(BertClassifierGpu<T>::widest_reduction(config))),
        arena_(BertClassifierGpu<T>::arena_bytes(config, num_labels, limits, training_use(options))),
        model_(config, num_labels, limits, context_.handles(), arena_.data(), arena_.size(), training_use(options)),
        options_(options),
        hyper_(options.adam),
        size_(params.size()),
        master_(params),
        grads_(size_),
        moments_(2 * size_),
        ids_(static_cast<std::size_t>(limits.tokens)),
        cu_seqlens_(static_cast<std::size_t>(limits.rows) + 1),
        targets_(static_cast<std::size_t>(limits.rows) * num_labels),
        losses_(4),  // per staging slot: the loss and the gradient's sum of squares
        logits_staging_(static_cast<std::size_t>(limits.rows) * num_labels),
        host_optimizer_(0, options.adam),
        buckets_(backward_ready_offsets(model_.layout(), config), model_.layout().total(),
                 kBucketBytes / sizeof(float)) {
    BERTRAIN_CHECK(params.size() == model_.layout().total(), "parameter buffer has " << params.size()
                                                                  << " elements, the layout needs "
                                                                  << model_.layout().total());
    BERTRAIN_CHECK(options.class_weights.empty() || static_cast<int>(options.class_weights.size()) == num_labels,
                   "got " << options.class_weights.size() << " class weights for " << num_labels << " labels");
    BERTRAIN_CUDA_CHECK(cudaMemsetAsync(moments_.data(), 0, moments_.bytes(), context_.stream()));
    // The backward writes (=) every tensor of the layout but never the alignment padding between tensors, which
    // the gradient norm, the allreduce and Adam read as part of the flat buffer: zero once, it stays zero.
    BERTRAIN_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), context_.stream()));
    if constexpr (!std::is_same_v<T, float>) {
      compute_ = DeviceBuffer<T>(size_);
      cast_cuda(compute_.data(), master_.data(), size_, context_.stream());
    }
    if (!options.class_weights.empty()) class_weights_ = DeviceBuffer<float>(options.class_weights);
    if (options.adam.weight_decay > 0) decay_mask_ = DeviceBuffer<uint32_t>(trainer_decay_mask(model_.layout()));
    if (options.accumulation > 1) accumulated_ = DeviceBuffer<float>(size_);
    for (Staging& s : staging_) {
      s.ids = PinnedBuffer<int32_t>(ids_.size());
      s.cu_seqlens = PinnedBuffer<int32_t>(cu_seqlens_.size());
      s.targets = PinnedBuffer<float>(targets_.size());
      s.loss = PinnedBuffer<float>(2);
    }
    if (comm.size() > 1) {
      BERTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
      collectives_ = agree_gpu_collectives(options.gpu_collectives, comm, cuda_device_count());
      std::size_t largest_bucket = 0;
      for (const GradientBucket& bucket : buckets_.buckets()) largest_bucket = std::max(largest_bucket, bucket.size());
      device_comm_ = make_device_communicator(collectives_, comm, device, options.collective_timeout_s, largest_bucket);
      if (options.reduce_bf16) reduce_buffer_ = DeviceBuffer<bf16>(size_);
    }
    context_.synchronize();
    host_.description = "cuda:" + std::to_string(device) + " " + context_.device_name() +
                        (std::is_same_v<T, float> ? ", fp32" : ", bf16 (fp32 master weights)") +
                        (options.recompute_activations ? ", activations recomputed in backward" : "");
    if (device_comm_ != nullptr) {
      host_.description += collectives_ == GpuCollectives::kNccl ? ", gradients summed by NCCL"
                                                                 : ", gradients summed by MPI through host memory";
    }
  }

  ~GpuBackend() override {
    // The NCCL communicator goes first: on an error path it is aborted, which ends any collective still
    // running, before freeing device memory (which waits for the device) could wait on one forever.
    device_comm_.reset();
    if (comm_stream_ != nullptr) cudaStreamDestroy(comm_stream_);
  }

  std::string description() const override { return host_.description; }
  std::size_t device_memory_bytes() const override {
    return arena_.bytes() + master_.bytes() + compute_.bytes() + grads_.bytes() + moments_.bytes() +
           context_.handles().gemm_workspace_bytes + context_.handles().workspace_elements * sizeof(float);
  }

  void train_step(const BertBatch& batch, const float* targets, double loss_scale, Communicator& comm,
                  MicroStep micro) override {
    BERTRAIN_CHECK(pending_.size() < staging_.size(), "train_step: take_loss() the earlier steps first");
    BERTRAIN_CHECK((comm.size() > 1) == (device_comm_ != nullptr),
                   "train_step with " << comm.size() << " ranks on an engine built for another world size");
    BERTRAIN_CHECK(micro.last || accumulated_.size() > 0,
                   "train_step: gradient accumulation on an engine built without it (TrainerOptions::accumulation)");
    const cudaStream_t stream = context_.stream();
    const int slot = next_slot_;
    next_slot_ = (next_slot_ + 1) % static_cast<int>(staging_.size());
    Staging& staging = staging_[static_cast<std::size_t>(slot)];
    float* loss = losses_.data() + 2 * slot;
    // The step's last micro-batch adds the earlier ones' sum to each bucket just before reducing it (reduce_bucket).
    add_accumulated_ = micro.last && !micro.first;
    if (!micro.last) {
      // An earlier micro-batch: its gradient goes into accumulated_; no collective, no update.
      if (batch.batch == 0) {
        if (micro.first) BERTRAIN_CUDA_CHECK(cudaMemsetAsync(accumulated_.data(), 0, accumulated_.bytes(), stream));
        BERTRAIN_CUDA_CHECK(cudaMemsetAsync(loss, 0, sizeof(float), stream));
      } else {
        forward_and_backward(batch, targets, loss_scale, staging, loss, [](std::size_t) {});
        if (micro.first) {
          BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(accumulated_.data(), grads_.data(), grads_.bytes(),
                                              cudaMemcpyDeviceToDevice, stream));
        } else {
          add_inplace_cuda(accumulated_.data(), grads_.data(), size_, stream);
        }
      }
      BERTRAIN_CUDA_CHECK(cudaMemsetAsync(loss + 1, 0, sizeof(float), stream));
    } else {
      if (batch.batch == 0) {  // this rank's share of a short last batch is empty
        BERTRAIN_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream));
        BERTRAIN_CUDA_CHECK(cudaMemsetAsync(loss, 0, sizeof(float), stream));
        // Zero gradients still take part in every collective: the same buckets, in the same order, as the
        // ranks that run the backward.
        buckets_.all_gradients_ready([this](const GradientBucket& bucket) { reduce_bucket(bucket); });
      } else {
        // With one GPU the reports are still checked against the plan (reduce_bucket does nothing).
        forward_and_backward(batch, targets, loss_scale, staging, loss, [this](std::size_t offset) {
          buckets_.gradients_ready(offset, [this](const GradientBucket& bucket) { reduce_bucket(bucket); });
        });
      }
      finish_reductions();
      // loss[1] = Σ g² of the (reduced) gradient, read back with the loss: a non-finite step stops training. Adam
      // clips by it on the device (--max-grad-norm).
      sum_of_squares_cuda(context_.handles(), loss + 1, grads_.data(), size_);
      const DeviceGradClip clip{loss + 1, static_cast<float>(options_.max_grad_norm)};
      adam_update_cuda(master_.data(), moments_.data(), moments_.data() + size_, grads_.data(), compute_copy(), size_,
                       hyper_, ++steps_, clip, decay_mask_.size() == 0 ? nullptr : decay_mask_.data(), stream);
    }
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(staging.loss.data(), loss, 2 * sizeof(float), cudaMemcpyDeviceToHost, stream));
    BERTRAIN_CUDA_CHECK(cudaEventRecord(staging.done.get(), stream));
    pending_.push_back({slot, micro.last});
  }

  int losses_left_pending() const override { return 1; }
  double take_loss() override {
    BERTRAIN_CHECK(!pending_.empty(), "take_loss without a pending training step");
    const Pending step = pending_.front();
    pending_.pop_front();
    Staging& staging = staging_[static_cast<std::size_t>(step.slot)];
    wait(staging.done.get());
    if (step.updated) last_grad_norm_ = std::sqrt(static_cast<double>(staging.loss.data()[1]));
    return staging.loss.data()[0];
  }
  double last_gradient_norm() const override { return last_grad_norm_; }

  double evaluate(const BertBatch& batch, const float* targets, float* logits) override {
    if (batch.batch == 0) return 0.0;
    while (!pending_.empty()) take_loss();
    Staging& staging = staging_[0];
    const BertBatch device_batch = upload(batch, targets, staging);
    // Forward and loss read only fixed buffers (the uploaded batch, the parameters, the arena) and the batch's
    // shape: one graph per shape, replayed when it repeats.
    evaluation_graphs_.run({batch.batch, batch.tokens, batch.longest, batch.first_sample}, context_.stream(), [&] {
      model_.forward(compute_params(), device_batch, DropoutSetting{});
      classification_loss_cuda(options_.loss, losses_.data(), static_cast<T*>(nullptr), model_.logits(),
                               targets_.data(), class_weights_.size() > 0 ? class_weights_.data() : nullptr,
                               batch.batch, model_.num_labels(), 1.0f, context_.stream());
    });
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(staging.loss.data(), losses_.data(), sizeof(float), cudaMemcpyDeviceToHost,
                                        context_.stream()));
    // The logits in T as the loss saw them, outside the graph: whether they are wanted may change between replays.
    const std::size_t n_logits = static_cast<std::size_t>(batch.batch) * model_.num_labels();
    if (logits != nullptr) {
      BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(logits_staging_.data(), model_.logits(), n_logits * sizeof(T),
                                          cudaMemcpyDeviceToHost, context_.stream()));
    }
    BERTRAIN_CUDA_CHECK(cudaEventRecord(staging.done.get(), context_.stream()));
    wait(staging.done.get());
    if (logits != nullptr) {
      if constexpr (std::is_same_v<T, float>) {
        std::memcpy(logits, logits_staging_.data(), n_logits * sizeof(float));
      } else {
        cast_cpu(logits, logits_staging_.data(), n_logits);  // bf16 -> fp32 is exact
      }
    }
    return staging.loss.data()[0];
  }

  void set_learning_rate(double lr) override { hyper_.lr = lr; }
  long optimizer_steps() const override { return steps_; }

  const std::vector<float>& parameters() override {
    while (!pending_.empty()) take_loss();
    context_.synchronize();
    host_.params = master_.download();
    return host_.params;
  }

  void save_optimizer(const std::string& path) override {
    while (!pending_.empty()) take_loss();
    context_.synchronize();
    std::vector<float> moments = moments_.download();
    host_optimizer_ = AdamOptimizer<float>(size_, hyper_);
    std::copy(moments.begin(), moments.begin() + static_cast<std::ptrdiff_t>(size_),
              host_optimizer_.first_moment().begin());
    std::copy(moments.begin() + static_cast<std::ptrdiff_t>(size_), moments.end(),
              host_optimizer_.second_moment().begin());
    host_optimizer_.set_steps_taken(steps_);
    save_optimizer_state(path, host_optimizer_, model_.layout().fingerprint());
  }

  void load_optimizer(const std::string& path) override {
    while (!pending_.empty()) take_loss();
    host_optimizer_ = AdamOptimizer<float>(size_, hyper_);
    load_optimizer_state(path, &host_optimizer_, model_.layout().fingerprint());
    context_.synchronize();
    std::vector<float> moments(host_optimizer_.first_moment());
    moments.insert(moments.end(), host_optimizer_.second_moment().begin(), host_optimizer_.second_moment().end());
    moments_.upload(moments.data(), moments.size());
    steps_ = host_optimizer_.steps_taken();
  }

 private:
  const T* compute_params() const {
    if constexpr (std::is_same_v<T, float>) {
      return master_.data();
    } else {
      return compute_.data();
    }
  }
  bf16* compute_copy() {
    if constexpr (std::is_same_v<T, float>) {
      return nullptr;
    } else {
      return compute_.data();
    }
  }

  // Enqueues the upload of `batch`, the forward with training dropout, the loss (× loss_scale, into loss[0]) and
  // the backward writing (=) grads_, reporting finished gradients to on_ready.
  void forward_and_backward(const BertBatch& batch, const float* targets, double loss_scale, Staging& staging,
                            float* loss, const std::function<void(std::size_t)>& on_ready) {
    const cudaStream_t stream = context_.stream();
    const BertBatch device_batch = upload(batch, targets, staging);
    // Every micro-batch of a step draws its dropout masks with the step's index (and its rows' positions in the
    // step batch), as one batch of all their rows would.
    const auto step = static_cast<uint32_t>(steps_);
    model_.forward(compute_params(), device_batch, DropoutSetting::training(model_.config(), options_.seed, step));
    classification_loss_cuda(options_.loss, loss, model_.dlogits(), model_.logits(), targets_.data(),
                             class_weights_.size() > 0 ? class_weights_.data() : nullptr, batch.batch,
                             model_.num_labels(), static_cast<float>(loss_scale), stream);
    model_.backward(grads_.data(), compute_params(), model_.dlogits(), on_ready);
  }

  // Copies the host batch into `staging` (free: its previous step has been taken) and enqueues the uploads.
  // Ids and row offsets are checked here: a kernel cannot report an out-of-range id or a broken offset.
  BertBatch upload(const BertBatch& batch, const float* targets, Staging& staging) {
    const std::size_t tokens = static_cast<std::size_t>(batch.tokens), offsets = static_cast<std::size_t>(batch.batch) + 1;
    const std::size_t target_count = static_cast<std::size_t>(batch.batch) * model_.num_labels();
    check_batch_for_device(batch, model_.limits(), model_.config().vocab_size, "GPU engine");
    std::memcpy(staging.ids.data(), batch.input_ids, tokens * sizeof(int32_t));
    std::memcpy(staging.cu_seqlens.data(), batch.cu_seqlens, offsets * sizeof(int32_t));
    std::memcpy(staging.targets.data(), targets, target_count * sizeof(float));
    const cudaStream_t stream = context_.stream();
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(ids_.data(), staging.ids.data(), tokens * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, stream));
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(cu_seqlens_.data(), staging.cu_seqlens.data(), offsets * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, stream));
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(targets_.data(), staging.targets.data(), target_count * sizeof(float),
                                        cudaMemcpyHostToDevice, stream));
    BertBatch device_batch = batch;
    device_batch.input_ids = ids_.data();
    device_batch.cu_seqlens = cu_seqlens_.data();
    return device_batch;
  }

  // The gradients of `bucket` are final on the compute stream: sum them across ranks on the communication
  // stream. Called by buckets_ only, so every rank reduces the plan's buckets in the plan's order.
  void reduce_bucket(const GradientBucket& bucket) {
    const std::size_t begin = bucket.begin, n = bucket.size();
    if (add_accumulated_) add_inplace_cuda(grads_.data() + begin, accumulated_.data() + begin, n, context_.stream());
    if (device_comm_ == nullptr) return;
    BERTRAIN_CUDA_CHECK(cudaEventRecord(bucket_ready_.get(), context_.stream()));
    BERTRAIN_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, bucket_ready_.get(), 0));
    if (reduce_buffer_.size() > 0) {
      // bf16 on the wire, fp32 again for the optimizer: each rank's gradient is rounded once before the sum.
      cast_cuda(reduce_buffer_.data() + begin, grads_.data() + begin, n, comm_stream_);
      device_comm_->allreduce_sum(reduce_buffer_.data() + begin, n, comm_stream_);
      cast_cuda(grads_.data() + begin, reduce_buffer_.data() + begin, n, comm_stream_);
    } else {
      device_comm_->allreduce_sum(grads_.data() + begin, n, comm_stream_);
    }
  }
  // Checks that every bucket of the step was reduced; the optimizer must see them all, so the compute stream
  // waits for the communication stream.
  void finish_reductions() {
    buckets_.finish_step();
    if (device_comm_ == nullptr) return;
    BERTRAIN_CUDA_CHECK(cudaEventRecord(reductions_done_.get(), comm_stream_));
    BERTRAIN_CUDA_CHECK(cudaStreamWaitEvent(context_.stream(), reductions_done_.get(), 0));
  }

  // Waits for `event`; with NCCL it polls, so that a failed or hung collective becomes an error.
  void wait(cudaEvent_t event) {
    if (device_comm_ == nullptr) {
      BERTRAIN_CUDA_CHECK(cudaEventSynchronize(event));
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t status = cudaEventQuery(event);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) BERTRAIN_CUDA_CHECK(status);
      device_comm_->check(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  GpuContext context_;
  DeviceBuffer<char> arena_;
  BertClassifierGpu<T> model_;
  TrainerOptions options_;
  AdamHyper hyper_;
  std::size_t size_;
  DeviceBuffer<float> master_, grads_, moments_;  // moments_: m then v
  DeviceBuffer<T> compute_;                        // bf16 copy of master_ (empty in fp32)
  DeviceBuffer<int32_t> ids_, cu_seqlens_;
  DeviceBuffer<float> targets_, class_weights_, losses_;
  DeviceBuffer<uint32_t> decay_mask_;  // with weight decay: trainer_decay_mask (engine/adam.h); else empty
  DeviceBuffer<float> accumulated_;  // gradient accumulation: the step's earlier micro-batches' gradient sum
  bool add_accumulated_ = false;     // this backward's buckets get accumulated_ added before their reduction
  std::array<Staging, 2> staging_;
  PinnedBuffer<T> logits_staging_;  // [limits.rows, C]: evaluate's logits on their way to the caller
  GraphCache evaluation_graphs_{options_.cuda_graphs ? kMaxEvaluationGraphs : 0};
  struct Pending {
    int slot;      // staging_ slot holding its loss
    bool updated;  // the step's last micro-batch: the slot also holds the step's gradient norm
  };
  std::deque<Pending> pending_;
  int next_slot_ = 0;
  long steps_ = 0;
  double last_grad_norm_ = 0;
  AdamOptimizer<float> host_optimizer_;
  GradientBucketSchedule buckets_;  // the same on every rank: a function of the layout and kBucketBytes
  struct {
    std::string description;
    std::vector<float> params;
  } host_;
  // Data parallelism (more than one rank).
  GpuCollectives collectives_ = GpuCollectives::kAuto;  // with several ranks: kNccl or kMpi, agreed by all
  std::unique_ptr<DeviceCommunicator> device_comm_;
  cudaStream_t comm_stream_ = nullptr;
  DeviceBuffer<bf16> reduce_buffer_;  // --grad-reduce bf16
  CudaEvent bucket_ready_, reductions_done_;
};

// What GpuBackend<T> allocates: the arena, fp32 master weights, gradients and two moments, the T copy of the
// weights (bf16), the gradient sum (--grad-accum-steps above 1), the bf16 reduction buffer (--grad-reduce bf16 with
// several ranks), and its context's GEMM and reduction workspaces.
template <typename T>
MemoryNeed gpu_training_memory(const BertConfig& config, int num_labels, const BatchLimits& limits,
                               const TrainerOptions& options, int ranks) {
  MemoryNeed need;
  need.activations = BertClassifierGpu<T>::arena_bytes(config, num_labels, limits, training_use(options));
  need.recomputes = options.recompute_activations;
  std::size_t per_parameter = 4 * sizeof(float);
  if constexpr (!std::is_same_v<T, float>) per_parameter += sizeof(T);
  if (options.accumulation > 1) per_parameter += sizeof(float);
  if (ranks > 1 && options.reduce_bf16) per_parameter += sizeof(bf16);
  need.state = bert_classifier_layout(config, num_labels).total() * per_parameter;
  need.workspace = kGemmWorkspaceBytes +
                   gpu_reduction_workspace_elements(BertClassifierGpu<T>::widest_reduction(config)) * sizeof(float);
  return need;
}

}  // namespace

MemoryNeed cuda_training_memory(int device, bool bf16_mode, const BertConfig& config, int num_labels,
                                const BatchLimits& limits, const TrainerOptions& options, int ranks) {
  BERTRAIN_CUDA_CHECK(cudaSetDevice(device));  // the arena's size asks the device (CUB's scratch)
  return bf16_mode ? gpu_training_memory<bf16>(config, num_labels, limits, options, ranks)
                   : gpu_training_memory<float>(config, num_labels, limits, options, ranks);
}

void cuda_memory_info(int device, std::size_t* free, std::size_t* total) {
  BERTRAIN_CUDA_CHECK(cudaSetDevice(device));
  BERTRAIN_CUDA_CHECK(cudaMemGetInfo(free, total));
}

std::unique_ptr<TrainingBackend> make_cuda_backend(int device, bool bf16_mode, const BertConfig& config,
                                                   int num_labels, const BatchLimits& limits,
                                                   const std::vector<float>& params, const TrainerOptions& options,
                                                   Communicator& comm) {
  if (bf16_mode) return std::make_unique<GpuBackend<bf16>>(device, config, num_labels, limits, params, options, comm);
  return std::make_unique<GpuBackend<float>>(device, config, num_labels, limits, params, options, comm);
}

}  // namespace bertrain
