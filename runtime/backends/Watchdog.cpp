//===- Watchdog.cpp - A thread that stops a blocked rank ------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "Watchdog.h"
#include "Timeout.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

using namespace flexpipe::rt;

static double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Watchdog::Watchdog(Check check, Fail fail, double interval, double grace)
    : check(std::move(check)), fail(std::move(fail)), interval(interval),
      grace(grace) {
  thread = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  thread.join();
}

Watchdog::Scope::Scope(Watchdog *watchdog, const char *what, double limit)
    : watchdog(watchdog) {
  if (!watchdog)
    return;
  const double start = now();
  std::lock_guard<std::mutex> lock(watchdog->scopeMutex);
  previousWhat = watchdog->what;
  previousSince = watchdog->since;
  previousLimit = watchdog->limit;
  watchdog->what = what;
  watchdog->since = start;
  watchdog->limit = limit;
}

Watchdog::Scope::~Scope() {
  if (!watchdog)
    return;
  std::lock_guard<std::mutex> lock(watchdog->scopeMutex);
  watchdog->what = previousWhat;
  watchdog->since = previousSince;
  watchdog->limit = previousLimit;
}

void Watchdog::loop() {
  double failingSince = -1;
  double lastTick = now();
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    wake.wait_for(lock, std::chrono::duration<double>(interval));
    if (stopping)
      break;
    lock.unlock();
    // A tick far later than the interval: the process was stopped (its
    // job suspended); that time is no peer's lack of progress.
    // The shift leaves 0.1 s of the gap counted (ticks that always come a
    // second late still reach the limit) and never moves a start past now
    // (a scope entered after the resume, before this tick, began then).
    const double tick = now(), gap = tick - lastTick - interval;
    if (gap > 1.0) {
      std::lock_guard<std::mutex> scopeLock(scopeMutex);
      since = std::min(since + gap - 0.1, tick);
      if (failingSince >= 0)
        failingSince = std::min(failingSince + gap - 0.1, tick);
    }
    std::string failure;
    if (!quieted && check) {
      std::string problem = check();
      if (problem.empty()) {
        failingSince = -1;
      } else if (failingSince < 0) {
        failingSince = now();
      } else if (now() - failingSince >= grace && !quieted) {
        failure = problem;
      }
    }
    // (After check(), whose own time is no stop.)
    lastTick = now();
    const char *blockedIn;
    double blockedFor, blockLimit;
    {
      std::lock_guard<std::mutex> scopeLock(scopeMutex);
      blockedIn = what;
      blockedFor = now() - since;
      blockLimit = limit;
    }
    if (failure.empty() && blockedIn && blockedFor > blockLimit) {
      failure = noProgressFor(blockedFor) + " while " + blockedIn +
                " (FLEXPIPE_TIMEOUT); a peer rank may have died or hung";
    }
    if (!failure.empty()) {
      fail(failure);
      return;
    }
    lock.lock();
  }
}
