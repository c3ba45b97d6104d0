#include "engine/rank_agreement.h"

#include <cstdint>
#include <string>

#include "core/error.h"
#include "engine/resume_check.h"

namespace bertrain {

namespace {

using nlohmann::json;

// Rank `root`'s text, on every rank.
std::string broadcast_text(Communicator& comm, const std::string& mine, int root) {
  uint64_t size = mine.size();
  comm.broadcast_bytes(&size, sizeof size, root);
  std::string text = comm.rank() == root ? mine : std::string(size, '\0');
  if (size > 0) comm.broadcast_bytes(text.data(), size, root);
  return text;
}

// A setting as people read it: a train flag as spelt (setting_flag_name); keys with a space ("the labels") as they are.
std::string setting_name(const std::string& key) {
  return key.find(' ') != std::string::npos ? key : setting_flag_name(key);
}

// "--epochs 5 where rank 0 has 3; ..." for the settings that differ.
std::string differences(const json& theirs, const json& root) {
  std::string text;
  for (auto it = theirs.begin(); it != theirs.end(); ++it) {
    const json& at_root = root.contains(it.key()) ? root.at(it.key()) : json();
    if (at_root == it.value()) continue;
    text += (text.empty() ? "" : "; ") + setting_name(it.key()) + " " + it.value().dump() + " where rank 0 has " +
            at_root.dump();
  }
  return text;
}

}  // namespace

void require_ranks_agree(Communicator& comm, const json& settings) {
  if (comm.size() == 1) return;
  const std::string mine = settings.dump();
  const std::string root = broadcast_text(comm, mine, 0);
  if (comm.all_true(mine == root)) return;
  // Rare: every rank learns every rank's settings in rank order, so that all name the same first one that differs.
  const json root_settings = json::parse(root);
  for (int r = 1; r < comm.size(); ++r) {
    const std::string theirs = broadcast_text(comm, mine, r);
    if (theirs == root) continue;
    BERTRAIN_FAIL("rank " << r << " does not train what rank 0 trains (every rank must run the same command on the "
                          "same data and model): "
                          << differences(json::parse(theirs), root_settings));
  }
}

}  // namespace bertrain
