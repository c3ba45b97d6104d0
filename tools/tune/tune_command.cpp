// `bertrain tune`: hyper-parameter search over `bertrain train` runs, Made-With-ML's Ray Tune step (HyperOpt's TPE,
// ASHA, trials in parallel, MLflow) as one command. This file reads the command line, the space and the initial
// points into a TuneSetup, checking everything a trial would refuse before the first one starts;
// tools/tune/study_runner.cpp runs the study.
#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "core/number_text.h"
#include "data/csv_parser.h"
#include "engine/asha_scheduler.h"
#include "engine/mlflow_store.h"
#include "engine/param_search.h"
#include "engine/predictor.h"
#include "engine/run_dir.h"
#include "engine/trainer.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/data_flags.h"
#include "tools/tune/study_runner.h"
#include "tools/tune/trial_process.h"

namespace bertrain {

using nlohmann::json;

namespace {

// Train flags a study sets itself for each trial, or that would make trials overwrite one another.
const std::set<std::string> kManagedFlags{"out", "resume", "overwrite", "mlflow-dir", "experiment", "run-name",
                                          "mlflow-parent-run", "help"};

// "lr_patience" and "lr-patience" both name train's --lr-patience.
std::string flag_name(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  if (key.rfind("--", 0) == 0) key = key.substr(2);
  return key;
}

// A JSON object with its keys spelled as flags; Error naming `origin` when two keys name the same flag.
json with_flag_names(const json& object, const std::string& origin) {
  if (!object.is_object()) return object;
  json out = json::object();
  for (const auto& item : object.items()) {
    const std::string name = flag_name(item.key());
    BERTRAIN_CHECK(!out.contains(name), origin << ": \"" << item.key() << "\" names --" << name << " a second time");
    out[name] = item.value();
  }
  return out;
}

// Made-With-ML's train_loop_config keys that are not train's flag names (its lr, lr_factor and lr_patience are).
const std::map<std::string, std::string> kMadeWithMlKeys{{"dropout_p", "dropout"}};

// The text after --initial-params: JSON (starting with [ or {) or a file holding it. One point or a list of them;
// Made-With-ML's form, {"train_loop_config": {...}}, is unwrapped, its keys spelt as train's flags.
std::vector<json> read_initial_params(const std::string& text) {
  if (text.empty()) return {};
  std::string origin = "--initial-params";
  std::string body = text;
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (text[first] != '[' && text[first] != '{')) {
    origin = text;
    body = read_file(text, "--initial-params file");
  }
  bool too_deep = false;
  const json parsed = parse_json_or_discarded(body, &too_deep);
  BERTRAIN_CHECK(!too_deep, origin << ": JSON nested deeper than " << kMaxJsonDepth << " levels");
  BERTRAIN_CHECK(!parsed.is_discarded(), origin << ": not valid JSON");
  std::vector<json> points;
  for (const json& p : parsed.is_array() ? parsed : json::array({parsed})) {
    if (!(p.is_object() && p.size() == 1 && p.contains("train_loop_config") && p["train_loop_config"].is_object())) {
      points.push_back(with_flag_names(p, origin));
      continue;
    }
    json point = json::object();
    for (const auto& item : p["train_loop_config"].items()) {
      const auto renamed = kMadeWithMlKeys.find(item.key());
      const std::string key = renamed != kMadeWithMlKeys.end() ? renamed->second : item.key();
      BERTRAIN_CHECK(!point.contains(key),
                     origin << ": \"" << item.key() << "\" names --" << flag_name(key) << " a second time");
      point[key] = item.value();
    }
    points.push_back(with_flag_names(point, origin));
  }
  return points;
}

// Checks the space's names against train's flags: before the space is parsed, so that a misspelt or managed key is
// named even in a space that would otherwise have nothing to search.
void check_space_names(const json& space, const ArgParser& train, const std::vector<std::string>& train_flags,
                       const std::string& origin) {
  if (!space.is_object()) return;  // parse_search_space says what a space is
  for (const auto& item : space.items()) {
    const std::string& name = item.key();
    const std::string where = origin + ": \"" + name + "\"";
    const char* hint = name == "dropout-p" ? "; Made-With-ML's dropout_p is --dropout" : "";
    BERTRAIN_CHECK(train.has_option(name), where << " is not a flag of bertrain train (see bertrain train --help)" << hint);
    BERTRAIN_CHECK(kManagedFlags.count(name) == 0, where << ": tune sets --" << name << " itself");
    BERTRAIN_CHECK(!has_option_in(train_flags, name),
                   where << " is also given after --: a flag is either searched or common to every trial");
  }
}

// Checks the parsed space's kinds against train's flags: a switch takes true / false.
void check_space_switches(const SearchSpace& space, const ArgParser& train, const std::string& origin) {
  for (const SearchParam& p : space.params) {
    if (!train.is_switch(p.name)) continue;
    const bool listed = p.distribution == Distribution::kChoice || p.distribution == Distribution::kFixed;
    const bool booleans = listed && std::all_of(p.values.begin(), p.values.end(), [](const json& v) { return v.is_boolean(); });
    BERTRAIN_CHECK(booleans, origin << ": \"" << p.name << "\": --" << p.name
                                    << " is a switch: give it true / false (a choice or a fixed value)");
  }
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    BERTRAIN_CHECK(!item.empty(), "--devices: an empty item in '" << text << "'");
    out.push_back(item);
  }
  return out;
}

std::string this_program() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("bertrain") : exe.string();
}

}  // namespace

int run_tune(const std::vector<std::string>& args) {
  std::vector<std::string> own, train_flags;
  const auto dashes = std::find(args.begin(), args.end(), "--");
  own.assign(args.begin(), dashes);
  if (dashes != args.end()) train_flags.assign(dashes + 1, args.end());
  ArgParser p("tune",
              "Searches hyper-parameters of bertrain train, as Made-With-ML's tune.py does with Ray Tune: each trial is a\n"
              "`bertrain train` with TRAIN FLAGS plus the trial's parameters from the --space file, run P at a time;\n"
              "TPE (HyperOpt's), random or grid search; ASHA stops trials that fall behind at each rung (epochs\n"
              "grace_period * reduction_factor^k). Each trial is a run directory DIR/trials/NNN (its output in\n"
              "train.log); DIR/study.json records every trial (rewritten after each event); at the end DIR/best is the\n"
              "best trial's best model (evaluate, predict, serve and transformers load it) and DIR/results.json has\n"
              "Made-With-ML's results fields. `bertrain report DIR` charts the study.");
  p.usage("bertrain tune --space FILE --out DIR [options] -- TRAIN FLAGS...");
  p.option("space", "", "the search space, a JSON file: {\"lr\": {\"type\": \"loguniform\", \"low\": 1e-5, \"high\": 5e-4}, ...} "
                        "with uniform, loguniform, quniform (q), int (low..high, both included), randint (Ray's: "
                        "high left out), choice (values) or a fixed value per train flag (see README: bertrain tune)",
           true).value_name("FILE");
  p.option("out", "", "the study directory (DIR above)", true).value_name("DIR");
  p.option("trials", "10", "how many trials (grid: default the --initial-params points and then the whole grid)");
  p.option("parallel", "0", "trials at once (0: one per --devices entry, else 1); on the CPU the cores are split "
                            "between them").value_name("P");
  p.option("search", "tpe", "tpe (HyperOpt's Tree-structured Parzen Estimator), random, or grid (choice, int, "
                            "quniform parameters)").value_name("tpe|random|grid");
  p.option("startup-trials", "20", "tpe: trials drawn at random before TPE models the results (HyperOpt's "
                                   "n_initial_points; --initial-params count among them)");
  p.option("scheduler", "asha", "asha: stop trials that fall behind (Ray's AsyncHyperBandScheduler); none: every "
                                "trial trains all its epochs").value_name("asha|none");
  p.option("grace-period", "1", "asha: epochs before a trial can be stopped (the first rung)").value_name("EPOCHS");
  p.option("reduction-factor", "4", "asha: rungs at grace_period * factor^k epochs; at each, a trial goes on only in "
                                    "the best 1/factor (Ray's default 4, which Made-With-ML uses)").value_name("X");
  p.option("metric", "val_loss", "what the study optimizes, per epoch from each trial's metrics.jsonl; best/ of each "
                                 "trial follows it (--metric-for-best; f1 and accuracy, its names, are taken too)")
      .value_name("val_loss|val_f1|val_accuracy");
  p.option("mode", "auto", "min or max; auto: min for val_loss, max for the others").value_name("auto|min|max");
  p.option("initial-params", "", "points evaluated first (Ray's points_to_evaluate): a JSON object or array of "
                                 "objects, or a file holding one").value_name("JSON|FILE");
  p.option("seed", "0", "the search's seed: the same seed proposes the same trials");
  p.option("devices", "", "GPUs for the trials, e.g. 0,1: each trial gets one (CUDA_VISIBLE_DEVICES), in turn")
      .value_name("LIST");
  p.option("launcher", "", "shell words put before each trial's command, e.g. 'srun -N1 -n1 --gpus=1' or "
                           "'mpirun -np 2': trials run through a cluster's launcher (and are told to stop with SIGUSR1, which "
                           "mpirun forwards)").value_name("CMD");
  p.option("mlflow-dir", "", "log the study as an MLflow run and each trial as its child (mlflow.parentRunId) in "
                             "this file store; default: MLFLOW_TRACKING_URI when set").value_name("DIR");
  p.option("experiment", "bertrain", "MLflow experiment (with --mlflow-dir)").value_name("NAME");
  p.option("run-name", "", "the study's MLflow run name (default: DIR's folder name); trials are NAME-trial-NNN")
      .value_name("NAME");
  p.flag("resume", "continue the study in DIR: finished trials are kept, interrupted ones resume from their "
                   "checkpoints, then new trials run until --trials");
  p.flag("quiet", "no progress lines (the table and the summary are still printed)");
  p.passes_on(train_arg_parser().option_names(),
              "train's flags go after --: bertrain tune --space FILE --out DIR [options] -- TRAIN FLAGS...");
  p.epilog(
      "exit status:\n"
      "  0   the study finished (trials that failed are recorded in study.json with their errors)\n"
      "  1   no trial finished with a metric, or a failure while working\n"
      "  2   a usage or input error: a bad flag, space, initial point or TRAIN FLAGS\n"
      "  75  stopped by SIGINT or SIGTERM after every running trial wrote its checkpoint: continue with --resume\n");
  if (!p.parse(own)) return 0;

  TuneSetup s;
  s.out_dir = p.get("out");
  s.train_flags = train_flags;
  s.search = p.get("search");
  s.trials = p.get_int("trials");
  s.parallel = p.get_int("parallel");
  s.seed = p.get_uint64("seed");
  s.tpe.startup_trials = p.get_int("startup-trials");
  s.asha = p.get("scheduler") == "asha";
  s.grace_period = p.get_double("grace-period");
  s.reduction_factor = p.get_double("reduction-factor");
  s.metric = p.get("metric");
  if (s.metric == "f1" || s.metric == "accuracy") s.metric = "val_" + s.metric;  // train --metric-for-best's names
  s.launcher = p.get("launcher");
  s.trial_stop_signal = s.launcher.empty() ? SIGTERM : SIGUSR1;
  p.refuse_empty("launcher", "give the launcher's words, or leave the flag out to run trials here");
  if (!s.launcher.empty()) {
    // Shell text that /bin/sh cannot parse would fail every trial (exit 1, a study of failures): refused now.
    const std::string why = shell_syntax_error(launcher_script(s.launcher));
    if (!why.empty()) throw UsageError("tune: --launcher is not shell text /bin/sh can read: " + why);
  }
  s.resume = p.get_flag("resume");
  s.quiet = p.get_flag("quiet");
  s.bertrain = this_program();
  if (train_flags.empty()) throw UsageError("tune: give the common train flags after --, e.g. -- --model DIR --train-data FILE");
  if (s.search != "tpe" && s.search != "random" && s.search != "grid") {
    throw UsageError("tune: --search must be tpe, random or grid, got '" + s.search + "'");
  }
  if (p.get("scheduler") != "asha" && p.get("scheduler") != "none") {
    throw UsageError("tune: --scheduler must be asha or none, got '" + p.get("scheduler") + "'");
  }
  if (s.metric != "val_loss" && s.metric != "val_f1" && s.metric != "val_accuracy") {
    throw UsageError("tune: --metric must be val_loss, val_f1 or val_accuracy (or f1, accuracy), got '" + s.metric + "'");
  }
  const std::string mode = p.get("mode");
  if (mode != "auto" && mode != "min" && mode != "max") throw UsageError("tune: --mode must be auto, min or max, got '" + mode + "'");
  s.lower_is_better = mode == "auto" ? s.metric == "val_loss" : mode == "min";
  if (s.trials < 1 && !(s.search == "grid" && !p.given("trials"))) throw UsageError("tune: --trials must be at least 1");
  if (s.parallel < 0) throw UsageError("tune: --parallel must be >= 0");
  if (s.tpe.startup_trials < 0) throw UsageError("tune: --startup-trials must be >= 0");
  if (!p.get("devices").empty()) s.devices = input_step([&] { return split_list(p.get("devices")); });
  if (s.parallel == 0) s.parallel = s.devices.empty() ? 1 : static_cast<int>(s.devices.size());
  for (const std::string& f : train_flags) {
    const std::string name = flag_name(f.substr(0, f.find('=')));
    if (f.rfind("--", 0) == 0 && kManagedFlags.count(name) != 0) {
      throw UsageError("tune: --" + name + " after --: tune sets it for each trial" +
                       (name == "mlflow-dir" || name == "experiment" || name == "run-name" ? "; give it to tune, before --" : ""));
    }
  }

  // The space, with its names spelled as train's flags.
  const std::string space_file = p.get("space");
  const json space_json = input_step([&] { return with_flag_names(read_json_file(space_file), space_file); });
  ArgParser train = train_arg_parser();
  input_step([&] { check_space_names(space_json, train, train_flags, space_file); });
  s.space = input_step([&] { return parse_search_space(space_json, space_file); });
  input_step([&] { check_space_switches(s.space, train, space_file); });
  for (const SearchParam& param : s.space.params) {
    if (train.is_switch(param.name)) s.switches[param.name] = true;
    else if (train.takes_integer(param.name)) s.integers[param.name] = true;
  }
  s.initial = input_step([&] { return read_initial_params(p.get("initial-params")); });
  for (std::size_t i = 0; i < s.initial.size(); ++i) {
    input_step([&] { check_point(s.space, s.initial[i], "--initial-params[" + std::to_string(i) + "]"); });
    for (const SearchParam& param : s.space.params) {
      if (!param.searched()) s.initial[i][param.name] = param.values[0];
    }
  }
  if (s.search == "grid") {  // the initial points run first, in addition to the grid (Ray's points_to_evaluate)
    const long size = input_step([&] { return grid_size(s.space); });
    if (!p.given("trials")) s.trials = static_cast<long>(s.initial.size()) + size;
  }

  // The flags tune adds: best/ follows the study's metric; a finished trial keeps no optimizer state; on a CPU
  // machine each trial its share of the cores.
  const char* metric_for_best = s.metric == "val_loss" ? "val_loss" : s.metric == "val_f1" ? "f1" : "accuracy";
  if (!has_option_in(train_flags, "metric-for-best") && s.space.find("metric-for-best") == nullptr) {
    s.extra_flags.insert(s.extra_flags.end(), {"--metric-for-best", metric_for_best});
  }
  // A finished trial is never trained on again (--resume continues interrupted trials only): its optimizer state,
  // two thirds of a checkpoint, goes when it finishes, as --save-optimizer during does.
  if (!has_option_in(train_flags, "save-optimizer") && s.space.find("save-optimizer") == nullptr) {
    s.extra_flags.insert(s.extra_flags.end(), {"--save-optimizer", "during"});
    s.drop_stopped_optimizer = true;  // train keeps a stopped run's state (it could resume); tune never resumes it
  }
  if (s.devices.empty() && s.launcher.empty() && s.parallel > 1) {
    const std::vector<int> cpus = allowed_cpus();
    const std::size_t share = std::max<std::size_t>(1, cpus.size() / static_cast<std::size_t>(s.parallel));
    for (int slot = 0; slot < s.parallel; ++slot) {
      std::vector<int> mine;
      for (std::size_t i = 0; i < share; ++i) mine.push_back(cpus[(static_cast<std::size_t>(slot) * share + i) % cpus.size()]);
      s.cpus.push_back(mine);
    }
    if (!has_option_in(train_flags, "threads") && s.space.find("threads") == nullptr) {
      s.extra_flags.insert(s.extra_flags.end(), {"--threads", std::to_string(share)});
    }
  }

  // Every trial's command line must parse and pass train's checks. Checked now: the first trial's (the space's prior
  // draws where --initial-params gives none), and each searched parameter at every value it can propose at its ends
  // (extreme_values), the others as in the first trial. A mistake in TRAIN FLAGS, or a space that can propose what
  // train refuses, fails here naming the flag or the key, not as a study of failed trials.
  SearchRng rng(s.seed, 0);
  const json initial = s.initial.empty() ? json::object() : s.initial[0];
  json first = json::object();
  for (const SearchParam& param : s.space.params) {
    first[param.name] = initial.contains(param.name) ? initial[param.name] : sample_prior(param, rng);
  }
  const auto command_of = [&](const json& point) {
    std::vector<std::string> argv = train_flags;
    for (const SearchParam& param : s.space.params) {
      for (const std::string& f : param_flags(s, param.name, point[param.name])) argv.push_back(f);
    }
    argv.insert(argv.end(), s.extra_flags.begin(), s.extra_flags.end());
    argv.insert(argv.end(), {"--out", s.out_dir + "/trials/000"});
    return argv;
  };
  // What train says to the command of `point`, parsed into `parser` ("" when it takes it); *usage: a usage error.
  // False when the command asks for --help (train's help was printed).
  const auto refusal = [&](ArgParser& parser, const json& point, std::string* why, bool* usage) {
    try {
      if (!parser.parse(command_of(point))) return false;
      train_args_of(parser);
    } catch (const UsageError& e) {
      *why = e.what();
      *usage = true;
    } catch (const InputError& e) {
      *why = e.what();
    }
    return true;
  };
  // An end as the space says it: a range's open end as its bound, not as the double just below it.
  const auto shown_end = [](const SearchParam& param, const json& value) {
    const bool below_high = (param.distribution == Distribution::kUniform ||
                             param.distribution == Distribution::kLogUniform) &&
                            value.get<double>() != param.low;
    return below_high ? "values just below " + shortest_double(param.high) : value.dump();
  };
  // What train says to `param` at the end `value` (why) and to the first trial (first_why), blamed on the key:
  // refused at the end, the space's; taken at the end where the first trial was refused, the first trial's value of
  // this parameter was what train refused. Refused alike at both: not the key's (returns).
  const auto blame_key = [&](const SearchParam& param, const json& value, const std::string& why,
                             const std::string& first_why) {
    if (!why.empty() && why != first_why) {
      throw InputError(space_file + ": \"" + param.name + "\" can propose " + shown_end(param, value) +
                       ", which train refuses: " + why);
    }
    if (why.empty() && !first_why.empty()) {
      throw InputError(space_file + ": \"" + param.name + "\" can propose " + first[param.name].dump() +
                       ", which train refuses: " + first_why);
    }
  };
  // What train's parse says to the command of `point` ("" when it takes it).
  const auto parse_refusal = [&](const json& point) {
    ArgParser parser = train_arg_parser();
    std::string why;
    bool point_usage = false;
    refusal(parser, point, &why, &point_usage);
    return why;
  };
  ArgParser check = train_arg_parser();
  std::string refused;  // what train says to the first trial's command ("" when it takes it)
  bool usage = false;
  if (!refusal(check, first, &refused, &usage)) return 0;
  for (const SearchParam* param : s.space.searched()) {
    for (const json& value : extreme_values(*param)) {
      json point = first;
      point[param->name] = value;
      blame_key(*param, value, parse_refusal(point), refused);  // refused alike at both: TRAIN FLAGS', below
    }
  }
  if (!refused.empty()) {
    if (usage) throw UsageError("tune: TRAIN FLAGS: " + refused);
    throw InputError("TRAIN FLAGS: " + refused);
  }
  // Each parameter's ends are taken alone; together they must be too: a --lr-scheduler with a --warmup-steps train
  // refuses beside it, a data file without the --label-column another key can propose. Every combination of the
  // searched parameters' ends that sets two or more off the first trial's values (the others as in it) is tried while
  // there are at most `limit` combinations, and a refusal names those parameters.
  const auto check_end_combinations = [&](const std::vector<const SearchParam*>& params, std::size_t limit,
                                          const std::function<std::string(const json&)>& refusal_of) {
    std::vector<std::vector<json>> ends;
    std::size_t combinations = 1;
    for (const SearchParam* param : params) {
      ends.push_back(extreme_values(*param));
      combinations *= ends.back().size();
      if (combinations > limit) return;
    }
    for (std::size_t index = 0; index < combinations; ++index) {
      json point = first;
      std::string together;
      int changed = 0;
      for (std::size_t k = 0, rest = index; k < params.size(); rest /= ends[k].size(), ++k) {
        const json& value = ends[k][rest % ends[k].size()];
        if (value == first[params[k]->name]) continue;
        point[params[k]->name] = value;
        together += (changed++ == 0 ? "\"" : " with \"") + params[k]->name + "\" " + shown_end(*params[k], value);
      }
      if (changed < 2) continue;  // one alone: checked above
      const std::string why = refusal_of(point);
      if (!why.empty()) {
        throw InputError(space_file + ": can propose " + together + ", which train refuses together: " + why);
      }
    }
  };
  // Parsing a command is cheap: up to 4096 combinations (12 parameters of two ends each).
  check_end_combinations(s.space.searched(), 4096, parse_refusal);
  // The files every trial reads, and the study directory: a typo fails here, before the study exists, and not as
  // a study of failed trials that the corrected command would have to --resume with other flags. What a trial reads
  // is read as its train reads it (the model's files, the data's columns and labels, max_length): the first trial's,
  // and, for a searched parameter that changes it (the model, a data file, how a file is read), each value it can
  // propose at its ends, the others as in the first trial, blamed on the key (blame_key).
  input_step([&] { check_writable_directory(s.out_dir, "--out"); });
  const auto reads_refusal = [](const ArgParser& trial) -> std::string {
    try {
      input_step([&] {
        resolve_model_dir(trial.get("model"));
        require_readable_file(trial.get("train-data"), "--train-data");
        if (!trial.get("val-data").empty()) require_readable_file(trial.get("val-data"), "--val-data");
        check_training_inputs(train_args_of(trial));
      });
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  const std::string unreadable = reads_refusal(check);
  std::set<std::string> input_flags = {"model", "train-data", "val-data"};
  for (const std::string& flag : dataset_flags_of(check)) input_flags.insert(flag);
  for (const SearchParam* param : s.space.searched()) {
    if (input_flags.count(param->name) == 0) continue;
    for (const json& value : extreme_values(*param)) {
      json point = first;
      point[param->name] = value;
      if (point == first) continue;
      ArgParser trial = train_arg_parser();
      trial.parse(command_of(point));  // taken: checked above
      blame_key(*param, value, reads_refusal(trial), unreadable);
    }
  }
  // Reading a trial's model and data is not cheap: the searched inputs' ends together while there are at most 16.
  std::vector<const SearchParam*> searched_inputs;
  for (const SearchParam* param : s.space.searched()) {
    if (input_flags.count(param->name) != 0) searched_inputs.push_back(param);
  }
  if (unreadable.empty()) {
    check_end_combinations(searched_inputs, 16, [&](const json& point) {
      if (std::string why = parse_refusal(point); !why.empty()) return why;  // a combination past the parse's 4096
      ArgParser trial = train_arg_parser();
      trial.parse(command_of(point));
      return reads_refusal(trial);
    });
  }
  if (!unreadable.empty()) throw InputError(unreadable);
  const SearchParam* epochs_param = s.space.find("epochs");
  if (s.asha) {
    for (const char* flag : {"max-steps", "eval-steps"}) {
      if (check.get_int(flag) != 0) {
        throw UsageError(std::string("tune: --scheduler asha counts epochs; --") + flag + " changes what a trial's "
                         "evaluations are (use --scheduler none)");
      }
    }
    if (epochs_param != nullptr && epochs_param->searched()) {
      throw UsageError("tune: --scheduler asha needs one --epochs for every trial (its max_t); epochs is searched");
    }
  }
  // The epochs of every trial, or, where --epochs is searched (without ASHA), the most a trial can run.
  s.max_t = check.get_int("epochs");
  if (epochs_param != nullptr) {
    s.max_t = 0;  // the integer part of the largest value it can propose (train takes --epochs so)
    for (const json& v : extreme_values(*epochs_param)) {
      if (v.is_number()) s.max_t = std::max(s.max_t, std::floor(v.get<double>()));
    }
  }
  // Under --eval-steps a trial's metrics.jsonl has a line per evaluation, several an epoch: the study counts those.
  if (check.get_int("eval-steps") > 0 || s.space.find("eval-steps") != nullptr) s.iteration = "evaluation";

  const MlflowStore store = input_step([&] { return mlflow_store(p.given("mlflow-dir"), p.get("mlflow-dir")); });
  s.mlflow_dir = store.dir;
  // Not inside what the study replaces: its best/ (each time a better trial ends) and its trials' runs.
  for (const char* folder : {"best", "trials"}) {
    if (!store.dir.empty() && is_inside(store.dir, s.out_dir + "/" + folder)) {
      throw InputError(store.origin + " " + store.dir + " is inside " + s.out_dir + "/" + folder + ", which the study " +
                       "replaces: keep the store outside it");
    }
  }
  s.experiment = p.get("experiment");
  s.run_name = p.get("run-name").empty() ? std::filesystem::path(s.out_dir).lexically_normal().filename().string()
                                         : p.get("run-name");
  if (s.run_name.empty() || s.run_name == ".") s.run_name = "tune";
  // What a --resume must find as it was (--trials may grow; parallelism, devices, launcher and MLflow may change).
  s.settings = json{{"space", space_json},
                    {"search", s.search},
                    {"seed", s.seed},
                    {"startup_trials", s.tpe.startup_trials},
                    {"scheduler", p.get("scheduler")},
                    {"grace_period", s.grace_period},
                    {"reduction_factor", s.reduction_factor},
                    {"max_t", s.max_t},
                    {"metric", s.metric},
                    {"mode", s.lower_is_better ? "min" : "max"},
                    {"initial_params", s.initial},
                    {"train_flags", s.train_flags}};
  if (s.asha) {
    input_step([&] { AshaScheduler(s.grace_period, s.max_t, s.reduction_factor, s.lower_is_better); });
  }
  // One tune per study at a time, locked before the study is read: a second tune, or a --resume beside the running
  // one, would rerun its trials and record them failed.
  std::optional<DirectoryLock> study_lock;
  input_step([&] { study_lock.emplace(s.out_dir, "--out"); });
  if (!s.resume) {
    if (file_exists(s.out_dir + "/study.json")) {
      throw InputError("tune: " + s.out_dir + " holds a study (study.json): continue it with --resume, or choose "
                       "another --out");
    }
    // A study writes best/ and trials/ into --out: one that holds a training run (or a study's remains) would lose
    // its best/.
    std::vector<std::string> present = run_files_in(s.out_dir);
    if (path_exists(s.out_dir + "/trials")) present.push_back("trials");
    if (!present.empty()) {
      throw InputError("tune: " + s.out_dir + " holds a run's files (" + join_names(present) + "), which the study would " +
                       "replace: choose another --out");
    }
    make_directories(s.out_dir);
  }
  return run_study(s);
}

}  // namespace bertrain
