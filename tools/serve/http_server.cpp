#include "tools/serve/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"

namespace bertrain {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Milliseconds to wait in poll(): until `deadline`, at most `slice_s` (so that stop() is noticed), at least 0.
int poll_ms(double deadline, double slice_s) {
  return static_cast<int>(std::clamp(deadline - now_s(), 0.0, slice_s) * 1000.0 + 0.5);
}

// How long, once the server stops, a connection with no request in it is kept: long enough that a client in the
// middle of a conversation sends its next request first (closing at once would lose it).
constexpr double kIdleAfterStopSeconds = 0.5;

// How often the listening thread looks for connections past their deadlines: the resolution of every timeout.
constexpr double kDeadlineCheckSeconds = 0.05;

// A closed connection's side that the client may still be sending on is read and dropped for this long at most,
// or until the client closes it, or this many bytes: see hand_back.
constexpr double kLingerSeconds = 1.0;
constexpr std::size_t kLingerBytes = 1u << 20;

// Slow bodies get this much time beyond the I/O timeout: a 2 MiB body over a 1 Mbit/s link still arrives, a client
// that sends a byte now and then does not hold its thread for ever.
constexpr double kBodyBytesPerSecond = 256.0 * 1024;

// What a client that sent `Expect: 100-continue` waits for before it sends the body.
constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";

// What one read from a connection takes at most: heads are short, and a connection that sends much is read in
// turns with the others.
constexpr std::size_t kReadBytes = 16 * 1024;

std::string peer_address(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "-";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
  }
  return text;
}

// Writes all of `data` before `deadline`; false when the peer is gone or too slow to take it.
bool send_all(int fd, const std::string& data, double deadline) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (now_s() >= deadline) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, poll_ms(deadline, 1.0));
  }
  return true;
}

}  // namespace

// One accepted connection. It belongs to the listening thread while it waits for a request head or is closing (in
// held_), or to one answering thread while its request is answered; it passes to a thread through the pool's queue
// and back through held_ (both under a mutex), so that only one of them touches it at a time.
struct HttpServer::Connection {
  Connection(int fd, std::string remote, HttpLimits limits) : fd(fd), remote(std::move(remote)), reader(limits) {}
  int fd;
  std::string remote;
  std::string in;  // bytes received and not yet read as requests (pipelined ones, a body's first bytes)
  HttpRequestReader reader;
  HttpRequest request;  // the request being read
  HttpRequestReader::Status head = HttpRequestReader::Status::kNeedMore;  // what reading its head gave
  HttpRequestReader::Status body = HttpRequestReader::Status::kNeedMore;  // and its body (kNeedMore also: none)
  bool head_checked = false;  // accept_head asked: `accepted`, and `refusal` when it said no
  bool accepted = false;
  HttpResponse refusal;
  bool reading_body = false;  // the listening thread reads its body
  bool continued = false;     // 100 Continue sent
  double idle_since = 0;    // when it began waiting for its next request: its accept, or its last answer
  double started = -1;      // when the current request's first byte arrived; -1: none has yet
  std::size_t counted = 0;  // its bytes in buffered_bodies_ (read by the listening thread, not yet answered)
  double linger_until = -1; // >= 0: being closed (our side shut), what still arrives dropped until then
  std::size_t dropped = 0;  // bytes dropped while lingering
  // The answer being written: its head, then the response's body (none for HEAD); who sends it owns the connection.
  std::string answer_head;
  HttpResponse answer;
  bool answer_has_body = false;
  std::size_t answer_sent = 0;   // bytes of head and body sent
  bool answer_keep_alive = false;
  double answer_deadline = 0;    // the client must have taken it whole by then
  bool sending = false;          // the listening thread sends the rest (armed for writing; counted in pending_answers_)
  std::size_t answer_size() const { return answer_head.size() + (answer_has_body ? answer.body.size() : 0); }
};

HttpServer::HttpServer(HttpServerOptions options, HttpHooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {}

HttpServer::~HttpServer() {
  threads_.reset();  // joins the answering threads (after listen() they have ended already)
  for (const auto& [fd, c] : held_) ::close(fd);
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void HttpServer::bind() {
  const std::string where = "--host " + options_.host + " --port " + std::to_string(options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &found);
  BERTRAIN_CHECK(resolved == 0, "cannot listen on " << where << " (not an address of this machine: "
                                                    << gai_strerror(resolved) << ")");
  int error = 0;
  for (const addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    // Non-blocking: the listening thread accepts until none is waiting, and never waits in accept().
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR (a restarted server binds at once) but not SO_REUSEPORT: a second server on a port in use is an
    // error, not a silent sharer of its connections.
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      error = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  BERTRAIN_CHECK(listen_fd_ >= 0, "cannot listen on " << where << " ("
                                                      << (error == EADDRINUSE ? "in use" : std::strerror(error))
                                                      << ", or not an address of this machine)");
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                            : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  BERTRAIN_CHECK(epoll_fd_ >= 0 && wake_fd_ >= 0, "cannot listen on " << where << ": " << std::strerror(errno));
  for (int fd : {listen_fd_, wake_fd_}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    BERTRAIN_CHECK(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e) == 0,
                   "cannot listen on " << where << ": " << std::strerror(errno));
  }
  threads_ = std::make_unique<ConnectionThreads>(options_.answering_threads);
}

void HttpServer::listen() {
  BERTRAIN_CHECK(threads_ != nullptr, "HttpServer::listen: call bind() once first");
  epoll_event events[256];
  double next_check = 0;
  for (;;) {
    if (stopping_ && listen_fd_ >= 0) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
      ::close(listen_fd_);
      listen_fd_ = -1;
    }
    if (now_s() >= next_check) {
      enforce_deadlines();
      next_check = now_s() + kDeadlineCheckSeconds;
    }
    if (stopping_ && open_ == 0) break;
    if (listen_fd_ >= 0) pace_accepting();
    // (It fails only when interrupted: the descriptors and the buffer are this object's own.)
    const int n = ::epoll_wait(epoll_fd_, events, 256, static_cast<int>(kDeadlineCheckSeconds * 1000));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        accept_waiting();
      } else if (fd == wake_fd_) {
        std::uint64_t count = 0;
        [[maybe_unused]] const ssize_t got = ::read(wake_fd_, &count, sizeof count);
      } else if (const ConnectionPtr c = held(fd)) {  // not held: being answered (an event from before it left)
        if (c->sending) {
          on_writable(c);
        } else {
          on_readable(c);
        }
      }
    }
  }
  threads_->shutdown();
}

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  wake();
}

void HttpServer::refuse_arriving() {
  refusing_arriving_ = true;
  wake();
}

void HttpServer::wake() {
  if (wake_fd_ < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void HttpServer::accept_waiting() {
  // 256 at most, then the connections already held get their turn.
  for (int accepted = 0; accepted < 256 && open_ < options_.max_open_connections; ++accepted) {
    sockaddr_storage addr{};
    socklen_t length = sizeof addr;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: the connection stays in the backlog; try again shortly.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    const int on = 1;  // answers are small: Nagle's delay would add tens of milliseconds to each
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    ++open_;
    auto c = std::make_shared<Connection>(fd, peer_address(addr), options_.limits);
    c->idle_since = now_s();
    next_request(c);
    hold(c, true);
  }
}

void HttpServer::pace_accepting() {
  const bool room = open_ < options_.max_open_connections;
  if (room == accepting_) return;
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = listen_fd_;
  if (::epoll_ctl(epoll_fd_, room ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listen_fd_, &e) != 0) return;  // tried next turn
  accepting_ = room;
  if (!room && hooks_.at_connection_limit) hooks_.at_connection_limit(open_.load());
}

HttpServer::ConnectionPtr HttpServer::held(int fd) {
  const std::lock_guard<std::mutex> lock(held_mutex_);
  const auto found = held_.find(fd);
  return found == held_.end() ? nullptr : found->second;
}

void HttpServer::hold(const ConnectionPtr& c, bool first) {
  bool armed = false;
  {
    // Held and armed at once: enforce_deadlines, which may close a held connection, never sees one half done.
    const std::lock_guard<std::mutex> lock(held_mutex_);
    held_[c->fd] = c;
    armed = arm(*c, first ? EPOLL_CTL_ADD : EPOLL_CTL_MOD);
    if (!armed) held_.erase(c->fd);
  }
  if (!armed) {  // out of kernel memory: the connection is given up
    if (c->sending) answer_done(*c);
    ::close(c->fd);
    --open_;
  }
}

bool HttpServer::arm(const Connection& c, int op) {
  // One-shot: once it reports, the descriptor says nothing more until armed again, so that a connection that has
  // gone to an answering thread (which reads it itself) wakes nobody.
  epoll_event e{};
  e.events = (c.sending ? EPOLLOUT : EPOLLIN) | EPOLLONESHOT;
  e.data.fd = c.fd;
  return ::epoll_ctl(epoll_fd_, op, c.fd, &e) == 0;
}

void HttpServer::rearm(const ConnectionPtr& c) {
  if (!arm(*c, EPOLL_CTL_MOD)) close_now(c);
}

void HttpServer::release(const ConnectionPtr& c) {
  const std::lock_guard<std::mutex> lock(held_mutex_);
  const auto found = held_.find(c->fd);
  if (found != held_.end() && found->second == c) held_.erase(found);
}

void HttpServer::next_request(const ConnectionPtr& c) {
  c->reader.reset();
  c->request = HttpRequest{};
  c->request.remote_addr = c->remote;
  c->head = c->body = HttpRequestReader::Status::kNeedMore;
  c->head_checked = c->accepted = c->reading_body = c->continued = false;
  c->refusal = HttpResponse{};
  c->started = c->in.empty() ? -1 : now_s();  // a pipelined request has begun
  if (c->in.empty() && c->in.capacity() > kReadBytes) std::string().swap(c->in);  // a large body's buffer
}

bool HttpServer::head_arrived(const ConnectionPtr& c) {
  if (c->in.empty()) return false;
  c->head = c->reader.read_head(&c->in, &c->request);
  return c->head != HttpRequestReader::Status::kNeedMore;
}

void HttpServer::on_readable(const ConnectionPtr& c) {
  char buffer[kReadBytes];
  const ssize_t n = ::recv(c->fd, buffer, sizeof buffer, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return rearm(c);
  if (c->linger_until >= 0) {  // dropped, until the client closes its side or has sent too much
    if (n > 0) c->dropped += static_cast<std::size_t>(n);
    if (n <= 0 || c->dropped >= kLingerBytes) return close_now(c);
    return rearm(c);
  }
  if (n <= 0) return close_now(c);  // the client went away (before a request, or in one: nothing to answer)
  if (c->reading_body && buffered_bodies_ >= body_budget()) {
    // The bodies held here have reached the budget: an answering thread reads the rest of this one (what was just
    // received included), as it would have read it all before the listening thread read bodies.
    c->in.append(buffer, static_cast<std::size_t>(n));
    release(c);
    return dispatch(c, Arrival::kHead);
  }
  if (c->started < 0) c->started = now_s();
  c->in.append(buffer, static_cast<std::size_t>(n));
  if (!request_ready(c)) return rearm(c);
  release(c);
  dispatch(c, Arrival::kHead);
}

void HttpServer::on_writable(const ConnectionPtr& c) {
  const int sent = send_some(*c);
  if (sent == 0) return rearm(c);
  answer_sent(c, sent == 1);
}

bool HttpServer::request_ready(const ConnectionPtr& c) {
  if (c->head == HttpRequestReader::Status::kNeedMore) {
    if (!head_arrived(c)) return false;
    if (c->head == HttpRequestReader::Status::kError) return true;
    c->head_checked = true;
    c->accepted = hooks_.accept_head(c->request, c->refusal);
    // Refused (its body is not read), bodiless, or more body bytes buffered here than the answering threads would
    // hold: the thread takes it as it is (and reads the body itself, the last case).
    if (!c->accepted || !c->reader.has_body() || buffered_bodies_ >= body_budget()) return true;
    c->reading_body = true;
    if (wants_continue(*c)) {  // (into an empty socket buffer: it goes whole)
      [[maybe_unused]] const ssize_t sent = ::send(c->fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      c->continued = true;
    }
  }
  c->body = c->reader.read_body(&c->in, &c->request);
  const std::size_t counted = c->request.body.size() + c->in.size();
  buffered_bodies_ = buffered_bodies_ - c->counted + counted;
  c->counted = counted;
  return c->body != HttpRequestReader::Status::kNeedMore;
}

void HttpServer::enforce_deadlines() {
  const double now = now_s();
  const double timeout = options_.io_timeout_s;
  std::vector<ConnectionPtr> closed, timed_out, refused;
  {
    const std::lock_guard<std::mutex> lock(held_mutex_);
    for (const auto& [fd, c] : held_) {
      if (c->sending) {  // an answer not taken in time: the client is too slow, or gone
        if (now >= c->answer_deadline) closed.push_back(c);
      } else if (c->linger_until >= 0) {
        if (now >= c->linger_until) closed.push_back(c);
      } else if (c->started < 0) {  // idle: closed silently, as a client expects of a kept-alive connection
        if (now - c->idle_since >= timeout || refusing_arriving_ ||
            (stopping_ && now - c->idle_since >= kIdleAfterStopSeconds)) {
          closed.push_back(c);
        }
      } else if (refusing_arriving_) {  // a request still arriving
        refused.push_back(c);
      } else if (now >= arrival_deadline(*c)) {
        timed_out.push_back(c);
      }
    }
  }
  // Still armed, these may report once more; not held by then, they are passed over.
  for (const ConnectionPtr& c : closed) close_now(c);
  for (const ConnectionPtr& c : timed_out) {
    release(c);
    dispatch(c, Arrival::kTimedOut);
  }
  for (const ConnectionPtr& c : refused) {
    release(c);
    dispatch(c, Arrival::kRefused);
  }
}

void HttpServer::dispatch(const ConnectionPtr& c, Arrival why) {
  uncount(c);
  threads_->enqueue([this, c, why] { answer(c, why); });
}

void HttpServer::uncount(const ConnectionPtr& c) {
  buffered_bodies_ -= c->counted;
  c->counted = 0;
}

std::size_t HttpServer::body_budget() const {
  return static_cast<std::size_t>(options_.answering_threads) * options_.limits.max_body;
}

double HttpServer::arrival_deadline(const Connection& c) const {
  // has_body() is false until the head is read, and (the body whole) once the request leaves the listening thread.
  double seconds = options_.io_timeout_s;
  if (c.reader.has_body()) {
    const double bytes = c.reader.declared_length() > 0 ? static_cast<double>(c.reader.declared_length())
                                                        : static_cast<double>(options_.limits.max_body);
    seconds += bytes / kBodyBytesPerSecond;
  }
  return c.started + seconds;
}

bool HttpServer::wants_continue(const Connection& c) {
  return !c.continued && c.request.body.empty() && c.in.empty() && c.request.minor_version >= 1 &&
         header_value(c.request.headers, "Expect") == "100-continue";
}

void HttpServer::close_now(const ConnectionPtr& c) {
  release(c);
  uncount(c);
  if (c->sending) answer_done(*c);
  ::close(c->fd);  // (which takes it out of the epoll set)
  --open_;
}

void HttpServer::hand_back(const ConnectionPtr& c, bool keep_alive) {
  if (!keep_alive) {
    // The client may still be sending (a refused body, a request cut off): our side is shut first and what arrives
    // is read and dropped for a moment (on_readable), so that the kernel does not answer the unread bytes with a
    // reset that would destroy the answer before the client reads it.
    ::shutdown(c->fd, SHUT_WR);
    c->linger_until = now_s() + kLingerSeconds;
    c->dropped = 0;
  } else {
    c->idle_since = now_s();
  }
  hold(c, false);
}

template <class Ready>
int HttpServer::read_until(int fd, std::string* in, double deadline, Ready ready) {
  char buffer[kReadBytes];
  while (!ready()) {  // (a reader's step is not asked again once it said it is done)
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      in->append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) return 0;
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return 0;
    if (refusing_arriving_) return -2;
    if (now_s() >= deadline) return -1;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, poll_ms(deadline, 0.1)) < 0 && errno != EINTR) return 0;
  }
  return 1;
}

void HttpServer::answer(const ConnectionPtr& c, Arrival why) {
  // Pipelined requests whose heads have arrived already are answered in turn on this thread; an answer the client
  // does not take at once is sent on by the listening thread, which goes on from there (answer_sent).
  for (;;) {
    const Next next = answer_one(c, why);
    if (next == Next::kSending) return hold(c, false);  // armed for writing
    if (next == Next::kClose) return hand_back(c, false);
    next_request(c);
    if (!head_arrived(c)) return hand_back(c, true);
    why = Arrival::kHead;
  }
}

void HttpServer::answer_sent(const ConnectionPtr& c, bool sent) {
  const bool keep = sent && c->answer_keep_alive;
  answer_done(*c);
  if (keep) {
    next_request(c);
    if (head_arrived(c)) {  // a pipelined request is here already: a thread answers it
      release(c);
      return dispatch(c, Arrival::kHead);
    }
  }
  hand_back(c, keep);
}

HttpServer::Next HttpServer::answer_one(const ConnectionPtr& c, Arrival why) {
  HttpRequest& request = c->request;
  HttpResponse response;
  const auto refuse = [&](int code, const std::string& message) {
    hooks_.error(response, code, message);
    return write_answer(c, response, false);
  };
  const auto late = [&] {
    return refuse(408, "the request did not arrive within " + std::to_string(options_.io_timeout_s) + " s");
  };
  const auto stopping = [&] {
    ++refused_arriving_;
    return refuse(503, "the server is stopping and this request had not arrived whole within its drain time");
  };
  if (why == Arrival::kTimedOut) return late();
  if (why == Arrival::kRefused) return stopping();
  if (c->head == HttpRequestReader::Status::kError) return refuse(c->reader.error_status(), c->reader.error_message());
  // Kept alive unless the client closes it or the server is stopping.
  const auto keep_alive = [&] { return request.wants_keep_alive() && !stopping_; };
  if (!c->head_checked) {  // a pipelined request this thread read, or one the listening thread left to it
    c->head_checked = true;
    c->accepted = hooks_.accept_head(request, c->refusal);
  }
  if (!c->accepted) {
    const bool keep = !c->reader.has_body() && keep_alive();  // an unread body would be read as the next request
    return write_answer(c, c->refusal, keep);
  }
  // A body the listening thread did not read, or not all of (past its budget): read here.
  if (c->reader.has_body() && c->body == HttpRequestReader::Status::kNeedMore) {
    if (wants_continue(*c)) {
      c->continued = true;
      send_all(c->fd, kContinue, now_s() + options_.io_timeout_s);
    }
    const int got = read_until(c->fd, &c->in, arrival_deadline(*c), [&] {
      c->body = c->reader.read_body(&c->in, &request);
      return c->body != HttpRequestReader::Status::kNeedMore;
    });
    if (got == 0) return Next::kClose;  // the client went away mid-request
    if (got == -1) return late();
    if (got == -2) return stopping();
  }
  if (c->body == HttpRequestReader::Status::kError) return refuse(c->reader.error_status(), c->reader.error_message());
  hooks_.handle(request, response);
  return write_answer(c, response, keep_alive());
}

HttpServer::Next HttpServer::write_answer(const ConnectionPtr& c, HttpResponse& response, bool keep_alive) {
  hooks_.before_write(c->request, response, now_s() - c->started);
  std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + http_reason(response.status) + "\r\n";
  if (!response.content_type.empty()) head += "Content-Type: " + response.content_type + "\r\n";
  // A 204 (a CORS preflight's answer) has no body and, RFC 9110 8.6, no Content-Length.
  if (response.status != 204) head += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  head += keep_alive ? "Connection: keep-alive\r\nKeep-Alive: timeout=" + std::to_string(options_.io_timeout_s) + "\r\n"
                     : "Connection: close\r\n";
  for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
  head += "\r\n";
  c->answer_head = std::move(head);
  c->answer = std::move(response);
  c->answer_has_body = c->request.method != "HEAD";
  c->answer_sent = 0;
  c->answer_keep_alive = keep_alive;
  c->answer_deadline = now_s() + options_.io_timeout_s;
  int sent = send_some(*c);
  if (sent == 0) {
    // The listening thread sends the rest as the client takes it, while the answers left to it are no more than the
    // answering threads could hold (one each, as before: the memory answers take stays bounded); past that this
    // thread waits for the client, as every answer was written before.
    if (pending_answers_.fetch_add(1) < static_cast<std::size_t>(options_.answering_threads)) {
      c->sending = true;
      return Next::kSending;
    }
    --pending_answers_;
    while (sent == 0 && now_s() < c->answer_deadline) {
      pollfd p{c->fd, POLLOUT, 0};
      ::poll(&p, 1, poll_ms(c->answer_deadline, 1.0));
      sent = send_some(*c);
    }
  }
  answer_done(*c);
  return sent == 1 && keep_alive ? Next::kKeepAlive : Next::kClose;
}

int HttpServer::send_some(Connection& c) {
  const std::size_t head = c.answer_head.size(), total = c.answer_size();
  while (c.answer_sent < total) {
    // The head and the body as they are, in one call: no copy of a large body, and no second packet for a small one.
    iovec parts[2];
    int count = 0;
    if (c.answer_sent < head) parts[count++] = {&c.answer_head[c.answer_sent], head - c.answer_sent};
    const std::size_t body_from = c.answer_sent > head ? c.answer_sent - head : 0;
    if (c.answer_has_body && body_from < c.answer.body.size()) {
      parts[count++] = {&c.answer.body[body_from], c.answer.body.size() - body_from};
    }
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t n = ::sendmsg(c.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.answer_sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else if (!(n < 0 && errno == EINTR)) {
      return -1;
    }
  }
  return 1;
}

void HttpServer::answer_done(Connection& c) {
  hooks_.after_write(c.request, c.answer, now_s() - c.started);
  if (c.sending) --pending_answers_;
  c.sending = false;
  c.answer = HttpResponse{};
  std::string().swap(c.answer_head);
}

}  // namespace bertrain
