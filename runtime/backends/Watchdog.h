//===- Watchdog.h - A thread that stops a blocked rank ----------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The liveness rule (Timeout.h) for waits that block the main thread in a
// library call: NCCL's set-up and errors (the CUDA backend) and MPI's
// blocking gradient all-reduce (the CPU backend). Plain C++, shared by the
// backends and the bootstrap test.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_WATCHDOG_H
#define FLEXPIPE_RUNTIME_BACKENDS_WATCHDOG_H

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace flexpipe::rt {

/// A thread that stops the process when something goes wrong while the main
/// thread may be blocked: `check` (run every `interval` seconds) returns a
/// failure, still there `grace` seconds later, or the main thread has been
/// inside one Scope for longer than its limit. Then it calls `fail` once
/// with the message (which normally exits) and stops.
class Watchdog {
public:
  using Check = std::function<std::string()>;
  using Fail = std::function<void(const std::string &)>;
  Watchdog(Check check, Fail fail, double interval = 0.25, double grace = 2);
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  /// The main thread is in `what` (a string literal) until destroyed.
  class Scope {
  public:
    Scope(Watchdog *watchdog, const char *what, double limit);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Watchdog *watchdog;
    const char *previousWhat;
    double previousSince, previousLimit;
  };

  /// Stops running `check` (peers may now exit normally); scopes are still
  /// timed.
  void quiet() { quieted = true; }

private:
  void loop();
  Check check;
  Fail fail;
  double interval, grace;
  /// The main thread's scope: what it is in (null: none), since when, for
  /// how long at most. Read and written together under scopeMutex, so the
  /// watchdog never pairs one scope's name with another's times (or with
  /// the zeros outside every scope).
  std::mutex scopeMutex;
  const char *what = nullptr;
  double since = 0, limit = 0;
  std::atomic<bool> quieted{false};
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;
};

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_BACKENDS_WATCHDOG_H
