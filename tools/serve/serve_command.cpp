// `bertrain serve`: the flags, and the server's life: bind, load and warm up the model, print one ready line,
// answer until SIGTERM, SIGINT, SIGUSR1 or SIGHUP, then stop accepting, answer everything already accepted (within
// --drain-timeout) and exit 0.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <limits>
#include <thread>

#include "core/build_config.h"
#include "core/error.h"
#include "core/files.h"
#include "engine/predictor.h"
#include "engine/stop_signals.h"
#include "engine/training_backend.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/data_flags.h"
#include "tools/model_source.h"
#include "tools/prediction_rule.h"
#include "tools/serve/http_frontend.h"
#include "tools/serve/serve_engine.h"
#include "tools/serve/serve_metrics.h"

namespace bertrain {

namespace {

// --max-batch-tokens auto.
constexpr int kGpuMaxBatchTokens = 16384;
constexpr int kCpuMaxBatchTokens = 4096;

constexpr int kMaxInt = std::numeric_limits<int>::max();
constexpr int kMaxConnections = 10000;
// A forward pass of more rows than this is no faster; the engine sizes its buffers for the largest batch.
constexpr int kMaxBatchRows = 65536;
// How long, after --drain-timeout, requests still arriving have to be answered 503 (HttpServer::refuse_arriving):
// a 0.1 s read slice, the answer's write, and up to 1 s of lingering close per connection, all in parallel.
constexpr std::chrono::seconds kRefuseArrivingGrace{2};

// Descriptors the server keeps for itself beside its connections (half the limit when that is smaller): its
// standard streams, epoll and wake descriptors, the files the engine and POST /evaluate/ open while it serves, the
// CUDA driver's.
constexpr long kReservedDescriptors = 128;

// How many descriptors the process may open, after raising its soft limit to the hard one, as a server should (Go's
// runtime does it for every program): the soft default, 1024, is low for the sake of select(), which nothing here
// uses. A limit that cannot be raised is kept.
long raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < limit.rlim_max) {
    // An infinite hard limit is capped by the kernel's fs.nr_open (1048576 by default): try that.
    for (const rlim_t want : {limit.rlim_max, static_cast<rlim_t>(1) << 20}) {
      rlimit raised{std::min(want, limit.rlim_max), limit.rlim_max};
      if (raised.rlim_cur > limit.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
        limit = raised;
        break;
      }
    }
  }
  return limit.rlim_cur == RLIM_INFINITY ? kMaxInt : static_cast<long>(std::min<rlim_t>(limit.rlim_cur, kMaxInt));
}

// --max-open-connections (auto, or a number within what `descriptors` leave beside the reserve).
int max_open_connections(const ArgParser& p, long descriptors) {
  const long reserved = std::min(kReservedDescriptors, descriptors / 2);
  const long most = std::max(1L, descriptors - reserved);
  if (p.get("max-open-connections") == "auto") return static_cast<int>(most);
  const int n = p.get_int_in("max-open-connections", 1, kMaxInt);
  if (n > most) {
    throw UsageError("serve: --max-open-connections " + std::to_string(n) + " is more than the descriptor limit allows " +
                     "(ulimit -n " + std::to_string(descriptors) + ", less " + std::to_string(reserved) +
                     " the server keeps for its own files): give at most " + std::to_string(most) +
                     ", or raise ulimit -n");
  }
  return n;
}

// The key, without the line end an editor leaves; an empty file is refused (it would accept an empty key).
std::string read_api_key(const std::string& path) {
  std::string key = read_file(path, "--api-key-file");
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) key.pop_back();
  BERTRAIN_CHECK(!key.empty(), "--api-key-file " << path << " is empty");
  BERTRAIN_CHECK(key.find_first_of("\r\n") == std::string::npos, "--api-key-file " << path << " holds more than one line");
  return key;
}

// The MLflow run of --run-id, or the run that trained --model RUN_DIR with --mlflow-dir; "" for other models.
std::string mlflow_run_id_of(const ModelSource& source) {
  if (source.run) return source.run->run_id;
  const std::string state = source.path + "/last/trainer_state.json";
  return file_exists(state) ? read_json_file(state).value("mlflow_run_id", "") : "";
}

// Waits for SIGTERM, SIGINT, SIGUSR1 or SIGHUP (blocked in every thread, so they arrive here) until `until` says stop waiting;
// returns the signal, or 0.
template <class Until>
int wait_for_signal(const sigset_t& signals, Until until) {
  const timespec tick{0, 100 * 1000 * 1000};
  while (!until()) {
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig > 0) return sig;
  }
  return 0;
}

}  // namespace

int run_serve(const std::vector<std::string>& args) {
#if !BERTRAIN_HAS_HTTP
  (void)args;
  throw Error("serve: this build has no HTTP server: it was configured with -DBERTRAIN_HTTP=OFF (configure again "
              "without it)");
#else
  ArgParser p("serve",
              "An HTTP server for a trained model: Made-With-ML's API (GET /, GET /run_id/, POST /predict/ with\n"
              "{\"title\", \"description\"}, POST /evaluate/ with {\"dataset\"}), bertrain's (POST /v1/predict with\n"
              "{\"texts\": [...]} or {\"rows\": [{column: value}]}, GET /v1/model) and text-embeddings-inference's\n"
              "(POST /predict, / or /invocations with {\"inputs\"}, GET /info, GET /health), GET /healthz, GET /readyz\n"
              "and Prometheus GET /metrics. Requests from every connection are batched by tokens into one forward pass\n"
              "(--max-batch-tokens, --max-batch-size, --max-wait-ms). Answers equal `bertrain predict`'s. SIGTERM /\n"
              "SIGINT / SIGUSR1 / SIGHUP: stop accepting, answer what was accepted, exit 0. Prints one line on stderr\n"
              "once ready, then an access log line per request.");
  p.usage("bertrain serve (--model DIR | --run-id ID) [options]");
  add_model_source_flags(p, "with --run-id: the MLflow file store of that run",
                         "with --run-id: the MLflow experiment of that run (default: any; MLflow run ids are unique)");
  p.option("host", "127.0.0.1", "address to listen on (0.0.0.0: every interface; only behind a firewall or proxy)")
      .value_name("ADDR");
  p.option("port", "8000", "TCP port (0: any free port, printed in the ready line)");
  p.option("device", "auto", "auto: CUDA when a device is visible").value_name("auto|cpu|cuda");
  p.option("precision", "fp32", "bf16: on CUDA only").value_name("fp32|bf16");
  p.option("threads", "0", "CPU engine threads (0: all cores, or OMP_NUM_THREADS)");
  p.option("max-batch-tokens", "auto",
           "real tokens (no padding) per forward pass, at least the model's max length; auto: " +
               std::to_string(kGpuMaxBatchTokens) + " on a GPU (TEI's default), " + std::to_string(kCpuMaxBatchTokens) +
               " on the CPU (a batch's activations stay in the caches, and a long batch delays every row in it)")
      .value_name("N");
  p.option("max-batch-size", "64", "rows per forward pass");
  p.option("max-wait-ms", "auto",
           "a batch runs at most this long after its oldest row arrived, full or not; auto: 5 on a GPU (a pass of "
           "one row costs almost what a full one does), 0 on the CPU (cost grows with the rows: waiting only adds "
           "latency; rows that arrive during a pass form the next batch anyway)")
      .value_name("MS");
  p.option("max-queue", "4096", "rows waiting for the engine; more: 503 with Retry-After").value_name("ROWS");
  p.option("max-concurrent-requests", "512", "prediction and evaluation requests in flight; more: 429");
  p.option("max-connections", "256",
           "whole requests answered at once, one thread each; more wait for one (open connections themselves, idle or "
           "still sending their requests, are held by one thread however many: --max-open-connections bounds them)");
  p.option("max-open-connections", "auto",
           "open connections, idle, sending a request or being answered; more wait in the listen backlog until one "
           "closes; auto: the descriptor limit (ulimit -n, which serve raises to its hard limit) less the " +
               std::to_string(kReservedDescriptors) + " (at most half) kept for the server's own files")
      .value_name("N");
  p.option("max-body-bytes", "2097152", "larger request bodies: 413").value_name("N");
  p.option("threshold", "",
           "single-label models: predict --other-label when the top probability is below RATE (default: none, except "
           "POST /predict/ with Made-With-ML's body: 0.9, as its serve.py); multi-label models: the probability a "
           "label needs (default 0.5)").value_name("RATE");
  p.option("other-label", "other", "single-label models: the prediction below --threshold").value_name("NAME");
  p.option("api-key-file", "", "require 'Authorization: Bearer KEY' (KEY: this file's one line) on every endpoint but "
                               "the probes (GET /, /healthz, /readyz, /health, /ping)").value_name("FILE");
  p.option("cors-allow-origin", "",
           "let pages of these origins in a browser read the answers (CORS): a comma-separated list such as "
           "https://app.example.com,http://localhost:3000, or * for any (default: none, no CORS headers)")
      .value_name("ORIGINS");
  p.option("evaluate-root", "", "allow POST /evaluate/ on dataset files inside DIR (refused otherwise: 403)")
      .value_name("DIR");
  p.option("drain-timeout", "30", "on SIGTERM, seconds to answer what was accepted before exiting 1 anyway")
      .value_name("SECONDS");
  add_no_clean_flag(p);
  p.flag("quiet", "no access log");
  p.epilog("exit status: 0 after SIGTERM / SIGINT / SIGUSR1 / SIGHUP with every accepted request answered; 1 when the engine failed or\n"
           "the drain timed out; 2 for a usage or input error (a bad flag, model or API key file, a port in use).\n");
  if (!p.parse(args)) return 0;
  if (!p.given("run-id") && (p.given("mlflow-dir") || p.given("experiment"))) {
    throw UsageError("serve: --mlflow-dir and --experiment say where --run-id's run is: give --run-id too");
  }

  ServeEngineOptions engine_options;
  engine_options.inference.device = p.get("device");
  engine_options.inference.precision = p.get("precision");
  engine_options.threads = p.get_threads();
  engine_options.no_clean = p.get_flag("no-clean");
  // auto needs to know the engine: resolving --device here also refuses a bad one before anything is loaded.
  const bool cuda = input_step([&] { return choose_backend(p.get("device"), p.get("precision"), 0).cuda; });
  engine_options.batching.max_batch_tokens = p.get("max-batch-tokens") == "auto" ? (cuda ? kGpuMaxBatchTokens : kCpuMaxBatchTokens)
                                                                                 : p.get_int_in("max-batch-tokens", 1, kMaxInt);
  engine_options.batching.max_batch_size = p.get_int_in("max-batch-size", 1, kMaxBatchRows);
  engine_options.batching.max_queue_rows = p.get_int_in("max-queue", 1, kMaxInt);
  const double max_wait_ms = p.get("max-wait-ms") == "auto" ? (cuda ? 5 : 0) : p.get_double("max-wait-ms");
  if (!(max_wait_ms >= 0 && max_wait_ms <= 60000)) throw UsageError("serve: --max-wait-ms must be in [0, 60000]");
  engine_options.batching.max_wait_s = max_wait_ms / 1000;

  HttpFrontendOptions http;
  http.host = p.get("host");
  http.port = p.get_int("port");
  if (http.port < 0 || http.port > 65535) throw UsageError("serve: --port must be in [0, 65535]");
  http.max_concurrent_requests = p.get_int_in("max-concurrent-requests", 1, kMaxInt);
  // One thread each, started before the ready line: tens of thousands would take the host's last process ids.
  http.max_connections = p.get_int_in("max-connections", 1, kMaxConnections);
  http.max_open_connections = max_open_connections(p, raise_descriptor_limit());
  http.max_body_bytes = static_cast<std::size_t>(p.get_int_in("max-body-bytes", 1, kMaxInt));
  http.other_label = p.get("other-label");
  http.quiet = p.get_flag("quiet");
  if (p.given("cors-allow-origin")) http.cors = CorsPolicy::parse(p.get("cors-allow-origin"));
  if (!p.get("threshold").empty()) {
    http.threshold = p.get_double("threshold");
    if (!(http.threshold >= 0 && http.threshold <= 1)) throw UsageError("serve: --threshold must be in [0, 1]");
  }
  const double drain_timeout = p.get_double("drain-timeout");
  if (!(drain_timeout > 0)) throw UsageError("serve: --drain-timeout must be > 0");

  // The model source, the key and the root are the user's input: what fails here exits 2.
  const ModelSource source = model_source(p);
  engine_options.model = source.path;
  input_step([&] {
    http.mlflow_run_id = mlflow_run_id_of(source);
    http.model_dir = resolve_model_dir(source.path);  // a missing or wrong model is refused before binding the port
    if (p.given("api-key-file")) http.api_key = read_api_key(p.get("api-key-file"));
    if (p.given("evaluate-root")) {
      BERTRAIN_CHECK(directory_exists(p.get("evaluate-root")), "--evaluate-root " << p.get("evaluate-root")
                                                                                  << " is not a directory");
      http.evaluate_root = p.get("evaluate-root");
    }
    return 0;
  });

  // Every thread started from here on inherits the blocked signals; only wait_for_signal takes them.
  sigset_t signals;
  sigemptyset(&signals);
  // SIGUSR1: what train and predict stop on (Slurm's warning before a preemption); SIGHUP: a closed terminal. Each
  // drains as SIGTERM does, rather than ending the server at once with requests unanswered. One ignored on entry
  // (`nohup`: SIGHUP) stays ignored: blocked, the kernel would queue it for sigwait instead of dropping it.
  for (const int sig : kStopSignals) {
    if (!ignored_on_entry(sig)) sigaddset(&signals, sig);
  }
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ServeMetrics metrics(HttpFrontend::paths());
  ServeEngine engine(engine_options, &metrics);
  HttpFrontend frontend(http, &engine, &metrics);
  input_step([&] {
    frontend.bind();
    return 0;
  });
  // /healthz answers while the model loads; /readyz and the predictions wait for it.
  std::promise<void> listening_done;
  std::future<void> drained = listening_done.get_future();
  std::thread listener([&] {
    frontend.listen();
    listening_done.set_value();
  });
  engine.start();
  int sig = wait_for_signal(signals, [&] { return engine.loading_finished(); });
  // An explicit --threshold on a single-label model must name a label to answer below it, as in predict (POST
  // /predict/'s own 0.9 answers Made-With-ML's "other", as its serve.py does).
  std::string refused = sig == 0 && !engine.ready() ? engine.load_error() : "";
  if (sig == 0 && engine.ready()) {
    try {
      PredictionRule rule;
      rule.multi_label = engine.predictor().multi_label();
      rule.threshold = http.threshold;
      rule.other = http.other_label;
      rule.check_other_label(engine.predictor().labels(), p.given("other-label"));
    } catch (const Error& e) {
      refused = e.what();
    }
  }
  if (!refused.empty()) {
    frontend.stop();
    listener.join();
    throw InputError(refused);
  }
  if (sig == 0) {
    const std::string note = unrecorded_cleaning_note(engine.predictor().config(), engine.predictor().model_dir(),
                                                      engine.dataset_options());
    if (!note.empty()) std::fprintf(stderr, "bertrain serve: note: %s\n", note.c_str());
    // Made-With-ML's rule answers a label this model may not have: said once, not discovered in the answers.
    if (!engine.predictor().multi_label() && !p.given("threshold") &&
        engine.predictor().labels().find(http.other_label) < 0) {
      std::fprintf(stderr,
                   "bertrain serve: note: POST /predict/ (Made-With-ML's API) answers '%s', which is not one of the "
                   "model's labels, when the top probability is below 0.9, as Made-With-ML's serve.py does; "
                   "--threshold sets the rule for every API\n",
                   http.other_label.c_str());
    }
    const RequestBatcherOptions& b = engine.batching();
    // An IPv6 address is bracketed in a URL (RFC 3986): http://[::1]:8000.
    const std::string host = http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host;
    std::fprintf(stderr, "bertrain serve: ready on http://%s:%d (%s on %s, %d labels; batches of up to %d tokens, %d rows, "
                         "%g ms wait; up to %d open connections)\n",
                 host.c_str(), frontend.port(), engine.predictor().model_dir().c_str(),
                 engine.predictor().engine_description().c_str(), static_cast<int>(engine.predictor().labels().size()),
                 b.max_batch_tokens, b.max_batch_size, b.max_wait_s * 1000, http.max_open_connections);
    std::fflush(stderr);
    sig = wait_for_signal(signals, [&] { return engine.failed(); });
  }
  if (sig != 0) {
    std::fprintf(stderr, "bertrain serve: %s: no new connections; answering the %d requests in flight\n", signal_name(sig).c_str(),
                 frontend.in_flight());
  }
  frontend.stop();
  bool drained_in_time = drained.wait_for(std::chrono::duration<double>(drain_timeout)) == std::future_status::ready;
  if (!drained_in_time && frontend.in_flight() == 0) {
    // Every accepted request is answered; what holds the drain is requests still arriving (a slow or stalled
    // client). They are answered 503 rather than waited for: within the server's 0.1 s read slices plus the
    // second a closing connection lingers for its client to read the answer.
    frontend.refuse_arriving();
    drained_in_time = drained.wait_for(kRefuseArrivingGrace) == std::future_status::ready;
    if (drained_in_time) {
      std::fprintf(stderr, "bertrain serve: answered %d requests still arriving after --drain-timeout %g s with 503\n",
                   frontend.refused_arriving(), drain_timeout);
    }
  }
  if (!drained_in_time) {
    const int unanswered = frontend.in_flight();
    if (unanswered > 0) {
      std::fprintf(stderr, "bertrain: error: serve: %d requests still unanswered after --drain-timeout %g s\n",
                   unanswered, drain_timeout);
    } else {
      // Every request answered, and arriving ones refused: what is left is answers a client has not taken yet.
      std::fprintf(stderr, "bertrain: error: serve: answers still being sent to clients that do not read them after "
                           "--drain-timeout %g s\n", drain_timeout);
    }
    std::fflush(stderr);
    std::_Exit(1);  // the answering threads are stuck in I/O: no orderly way to join them
  }
  listener.join();
  engine.stop();
  if (engine.failed()) throw Error(engine.failure());
  std::fprintf(stderr, "bertrain serve: stopped\n");
  return 0;
#endif
}

}  // namespace bertrain
