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
// what it waited for. Header-only: the CPU and CUDA backends and the
// bootstrap test include it.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_TIMEOUT_H
#define FLEXPIPE_RUNTIME_BACKENDS_TIMEOUT_H

#include <cerrno>
#include <cmath>
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

/// FLEXPIPE_TIMEOUT from the environment, or the default when unset or
/// empty. Returns "" or what is wrong.
inline std::string timeoutFromEnv(double &seconds) {
  seconds = kDefaultTimeout;
  const char *text = std::getenv("FLEXPIPE_TIMEOUT");
  if (!text || !*text)
    return {};
  return parseSeconds("FLEXPIPE_TIMEOUT", text, seconds);
}

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_BACKENDS_TIMEOUT_H
