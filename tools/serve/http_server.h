// The HTTP/1.1 server under `bertrain serve`: POSIX sockets, a thread per connection from a fixed pool
// (tools/serve/connection_threads.h), requests read by HttpRequestReader. What it guarantees an operator:
//   - every length is bounded before it is buffered (request line, header lines, headers, body);
//   - a request must arrive whole within the I/O timeout (plus 1 s per 256 KiB of body), however slowly its bytes
//     trickle in, so a slow client holds a thread for seconds, not for ever;
//   - pipelined requests are answered in order;
//   - while other connections wait for a thread, a kept-alive connection is closed after its answer (announced), or
//     when it has been idle for half a second, so that a health probe is answered within about that however many
//     clients keep connections open;
//   - stop(): no new connections; every request received on an accepted connection (waiting for a thread or not,
//     arriving within half a second of its turn) is answered, with Connection: close; then listen() returns;
//   - refuse_arriving(), after stop(): requests still arriving are not waited for but answered 503 at once.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <limits>
#include <string>

#include "tools/serve/connection_threads.h"
#include "tools/serve/http_message.h"
#include "tools/serve/http_request_reader.h"

namespace bertrain {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: a free port the system chooses
  int max_connections = 256;
  int io_timeout_s = 5;  // a request's arrival, an answer's delivery, a kept-alive connection's idle time
  HttpLimits limits;
};

// What the server asks of the application.
struct HttpHooks {
  // From the request's head, before its body is read: false refuses it with `response` as filled in (the
  // connection is then closed if a body was announced, since it is not read).
  std::function<bool(const HttpRequest&, HttpResponse&)> accept_head;
  // Answers a whole request. HEAD requests are given as GET; the server leaves the body out.
  std::function<void(HttpRequest&, HttpResponse&)> handle;
  // Fills in the answer to a request the server refused itself (status 400, 408, 413, 414, 431, 501, 505).
  std::function<void(HttpResponse&, int status, const std::string& message)> error;
  // Called with every answer just before it is written (metrics), and just after (the access log); seconds since
  // the request's head arrived. The request may be partly read (an error's): method and path may be empty.
  std::function<void(const HttpRequest&, const HttpResponse&, double seconds)> before_write, after_write;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHooks hooks);
  ~HttpServer();

  // Binds host:port and starts the connection threads; Error naming the flags when that fails.
  void bind();
  int port() const { return port_; }
  // Accepts and answers until stop(); returns once every accepted connection is closed.
  void listen();
  // Safe from any thread (or a signal's waiter), idempotent.
  void stop();
  // After stop(), when the drain must end: a request whose bytes are still arriving (a slow or stalled client) is
  // answered 503 within a tenth of a second instead of being waited for, and idle connections close at once.
  // Requests already whole are answered as usual. Safe from any thread, idempotent.
  void refuse_arriving();
  // How many requests refuse_arriving() refused.
  int refused_arriving() const { return refused_arriving_.load(); }

 private:
  // Serves connection `fd` from `remote`: its requests in turn while it sends them, `in` the bytes already read of
  // the next, `idle_since` when it began waiting for that request (its accept, or its last answer).
  void serve_connection(int fd, const std::string& remote, double idle_since, std::string in);
  // Reads into `in` until `ready` says the buffer holds enough, the deadline passes, or the peer closes. 1: ready,
  // 0: closed by the peer (or given up, idle: waiting since `idle_since` >= 0 for a request that has not begun),
  // -1: deadline, -2: refused by refuse_arriving(), -3: `crowded_deadline` passed while other connections waited for
  // a thread, -4: idle, nothing arrived for kRequeueSeconds while other connections waited (the caller queues the
  // connection again behind them, so that one silent connection does not keep a thread from those that talk).
  template <class Ready>
  int read_until(int fd, std::string* in, double deadline, double idle_since, Ready ready,
                 double crowded_deadline = std::numeric_limits<double>::infinity());
  bool write_answer(int fd, const HttpRequest& request, HttpResponse& response, bool keep_alive, double started);

  HttpServerOptions options_;
  HttpHooks hooks_;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};  // stop() writes to [1] to end accept()'s poll
  int port_ = 0;
  std::unique_ptr<ConnectionThreads> threads_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> refusing_arriving_{false};
  std::atomic<int> refused_arriving_{0};
};

}  // namespace bertrain
