#include "engine/study.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/error.h"

namespace bertrain {

using nlohmann::json;

namespace {

constexpr const char* kStatusNames[] = {"running", "completed", "stopped", "failed", "interrupted"};

json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(); }
json count_or_null(double x) { return std::isfinite(x) ? json(static_cast<long>(x)) : json(); }

double number_field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return NAN;
  BERTRAIN_CHECK(j[key].is_number(), where << ": \"" << key << "\" is not a number");
  return j[key].get<double>();
}

std::string string_field(const json& j, const char* key, const std::string& where, bool required) {
  if (!j.contains(key)) {
    BERTRAIN_CHECK(!required, where << ": no \"" << key << "\"");
    return "";
  }
  BERTRAIN_CHECK(j[key].is_string(), where << ": \"" << key << "\" is not a string");
  return j[key].get<std::string>();
}

// Whether metric a is better than b (a NaN is never better).
bool better(double a, double b, bool lower_is_better) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return lower_is_better ? a < b : a > b;
}

}  // namespace

const char* trial_status_name(TrialStatus status) { return kStatusNames[static_cast<int>(status)]; }

TrialStatus parse_trial_status(const std::string& name) {
  for (int i = 0; i < 5; ++i) {
    if (name == kStatusNames[i]) return static_cast<TrialStatus>(i);
  }
  BERTRAIN_FAIL("unknown trial status '" << name << "'");
}

std::string trial_id(long index) {
  char text[32];
  std::snprintf(text, sizeof(text), "%03ld", index);
  return text;
}

void TrialRecord::add_evaluation(double value, bool lower_is_better) {
  if (better(value, best_metric, lower_is_better)) {
    best_metric = value;
    best_epoch = static_cast<double>(epochs);
  }
  last_metric = value;
  ++epochs;
}

std::vector<Observation> Study::observations() const {
  std::vector<Observation> out;
  for (const TrialRecord& t : trials) {
    if ((t.status == TrialStatus::kCompleted || t.status == TrialStatus::kStopped) && std::isfinite(t.best_metric)) {
      out.push_back({t.params, lower_is_better ? t.best_metric : -t.best_metric});
    }
  }
  return out;
}

long Study::best_trial() const {
  long best = -1;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& t = trials[i];
    if (t.status != TrialStatus::kCompleted && t.status != TrialStatus::kStopped) continue;
    if (better(t.best_metric, best < 0 ? NAN : trials[static_cast<std::size_t>(best)].best_metric, lower_is_better)) {
      best = static_cast<long>(i);
    }
  }
  return best;
}

std::vector<std::size_t> Study::ranking() const {
  std::vector<std::size_t> order(trials.size());
  std::iota(order.begin(), order.end(), 0);
  // Groups: a metric, none yet, failed (whatever it reached before failing); by metric within the first.
  const auto group = [&](const TrialRecord& t) { return t.status == TrialStatus::kFailed ? 2 : std::isnan(t.best_metric) ? 1 : 0; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const int ga = group(trials[a]), gb = group(trials[b]);
    if (ga != gb) return ga < gb;
    return better(trials[a].best_metric, trials[b].best_metric, lower_is_better);
  });
  return order;
}

json Study::to_json() const {
  json trial_list = json::array();
  for (const TrialRecord& t : trials) {
    json j{{"id", t.id},
           {"dir", t.dir()},
           {"params", t.params},
           {"status", trial_status_name(t.status)},
           {"epochs", t.epochs},
           {"best_metric", number_or_null(t.best_metric)},
           {"best_epoch", count_or_null(t.best_epoch)},
           {"last_metric", number_or_null(t.last_metric)},
           {"time_s", t.time_s}};
    if (t.status == TrialStatus::kFailed) j["error"] = t.error;
    if (!t.mlflow_run_id.empty()) j["mlflow_run_id"] = t.mlflow_run_id;
    trial_list.push_back(j);
  }
  json events = json::array();
  for (const SchedulerEvent& e : scheduler_events) {
    events.push_back({{"trial", e.trial}, {"iteration", e.iteration}, {"value", number_or_null(e.value)}});
  }
  const long best = best_trial();
  json j{{"version", 1},
         {"metric", metric},
         {"mode", lower_is_better ? "min" : "max"},
         {"settings", settings},
         {"searched", searched},
         {"trials", trial_list},
         {"scheduler_events", events},
         {"best_trial", best < 0 ? json() : json(trials[static_cast<std::size_t>(best)].id)},
         {"time_s", time_s}};
  if (!mlflow_run_id.empty()) j["mlflow_run_id"] = mlflow_run_id;
  return j;
}

Study Study::from_json(const json& j, const std::string& origin) {
  BERTRAIN_CHECK(j.is_object(), origin << ": not a JSON object");
  BERTRAIN_CHECK(j.value("version", 0) == 1, origin << ": not a study.json of version 1");
  Study s;
  s.metric = string_field(j, "metric", origin, true);
  const std::string mode = string_field(j, "mode", origin, true);
  BERTRAIN_CHECK(mode == "min" || mode == "max", origin << ": \"mode\" must be min or max, got '" << mode << "'");
  s.lower_is_better = mode == "min";
  BERTRAIN_CHECK(j.contains("settings") && j["settings"].is_object(), origin << ": no object \"settings\"");
  s.settings = j["settings"];
  BERTRAIN_CHECK(j.contains("searched") && j["searched"].is_array(), origin << ": no array \"searched\"");
  for (const json& name : j["searched"]) {
    BERTRAIN_CHECK(name.is_string(), origin << ": \"searched\" holds a non-string");
    s.searched.push_back(name.get<std::string>());
  }
  BERTRAIN_CHECK(j.contains("trials") && j["trials"].is_array(), origin << ": no array \"trials\"");
  for (std::size_t i = 0; i < j["trials"].size(); ++i) {
    const json& tj = j["trials"][i];
    const std::string where = origin + ": trials[" + std::to_string(i) + "]";
    BERTRAIN_CHECK(tj.is_object(), where << ": not an object");
    TrialRecord t;
    t.id = string_field(tj, "id", where, true);
    BERTRAIN_CHECK(t.id == trial_id(static_cast<long>(i)), where << ": id '" << t.id << "' should be '" << trial_id(static_cast<long>(i)) << "'");
    BERTRAIN_CHECK(tj.contains("params") && tj["params"].is_object(), where << ": no object \"params\"");
    t.params = tj["params"];
    t.status = parse_trial_status(string_field(tj, "status", where, true));
    BERTRAIN_CHECK(tj.contains("epochs") && tj["epochs"].is_number_integer() && tj["epochs"].get<long>() >= 0,
                   where << ": \"epochs\" is not a count");
    t.epochs = tj["epochs"].get<long>();
    t.best_metric = number_field(tj, "best_metric", where);
    t.best_epoch = number_field(tj, "best_epoch", where);
    t.last_metric = number_field(tj, "last_metric", where);
    t.time_s = number_field(tj, "time_s", where);
    if (std::isnan(t.time_s)) t.time_s = 0;
    t.error = string_field(tj, "error", where, false);
    t.mlflow_run_id = string_field(tj, "mlflow_run_id", where, false);
    s.trials.push_back(t);
  }
  if (j.contains("scheduler_events")) {
    BERTRAIN_CHECK(j["scheduler_events"].is_array(), origin << ": \"scheduler_events\" is not an array");
    for (const json& e : j["scheduler_events"]) {
      BERTRAIN_CHECK(e.is_object() && e.contains("trial") && e["trial"].is_string() && e.contains("iteration") &&
                         e["iteration"].is_number_integer(),
                     origin << ": a scheduler event needs \"trial\" and \"iteration\"");
      s.scheduler_events.push_back({e["trial"].get<std::string>(), e["iteration"].get<long>(),
                                    number_field(e, "value", origin + ": scheduler_events")});
    }
  }
  s.mlflow_run_id = string_field(j, "mlflow_run_id", origin, false);
  s.time_s = number_field(j, "time_s", origin);
  if (std::isnan(s.time_s)) s.time_s = 0;
  return s;
}

}  // namespace bertrain
