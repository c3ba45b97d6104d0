#include "tools/serve/http_frontend.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "core/ascii.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/timestamp.h"
#include "data/dataset.h"
#include "tools/evaluation.h"
#include "tools/serve/api_requests.h"
#include "tools/serve/http_server.h"

namespace bertrain {

namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kJson = "application/json";
// A request body from which on a connection thread gives its freed memory back to the system (malloc_trim).
constexpr std::size_t kTrimAfterBodyBytes = std::size_t{1} << 20;

// What load balancers and orchestrators probe (GET), never behind the API key: Made-With-ML's /, bertrain's
// /healthz and /readyz, TEI's /health and /ping.
bool is_health_path(const std::string& path) {
  return path == "/" || path == "/healthz" || path == "/readyz" || path == "/health" || path == "/ping";
}

void answer_error(HttpResponse& res, int status, const std::string& type, const std::string& message) {
  res.status = status;
  res.set_content(error_body(message, type), kJson);
}

// A request path as messages and the access log show it: bytes outside printable ASCII (a decoded %0A, invalid
// UTF-8) and the quote escaped as \xNN, so that a path can neither forge a log line nor break a JSON string.
std::string printable(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Equal keys take the same time whatever their contents, so that timing does not reveal a key byte by byte.
bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

// Counts a request in flight for as long as it lives.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>* count) : count_(count), value_(++*count) {}
  ~InFlight() { --*count_; }
  int value() const { return value_; }

 private:
  std::atomic<int>* count_;
  int value_;
};

}  // namespace

// The route handlers, with everything they share.
class HttpFrontend::Handlers {
 public:
  explicit Handlers(HttpFrontend* frontend) : f_(*frontend) {}

  // Every route: its answers to GET (and HEAD) and to POST. A known path with another method is 405 (with Allow), any
  // other path 404. HEAD is answered wherever GET is (the server leaves the body out).
  using Answer = void (Handlers::*)(const HttpRequest& req, HttpResponse& res);
  struct Route {
    Answer get = nullptr;
    Answer post = nullptr;
  };
  // A route's methods as Allow and Access-Control-Allow-Methods list them.
  static std::string methods(const Route& r) {
    return r.get == nullptr ? "POST" : r.post == nullptr ? "GET, HEAD" : "GET, HEAD, POST";
  }
  static const std::map<std::string, Route>& routes() {
    static const std::map<std::string, Route> table = {
        // Made-With-ML's health check on GET; text-embeddings-inference predicts on POST / (and /invocations,
        // SageMaker's) for a classifier.
        {"/", {&Handlers::root, &Handlers::predict_any}},
        {"/run_id/", {&Handlers::run_id_answer, nullptr}},
        {"/predict/", {nullptr, &Handlers::predict_any}},
        {"/predict", {nullptr, &Handlers::predict_any}},
        {"/invocations", {nullptr, &Handlers::predict_any}},
        {"/evaluate/", {nullptr, &Handlers::evaluate}},
        {"/v1/predict", {nullptr, &Handlers::predict_v1}},
        {"/v1/model", {&Handlers::model, nullptr}},
        {"/info", {&Handlers::tei_info, nullptr}},
        {"/healthz", {&Handlers::alive, nullptr}},
        {"/readyz", {&Handlers::ready, nullptr}},
        {"/health", {&Handlers::tei_health, nullptr}},
        {"/ping", {&Handlers::tei_health, nullptr}},
        {"/metrics", {&Handlers::metrics, nullptr}}};
    return table;
  }

  // Made-With-ML's answers to GET / and GET /run_id/, and the liveness probe's.
  void root(const HttpRequest&, HttpResponse& res) {
    res.set_content(R"({"message":"OK","status-code":200,"data":{}})", kJson);
  }
  void run_id_answer(const HttpRequest&, HttpResponse& res) {
    res.set_content(ordered_json{{"run_id", run_id()}}.dump(), kJson);
  }
  void alive(const HttpRequest&, HttpResponse& res) { res.set_content(R"({"status":"alive"})", kJson); }

  void predict_any(const HttpRequest& req, HttpResponse& res) { predict(req.body, res, false); }
  void predict_v1(const HttpRequest& req, HttpResponse& res) { predict(req.body, res, true); }

  void predict(const std::string& body, HttpResponse& res, bool v1) {
    guarded(res, [&] {
      const Predictor& predictor = ready_predictor();
      const DatasetOptions& data = f_.engine_->dataset_options();
      const PredictCall call = v1 ? parse_v1_predict_body(body, data.text_columns) : parse_predict_body(body);
      std::vector<Example> rows;
      std::vector<bool> truncated;
      long cut = 0;
      for (std::size_t i = 0; i < call.texts.size(); ++i) {
        bool was_cut = false;
        rows.push_back(call.keep_end ? encode_text_keeping_end(call.texts[i], predictor.tokenizer(), data, &was_cut)
                                     : encode_text(call.texts[i], predictor.tokenizer(), data, &was_cut));
        if (was_cut && !call.truncate) {  // TEI's "truncate": false; 422, its status for what fails validation
          throw ApiError(422, "validation",
                         (call.tei_list ? "inputs[" + std::to_string(i) + "]" : std::string("\"inputs\"")) +
                             " has more than the model's " + std::to_string(data.max_length) +
                             " tokens (leave \"truncate\" out, or send true, to cut it)");
        }
        truncated.push_back(was_cut);
        cut += was_cut;
      }
      const std::shared_ptr<PendingRows> pending = std::make_shared<PendingRows>(std::move(rows));
      run_rows(pending, res);
      f_.metrics_->add_truncated_rows(cut);
      PredictionRule rule;
      rule.multi_label = predictor.multi_label();
      rule.other = f_.options_.other_label;
      rule.threshold = f_.options_.threshold;
      // Made-With-ML's serve.py predicts "other" below 0.9 unless told another threshold.
      if (call.shape == AnswerShape::kMadeWithMl && rule.threshold < 0 && !rule.multi_label) rule.threshold = 0.9;
      res.set_content(predict_answer(call, pending->probabilities(), pending->logits(), truncated, predictor.labels(), rule),
                      kJson);
    });
  }

  void evaluate(const HttpRequest& req, HttpResponse& res) {
    guarded(res, [&] {
      if (f_.options_.evaluate_root.empty()) {
        throw ApiError(403, "forbidden", "POST /evaluate/ is disabled: start bertrain serve with --evaluate-root DIR");
      }
      const Predictor& predictor = ready_predictor();
      const std::string requested = parse_evaluate_body(req.body);
      const std::string path = dataset_under_root(f_.options_.evaluate_root, requested);
      DatasetOptions options = f_.engine_->dataset_options();
      options.read_labels = true;
      TextDataset data;
      try {
        data = load_text_dataset(path, predictor.tokenizer(), &predictor.labels(), options);
      } catch (const std::exception& e) {
        // Said as the client named the file, relative to the root: not the server's path to it, nor where in
        // bertrain it was found.
        std::string message = without_source_location(e.what());
        const auto replace_all = [&message](const std::string& from, const std::string& to) {
          for (std::size_t at = message.find(from); !from.empty() && at != std::string::npos; at = message.find(from, at + to.size())) {
            message.replace(at, from.size(), to);
          }
        };
        replace_all(path, requested);
        std::error_code ec;
        replace_all(std::filesystem::canonical(f_.options_.evaluate_root, ec).string() + "/", "");
        throw ApiError(400, "validation", message);
      }
      // Through the engine's queue a batch at a time, so that predictions of other clients go on between them.
      const std::size_t classes = static_cast<std::size_t>(predictor.labels().size());
      const std::size_t chunk = static_cast<std::size_t>(f_.engine_->batching().max_batch_size);
      std::vector<float> probs, logits;
      for (std::size_t at = 0; at < data.examples.size(); at += chunk) {
        const std::size_t end = std::min(at + chunk, data.examples.size());
        auto pending = std::make_shared<PendingRows>(
            std::vector<Example>(data.examples.begin() + static_cast<long>(at), data.examples.begin() + static_cast<long>(end)));
        run_rows(pending, res, /*wait_for_room=*/true);
        const long values = static_cast<long>((end - at) * classes);
        probs.insert(probs.end(), pending->probabilities().begin(), pending->probabilities().begin() + values);
        logits.insert(logits.end(), pending->logits().begin(), pending->logits().begin() + values);
      }
      f_.metrics_->add_truncated_rows(data.truncated);
      // Multi-label models predict a label at --threshold (0.5 when not given), as the predictions do.
      const double threshold = f_.options_.threshold >= 0 ? f_.options_.threshold : 0.5;
      const ordered_json out = evaluation_json(predictor, requested, data, probs, logits, threshold,
                                                  f_.options_.mlflow_run_id);
      res.set_content(ordered_json{{"results", out}}.dump(), kJson);
    });
  }

  void model(const HttpRequest&, HttpResponse& res) {
    guarded(res, [&] {
      const Predictor& p = ready_predictor();
      const DatasetOptions& data = f_.engine_->dataset_options();
      const RequestBatcherOptions& b = f_.engine_->batching();
      ordered_json out;
      out["model"] = p.model_dir();
      out["run_id"] = run_id();
      out["labels"] = p.labels().names();
      out["problem_type"] = p.multi_label() ? "multi_label_classification" : "single_label_classification";
      out["max_length"] = data.max_length;
      out["text_columns"] = data.text_columns;
      out["clean_text"] = data.clean;
      out["engine"] = p.engine_description();
      out["device"] = p.engine_description().rfind("cuda", 0) == 0 ? "cuda" : "cpu";
      out["precision"] = p.engine_description().find("bf16") != std::string::npos ? "bf16" : "fp32";
      out["parameters"] = p.parameter_count();
      out["layers"] = p.config().num_hidden_layers;
      out["hidden_size"] = p.config().hidden_size;
      out["max_batch_tokens"] = b.max_batch_tokens;
      out["max_batch_size"] = b.max_batch_size;
      out["max_wait_ms"] = b.max_wait_s * 1000;
      out["max_queue"] = b.max_queue_rows;
      // The threshold that applies: --threshold, else a multi-label model's 0.5; null: a single-label model's arg-max.
      const double threshold = f_.options_.threshold >= 0 ? f_.options_.threshold : p.multi_label() ? 0.5 : -1;
      out["threshold"] = threshold >= 0 ? ordered_json(threshold) : ordered_json(nullptr);
      out["version"] = build_version();
      res.set_content(out.dump(), kJson);
    });
  }

  // GET /run_id/: the MLflow run id when the model came from a tracked run, else the model directory.
  std::string run_id() const {
    return f_.options_.mlflow_run_id.empty() ? f_.options_.model_dir : f_.options_.mlflow_run_id;
  }

  void metrics(const HttpRequest&, HttpResponse& res) {
    ServeMetrics::Gauges g = f_.engine_->gauges();
    g.ready = g.ready && !f_.draining_.load();
    g.in_flight_requests = f_.in_flight_.load();
    g.open_connections = f_.server_->open_connections();
    g.max_open_connections = f_.options_.max_open_connections;
    const double now = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    res.set_content(f_.metrics_->render(g, now), "text/plain; version=0.0.4; charset=utf-8");
  }

  // Why the server does not serve predictions now ("" when it does): what both readiness probes answer 503 to.
  std::string unready() const {
    if (f_.draining_.load()) return "shutting down";
    if (f_.engine_->failed()) return f_.engine_->failure();
    if (!f_.engine_->ready()) return "loading the model";
    return "";
  }

  void ready(const HttpRequest&, HttpResponse& res) {
    if (const std::string why = unready(); !why.empty()) return answer_error(res, 503, "unhealthy", why);
    res.set_content(R"({"status":"ready"})", kJson);
  }

  // text-embeddings-inference's GET /health: 200 with no body once the model serves, else 503 {"error": "unhealthy"}.
  void tei_health(const HttpRequest&, HttpResponse& res) {
    if (!unready().empty()) answer_error(res, 503, "unhealthy", "unhealthy");
  }

  // text-embeddings-inference's GET /info, its Info struct with a classifier's labels (what its clients read).
  void tei_info(const HttpRequest&, HttpResponse& res) {
    guarded(res, [&] {
      const Predictor& p = ready_predictor();
      const RequestBatcherOptions& b = f_.engine_->batching();
      ordered_json id2label = ordered_json::object(), label2id = ordered_json::object();
      for (int i = 0; i < p.labels().size(); ++i) {
        id2label[std::to_string(i)] = p.labels().name(i);
        label2id[p.labels().name(i)] = i;
      }
      ordered_json out;
      out["model_id"] = run_id();
      out["model_sha"] = nullptr;
      out["model_dtype"] = p.engine_description().find("bf16") != std::string::npos ? "bfloat16" : "float32";
      out["served_model_name"] = run_id();
      out["model_type"] = {{"classifier", {{"id2label", id2label}, {"label2id", label2id}}}};
      out["max_concurrent_requests"] = f_.options_.max_concurrent_requests;
      out["max_input_length"] = f_.engine_->dataset_options().max_length;
      out["max_batch_tokens"] = b.max_batch_tokens;
      out["max_batch_requests"] = b.max_batch_size;
      out["max_client_batch_size"] = b.max_queue_rows;  // the most rows one request may bring
      out["auto_truncate"] = true;
      out["tokenization_workers"] = f_.options_.max_connections;  // requests are tokenized on the answering threads
      out["version"] = build_version();
      out["sha"] = nullptr;
      out["docker_label"] = nullptr;
      res.set_content(out.dump(), kJson);
    });
  }

 private:
  // Runs `body`, answering an ApiError with its status and any other exception with 500; requests over
  // --max-concurrent-requests are refused with 429 first.
  template <class Body>
  void guarded(HttpResponse& res, Body&& body) {
    const InFlight in_flight(&f_.in_flight_);
    try {
      if (in_flight.value() > f_.options_.max_concurrent_requests) {
        res.set_header("Retry-After", "1");
        throw ApiError(429, "overloaded",
                       "more than --max-concurrent-requests " + std::to_string(f_.options_.max_concurrent_requests) +
                           " requests in flight; retry later");
      }
      body();
    } catch (const ApiError& e) {
      answer_error(res, e.status(), e.type(), e.what());
    } catch (const std::exception& e) {
      answer_error(res, 500, "backend", without_source_location(e.what()));
    }
  }

  const Predictor& ready_predictor() {
    if (f_.engine_->failed()) throw ApiError(503, "unhealthy", f_.engine_->failure());
    if (!f_.engine_->ready()) throw ApiError(503, "unhealthy", "the model is still loading; retry later");
    return f_.engine_->predictor();
  }

  // Queues `pending` and waits for its rows. Queue full: 503 with Retry-After, unless `wait_for_room` (an
  // evaluation's next batch waits its turn instead).
  void run_rows(const std::shared_ptr<PendingRows>& pending, HttpResponse& res, bool wait_for_room = false) {
    for (;;) {
      switch (f_.engine_->submit(pending)) {
        case ServeEngine::Admission::kAccepted:
          if (!pending->wait()) throw ApiError(500, "backend", pending->error());
          if (const long bad = first_non_finite_row(pending->logits(), f_.engine_->predictor().labels().size());
              bad >= 0) {
            throw ApiError(500, "backend", non_finite_scores(f_.engine_->predictor().model_dir(),
                                                             "text " + std::to_string(bad) + " of the request"));
          }
          return;
        case ServeEngine::Admission::kQueueFull:
          if (wait_for_room && !f_.draining_.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            continue;
          }
          res.set_header("Retry-After", "1");
          throw ApiError(503, "overloaded", "the queue is full (--max-queue " +
                                                std::to_string(f_.engine_->batching().max_queue_rows) + " rows); retry later");
        case ServeEngine::Admission::kTooManyRows:
          throw ApiError(413, "validation", "the request has " + std::to_string(pending->rows().size()) +
                                                " rows, more than the queue holds (--max-queue " +
                                                std::to_string(f_.engine_->batching().max_queue_rows) + ")");
        case ServeEngine::Admission::kRowTooLong:
          throw ApiError(500, "backend", "a row is longer than --max-batch-tokens");
        case ServeEngine::Admission::kNotReady:
          throw ApiError(503, "unhealthy", "the model is still loading; retry later");
        case ServeEngine::Admission::kStopping:
          res.set_header("Retry-After", "1");
          throw ApiError(503, "unhealthy", "the server is shutting down");
      }
    }
  }

  HttpFrontend& f_;
};

std::vector<std::string> HttpFrontend::paths() {
  std::vector<std::string> paths;
  for (const auto& [path, route] : Handlers::routes()) paths.push_back(path);
  return paths;
}

HttpFrontend::HttpFrontend(HttpFrontendOptions options, ServeEngine* engine, ServeMetrics* metrics)
    : options_(std::move(options)), engine_(engine), metrics_(metrics), handlers_(std::make_unique<Handlers>(this)) {
  HttpServerOptions server;
  server.host = options_.host;
  server.port = options_.port;
  server.answering_threads = options_.max_connections;
  server.max_open_connections = options_.max_open_connections;
  server.io_timeout_s = options_.io_timeout_s;
  server.limits.max_body = options_.max_body_bytes;
  HttpHooks hooks;
  hooks.accept_head = [this](const HttpRequest& req, HttpResponse& res) { return accept_head(req, res); };
  hooks.handle = [this](HttpRequest& req, HttpResponse& res) { handle(req, res); };
  // The server's own refusals (malformed, too long, too slow, too large) get a JSON body too.
  hooks.error = [](HttpResponse& res, int status, const std::string& message) {
    answer_error(res, status, status == 413 || status == 431 || status == 414 ? "validation" : "client", message);
  };
  // Counted just before the answer is written, so that a client that reads /metrics after its answer finds it there.
  hooks.before_write = [this](const HttpRequest& req, HttpResponse& res, double seconds) {
    options_.cors.add_headers(req, res);  // every answer, errors too: a page can read why it was refused
    metrics_->record_request(req.path, req.method, res.status, seconds);
  };
  hooks.after_write = [this](const HttpRequest& req, const HttpResponse& res, double seconds) {
    // What a large request took (its text decoded, cleaned, tokenized on this thread) goes back to the system:
    // glibc keeps freed memory in the thread's arena, and 300 concurrent 2 MiB texts left a tiny model's server at
    // 2.3 GB for good. A trim costs about a millisecond, after requests this size only.
    if (req.body.size() >= kTrimAfterBodyBytes) ::malloc_trim(0);
    if (options_.quiet) return;
    std::fprintf(stderr, "%s %s \"%s %s\" %d %zu %.1fms\n", iso_timestamp_now().c_str(), req.remote_addr.c_str(),
                 req.method.empty() ? "-" : printable(req.method).c_str(),
                 req.path.empty() ? "-" : printable(req.path).c_str(), res.status, res.body.size(), seconds * 1000);
  };
  // Said even with --quiet (it is no access log), at most once a minute: a server at its limit pauses often.
  hooks.at_connection_limit = [this](int open) {
    const double now = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    if (now - last_limit_notice_ < 60) return;
    last_limit_notice_ = now;
    std::fprintf(stderr, "%s bertrain serve: %d connections open (--max-open-connections): new ones wait in the listen "
                         "backlog until one closes\n",
                 iso_timestamp_now().c_str(), open);
  };
  server_ = std::make_unique<HttpServer>(std::move(server), std::move(hooks));
}

HttpFrontend::~HttpFrontend() = default;

bool HttpFrontend::accept_head(const HttpRequest& req, HttpResponse& res) {
  const auto& routes = Handlers::routes();
  const auto route = routes.find(req.path);
  if (route == routes.end()) {
    // Made-With-ML's paths end in a slash; without it, FastAPI redirects there (307 keeps the method and body). A
    // browser fails a preflight that redirects: that one is answered for the path with the slash, which the request
    // itself then follows.
    if (const auto slashed = routes.find(req.path + "/"); slashed != routes.end()) {
      if (options_.cors.answer_preflight(req, Handlers::methods(slashed->second), res)) return false;
      const std::size_t query = req.target.find('?');
      res.set_header("Location", req.path + "/" + (query == std::string::npos ? "" : req.target.substr(query)));
      answer_error(res, 307, "redirect", "the path is " + req.path + "/");
      return false;
    }
    answer_error(res, 404, "not_found", "no such path: " + printable(req.path));
    return false;
  }
  const Handlers::Route& r = route->second;
  const std::string allow = Handlers::methods(r);
  // A browser's preflight carries no API key: answered before the key is asked for.
  if (options_.cors.answer_preflight(req, allow, res)) return false;
  const bool reading = req.method == "GET" || req.method == "HEAD";
  if (!((reading && r.get != nullptr) || (req.method == "POST" && r.post != nullptr))) {
    const std::string use = r.get == nullptr ? "POST" : r.post == nullptr ? "GET" : "GET or POST";
    res.set_header("Allow", allow);
    answer_error(res, 405, "method_not_allowed", printable(req.method) + " " + req.path + ": use " + use);
    return false;
  }
  if (!options_.api_key.empty() && !(reading && is_health_path(req.path))) {
    const std::string auth = req.header("Authorization");
    // The scheme's name is case-insensitive (RFC 9110 11.1): "bearer KEY" is as good as "Bearer KEY".
    if (ascii_lower(auth.substr(0, 7)) != "bearer " || !constant_time_equal(auth.substr(7), options_.api_key)) {
      res.set_header("WWW-Authenticate", "Bearer");
      answer_error(res, 401, "unauthorized", auth.empty() ? "missing Authorization: Bearer KEY" : "wrong API key");
      return false;
    }
  }
  // Bodies are JSON as sent: a compressed one would be read as invalid JSON.
  const std::string encoding = req.header("Content-Encoding");
  if (!encoding.empty() && encoding != "identity") {
    answer_error(res, 415, "validation", "Content-Encoding " + printable(encoding) + " is not accepted: send the body uncompressed");
    return false;
  }
  return true;
}

void HttpFrontend::handle(HttpRequest& req, HttpResponse& res) {
  try {
    // accept_head let only the routes' paths through.
    const Handlers::Route& route = Handlers::routes().at(req.path);
    (handlers_.get()->*(req.method == "POST" ? route.post : route.get))(req, res);
  } catch (const std::exception&) {
    // An exception escaping a handler (the handlers answer their own): a JSON 500, the connection lives on.
    res = HttpResponse{};
    answer_error(res, 500, "backend", "internal error");
  }
}

void HttpFrontend::bind() { server_->bind(); }

int HttpFrontend::port() const { return server_->port(); }

void HttpFrontend::listen() { server_->listen(); }

void HttpFrontend::stop() {
  draining_ = true;
  server_->stop();
}

void HttpFrontend::refuse_arriving() { server_->refuse_arriving(); }

int HttpFrontend::refused_arriving() const { return server_->refused_arriving(); }

}  // namespace bertrain
