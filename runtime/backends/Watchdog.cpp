//===- Watchdog.cpp - A thread that stops a blocked rank ------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "Watchdog.h"
#include "Timeout.h"

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
  previousWhat = watchdog->what.load();
  previousSince = watchdog->since.load();
  previousLimit = watchdog->limit.load();
  watchdog->limit = limit;
  watchdog->since = now();
  watchdog->what = what;
}

Watchdog::Scope::~Scope() {
  if (!watchdog)
    return;
  // The watchdog reads what, since, limit: it never pairs one scope's name
  // with another's times.
  watchdog->what = nullptr;
  watchdog->limit = previousLimit;
  watchdog->since = previousSince;
  watchdog->what = previousWhat;
}

void Watchdog::loop() {
  double failingSince = -1;
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    wake.wait_for(lock, std::chrono::duration<double>(interval));
    if (stopping)
      break;
    lock.unlock();
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
    const char *blockedIn = what.load();
    const double blockedFor = now() - since.load();
    if (failure.empty() && blockedIn && blockedFor > limit.load()) {
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
