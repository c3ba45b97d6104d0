// A stand-in for `bertrain train` in tune's tests, run as tune's --launcher (so it is called as
// `fake_trial BERTRAIN train FLAGS...`): a deterministic objective with a known optimum, written the way the
// trainer writes its run directory (metrics.jsonl replaced atomically after each epoch, last/trainer_state.json,
// best/, results.json at the end), that stops with exit 75 on SIGTERM and continues with --resume.
//   val_loss after epoch e (from 0) = (log10(lr) + 3.5)^2 + 4 (dropout - 0.35)^2 + 0.5 / (e + 1)
// so the best parameters are lr = 10^-3.5 and dropout = 0.35. SIGTERM or SIGUSR1 during an epoch ends it without its
// evaluation (the checkpoint of the epoch before stands), as the trainer's step checkpoint does. It also writes RUN_DIR/argv.txt (its flags, one per
// line) and CUDA_VISIBLE_DEVICES (RUN_DIR/cuda_visible_devices.txt), and appends "start <ns>" / "end <ns>" (CLOCK_REALTIME) to RUN_DIR/times.txt, and fails (exit 1, with
// bertrain's error line) when --weight-decay is above 0.5. FAKE_TRIAL_EPOCH_MS: how long an epoch takes (default 50).
// FAKE_TRIAL_IGNORE_STOP=1: a stop signal is noted but training goes on to its end and exits 0, as a trainer whose
// last epoch ended before the signal landed.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

volatile sig_atomic_t stop = 0;
void on_term(int sig) { stop = sig; }

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  std::filesystem::rename(tmp, path);
}

long long now_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGTERM, on_term);
  signal(SIGUSR1, on_term);  // as train: a stop signal (tune sends it through a --launcher)
  std::map<std::string, std::string> flags;
  std::string listed;
  // argv[1] is the bertrain binary, argv[2] "train".
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    listed += a + "\n";
    if (a.rfind("--", 0) != 0) continue;
    const bool has_value = i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0;
    flags[a.substr(2)] = has_value ? argv[i + 1] : "1";
  }
  const std::string out = flags["out"];
  std::filesystem::create_directories(out);
  write_atomically(out + "/argv.txt", listed);
  const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
  write_atomically(out + "/cuda_visible_devices.txt", devices != nullptr ? devices : "(unset)");
  std::ofstream(out + "/times.txt", std::ios::app) << "start " << now_ns() << "\n";
  const int epochs = flags.count("epochs") ? std::atoi(flags["epochs"].c_str()) : 10;
  const double lr = flags.count("lr") ? std::atof(flags["lr"].c_str()) : 1e-4;
  const double dropout = flags.count("dropout") ? std::atof(flags["dropout"].c_str()) : 0.5;
  if (flags.count("weight-decay") && std::atof(flags["weight-decay"].c_str()) > 0.5) {
    std::fprintf(stderr, "bertrain: error: fake failure: --weight-decay %s is too large\n", flags["weight-decay"].c_str());
    return 1;
  }
  const char* epoch_ms = std::getenv("FAKE_TRIAL_EPOCH_MS");
  const int sleep_ms = epoch_ms != nullptr ? std::atoi(epoch_ms) : 50;
  const char* ignore_stop = std::getenv("FAKE_TRIAL_IGNORE_STOP");
  const bool stoppable = ignore_stop == nullptr || std::string(ignore_stop) != "1";
  int done = 0;
  std::string metrics;
  if (flags.count("resume")) {
    std::ifstream state(out + "/last/trainer_state.json");
    std::string text((std::istreambuf_iterator<char>(state)), std::istreambuf_iterator<char>());
    done = std::atoi(text.substr(text.find(':') + 1).c_str());
    std::ifstream m(out + "/metrics.jsonl");
    for (std::string line; std::getline(m, line) && line.size() > 1;) metrics += line + "\n";
  }
  const double base = std::pow(std::log10(lr) + 3.5, 2) + 4 * std::pow(dropout - 0.35, 2);
  double best = INFINITY;
  for (int e = done; e < epochs; ++e) {
    for (int t = 0; t < sleep_ms && !(stop && stoppable); t += 5) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (stop && stoppable) {  // as the trainer: a checkpoint of the unfinished epoch, no evaluation
      std::ofstream(out + "/times.txt", std::ios::app) << "end " << now_ns() << "\n";
      std::fprintf(stderr, "bertrain: stopped by %s in epoch %d\n", stop == SIGUSR1 ? "SIGUSR1" : "SIGTERM", e + 1);
      return 75;
    }
    const double v = base + 0.5 / (e + 1);
    char line[512];  // five %.17g of up to 24 characters each, three ints and the keys
    std::snprintf(line, sizeof(line),
                  "{\"epoch\": %d, \"step\": %d, \"lr\": %.17g, \"train_loss\": %.17g, \"val_loss\": %.17g, "
                  "\"val_accuracy\": %.17g, \"val_f1\": %.17g, \"samples_per_s\": 1000, \"elapsed_s\": %d}\n",
                  e, e + 1, lr, v + 0.1, v, 1 / (1 + v), 1 / (1 + v), e + 1);
    metrics += line;
    std::filesystem::create_directories(out + "/last");
    write_atomically(out + "/last/trainer_state.json", "{\"epochs_done\": " + std::to_string(e + 1) + "}\n");
    if (v < best) {
      best = v;
      std::filesystem::create_directories(out + "/best");
      write_atomically(out + "/best/model.safetensors", "epoch " + std::to_string(e) + "\n");
      write_atomically(out + "/best/config.json", "{}\n");
    }
    write_atomically(out + "/metrics.jsonl", metrics);
  }
  write_atomically(out + "/results.json", "{\"metrics\": []}\n");
  std::ofstream(out + "/times.txt", std::ios::app) << "end " << now_ns() << "\n";
  // FAKE_TRIAL_LINGER_MS: the time a process takes to exit after its training (MLflow, freeing memory), during
  // which the trainer no longer catches its stop signals: one then ends the process.
  if (const char* linger = std::getenv("FAKE_TRIAL_LINGER_MS")) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    if (stop) raise(stop);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(linger)));
  }
  return 0;
}
