// The HTTP/1.1 server under `bertrain serve`: POSIX sockets and epoll. One thread (the one in listen()) holds every
// connection whose request has not arrived whole: it accepts them, reads what arrives, parses heads
// (HttpRequestReader), asks accept_head, reads bodies, enforces the deadlines and closes connections. A whole request
// goes to a pool of answering threads (tools/serve/connection_threads.h), which answers it and hands the connection
// back. So idle, silent and trickling connections cost no thread however many there are: a health probe is answered
// at once behind thousands of them. (Only once the bodies the listening thread holds reach what the threads would
// hold, --max-connections x the body limit, does a thread read a body itself, as every body was read before: the
// memory bodies take stays bounded.) Likewise an answer the client does not take at once (a large one read slowly,
// or not at all) is left to the listening thread to send as the client reads, so that a client that does not read
// holds no thread (while it holds no more answers than there are answering threads; past that a thread waits for the
// client, as every answer was written before). What it guarantees an operator:
//   - every length is bounded before it is buffered (request line, header lines, headers, body);
//   - a request must arrive whole within the I/O timeout (plus 1 s per 256 KiB of body), however slowly its bytes
//     trickle in (408 after that); a kept-alive connection idle that long is closed;
//   - pipelined requests are answered in order;
//   - stop(): no new connections; every request received on an accepted connection is answered, with
//     Connection: close; connections idle half a second are closed; then listen() returns;
//   - refuse_arriving(), after stop(): requests still arriving are not waited for but answered 503 at once;
//   - at most max_open_connections are open: further ones wait in the kernel's listen backlog until one closes
//     (rather than taking the descriptors the process needs for its own files, or failing accept() in a loop).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tools/serve/connection_threads.h"
#include "tools/serve/http_message.h"
#include "tools/serve/http_request_reader.h"

namespace bertrain {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: a free port the system chooses
  int answering_threads = 256;  // whole requests answered at once
  int max_open_connections = 1 << 20;  // accepted and not closed yet
  int io_timeout_s = 5;  // a request's arrival, an answer's delivery, a kept-alive connection's idle time
  HttpLimits limits;
};

// What the server asks of the application.
struct HttpHooks {
  // From the request's head, before its body is read: false refuses it with `response` as filled in (the
  // connection is then closed if a body was announced, since it is not read). Called on the listening thread (or an
  // answering one): it must be quick and safe from any thread.
  std::function<bool(const HttpRequest&, HttpResponse&)> accept_head;
  // Answers a whole request. HEAD requests are given as GET; the server leaves the body out.
  std::function<void(HttpRequest&, HttpResponse&)> handle;
  // Fills in the answer to a request the server refused itself (status 400, 408, 413, 414, 431, 501, 503, 505).
  std::function<void(HttpResponse&, int status, const std::string& message)> error;
  // Called with every answer just before it is written (metrics; it may add headers, as CORS's), and just after (the
  // access log); seconds since the request's first byte arrived. The request may be partly read (an error's): method
  // and path may be empty.
  std::function<void(const HttpRequest&, HttpResponse&, double seconds)> before_write;
  std::function<void(const HttpRequest&, const HttpResponse&, double seconds)> after_write;
  // Called on the listening thread each time max_open_connections are open and accepting pauses (optional).
  std::function<void(int open)> at_connection_limit;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHooks hooks);
  ~HttpServer();

  // Binds host:port and starts the answering threads; Error naming the flags when that fails.
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
  // Connections accepted and not closed yet: idle, arriving, or being answered.
  int open_connections() const { return open_.load(); }

 private:
  struct Connection;
  using ConnectionPtr = std::shared_ptr<Connection>;
  enum class Arrival { kHead, kTimedOut, kRefused };  // why a connection left the listening thread

  // The listening thread's side (listen()). A connection waiting for its request's head, or with an answer the
  // listening thread sends, is in held_ with its descriptor armed (one-shot) in the epoll set; a connection being
  // answered by a thread is in neither.
  void accept_waiting();
  // Takes the listening socket out of the epoll set at max_open_connections (so that it does not report on every
  // turn while nothing is accepted) and back once a connection has closed.
  void pace_accepting();
  void on_readable(const ConnectionPtr& c);
  void on_writable(const ConnectionPtr& c);  // sends more of the answer the listening thread took over
  void enforce_deadlines();
  // Reads what arrived as the request: its head (then asks accept_head), then, unless refused or past the budget,
  // its body. True when the request is for a thread: whole, refused, or with a body left to the thread to read
  // (also when the budget is reached while the body arrives: on_readable).
  bool request_ready(const ConnectionPtr& c);
  void dispatch(const ConnectionPtr& c, Arrival why);  // to an answering thread
  void uncount(const ConnectionPtr& c);               // its body's bytes out of buffered_bodies_
  void close_now(const ConnectionPtr& c);
  // Both sides.
  ConnectionPtr held(int fd);                      // the held connection on `fd`, or null
  void hold(const ConnectionPtr& c, bool first);   // into held_, armed (EPOLL_CTL_ADD the first time)
  bool arm(const Connection& c, int op);           // EPOLL_CTL_ADD or _MOD, one-shot: writable when sending, else readable
  void rearm(const ConnectionPtr& c);              // after it reported, still held
  void release(const ConnectionPtr& c);            // out of held_ (when it is there)
  void next_request(const ConnectionPtr& c);       // ready to read the connection's next request
  bool head_arrived(const ConnectionPtr& c);       // reads what arrived as a head: true when whole (or refused)
  // Bytes of bodies the listening thread may hold (then it reads no more of them; answering threads do): what the
  // answering threads could hold reading them.
  std::size_t body_budget() const;
  // When the request on `c` must have arrived whole: the I/O timeout after its first byte, plus its body's time
  // (1 s per 256 KiB declared) once its head says it has one.
  double arrival_deadline(const Connection& c) const;
  static bool wants_continue(const Connection& c);  // the client waits for 100 Continue before its body

  // An answering thread's side: the rest of the request (its body) and the answer, then pipelined requests that
  // have arrived; then the connection is held again, kept alive or closing, or with the rest of an answer to send.
  enum class Next { kKeepAlive, kClose, kSending };  // after an answer: the next request, closing, or still sending
  void answer(const ConnectionPtr& c, Arrival why);
  Next answer_one(const ConnectionPtr& c, Arrival why);
  void hand_back(const ConnectionPtr& c, bool keep_alive);
  // After an answer has all gone (or the client was too slow to take it, or went away: `sent` false), on either
  // side: kept alive, the next request (a pipelined one already here goes to a thread); else closing.
  void answer_sent(const ConnectionPtr& c, bool sent);
  // Reads into `in` until `ready` says the buffer holds enough. 1: ready, 0: the peer closed or failed, -1: the
  // deadline passed, -2: refused by refuse_arriving(). What already arrived is read before either gives up.
  template <class Ready>
  int read_until(int fd, std::string* in, double deadline, Ready ready);
  // Writes `response` to the request on `c` as far as the socket takes it at once. kSending: the rest is for the
  // listening thread (the thread hands the connection over); while it has as many answers to send as there are
  // answering threads, this thread waits for the client itself, as before, and never returns kSending.
  Next write_answer(const ConnectionPtr& c, HttpResponse& response, bool keep_alive);
  // Sends what is left of c's answer without waiting: 1 all sent, 0 the socket is full, -1 the client is gone.
  static int send_some(Connection& c);
  void answer_done(Connection& c);  // the after_write hook, and the answer's memory and its place given back
  void wake();

  HttpServerOptions options_;
  HttpHooks hooks_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: stop() and refuse_arriving() wake the listening thread
  int port_ = 0;
  std::unique_ptr<ConnectionThreads> threads_;
  std::mutex held_mutex_;
  std::unordered_map<int, ConnectionPtr> held_;  // connections waiting for a request head, or closing, by descriptor
  std::atomic<int> open_{0};                     // accepted and not closed yet, held or being answered
  bool accepting_ = true;                        // the listening socket is in the epoll set (only listen() touches it)
  std::size_t buffered_bodies_ = 0;              // bytes of bodies the listening thread is reading (only it)
  std::atomic<std::size_t> pending_answers_{0};  // answers left to the listening thread to send
  std::atomic<bool> stopping_{false};
  std::atomic<bool> refusing_arriving_{false};
  std::atomic<int> refused_arriving_{0};
};

}  // namespace bertrain
