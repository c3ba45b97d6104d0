#include "engine/memory_fit.h"

#include "core/error.h"

namespace bertrain {

namespace {

// "for batches of up to 256 rows and 131072 tokens (82.6 GiB of activations; 1.6 GiB of parameters, gradients and
// Adam's moments)"
std::string what_needs_it(const MemoryNeed& need, const BatchLimits& limits) {
  return "for batches of up to " + std::to_string(limits.rows) + " rows and " + std::to_string(limits.tokens) +
         " tokens (" + memory_text(need.activations) + " of activations; " + memory_text(need.state) +
         " of parameters, gradients and Adam's moments)";
}

// What lowers the need: the flags, and recomputation where it is not on yet.
std::string advice(const MemoryNeed& need) {
  return std::string(": lower --batch-size (--grad-accum-steps K then keeps the step's batch: K batches a step, in "
                     "the memory of one) or --max-length") +
         (need.recomputes ? "" : ", or add --gradient-checkpointing (most of the activations recomputed in backward)");
}

}  // namespace

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
  const std::size_t all = need.total() * static_cast<std::size_t>(processes);
  if (all <= have.available) return "";
  const std::string needs =
      command + ": the CPU engine needs " + memory_text(need.total()) + " " + what_needs_it(need, limits) +
      (processes > 1 ? ", " + memory_text(all) + " for the " + std::to_string(processes) + " processes on this host"
                     : "");
  const std::string has = have.limited_by.empty()
                              ? "this machine has " + memory_text(have.available) + " of memory available"
                              : memory_text(have.available) + " of memory is available to it under " + have.limited_by;
  if (all > have.available + have.swap_free) {
    throw InputError(needs + ", and " + has +
                     (have.swap_free > 0 ? " and " + memory_text(have.swap_free) + " of swap" : "") + advice(need));
  }
  return needs + ", and " + has + ": it will swap, and train far slower" + advice(need);
}

void check_device_memory(const MemoryNeed& need, const BatchLimits& limits, std::size_t free, std::size_t total,
                         const std::string& device_name, const std::string& command) {
  if (need.total() <= free) return;
  throw InputError(command + ": the GPU engine needs " + memory_text(need.total()) + " of " + device_name +
                   "'s memory " + what_needs_it(need, limits) + ", and " + memory_text(free) + " of its " +
                   memory_text(total) + " are free" + advice(need));
}

}  // namespace bertrain
