// `train --resume --out RUN_DIR` alone: the rest of the run's command line, read back from its checkpoint, so that
// a stopped run continues without its command being typed again.
#pragma once

#include <string>
#include <vector>

#include "tools/args.h"

namespace bertrain {

// Whether `args` (train's, as given) ask to continue a run from its checkpoint alone: --resume and --out without
// --model.
bool resumes_from_checkpoint_alone(const std::vector<std::string>& args);

// The flags of the settings RUN_DIR/last/trainer_state.json recorded for the run in --out (its params and MLflow
// store; last.old's after an interrupted checkpoint swap) that `args` do not give, for the options `train` (train's
// parser) has; a setting at its default is left out, and so are --threads (the machine's) and --out. Throws Error
// naming the file when it is missing or damaged, and for a run logging into MLflow whose checkpoint does not name
// the store (an older bertrain's) when `args` and MLFLOW_TRACKING_URI give none.
std::vector<std::string> recorded_train_flags(const std::vector<std::string>& args, const ArgParser& train);

}  // namespace bertrain
