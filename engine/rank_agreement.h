// Data-parallel ranks must train the same thing: the same flags, data, model and labels. A rank launched with other
// flags or a different copy of the data would reach collectives of other sizes or counts than rank 0's: an MPI error
// that corrupts memory, or a hang. Checked once, before the first collective that depends on it.
#pragma once

#include <nlohmann/json.hpp>

#include "dist/communicator.h"

namespace bertrain {

// Compares `settings` (a JSON object, the same keys on every rank) with rank 0's. A collective: every rank calls it.
// Where some rank differs, every rank throws the same Error, naming the first such rank and each setting where it
// differs ("rank 2 runs --epochs 5 where rank 0 runs 3"), so that rank 0 can say it once.
void require_ranks_agree(Communicator& comm, const nlohmann::json& settings);

}  // namespace bertrain
