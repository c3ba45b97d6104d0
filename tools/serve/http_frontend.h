// The HTTP side of `bertrain serve`, on HttpServer (tools/serve/http_server.h: HTTP/1.1, keep-alive, a fixed pool of
// answering threads): routes, the API key, limits (body size, connections, requests in flight), the access log and
// the metrics of every answer. Requests are parsed and tokenized on the answering threads; rows go to the ServeEngine.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tools/serve/cors.h"
#include "tools/serve/http_message.h"
#include "tools/serve/serve_engine.h"
#include "tools/serve/serve_metrics.h"

namespace bertrain {

class HttpServer;

struct HttpFrontendOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0: a free port chosen by the system (port() says which)
  std::size_t max_body_bytes = 2 << 20;  // larger bodies: 413
  int max_connections = 256;             // answering threads: whole requests answered at once
  int max_open_connections = 1 << 20;    // open connections; more wait in the listen backlog
  int max_concurrent_requests = 512;     // predictions and evaluations in flight; more: 429
  std::string api_key;                   // not empty: every endpoint but the probes (GET /, /healthz, ...) needs it
  std::string evaluate_root;             // empty: POST /evaluate/ is refused (403)
  CorsPolicy cors;                       // the origins whose pages may read answers (none: no CORS headers)
  double threshold = -1;                 // --threshold; < 0: not given
  std::string other_label = "other";
  std::string mlflow_run_id;             // the model's MLflow run ("" when none): GET /run_id/, evaluations
  std::string model_dir;                 // GET /run_id/ of a model that no MLflow run tracked
  int io_timeout_s = 5;                  // a request's arrival, an answer's delivery, a keep-alive idle connection
  bool quiet = false;                    // no access log
};

class HttpFrontend {
 public:
  HttpFrontend(HttpFrontendOptions options, ServeEngine* engine, ServeMetrics* metrics);
  ~HttpFrontend();

  // The paths the server answers (the label set of /metrics; any other path is "other").
  static std::vector<std::string> paths();

  // Binds --host:--port and starts the answering threads; throws Error naming the flags when that fails (in use,
  // no such address, more threads than the system starts).
  void bind();
  int port() const;
  // Accepts and answers until stop(), then returns once every request received on an accepted connection is answered.
  void listen();
  // Stops accepting; /readyz answers 503 from now on. Safe from any thread, idempotent.
  void stop();
  int in_flight() const { return in_flight_.load(); }
  // After stop(): requests still arriving are answered 503 at once instead of waited for (HttpServer::refuse_arriving);
  // returns how many have been so far.
  void refuse_arriving();
  int refused_arriving() const;

 private:
  class Handlers;
  // The routes' checks before a body is read (404, 405, 401, 415) and the answer to a whole request.
  bool accept_head(const HttpRequest& req, HttpResponse& res);
  void handle(HttpRequest& req, HttpResponse& res);

  HttpFrontendOptions options_;
  ServeEngine* engine_;
  ServeMetrics* metrics_;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<HttpServer> server_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> draining_{false};
  double last_limit_notice_ = -1e9;  // when the connection limit was last reported (the listening thread's)
};

}  // namespace bertrain
