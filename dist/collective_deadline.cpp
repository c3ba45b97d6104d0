#include "dist/collective_deadline.h"

#include <algorithm>

#include "core/error.h"

namespace bertrain {

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::chrono::duration<double> watchdog_period(double timeout_s) {
  return std::chrono::duration<double>(std::clamp(timeout_s / 20, 0.01, 1.0));
}

CollectiveDeadline::CollectiveDeadline(double timeout_s, std::function<void(const std::string&)> on_expiry)
    : timeout_s_(timeout_s), on_expiry_(std::move(on_expiry)) {
  BERTRAIN_CHECK(timeout_s > 0, "the collective timeout must be positive, got " << timeout_s);
  // The first look's lateness counts from now, not from when the new thread first runs.
  watchdog_ = std::thread([this, created_s = steady_now_s()] { watch(created_s); });
}

CollectiveDeadline::~CollectiveDeadline() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  watchdog_.join();
}

CollectiveDeadline::Scope::Scope(CollectiveDeadline* deadline, const char* what) : deadline_(deadline) {
  if (deadline_ == nullptr) return;
  deadline_->started_s_.store(steady_now_s(), std::memory_order_relaxed);
  deadline_->what_.store(what, std::memory_order_release);
}

CollectiveDeadline::Scope::~Scope() {
  if (deadline_ != nullptr) deadline_->what_.store(nullptr, std::memory_order_release);
}

void CollectiveDeadline::watch(double created_s) {
  const std::chrono::duration<double> period = watchdog_period(timeout_s_);
  OwnAbsence own_absence(period, created_s);
  double seen_start_s = -1;  // the start of the collective the watcher saw last
  double absent_s = 0;       // how long this process itself did not run since that collective started
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stop_; })) {
    const double now = steady_now_s();
    const double absent_now_s = own_absence.at_look(now);
    const char* what = what_.load(std::memory_order_acquire);
    if (what == nullptr) continue;
    const double start = started_s_.load(std::memory_order_relaxed);
    if (start != seen_start_s) {
      seen_start_s = start;
      absent_s = 0;
    }
    absent_s += absent_now_s;
    if (now - start - absent_s <= timeout_s_) continue;
    lock.unlock();
    on_expiry_(what);
    return;
  }
}

}  // namespace bertrain
