#include "engine/train_args.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "dist/device_communicator.h"
#include "engine/early_stopping.h"
#include "engine/lr_schedule.h"
#include "engine/run_dir.h"

namespace bertrain {

namespace {

// A positive value float32 holds as a normal number, neither infinite nor rounded to 0 or a subnormal.
bool in_float_range(double x) {
  return x >= std::numeric_limits<float>::min() && x <= std::numeric_limits<float>::max();
}
constexpr const char* kFloatRange = "1.2e-38 to 3.4e38";

}  // namespace

void validate_train_args(const TrainArgs& a) {
  BERTRAIN_CHECK(!a.model_dir.empty(), "--model is required");
  BERTRAIN_CHECK(!a.train_data.empty(), "--train-data is required");
  BERTRAIN_CHECK(!a.out_dir.empty(), "--out is required");
  BERTRAIN_CHECK(a.epochs >= 1, "--epochs must be at least 1, got " << a.epochs);
  BERTRAIN_CHECK(a.batch_size >= 1, "--batch-size must be at least 1, got " << a.batch_size);
  BERTRAIN_CHECK(a.lr > 0 && std::isfinite(a.lr), "--lr must be positive and finite, got " << a.lr);
  // The engine computes in float32: a rate past its range is infinite there, one below it 0 (nothing learns).
  BERTRAIN_CHECK(in_float_range(a.lr), "--lr must be within float32's range, " << kFloatRange << " (the engine "
                                                                                << "computes in float32), got " << a.lr);
  BERTRAIN_CHECK(a.dropout >= 0 && a.dropout < 1, "--dropout must be in [0, 1), got " << a.dropout);
  BERTRAIN_CHECK(a.lr_factor > 0 && a.lr_factor < 1, "--lr-factor must be in (0, 1), got " << a.lr_factor);
  BERTRAIN_CHECK(a.lr_patience >= 0, "--lr-patience must be >= 0, got " << a.lr_patience);
  BERTRAIN_CHECK(a.adam_beta1 >= 0 && a.adam_beta1 < 1, "--adam-beta1 must be in [0, 1), got " << a.adam_beta1);
  BERTRAIN_CHECK(a.adam_beta2 >= 0 && a.adam_beta2 < 1, "--adam-beta2 must be in [0, 1), got " << a.adam_beta2);
  BERTRAIN_CHECK(a.adam_eps > 0 && std::isfinite(a.adam_eps),
                 "--adam-eps must be positive and finite, got " << a.adam_eps);
  BERTRAIN_CHECK(in_float_range(a.adam_eps), "--adam-eps must be within float32's range, " << kFloatRange
                                             << " (at 0 a parameter with no gradient divides 0 by 0), got "
                                             << a.adam_eps);
  // An infinite decay makes every weight non-finite at the first step: a flag error, not a diverging run (exit 3).
  // A positive value below it is 0 there: no decay where some was asked for, or every gradient clipped to nothing.
  BERTRAIN_CHECK(a.weight_decay == 0 || in_float_range(a.weight_decay),
                 "--weight-decay must be 0 or within float32's range, " << kFloatRange << ", got " << a.weight_decay);
  BERTRAIN_CHECK(a.max_grad_norm == 0 || in_float_range(a.max_grad_norm),
                 "--max-grad-norm must be 0 (no clipping) or within float32's range, " << kFloatRange << ", got "
                                                                                      << a.max_grad_norm);
  BERTRAIN_CHECK(a.num_samples >= 0, "--num-samples must be >= 0, got " << a.num_samples);
  if (a.val_data.empty()) {
    BERTRAIN_CHECK(a.val_fraction > 0 && a.val_fraction < 1, "--val-fraction must be in (0, 1), got " << a.val_fraction);
  }
  BERTRAIN_CHECK(a.collective_timeout_s > 0, "--collective-timeout must be positive, got " << a.collective_timeout_s);
  BERTRAIN_CHECK(a.progress_interval_s >= 0 && std::isfinite(a.progress_interval_s),
                 "--progress-interval must be 0 (no progress lines) or more seconds, got " << a.progress_interval_s);
  BERTRAIN_CHECK(a.log_steps >= 0, "--log-steps must be >= 0, got " << a.log_steps);
  BERTRAIN_CHECK(a.log_steps == 0 || !a.mlflow_dir.empty(), "--log-steps logs to MLflow: give --mlflow-dir too");
  BERTRAIN_CHECK(a.mlflow_parent_run.empty() || !a.mlflow_dir.empty(), "--mlflow-parent-run needs --mlflow-dir");
  BERTRAIN_CHECK(a.save_steps >= 0, "--save-steps must be >= 0, got " << a.save_steps);
  BERTRAIN_CHECK(a.keep >= 0, "--keep must be >= 0, got " << a.keep);
  BERTRAIN_CHECK(a.keep == 0 || a.save_steps > 0,
                 (a.save_total_limit > 0 ? "--save-total-limit " + std::to_string(a.save_total_limit)
                                         : "--keep " + std::to_string(a.keep))
                     << " keeps step checkpoints: give --save-steps too");
  BERTRAIN_CHECK(a.data.max_length == 0 || a.data.max_length >= 2,
                 "--max-length must be 0 (the model's) or at least 2 ([CLS] and [SEP]), got " << a.data.max_length);
  BERTRAIN_CHECK(a.grad_reduce == "fp32" || a.grad_reduce == "bf16",
                 "--grad-reduce must be fp32 or bf16, got '" << a.grad_reduce << "'");
  parse_gpu_collectives(a.gpu_collectives);
  BERTRAIN_CHECK(a.grad_accum_steps >= 1, "--grad-accum-steps must be at least 1, got " << a.grad_accum_steps);
  BERTRAIN_CHECK(static_cast<long long>(a.batch_size) * a.grad_accum_steps <= std::numeric_limits<int>::max(),
                 "--batch-size x --grad-accum-steps, the rows of one optimizer step, must be at most 2147483647, got "
                     << a.batch_size << " x " << a.grad_accum_steps);
  BERTRAIN_CHECK(a.max_steps >= 0, "--max-steps must be >= 0 (0: --epochs decides), got " << a.max_steps);
  BERTRAIN_CHECK(a.eval_steps >= 0, "--eval-steps must be >= 0 (0: every epoch), got " << a.eval_steps);
  const LrSchedulerKind schedule = parse_lr_scheduler(a.lr_scheduler);
  BERTRAIN_CHECK(a.warmup_steps >= 0, "--warmup-steps must be >= 0, got " << a.warmup_steps);
  BERTRAIN_CHECK(a.warmup_ratio >= 0 && a.warmup_ratio < 1, "--warmup-ratio must be in [0, 1), got " << a.warmup_ratio);
  BERTRAIN_CHECK(a.warmup_steps == 0 || a.warmup_ratio == 0, "give --warmup-steps or --warmup-ratio, not both");
  BERTRAIN_CHECK(schedule != LrSchedulerKind::kPlateau || (a.warmup_steps == 0 && a.warmup_ratio == 0),
                 "--warmup-steps / --warmup-ratio need a step-wise --lr-scheduler (linear, cosine or constant); "
                 "plateau changes the rate only after an evaluation");
  parse_metric_for_best(a.metric_for_best);
  BERTRAIN_CHECK(a.early_stopping_patience >= 0,
                 "--early-stopping-patience must be >= 0 (0: no early stopping), got " << a.early_stopping_patience);
  BERTRAIN_CHECK(a.early_stopping_threshold >= 0 && std::isfinite(a.early_stopping_threshold),
                 "--early-stopping-threshold must be >= 0, got " << a.early_stopping_threshold);
  BERTRAIN_CHECK(a.early_stopping_threshold == 0 || a.early_stopping_patience > 0,
                 "--early-stopping-threshold needs --early-stopping-patience");
  BERTRAIN_CHECK(a.save_total_limit >= 0, "--save-total-limit must be >= 0, got " << a.save_total_limit);
  parse_optimizer_saving(a.save_optimizer);
}


nlohmann::json train_args_json(const TrainArgs& a) {
  using nlohmann::json;
  return json{{"model", a.model_dir},          {"train_data", a.train_data},   {"val_data", a.val_data},
              {"val_fraction", a.val_fraction}, {"out", a.out_dir},             {"epochs", a.epochs},
              {"batch_size", a.batch_size},     {"lr", a.lr},                   {"dropout", a.dropout},
              {"lr_factor", a.lr_factor},       {"lr_patience", a.lr_patience}, {"adam_beta1", a.adam_beta1},
              {"adam_beta2", a.adam_beta2},     {"adam_eps", a.adam_eps},       {"weight_decay", a.weight_decay},
              {"max_grad_norm", a.max_grad_norm}, {"gradient_checkpointing", a.gradient_checkpointing},
              {"class_weights", a.class_weights}, {"num_samples", a.num_samples}, {"seed", a.seed},
              {"split_seed", a.split_seed},     {"shuffle", a.shuffle},         {"clean", a.clean},
              {"device", a.device},             {"precision", a.precision},     {"grad_reduce", a.grad_reduce},
              {"collective_timeout_s", a.collective_timeout_s}, {"gpu_collectives", a.gpu_collectives},
              {"format", a.data.format},        {"text_columns", a.data.text_columns},
              {"label_column", a.data.label_column}, {"multi_label", a.data.multi_label},
              {"label_separator", a.data.label_separator}, {"skip_bad_rows", a.data.skip_bad_rows},
              {"max_length", a.data.max_length}, {"head_init", head_init_name(a.head_init)},
              {"save_steps", a.save_steps},     {"keep", a.keep},               {"log_steps", a.log_steps},
              {"grad_accum_steps", a.grad_accum_steps}, {"max_steps", a.max_steps}, {"lr_scheduler", a.lr_scheduler},
              {"warmup_steps", a.warmup_steps}, {"warmup_ratio", a.warmup_ratio}, {"eval_steps", a.eval_steps},
              {"metric_for_best", a.metric_for_best}, {"early_stopping_patience", a.early_stopping_patience},
              {"early_stopping_threshold", a.early_stopping_threshold},
              {"save_total_limit", a.save_total_limit}, {"save_optimizer", a.save_optimizer},
              {"threads", a.threads}};
}

}  // namespace bertrain
