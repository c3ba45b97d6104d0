// The connection threads of `bertrain serve`'s HTTP frontend: cpp-httplib's ThreadPool, but started by the frontend
// when it binds, before the ready line, and with a failure to start them that is an error naming --max-connections.
// httplib::ThreadPool starts its threads inside listen(), on the listener thread, where a failure (EAGAIN past the
// system's thread limit) was an uncaught exception after "ready"; and its constructor, throwing halfway, would leave
// joinable threads behind (std::terminate).
#pragma once

#include <httplib.h>

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

class ConnectionThreads final : public httplib::TaskQueue {
 public:
  // Starts `count` threads; Error (naming --max-connections) when the system will not start them all, after the
  // ones it started have ended.
  explicit ConnectionThreads(int count) {
    try {
      for (int i = 0; i < count; ++i) threads_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      const std::size_t started = threads_.size();
      shutdown();
      BERTRAIN_FAIL("cannot start " << count << " connection threads (--max-connections " << count << "): "
                                    << "the system started " << started << " (" << e.what()
                                    << "); give a smaller --max-connections");
    }
  }
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> task) override {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

  // Lets the threads finish the tasks already queued, then joins them. Idempotent.
  void shutdown() override {
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
