#include "tools/tune/study_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/count_text.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "core/number_text.h"
#include "core/progress.h"
#include "engine/asha_scheduler.h"
#include "engine/mlflow_run.h"
#include "engine/run_dir.h"
#include "engine/stop_signals.h"
#include "engine/study.h"
#include "tools/tune/trial_process.h"
#include "tools/wait_status.h"

namespace bertrain {

using nlohmann::json;

namespace {

// The first stop signal (kStopSignals: SIGTERM, SIGINT, Slurm's SIGUSR1, a closed terminal's SIGHUP), or SIGPIPE when
// what read tune's output went away (`tune | head`): the study stops, its trials with their checkpoints, exit 75. After
// SIGPIPE writes to the closed output fail with EPIPE instead of ending tune before its trials' checkpoints.
std::atomic<int> stop_signal{0};
void on_stop_signal(int sig) {  // async-signal-safe (an atomic, sigaction)
  int none = 0;
  stop_signal.compare_exchange_strong(none, sig);
  if (sig == SIGPIPE) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return shortest_double(v.get<double>());
  return v.dump();
}

// A value for a table: 4 significant digits.
std::string short_value(const json& v) {
  if (!v.is_number_float()) return value_text(v);
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", v.get<double>());
  return text;
}

std::string metric_text(double x) {
  if (!std::isfinite(x)) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.5f", x);
  return text;
}

// The last "bertrain: error: ..." line of a trial's log (or its last line), for study.json and the table.
std::string error_of(const std::string& log_path, int status) {
  std::ifstream in(log_path);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.rfind("bertrain: ", 0) == 0) error = line;
  }
  const std::string text = !error.empty() ? error : last;
  return describe_wait_status(status) + (text.empty() ? "" : ": " + text);
}

// A running trial: its record's index, its process, and what tune asked of it.
struct Running {
  std::size_t index = 0;
  std::unique_ptr<TrialProcess> process;
  int slot = 0;
  Clock::time_point started;
  double time_before = 0;    // time_s of earlier runs of this trial (a resumed one)
  bool stop_requested = false;  // ASHA stopped it
};

class StudyRunner {
 public:
  explicit StudyRunner(const TuneSetup& setup)
      : s_(setup), search_(make_param_search(setup.search, setup.space, setup.seed, setup.tpe)) {}

  int run() {
    load_or_start();
    install_signal_handlers();
    open_mlflow();
    for (const TrialRecord& t : study_.trials) {
      end_trial_runs(t);  // what a full disk or a kill kept from it before
    }
    const auto start = Clock::now();
    const double time_before = study_.time_s;
    std::vector<bool> slot_busy(static_cast<std::size_t>(s_.parallel), false);
    std::vector<std::size_t> to_resume = resumable_trials();
    for (const std::size_t i : to_resume) wait_until_released(study_.trials[i]);
    if (!s_.quiet) print_header(to_resume.size());
    while (true) {
      if (stop_signal != 0 && !stopping_) begin_stop();
      while (!stopping_ && running_.size() < static_cast<std::size_t>(s_.parallel) &&
             (!to_resume.empty() || static_cast<long>(study_.trials.size()) < s_.trials)) {
        const int slot = static_cast<int>(std::find(slot_busy.begin(), slot_busy.end(), false) - slot_busy.begin());
        slot_busy[static_cast<std::size_t>(slot)] = true;
        if (!to_resume.empty()) {
          start_trial(to_resume.front(), slot, /*resume=*/true);
          to_resume.erase(to_resume.begin());
        } else {
          propose_trial();
          start_trial(study_.trials.size() - 1, slot, /*resume=*/false);
        }
      }
      bool slot_freed = false;
      for (auto it = running_.begin(); it != running_.end();) {
        follow_metrics(*it);
        if (it->process->poll()) {
          slot_freed = true;
          follow_metrics(*it);
          finish_trial(*it);
          slot_busy[static_cast<std::size_t>(it->slot)] = false;
          it = running_.erase(it);
        } else {
          ++it;
        }
      }
      study_.time_s = time_before + seconds_since(start);
      if (running_.empty() && (stopping_ || static_cast<long>(study_.trials.size()) >= s_.trials)) break;
      if (!slot_freed) wait_for_news();  // else the next trial starts at once
    }
    save();
    if (stopping_) return finish_interrupted();
    return finish_study();
  }

 private:
  // The epochs trial `t` runs: its own where --epochs is searched (as train takes the flag: the integer part), else
  // the study's.
  double epochs_of(const TrialRecord& t) const {
    const auto it = t.params.find("epochs");
    return it != t.params.end() && it->is_number() ? std::floor(it->get<double>()) : s_.max_t;
  }

  std::string path(const std::string& relative) const { return s_.out_dir + "/" + relative; }

  void load_or_start() {
    const std::string file = path("study.json");
    if (s_.resume) {
      if (!file_exists(file)) throw InputError("tune --resume: no study in " + s_.out_dir + " (no study.json)");
      study_ = input_step([&] { return Study::from_json(read_json_file(file), file); });
      input_step([&] { check_settings_unchanged(); });
      // The best trial so far must still have its model, which the study's best/ is made from at the end: a
      // missing one is said now, before any trial runs, not after them.
      if (const long best = study_.best_trial(); best >= 0) {
        const std::string model = path(study_.trials[static_cast<std::size_t>(best)].dir() + "/best");
        if (!directory_exists(model)) {
          throw InputError("tune --resume: " + model + " is missing: it is the model of trial " +
                           study_.trials[static_cast<std::size_t>(best)].id + ", the best so far (restore the " +
                           "trial's folder, or start a new study)");
        }
      }
      // The scheduler learns again what it had seen, in the same order, so that its rungs are as they were.
      for (const SchedulerEvent& e : study_.scheduler_events) {
        if (asha_) asha_->on_result(e.trial, e.iteration, e.value);
      }
    } else {
      study_.settings = s_.settings;
      study_.metric = s_.metric;
      study_.lower_is_better = s_.lower_is_better;
      study_.iteration = s_.iteration;
      for (const SearchParam* p : s_.space.searched()) study_.searched.push_back(p->name);
      make_directories(path("trials"));
    }
    // Also into a study written before the field, so that its report shows what the trials ran with.
    study_.integers.clear();
    for (const std::string& name : study_.searched) {
      if (s_.integers.count(name) != 0) study_.integers.push_back(name);
    }
    save();
  }

  void check_settings_unchanged() const {
    for (const auto& item : s_.settings.items()) {
      const json was = study_.settings.value(item.key(), json());
      BERTRAIN_CHECK(was == item.value(), "tune --resume: " << item.key() << " differs from the study in " << s_.out_dir
                                                            << " (was " << was.dump() << ", now " << item.value().dump()
                                                            << "); resume with the same settings, or start a new DIR");
    }
  }

  // Trials a --resume continues: the ones the study was running or had interrupted.
  std::vector<std::size_t> resumable_trials() const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < study_.trials.size(); ++i) {
      if (!study_.trials[i].finished()) out.push_back(i);
    }
    return out;
  }

  // A trial of a study whose tune was killed outright stops on its own (PR_SET_PDEATHSIG, trial_process.cpp) and may
  // still be writing its checkpoint when --resume starts: resumed then, its train would be refused the run directory
  // and the trial recorded failed for good. Waits (saying so) until no process holds the trial's run directory, a
  // stop signal comes, or kReleaseWaitS pass; the trial then runs as it would have.
  void wait_until_released(const TrialRecord& t) const {
    constexpr double kReleaseWaitS = 300;
    const auto start = Clock::now();
    bool said = false;
    while (stop_signal == 0 && seconds_since(start) < kReleaseWaitS) {
      try {
        const DirectoryLock released(path(t.dir()), "trial " + t.id + "'s run directory");
        return;
      } catch (const DirectoryInUseError&) {
        if (!said) {
          std::fprintf(stderr, "tune: trial %s: waiting for its earlier process to let go of %s (a trial of a killed "
                       "study finishing its checkpoint)\n", t.id.c_str(), path(t.dir()).c_str());
          said = true;
        }
      } catch (const Error&) {
        return;  // not a question of another process: the trial meets it and says so
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // Sleeps until a trial exits (SIGCHLD, blocked for this) or 100 ms pass: a new epoch in a metrics.jsonl is seen
  // within 100 ms, a finished trial's slot taken again at once. SIGINT / SIGTERM end the wait too.
  void wait_for_news() const {
    sigset_t child;
    sigemptyset(&child);
    sigaddset(&child, SIGCHLD);
    const timespec timeout{0, 100 * 1000 * 1000};
    ::sigtimedwait(&child, nullptr, &timeout);
  }

  void install_signal_handlers() {
    // SIGCHLD stays pending until wait_for_news takes it (trials start with an empty mask: trial_process.cpp).
    sigset_t child;
    sigemptyset(&child);
    sigaddset(&child, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &child, nullptr);
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    // One ignored on entry (`nohup`: SIGHUP; a shell's background job: SIGINT) stays ignored, as in every command.
    for (const int sig : kStopSignals) {
      if (!ignored_on_entry(sig)) sigaction(sig, &action, nullptr);
    }
    if (!ignored_on_entry(SIGPIPE)) sigaction(SIGPIPE, &action, nullptr);
  }

  void open_mlflow() {
    if (s_.mlflow_dir.empty()) return;
    // A study's run to continue that is missing, damaged or deleted is the input's fault (exit 2).
    if (!study_.mlflow_run_id.empty()) {
      input_step([&] { continued_run_experiment(s_.mlflow_dir, s_.experiment, study_.mlflow_run_id); });
    }
    mlflow_ = std::make_unique<MlflowRun>(s_.mlflow_dir, s_.experiment, s_.run_name, study_.mlflow_run_id);
    if (study_.mlflow_run_id.empty()) {
      study_.mlflow_run_id = mlflow_->run_id();
      json params = json::object();
      for (const auto& item : s_.settings.items()) {
        if (item.key() != "train_flags" && item.key() != "space") params[item.key()] = item.value();
      }
      params["train_flags"] = json(s_.train_flags).dump();
      mlflow_->log_params(params);
      for (const SearchParam& p : s_.space.params) {
        mlflow_->set_tag("bertrain.space." + p.name, s_.settings["space"][p.name].dump());
      }
      mlflow_->set_tag("bertrain.study", s_.out_dir);
      save();
    }
  }

  void propose_trial() {
    const long index = static_cast<long>(study_.trials.size());
    TrialRecord t;
    t.id = trial_id(index);
    if (index < static_cast<long>(s_.initial.size())) {
      t.params = s_.initial[static_cast<std::size_t>(index)];
    } else {
      // A grid's points come after the initial ones (Ray runs points_to_evaluate in addition to its variants); TPE
      // counts every trial towards its random start, as HyperOpt does.
      const long proposal = s_.search == "grid" ? index - static_cast<long>(s_.initial.size()) : index;
      t.params = search_->propose(proposal, study_.observations());
    }
    study_.trials.push_back(t);
  }

  std::vector<std::string> trial_command(const TrialRecord& t, bool resume) const {
    std::vector<std::string> argv{s_.bertrain, "train"};
    argv.insert(argv.end(), s_.train_flags.begin(), s_.train_flags.end());
    for (const auto& item : t.params.items()) {
      for (const std::string& f : param_flags(s_, item.key(), item.value())) argv.push_back(f);
    }
    argv.insert(argv.end(), s_.extra_flags.begin(), s_.extra_flags.end());
    argv.insert(argv.end(), {"--out", path(t.dir())});
    if (mlflow_) {
      argv.insert(argv.end(), {"--mlflow-dir", s_.mlflow_dir, "--experiment", s_.experiment, "--run-name",
                               s_.run_name + "-trial-" + t.id, "--mlflow-parent-run", study_.mlflow_run_id});
    }
    if (resume) {
      // A trial with a checkpoint goes on from it; one killed before its first checkpoint starts again.
      argv.push_back(file_exists(path(t.dir() + "/last/trainer_state.json")) ? "--resume" : "--overwrite");
    }
    if (s_.launcher.empty()) return argv;
    // The launcher is shell text (srun ..., mpirun ...); the trial's words follow it as "$@", unquoted by nothing.
    std::vector<std::string> wrapped{"/bin/sh", "-c", launcher_script(s_.launcher), "bertrain-tune-trial"};
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    return wrapped;
  }

  void start_trial(std::size_t index, int slot, bool resume) {
    TrialRecord& t = study_.trials[index];
    make_directories(path(t.dir()));
    // Train's advice when a trial diverges names the study's settings, not --out or --overwrite, which tune sets.
    std::map<std::string, std::string> env{{"BERTRAIN_TUNE_TRIAL", t.id}};
    if (!s_.devices.empty()) {
      env["CUDA_VISIBLE_DEVICES"] = s_.devices[static_cast<std::size_t>(slot) % s_.devices.size()];
    }
    const std::vector<int> cpus = s_.cpus.empty() ? std::vector<int>() : s_.cpus[static_cast<std::size_t>(slot)];
    Running r;
    r.index = index;
    r.slot = slot;
    r.started = Clock::now();
    r.time_before = t.time_s;
    r.process = std::make_unique<TrialProcess>(trial_command(t, resume), env, path(t.dir() + "/train.log"),
                                               s_.trial_stop_signal, cpus);
    t.status = TrialStatus::kRunning;
    save();
    if (!s_.quiet) {
      std::string params;
      for (const SearchParam* p : s_.space.searched()) params += " " + p->name + "=" + shown_value(p->name, t.params[p->name]);
      const std::string gpu = s_.devices.empty() ? "" : ", GPU " + env["CUDA_VISIBLE_DEVICES"];
      std::printf("trial %s %s:%s (%s/%s%s)\n", t.id.c_str(), resume ? "resumed" : "started", params.c_str(),
                  s_.out_dir.c_str(), t.dir().c_str(), gpu.c_str());
      std::fflush(stdout);
    }
    running_.push_back(std::move(r));
  }

  // Reads the trial's metrics.jsonl (replaced atomically by the trainer) past the evaluations already seen, and
  // lets the scheduler decide on each new one.
  void follow_metrics(Running& r) {
    TrialRecord& t = study_.trials[r.index];
    const std::string file = path(t.dir() + "/metrics.jsonl");
    if (!file_exists(file)) return;
    std::ifstream in(file);
    std::string line;
    long seen = 0;
    bool changed = false;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (++seen <= t.epochs) continue;
      const json record = parse_json_or_discarded(line);
      if (record.is_discarded() || !record.is_object()) break;  // never written so by the trainer; read it next time
      const json& v = record.contains(s_.metric) ? record[s_.metric] : json();
      const double value = v.is_number() ? v.get<double>() : NAN;
      t.add_evaluation(value, s_.lower_is_better);
      changed = true;
      if (!s_.quiet) {
        // Under --eval-steps the number of evaluations is not known ahead: the line says where the trial is.
        const std::string where =
            study_.iteration == "epoch"
                ? "epoch " + std::to_string(t.epochs) + "/" + shortest_double(epochs_of(t))
                : "evaluation " + std::to_string(t.epochs) + " (step " + std::to_string(record.value("step", 0L)) +
                      ", epoch " + std::to_string(record.value("epoch", 0L) + 1) + ")";
        std::printf("trial %s %s: %s %s\n", t.id.c_str(), where.c_str(), s_.metric.c_str(), metric_text(value).c_str());
      }
      // A trial the scheduler stopped reports no more, as in Ray (an epoch it finished before the signal landed
      // is in its record, not in the scheduler's).
      if (!asha_ || r.stop_requested) continue;
      study_.scheduler_events.push_back({t.id, t.epochs, value});
      const double milestone_cut = cutoff_before(t.epochs);
      if (asha_->on_result(t.id, t.epochs, value) == AshaScheduler::Decision::kStop) {
        r.stop_requested = true;
        r.process->stop();
        if (!s_.quiet) {
          std::printf("trial %s stopped by ASHA after epoch %ld: %s %s is not in the best 1/%g at that rung "
                      "(cutoff %s)\n",
                      t.id.c_str(), t.epochs, s_.metric.c_str(), metric_text(value).c_str(), s_.reduction_factor,
                      metric_text(milestone_cut).c_str());
        }
      }
    }
    if (changed) {
      std::fflush(stdout);
      save();
    }
  }

  // A parameter's value as the trial runs it: an integer flag's integer part (param_flags), else 4 significant
  // digits. study.json keeps the value the search proposed, which its models learn from.
  std::string shown_value(const std::string& name, const json& v) const {
    if (s_.integers.count(name) != 0 && v.is_number()) return std::to_string(static_cast<long long>(std::trunc(v.get<double>())));
    return short_value(v);
  }

  // The cutoff, as the metric, of the rung a result after `iteration` evaluations is compared at (for messages).
  double cutoff_before(long iteration) const {
    for (double m : asha_->milestones()) {
      if (static_cast<double>(iteration) >= m) {
        const double reward_cut = asha_->cutoff(m);
        return s_.lower_is_better ? -reward_cut : reward_cut;
      }
    }
    return NAN;
  }

  void finish_trial(Running& r) {
    TrialRecord& t = study_.trials[r.index];
    const int status = r.process->status();
    t.time_s = r.time_before + seconds_since(r.started);
    const bool exited = WIFEXITED(status);
    const int code = exited ? WEXITSTATUS(status) : -1;
    // Our stop signal can land after the training's end, when train no longer turns it into a checkpoint and exit
    // 75: then the process dies of it, having done what we asked.
    const bool our_sigterm =
        WIFSIGNALED(status) && WTERMSIG(status) == s_.trial_stop_signal && (r.stop_requested || stopping_);
    const bool all_epochs = static_cast<double>(t.epochs) >= epochs_of(t);
    if (exited && code == 0) {
      t.status = r.stop_requested && !all_epochs ? TrialStatus::kStopped : TrialStatus::kCompleted;
    } else if ((exited && code == 75) || our_sigterm) {
      t.status = !r.stop_requested ? TrialStatus::kInterrupted
                 : all_epochs      ? TrialStatus::kCompleted
                                   : TrialStatus::kStopped;
    } else {
      t.status = TrialStatus::kFailed;
      t.error = error_of(path(t.dir() + "/train.log"), status);
    }
    // A trial ASHA stopped is never trained on again: its optimizer state goes, as a finished trial's does.
    if (t.status == TrialStatus::kStopped && s_.drop_stopped_optimizer) drop_optimizer_state(path(t.dir()));
    const std::string state = path(t.dir() + "/last/trainer_state.json");
    if (file_exists(state)) {
      const json j = parse_json_or_discarded(read_file(state, "trainer state"));
      if (j.is_object()) t.mlflow_run_id = j.value("mlflow_run_id", "");
    }
    if (mlflow_ && t.finished() && std::isfinite(t.best_metric)) {
      mlflow_->log_metric("trial_best_" + s_.metric, t.best_metric, std::stol(t.id));
    }
    end_trial_runs(t);
    save();
    if (!s_.quiet) {
      std::string what = trial_status_name(t.status);
      if (t.status == TrialStatus::kFailed) what += " (" + t.error + "; log: " + path(t.dir() + "/train.log") + ")";
      const std::string late = t.status == TrialStatus::kCompleted && r.stop_requested
                                   ? " (its training ended before ASHA's stop took effect)"
                                   : "";
      const std::string at = std::isfinite(t.best_epoch) ? " at " + study_.iteration + " " +
                                                                 std::to_string(static_cast<long>(t.best_epoch) + 1)
                                                           : "";
      std::printf("trial %s %s after %s%s: best %s %s%s\n", t.id.c_str(), what.c_str(),
                  count_of(t.epochs, study_.iteration).c_str(), late.c_str(), s_.metric.c_str(),
                  metric_text(t.best_metric).c_str(), at.c_str());
      // The trial's own time, then the study's: both are durations, not a clock.
      std::printf("  took %s; %s (study: %s)\n", format_duration(t.time_s).c_str(), progress_text().c_str(),
                  format_duration(study_.time_s).c_str());
      std::fflush(stdout);
    }
  }

  // A trial that failed may have died before its training could end its MLflow run (killed by a signal or for
  // memory, or a full disk): the run would say RUNNING for ever. Its runs still RUNNING are ended FAILED here, when
  // the trial fails and again when the study is resumed. A store that cannot be written is said, not fatal: the
  // study's own results do not depend on it.
  // A finished trial's MLflow runs as Ray's MLflowLoggerCallback leaves them: a failed trial's runs still RUNNING
  // (a kill or a full disk kept it from ending them) end FAILED; a trial ASHA stopped, whose train ended its run
  // KILLED on the stop signal, is FINISHED, as Ray ends a trial its scheduler stopped.
  void end_trial_runs(const TrialRecord& t) {
    if (!mlflow_ || (t.status != TrialStatus::kFailed && t.status != TrialStatus::kStopped)) return;
    const bool failed = t.status == TrialStatus::kFailed;
    const MlflowStatus from = failed ? MlflowStatus::kRunning : MlflowStatus::kKilled;
    const MlflowStatus to = failed ? MlflowStatus::kFailed : MlflowStatus::kFinished;
    try {
      for (const std::string& id : find_mlflow_child_runs(s_.mlflow_dir, mlflow_->experiment_id(),
                                                          study_.mlflow_run_id, s_.run_name + "-trial-" + t.id)) {
        if (find_mlflow_run(s_.mlflow_dir, id, "").status != static_cast<int>(from)) continue;
        MlflowRun(s_.mlflow_dir, s_.experiment, "", id).set_status(to);
      }
    } catch (const Error& e) {
      std::fprintf(stderr, "bertrain: warning: tune: trial %s's MLflow run could not be ended %s: %s\n", t.id.c_str(),
                   failed ? "FAILED" : "FINISHED", e.what());
    }
  }

  std::string progress_text() const {
    long done = 0;
    for (const TrialRecord& t : study_.trials) done += t.finished() ? 1 : 0;
    const long best = study_.best_trial();
    std::string text = std::to_string(done) + " of " + std::to_string(s_.trials) + " trials done";
    if (best >= 0) {
      const TrialRecord& b = study_.trials[static_cast<std::size_t>(best)];
      text += "; best so far: trial " + b.id + ", " + s_.metric + " " + metric_text(b.best_metric);
    }
    return text;
  }

  void begin_stop() {
    stopping_ = true;
    if (!s_.quiet) {
      std::printf("tune: %s: stopping %s with their checkpoints\n", signal_name(stop_signal.load()).c_str(),
                  count_of(static_cast<long long>(running_.size()), "running trial").c_str());
      std::fflush(stdout);
    }
    for (Running& r : running_) r.process->stop();
  }

  void save() const { write_file_atomically(path("study.json"), study_.to_json().dump(2) + "\n"); }

  int finish_interrupted() {
    if (mlflow_) {
      mlflow_->log_artifact(path("study.json"), "study.json");
      mlflow_->set_status(MlflowStatus::kKilled);
    }
    print_table();
    std::fprintf(stderr, "bertrain: tune stopped by %s; continue with the same command and --resume\n",
                 signal_name(stop_signal.load()).c_str());
    return 75;
  }

  int finish_study() {
    const long best = study_.best_trial();
    if (best < 0) {
      if (mlflow_) mlflow_->set_status(MlflowStatus::kFailed);
      print_table();
      std::string first_error;
      for (const TrialRecord& t : study_.trials) {
        if (t.status == TrialStatus::kFailed) {
          first_error = "; trial " + t.id + ": " + t.error;
          break;
        }
      }
      BERTRAIN_FAIL("tune: no trial finished with a " << s_.metric << first_error << " (logs: " << s_.out_dir
                                                     << "/trials/*/train.log)");
    }
    const TrialRecord& b = study_.trials[static_cast<std::size_t>(best)];
    write_best(b);
    write_results(b);
    if (mlflow_) {
      mlflow_->log_metric("best_" + s_.metric, b.best_metric, 0);
      mlflow_->set_tag("best_trial", b.id);
      if (!b.mlflow_run_id.empty()) mlflow_->set_tag("best_trial_run_id", b.mlflow_run_id);
      mlflow_->log_artifact(path("study.json"), "study.json");
      mlflow_->log_artifact(path("results.json"), "results.json");
      mlflow_->set_status(MlflowStatus::kFinished);
    }
    print_table();
    std::printf("best: trial %s, %s %s at %s %ld; model in %s/best, results in %s/results.json, study in "
                "%s/study.json (%s)\n",
                b.id.c_str(), s_.metric.c_str(), metric_text(b.best_metric).c_str(), study_.iteration.c_str(),
                static_cast<long>(b.best_epoch) + 1, s_.out_dir.c_str(), s_.out_dir.c_str(), s_.out_dir.c_str(),
                format_duration(study_.time_s).c_str());
    return 0;
  }

  // DIR/best: the best trial's best model, its files linked (they are never rewritten in place) or copied.
  void write_best(const TrialRecord& b) const {
    const std::string source = path(b.dir() + "/best");
    BERTRAIN_CHECK(directory_exists(source), "tune: the best trial has no model: " << source << " is missing");
    replace_directory_atomically(path("best"), [&](const std::string& tmp) {
      std::vector<std::string> names;
      for (const auto& entry : std::filesystem::directory_iterator(source)) {
        BERTRAIN_CHECK(entry.is_regular_file(),
                       "tune: unexpected non-file " << entry.path().string() << " in " << source);
        link_or_copy_file(entry.path().string(), tmp + "/" + entry.path().filename().string());
      }
    });
  }

  // DIR/results.json: Made-With-ML's tune results (timestamp, run_id, params, metrics per epoch) and the study's.
  void write_results(const TrialRecord& b) const {
    char stamp[64];
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    std::strftime(stamp, sizeof(stamp), "%B %d, %Y %I:%M:%S %p", &local);
    json metrics = json::array();
    std::ifstream in(path(b.dir() + "/metrics.jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      const json m = parse_json_or_discarded(line);
      if (!m.is_object()) continue;
      json row = json::object();
      for (const char* key : {"epoch", "train_loss", "val_loss"}) row[key] = m.value(key, json());
      if (s_.metric != "val_loss") row[s_.metric] = m.value(s_.metric, json());
      metrics.push_back(row);
    }
    const json results{{"timestamp", stamp},
                       {"run_id", b.mlflow_run_id.empty() ? json() : json(b.mlflow_run_id)},
                       {"trial", b.id},
                       {"params", b.params},
                       {"metrics", metrics},
                       {"metric", s_.metric},
                       {"mode", s_.lower_is_better ? "min" : "max"},
                       {"best_metric", b.best_metric},
                       {"best_epoch", static_cast<long>(b.best_epoch)},
                       {"model", path("best")},
                       {"trial_dir", path(b.dir())},
                       {"study_run_id", study_.mlflow_run_id.empty() ? json() : json(study_.mlflow_run_id)},
                       {"trials", study_.trials.size()},
                       {"time_s", study_.time_s}};
    write_file_atomically(path("results.json"), results.dump(2) + "\n");
  }

  void print_header(std::size_t resuming) const {
    std::printf("tune: %s search over %s, %s, %d at a time, %s; %s %s; study in %s/study.json%s\n", s_.search.c_str(),
                count_of(static_cast<long long>(s_.space.searched().size()), "parameter").c_str(),
                count_of(s_.trials, "trial").c_str(), s_.parallel,
                s_.asha ? ("ASHA (grace period " + shortest_double(s_.grace_period) + ", reduction factor " +
                           shortest_double(s_.reduction_factor) + ", max " + shortest_double(s_.max_t) + " epochs)").c_str()
                        : "no early stopping",
                s_.lower_is_better ? "minimizing" : "maximizing", s_.metric.c_str(), s_.out_dir.c_str(),
                resuming > 0 ? ("; resuming " + count_of(static_cast<long long>(resuming), "trial")).c_str() : "");
    std::fflush(stdout);
  }

  // The trials best first: id, status, epochs (or evaluations), best metric, each searched parameter, time.
  void print_table() const {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> head{"trial", "status", study_.iteration + "s", "best " + s_.metric};
    for (const std::string& name : study_.searched) head.push_back(name);
    head.push_back("time");
    rows.push_back(head);
    for (std::size_t i : study_.ranking()) {
      const TrialRecord& t = study_.trials[i];
      std::vector<std::string> row{t.id, trial_status_name(t.status), std::to_string(t.epochs),
                                   metric_text(t.best_metric)};
      for (const std::string& name : study_.searched) {
        row.push_back(t.params.contains(name) ? shown_value(name, t.params[name]) : "");
      }
      row.push_back(format_duration(t.time_s));
      rows.push_back(row);
    }
    std::vector<std::size_t> width(head.size(), 0);
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows) {
      std::string line;
      for (std::size_t c = 0; c < row.size(); ++c) {
        line += row[c] + std::string(width[c] - row[c].size() + (c + 1 < row.size() ? 2 : 0), ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
  }

  const TuneSetup& s_;
  std::unique_ptr<ParamSearch> search_;
  std::unique_ptr<AshaScheduler> asha_ =
      s_.asha ? std::make_unique<AshaScheduler>(s_.grace_period, s_.max_t, s_.reduction_factor, s_.lower_is_better)
              : nullptr;
  Study study_;
  std::vector<Running> running_;
  std::unique_ptr<MlflowRun> mlflow_;
  bool stopping_ = false;
};

}  // namespace

std::vector<std::string> param_flags(const TuneSetup& setup, const std::string& name, const json& value) {
  if (setup.switches.count(name) != 0) {
    if (value.get<bool>()) return {"--" + name};
    return {};
  }
  if (setup.integers.count(name) != 0 && value.is_number()) {
    // An integer flag takes the value's integer part: a patience of 3.7 bad epochs acts as 3 in PyTorch's
    // ReduceLROnPlateau (it waits while bad epochs <= patience), the uniform(1, 10) Made-With-ML searches.
    return {"--" + name, std::to_string(static_cast<long long>(std::trunc(value.get<double>())))};
  }
  return {"--" + name, value_text(value)};
}

int run_study(const TuneSetup& setup) { return StudyRunner(setup).run(); }

}  // namespace bertrain
