//===- Timeout.h - FLEXPIPE_TIMEOUT, shared by the backends -----*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The liveness rule of every backend: a rank that waits longer than
// FLEXPIPE_TIMEOUT seconds (default 300) for a peer stops the job, naming
// what it waited for. A wait that covers much work at once (the CUDA
// backend's host waits for a whole iteration) counts the time since the last
// progress instead (ProgressDeadline). Header-only: the CPU and CUDA backends
// and the bootstrap test include it.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_TIMEOUT_H
#define FLEXPIPE_RUNTIME_BACKENDS_TIMEOUT_H

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace flexpipe::rt {

/// The default of FLEXPIPE_TIMEOUT, seconds.
constexpr double kDefaultTimeout = 300;

/// Reads a positive, finite number of seconds from `text` (the value of the
/// environment variable `name`) into `seconds`. Returns "" or what is wrong.
inline std::string parseSeconds(const char *name, const char *text,
                                double &seconds) {
  char *end = nullptr;
  errno = 0;
  const double value = text ? std::strtod(text, &end) : 0;
  if (!text || end == text || *end != '\0' || errno != 0 ||
      !std::isfinite(value) || value <= 0)
    return std::string(name) + " must be a positive number of seconds, not '" +
           (text ? text : "") + "'";
  seconds = value;
  return {};
}

/// "no progress for N s" as every backend says it: whole seconds, or two
/// significant digits below 1 s (FLEXPIPE_TIMEOUT may be a fraction).
inline std::string noProgressFor(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, seconds < 1 ? "%.2g" : "%.0f", seconds);
  return std::string("no progress for ") + text + " s";
}

/// FLEXPIPE_TIMEOUT from the environment, or the default when unset or
/// empty. Returns "" or what is wrong.
inline std::string timeoutFromEnv(double &seconds) {
  seconds = kDefaultTimeout;
  const char *text = std::getenv("FLEXPIPE_TIMEOUT");
  if (!text || !*text)
    return {};
  return parseSeconds("FLEXPIPE_TIMEOUT", text, seconds);
}

/// When a wait gives up: after `timeout` seconds without progress, not
/// after `timeout` seconds in all, so that a long iteration that keeps
/// moving never times out while a stuck peer still does. The caller polls
/// with its clock (seconds, any origin) and a count of the pieces of work
/// seen complete so far (never decreasing); any increase is progress. Pure,
/// so that a test can drive it with a fake clock.
class ProgressDeadline {
public:
  ProgressDeadline(double timeout, double now, size_t completed = 0)
      : timeout(timeout), lastProgress(now), lastCompleted(completed) {}

  /// Whether the wait should give up at `now`, given `completed`.
  bool expired(double now, size_t completed) {
    if (completed != lastCompleted) {
      lastCompleted = completed;
      lastProgress = now;
    }
    return idle(now) > timeout;
  }
  /// Seconds since the last progress (or the start).
  double idle(double now) const { return now - lastProgress; }

private:
  double timeout;
  double lastProgress;
  size_t lastCompleted;
};

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_BACKENDS_TIMEOUT_H
