// Whether a training engine fits the memory it will run in, checked before it allocates: a batch too large for the
// machine ends as one error line that says how much is needed and which flags lower it (exit 2, which `bertrain
// launch` does not retry), where it ended as std::bad_alloc's "out of memory", as the kernel's OOM killer (a
// SIGKILL that launch retried three times), or as a CUDA allocation error (exit 1, retried).
#pragma once

#include <cstddef>
#include <string>

#include "core/host_memory.h"
#include "engine/classifier_trainer.h"
#include "model/bert_classifier.h"

namespace bertrain {

// What an engine allocates when it is built, by part.
struct MemoryNeed {
  std::size_t activations = 0;  // the model's activations and scratch for the largest batch
  std::size_t state = 0;        // parameters, gradients, Adam's moments, the accumulated gradient
  std::size_t workspace = 0;    // the GPU engine's GEMM and reduction workspaces
  bool recomputes = false;      // activations recomputed in backward (--gradient-checkpointing) already
  std::size_t total() const { return activations + state + workspace; }
};

// The CPU engine (ClassifierTrainer<float> in CpuBackend) with `options` for batches within `limits`: the training
// model's activations, and the parameters, gradients and two moments it holds beside the caller's parameters (and
// the gradient sum of --grad-accum-steps above 1).
MemoryNeed cpu_training_memory(const BertConfig& config, int num_labels, const BatchLimits& limits,
                               const TrainerOptions& options);

// Throws InputError when `processes` engines of `need` each (the ranks of a job on this host) cannot fit the memory
// and swap `have` leaves them, or one engine does not fit its process's address space (ulimit -v); the message names
// `command`, the sizes, and --batch-size, --grad-accum-steps and --max-length (and --gradient-checkpointing where the
// need does not recompute yet). Returns a warning when they fit only with swap (training would page), "" when they
// fit in memory.
std::string check_host_memory(const MemoryNeed& need, const BatchLimits& limits, int processes,
                              const HostMemory& have, const std::string& command);

// The same for device memory: `processes` engines of `need` (the ranks sharing the device) against `free` of
// `total` bytes of `device_name` (cudaMemGetInfo), less kDeviceHeadroomBytes.
void check_device_memory(const MemoryNeed& need, const BatchLimits& limits, int processes, std::size_t free,
                         std::size_t total, const std::string& device_name, const std::string& command);

// Inference (evaluate, predict, serve) grows one model's activations to the largest batch seen: throws InputError
// when `bytes` of them for batches within `limits` cannot fit the memory and swap, or the address space, `have`
// leaves (the CPU engine), or `free` less kDeviceHeadroomBytes of `device_name`'s `total` (a CUDA one); the message
// names the batch flags of the commands and --max-length.
void check_inference_host_memory(std::size_t bytes, const BatchLimits& limits, const HostMemory& have);
void check_inference_device_memory(std::size_t bytes, const BatchLimits& limits, std::size_t free, std::size_t total,
                                   const std::string& device_name);

// Device memory left for what an engine's libraries allocate besides its own buffers (cuBLAS's handles, NCCL's
// buffers with several ranks, the allocator's rounding): chosen as a margin, not measured.
inline constexpr std::size_t kDeviceHeadroomBytes = std::size_t{256} << 20;

}  // namespace bertrain
