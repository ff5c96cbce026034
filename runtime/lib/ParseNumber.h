//===- ParseNumber.h - Strict numbers on the command line -------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The rank programs' and flexpipe-reference's option values: the whole text
// must be the number and it must lie in range (atoll and atof would take
// "12abc" as 12, "abc" as 0, and overflow silently).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_LIB_PARSENUMBER_H
#define FLEXPIPE_RUNTIME_LIB_PARSENUMBER_H

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace flexpipe::rt {

/// A decimal integer in [lo, hi]; false (and `value` unchanged) otherwise.
inline bool parseInteger(const char *text, int64_t lo, int64_t hi,
                         int64_t &value) {
  char *end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end || errno == ERANGE || v < lo || v > hi)
    return false;
  value = v;
  return true;
}

/// A finite number in [lo, hi]; false (and `value` unchanged) otherwise.
inline bool parseNumber(const char *text, double lo, double hi, double &value) {
  char *end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end || !std::isfinite(v) || v < lo || v > hi)
    return false;
  value = v;
  return true;
}

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_LIB_PARSENUMBER_H
