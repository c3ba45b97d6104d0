// A watchdog over blocking collectives (MPI's sums and broadcasts): one that has not returned within the
// timeout, because a peer rank was stopped (SIGSTOP, a debugger, a frozen node), hangs in I/O or is far
// behind, ends the job instead of leaving every other rank waiting for ever. A rank that dies is mpirun's to
// notice; a rank that lives but never arrives is not, and MPI's blocking calls have no timeout of their own.
//
// The calling thread marks each collective (Scope); a thread of this class looks a few times per timeout and,
// once the marked collective has waited longer than the timeout, calls on_expiry once with its name. Time this
// process itself was stopped (a look far later than planned) does not count: that wait is not the peers'. The
// marks are two atomic stores: nothing is allocated and nothing waits on the calling thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace bertrain {

// The watchdogs' clock (this file's and NCCL's): seconds on the steady clock.
double steady_now_s();

// How often a watchdog with this timeout looks: a timeout is noticed within a twentieth of it (at most 1 s).
std::chrono::duration<double> watchdog_period(double timeout_s);

// Time a watchdog's own process did not run (stopped by SIGSTOP or a debugger, or not scheduled), measured by how
// much later than planned its looks come. That time is not the peers' delay: a job suspended whole (Ctrl-Z) and
// continued must not find every collective it had in flight timed out, and a stopped rank, continued by mpirun to
// be killed, must not report the timeout it caused. Used by this file's watchdog and by NCCL's.
class OwnAbsence {
 public:
  OwnAbsence(std::chrono::duration<double> period, double start_s) : period_s_(period.count()), last_look_s_(start_s) {}
  // At a look at now_s: the seconds since the previous look beyond the period when that excess is itself more than a
  // period (an absence, not a slow wake-up); else 0.
  double at_look(double now_s) {
    const double late_s = now_s - last_look_s_ - period_s_;
    last_look_s_ = now_s;
    return late_s > period_s_ ? late_s : 0.0;
  }

 private:
  double period_s_;
  double last_look_s_;
};

class CollectiveDeadline {
 public:
  // timeout_s > 0. on_expiry(what) runs on the watchdog thread, at most once, when a collective named `what`
  // (the name given to Scope) has been outstanding for longer than timeout_s; it is expected to end the job.
  CollectiveDeadline(double timeout_s, std::function<void(const std::string& what)> on_expiry);
  ~CollectiveDeadline();  // stops watching (without calling on_expiry)
  CollectiveDeadline(const CollectiveDeadline&) = delete;
  CollectiveDeadline& operator=(const CollectiveDeadline&) = delete;

  // Marks the collective `what` (a string literal: only its pointer is kept) outstanding for the scope's life.
  // One thread marks; scopes do not nest.
  class Scope {
   public:
    Scope(CollectiveDeadline* deadline, const char* what);  // null deadline: nothing is watched
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CollectiveDeadline* deadline_;
  };

 private:
  void watch(double created_s);

  const double timeout_s_;
  const std::function<void(const std::string&)> on_expiry_;
  // Written by the marking thread: the start (steady clock, s) before the name, so that the watcher, reading
  // the name first, never pairs a name with an older start than its own (a late look can only under-estimate).
  std::atomic<double> started_s_{0};
  std::atomic<const char*> what_{nullptr};  // null: no collective outstanding
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread watchdog_;  // last: started once everything it reads exists
};

}  // namespace bertrain
