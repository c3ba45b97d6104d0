#include "engine/memory_fit.h"

#include "core/error.h"

namespace bertrain {

namespace {

// "the CPU engine needs 84.0 GiB for batches of up to 256 rows and 131072 tokens (82.0 GiB of activations; 2.0 GiB of
// parameters, gradients and Adam's moments)", and for several processes what they need together.
std::string needs_text(const std::string& command, const std::string& engine, const MemoryNeed& need,
                       const BatchLimits& limits, int processes, const std::string& where) {
  std::string text = command + ": the " + engine + " engine needs " + memory_text(need.total()) + where +
                     " for batches of up to " + std::to_string(limits.rows) + " rows and " +
                     std::to_string(limits.tokens) + " tokens (" + memory_text(need.activations) + " of activations; " +
                     memory_text(need.state) + " of parameters, gradients and Adam's moments" +
                     (need.workspace > 0 ? "; " + memory_text(need.workspace) + " of workspaces" : "") + ")";
  if (processes > 1) {
    text += ", " + memory_text(need.total() * static_cast<std::size_t>(processes)) + " for the " +
            std::to_string(processes) + " processes" + (where.empty() ? " on this host" : " sharing it");
  }
  return text;
}

// What lowers the need: the flags, and recomputation where it is not on yet.
std::string advice(const MemoryNeed& need) {
  return std::string(": lower --batch-size (--grad-accum-steps K then keeps the step's batch: K batches a step, in "
                     "the memory of one) or --max-length") +
         (need.recomputes ? "" : ", or add --gradient-checkpointing (most of the activations recomputed in backward)");
}

// An inference arena's need: "the CPU engine needs 58.2 GiB for the activations of batches of up to 4096 rows and
// 2097152 tokens".
std::string inference_needs_text(const std::string& engine, std::size_t bytes, const BatchLimits& limits,
                                 const std::string& where) {
  return "the " + engine + " engine needs " + memory_text(bytes) + where + " for the activations of batches of up to " +
         std::to_string(limits.rows) + " rows and " + std::to_string(limits.tokens) + " tokens";
}

// What there is, as the messages say it: ", and 1.7 GiB of address space is left to it under ulimit -v (RLIMIT_AS) of
// 2.9 GiB"; "this machine has 22.9 GiB of memory available" (or what a limit leaves), " and 2.0 GiB of swap";
// ", and 60.0 GiB of its 139.0 GiB are free (256 MiB of it kept for the libraries)".
std::string address_space_left(const HostMemory& have) {
  return ", and " + memory_text(*have.address_space) +
         " of address space is left to it under ulimit -v (RLIMIT_AS) of " + memory_text(have.address_space_limit);
}
std::string memory_available(const HostMemory& have) {
  return have.limited_by.empty()
             ? "this machine has " + memory_text(have.available) + " of memory available"
             : memory_text(have.available) + " of memory is available to it under " + have.limited_by;
}
std::string swap_free(const HostMemory& have) {
  return have.swap_free > 0 ? " and " + memory_text(have.swap_free) + " of swap" : "";
}
std::string device_free(std::size_t free, std::size_t total) {
  return ", and " + memory_text(free) + " of its " + memory_text(total) + " are free (" +
         memory_text(kDeviceHeadroomBytes) + " of it kept for the libraries)";
}

const char* const kInferenceAdvice =
    ": lower the batch (predict's and evaluate's --batch-size, serve's --max-batch-size and --max-batch-tokens) or "
    "--max-length";

}  // namespace

void check_inference_host_memory(std::size_t bytes, const BatchLimits& limits, const HostMemory& have) {
  if (have.address_space && bytes > *have.address_space) {
    throw InputError(inference_needs_text("CPU", bytes, limits, "") + address_space_left(have) + kInferenceAdvice);
  }
  if (bytes <= have.available + have.swap_free) return;
  throw InputError(inference_needs_text("CPU", bytes, limits, "") + ", and " + memory_available(have) +
                   swap_free(have) + kInferenceAdvice);
}

void check_inference_device_memory(std::size_t bytes, const BatchLimits& limits, std::size_t free, std::size_t total,
                                   const std::string& device_name) {
  if (bytes + kDeviceHeadroomBytes <= free) return;
  throw InputError(inference_needs_text("GPU", bytes, limits, " of " + device_name + "'s memory") +
                   device_free(free, total) + kInferenceAdvice);
}

MemoryNeed cpu_training_memory(const BertConfig& config, int num_labels, const BatchLimits& limits,
                               const TrainerOptions& options) {
  MemoryNeed need;
  need.activations = BertClassifier<float>::activation_bytes(config, num_labels, limits, training_use(options));
  need.recomputes = options.recompute_activations;
  const std::size_t parameters = bert_classifier_layout(config, num_labels).total();
  const std::size_t copies = 4 + (options.accumulation > 1 ? 1 : 0);  // parameters, gradients, m, v (+ the sum)
  need.state = parameters * copies * sizeof(float);
  return need;
}

std::string check_host_memory(const MemoryNeed& need, const BatchLimits& limits, int processes,
                              const HostMemory& have, const std::string& command) {
  // ulimit -v is each process's own: one engine against its process's room.
  if (have.address_space && need.total() > *have.address_space) {
    throw InputError(needs_text(command, "CPU", need, limits, 1, "") + address_space_left(have) + advice(need));
  }
  // The machine's memory and a cgroup's are shared by the job's processes on this host.
  const std::size_t all = need.total() * static_cast<std::size_t>(processes);
  if (all <= have.available) return "";
  const std::string needs = needs_text(command, "CPU", need, limits, processes, "");
  if (all > have.available + have.swap_free) {
    throw InputError(needs + ", and " + memory_available(have) + swap_free(have) + advice(need));
  }
  return needs + ", and " + memory_available(have) + ": it will swap, and train far slower" + advice(need);
}

void check_device_memory(const MemoryNeed& need, const BatchLimits& limits, int processes, std::size_t free,
                         std::size_t total, const std::string& device_name, const std::string& command) {
  const std::size_t all = need.total() * static_cast<std::size_t>(processes);
  if (all + kDeviceHeadroomBytes <= free) return;
  throw InputError(needs_text(command, "GPU", need, limits, processes, " of " + device_name + "'s memory") +
                   device_free(free, total) + advice(need));
}

}  // namespace bertrain
