#include "engine/training_backend.h"

#include <omp.h>

#include <algorithm>
#include <deque>

#include "core/build_config.h"
#include "core/build_info.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "engine/checkpoint.h"
#include "kernels/tensor_ops.h"

namespace bertrain {

namespace {

// The CPU engine: ClassifierTrainer<float>, synchronous, gradients summed over ranks with MPI.
class CpuBackend final : public TrainingBackend {
 public:
  CpuBackend(const BertConfig& config, int num_labels, const BatchLimits& limits, const std::vector<float>& params,
             const TrainerOptions& options)
      : trainer_(config, num_labels, limits, params, options),
        threads_(omp_get_max_threads()),
        recomputes_(options.recompute_activations) {}

  std::string description() const override {
    return cpu_engine_description(threads_) + (recomputes_ ? ", activations recomputed in backward" : "");
  }
  std::size_t device_memory_bytes() const override { return 0; }

  void train_step(const BertBatch& batch, const float* targets, double loss_scale, Communicator& comm,
                  MicroStep micro) override {
    const double loss = trainer_.compute_gradients(batch, targets, loss_scale);
    std::vector<float>& grads = trainer_.gradients();
    if (!micro.last) {  // kept until the step's last micro-batch (assign allocates on the first step only)
      if (micro.first) {
        accumulated_.assign(grads.begin(), grads.end());
      } else {
        add_inplace_cpu(accumulated_.data(), grads.data(), grads.size());
      }
      steps_.push_back({loss, 0.0, false});
      return;
    }
    if (!micro.first) add_inplace_cpu(grads.data(), accumulated_.data(), grads.size());
    comm.allreduce_sum(grads.data(), grads.size());
    const double grad_norm = trainer_.apply_update();
    steps_.push_back({loss, grad_norm, true});
  }
  int losses_left_pending() const override { return 0; }
  double take_loss() override {
    BERTRAIN_CHECK(!steps_.empty(), "take_loss without a pending training step");
    const StepResult step = steps_.front();
    steps_.pop_front();
    if (step.updated) last_grad_norm_ = step.grad_norm;
    return step.loss;
  }
  double last_gradient_norm() const override { return last_grad_norm_; }
  double evaluate(const BertBatch& batch, const float* targets, float* logits) override {
    const double loss = trainer_.evaluate(batch, targets);
    if (logits != nullptr && batch.batch > 0) {
      const float* model_logits = trainer_.model().logits();
      std::copy(model_logits, model_logits + static_cast<std::size_t>(batch.batch) * trainer_.model().num_labels(),
                logits);
    }
    return loss;
  }

  void set_learning_rate(double lr) override { trainer_.optimizer().hyper().lr = lr; }
  long optimizer_steps() const override { return trainer_.optimizer().steps_taken(); }
  const std::vector<float>& parameters() override { return trainer_.parameters(); }
  void save_optimizer(const std::string& path) override {
    save_optimizer_state(path, trainer_.optimizer(), trainer_.model().layout().fingerprint());
  }
  void load_optimizer(const std::string& path) override {
    load_optimizer_state(path, &trainer_.optimizer(), trainer_.model().layout().fingerprint());
  }

 private:
  struct StepResult {
    double loss, grad_norm;
    bool updated;  // the step's last micro-batch: grad_norm is the step's
  };
  ClassifierTrainer<float> trainer_;
  std::vector<float> accumulated_;  // gradient accumulation: the step's earlier micro-batches' gradient sum
  std::deque<StepResult> steps_;
  double last_grad_norm_ = 0;
  int threads_;  // OpenMP's count on the thread that built (and runs) the engine
  bool recomputes_;  // --gradient-checkpointing
};

}  // namespace

BackendChoice choose_backend(const std::string& device, const std::string& precision, int local_rank) {
  BERTRAIN_CHECK(device == "auto" || device == "cpu" || device == "cuda",
                 "--device must be auto, cpu or cuda, got '" << device << "'");
  BERTRAIN_CHECK(precision == "fp32" || precision == "bf16",
                 "--precision must be fp32 or bf16, got '" << precision << "'");
  BackendChoice choice;
  if (device == "cpu") {
    BERTRAIN_CHECK(precision == "fp32", "--precision bf16 needs --device cuda; the CPU engine is fp32 only");
    return choice;
  }
  std::string why;
  const int devices = cuda_device_count(&why);
  if (devices == 0) {
    BERTRAIN_CHECK(device == "auto", "--device cuda: " << (BERTRAIN_HAS_CUDA ? "no usable CUDA device (" + why + ")" : "this build has no CUDA support "
                                                                                      "(configure with -DBERTRAIN_CUDA=ON)"));
    BERTRAIN_CHECK(precision == "fp32", "--precision bf16 needs a CUDA device (" << why << ")");
    return choice;
  }
  choice.cuda = true;
  choice.device = local_rank % devices;
  choice.bf16 = precision == "bf16";
  return choice;
}

std::unique_ptr<TrainingBackend> make_training_backend(const BackendChoice& choice, const BertConfig& config,
                                                       int num_labels, const BatchLimits& limits,
                                                       const std::vector<float>& params,
                                                       const TrainerOptions& options, Communicator& comm) {
  if (choice.cuda) {
    return make_cuda_backend(choice.device, choice.bf16, config, num_labels, limits, params, options,
                             comm);
  }
  return std::make_unique<CpuBackend>(config, num_labels, limits, params, options);
}

#if !BERTRAIN_HAS_CUDA
std::unique_ptr<TrainingBackend> make_cuda_backend(int, bool, const BertConfig&, int, const BatchLimits&,
                                                   const std::vector<float>&, const TrainerOptions&, Communicator&) {
  BERTRAIN_FAIL("this build has no CUDA support (configure with -DBERTRAIN_CUDA=ON on a machine with nvcc)");
}
MemoryNeed cuda_training_memory(int, bool, const BertConfig&, int, const BatchLimits&, const TrainerOptions&, int) {
  BERTRAIN_FAIL("this build has no CUDA support (configure with -DBERTRAIN_CUDA=ON on a machine with nvcc)");
}
void cuda_memory_info(int, std::size_t*, std::size_t*) {
  BERTRAIN_FAIL("this build has no CUDA support (configure with -DBERTRAIN_CUDA=ON on a machine with nvcc)");
}
#endif

}  // namespace bertrain
