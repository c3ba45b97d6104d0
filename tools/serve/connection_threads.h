// The answering threads of `bertrain serve`'s HTTP server (tools/serve/http_server.h): a fixed pool started when the
// server binds, before the ready line, so that a system that will not start them is an error naming
// --max-connections; requests that have arrived (whole, or with a body left to the thread to read) wait in a queue
// for a free thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.h"

namespace bertrain {

class ConnectionThreads final {
 public:
  // Starts `count` threads; Error (naming --max-connections) when the system will not start them all, after the
  // ones it started have ended.
  explicit ConnectionThreads(int count) {
    try {
      for (int i = 0; i < count; ++i) threads_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      const std::size_t started = threads_.size();
      shutdown();
      BERTRAIN_FAIL("cannot start " << count << " answering threads (--max-connections " << count << "): "
                                    << "the system started " << started << " (" << e.what()
                                    << "); give a smaller --max-connections");
    }
  }
  ~ConnectionThreads() { shutdown(); }
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;

  void enqueue(std::function<void()> task) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

  // Lets the threads finish the tasks already queued, then joins them. Idempotent.
  void shutdown() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, and nothing left to do
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::vector<std::thread> threads_;
  std::list<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace bertrain
