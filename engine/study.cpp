#include "engine/study.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>

#include "core/error.h"
#include "engine/search_space.h"

namespace bertrain {

using nlohmann::json;

namespace {

constexpr const char* kStatusNames[] = {"running", "completed", "stopped", "failed", "interrupted"};

json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(); }
json count_or_null(double x) { return std::isfinite(x) ? json(static_cast<long>(x)) : json(); }

// study.json's fields, checked as they are read: every error names the file and the field's path in it
// ("trials[2].epochs"), as a person finds it when they open the file.
struct StudyFields {
  std::string origin;

  const json& need(const json& object, const std::string& key, const std::string& field) const {
    BERTRAIN_CHECK(object.contains(key), origin << ": no field '" << field << "'");
    return object[key];
  }
  std::string string(const json& object, const std::string& key, const std::string& field) const {
    const json& value = need(object, key, field);
    BERTRAIN_CHECK(value.is_string(), origin << ": field '" << field << "' is not a string");
    return value.get<std::string>();
  }
  // An array of strings, each checked by `check(name, field)` against those before it.
  std::vector<std::string> names(const json& array, const std::string& key,
                                 const std::function<void(const std::string&, const std::string&,
                                                          const std::vector<std::string>&)>& check) const {
    BERTRAIN_CHECK(array.is_array(), origin << ": field '" << key << "' is not an array");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < array.size(); ++i) {
      const std::string at = key + "[" + std::to_string(i) + "]";
      BERTRAIN_CHECK(array[i].is_string(), origin << ": field '" << at << "' is not a string");
      check(array[i].get<std::string>(), at, out);
      out.push_back(array[i].get<std::string>());
    }
    return out;
  }
  // A number, or NaN for null; tune writes null until there is a value, so an absent field counts as null too.
  double number_or_null(const json& object, const std::string& key, const std::string& field) const {
    if (!object.contains(key) || object[key].is_null()) return NAN;
    BERTRAIN_CHECK(object[key].is_number(), origin << ": field '" << field << "' is not a number or null");
    return object[key].get<double>();
  }

  // Entry `index` of "trials": its id must be the index's (trials are numbered in the order they were proposed).
  TrialRecord trial(const json& entry, long index) const {
    const std::string at = "trials[" + std::to_string(index) + "]";
    BERTRAIN_CHECK(entry.is_object(), origin << ": field '" << at << "' is not an object");
    TrialRecord t;
    t.id = string(entry, "id", at + ".id");
    BERTRAIN_CHECK(t.id == trial_id(index), origin << ": field '" << at << ".id' is '" << t.id << "', not '"
                                                   << trial_id(index) << "' (trials are numbered in order)");
    const json& params = need(entry, "params", at + ".params");
    BERTRAIN_CHECK(params.is_object(), origin << ": field '" << at << ".params' is not an object");
    for (const auto& [name, value] : params.items()) {
      BERTRAIN_CHECK(value.is_number() || value.is_string() || value.is_boolean(),
                     origin << ": field '" << at << ".params." << name << "' is not a number, string or boolean");
    }
    t.params = params;
    const std::string status = string(entry, "status", at + ".status");
    const auto* const name = std::find(std::begin(kStatusNames), std::end(kStatusNames), status);
    BERTRAIN_CHECK(name != std::end(kStatusNames), origin << ": field '" << at << ".status' is '" << status
                                                          << "', not completed, stopped, failed, interrupted or running");
    t.status = static_cast<TrialStatus>(name - std::begin(kStatusNames));
    const json& epochs = need(entry, "epochs", at + ".epochs");
    BERTRAIN_CHECK(epochs.is_number_integer() && epochs.get<long long>() >= 0,
                   origin << ": field '" << at << ".epochs' is not a count (a whole number, 0 or more)");
    t.epochs = epochs.get<long>();
    t.best_metric = number_or_null(entry, "best_metric", at + ".best_metric");
    t.best_epoch = number_or_null(entry, "best_epoch", at + ".best_epoch");
    BERTRAIN_CHECK(std::isnan(t.best_epoch) || (t.best_epoch >= 0 && t.best_epoch == std::floor(t.best_epoch)),
                   origin << ": field '" << at << ".best_epoch' is not an epoch (a whole number, 0 or more, or null)");
    BERTRAIN_CHECK(std::isnan(t.best_epoch) || t.best_epoch < static_cast<double>(t.epochs),
                   origin << ": field '" << at << ".best_epoch' is " << static_cast<long>(t.best_epoch)
                          << ", not below the trial's epochs (" << t.epochs << "; it counts from 0)");
    t.last_metric = number_or_null(entry, "last_metric", at + ".last_metric");
    t.time_s = number_or_null(entry, "time_s", at + ".time_s");
    if (std::isnan(t.time_s)) t.time_s = 0;
    if (entry.contains("error") && !entry["error"].is_null()) t.error = string(entry, "error", at + ".error");
    if (entry.contains("mlflow_run_id")) t.mlflow_run_id = string(entry, "mlflow_run_id", at + ".mlflow_run_id");
    return t;
  }
};

// Whether metric a is better than b (a NaN is never better).
bool better(double a, double b, bool lower_is_better) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return lower_is_better ? a < b : a > b;
}

}  // namespace

const char* trial_status_name(TrialStatus status) { return kStatusNames[static_cast<int>(status)]; }

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
         {"iteration", iteration},
         {"settings", settings},
         {"searched", searched},
         {"trials", trial_list},
         {"scheduler_events", events},
         {"best_trial", best < 0 ? json() : json(trials[static_cast<std::size_t>(best)].id)},
         {"time_s", time_s}};
  if (!mlflow_run_id.empty()) j["mlflow_run_id"] = mlflow_run_id;
  if (!integers.empty()) j["integers"] = integers;
  return j;
}

Study Study::from_json(const json& j, const std::string& origin) {
  const StudyFields f{origin};
  BERTRAIN_CHECK(j.is_object(), origin << ": not a JSON object");
  const json& version = f.need(j, "version", "version");
  BERTRAIN_CHECK(version.is_number_integer() && version.get<long long>() == 1,
                 origin << ": field 'version' is " << version.dump() << ", and this bertrain reads version 1");
  Study s;
  s.metric = f.string(j, "metric", "metric");
  BERTRAIN_CHECK(!s.metric.empty(), origin << ": field 'metric' is empty");
  const std::string mode = f.string(j, "mode", "mode");
  BERTRAIN_CHECK(mode == "min" || mode == "max", origin << ": field 'mode' is '" << mode << "', not min or max");
  s.lower_is_better = mode == "min";
  if (j.contains("iteration")) {  // studies written before it counted epochs
    s.iteration = f.string(j, "iteration", "iteration");
    BERTRAIN_CHECK(s.iteration == "epoch" || s.iteration == "evaluation",
                   origin << ": field 'iteration' is '" << s.iteration << "', not epoch or evaluation");
  }
  if (j.contains("settings")) {
    BERTRAIN_CHECK(j["settings"].is_object(), origin << ": field 'settings' is not an object");
    s.settings = j["settings"];
  }
  s.searched = f.names(f.need(j, "searched", "searched"), "searched",
                       [&](const std::string& name, const std::string& at, const std::vector<std::string>& before) {
                         BERTRAIN_CHECK(std::find(before.begin(), before.end(), name) == before.end(),
                                        origin << ": field '" << at << "' names '" << name << "' again");
                       });
  if (j.contains("integers")) {
    s.integers = f.names(j["integers"], "integers", [&](const std::string& name, const std::string& at,
                                                        const std::vector<std::string>&) {
      BERTRAIN_CHECK(std::find(s.searched.begin(), s.searched.end(), name) != s.searched.end(),
                     origin << ": field '" << at << "' names '" << name << "', which 'searched' does not");
    });
  }
  const json& trials = f.need(j, "trials", "trials");
  BERTRAIN_CHECK(trials.is_array(), origin << ": field 'trials' is not an array");
  for (std::size_t i = 0; i < trials.size(); ++i) s.trials.push_back(f.trial(trials[i], static_cast<long>(i)));
  if (j.contains("best_trial") && !j["best_trial"].is_null()) {
    const std::string best = f.string(j, "best_trial", "best_trial");
    BERTRAIN_CHECK(std::any_of(s.trials.begin(), s.trials.end(), [&](const TrialRecord& t) { return t.id == best; }),
                   origin << ": field 'best_trial' is '" << best << "', which no trial is");
  }
  if (j.contains("scheduler_events")) {
    const json& events = j["scheduler_events"];
    BERTRAIN_CHECK(events.is_array(), origin << ": field 'scheduler_events' is not an array");
    for (std::size_t i = 0; i < events.size(); ++i) {
      const std::string at = "scheduler_events[" + std::to_string(i) + "]";
      BERTRAIN_CHECK(events[i].is_object(), origin << ": field '" << at << "' is not an object");
      const json& iteration = f.need(events[i], "iteration", at + ".iteration");
      BERTRAIN_CHECK(iteration.is_number_integer() && iteration.get<long>() >= 1,
                     origin << ": field '" << at << ".iteration' is not an evaluation count");
      s.scheduler_events.push_back({f.string(events[i], "trial", at + ".trial"), iteration.get<long>(),
                                    f.number_or_null(events[i], "value", at + ".value")});
    }
  }
  // Each trial's params are a point of the study's space, as --initial-params must be: report charts them and
  // --resume runs them again, so a value of another type or out of its range is said here, by its field.
  if (s.settings.contains("space")) {
    const SearchSpace space = parse_search_space(s.settings["space"], origin + ": field 'settings.space'");
    for (std::size_t i = 0; i < s.trials.size(); ++i) {
      check_point(space, s.trials[i].params, origin + ": field 'trials[" + std::to_string(i) + "].params'");
    }
  }
  if (j.contains("mlflow_run_id")) s.mlflow_run_id = f.string(j, "mlflow_run_id", "mlflow_run_id");
  s.time_s = f.number_or_null(j, "time_s", "time_s");
  if (std::isnan(s.time_s)) s.time_s = 0;
  return s;
}

}  // namespace bertrain
