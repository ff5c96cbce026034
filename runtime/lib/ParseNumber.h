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
#include <cstring>
#include <limits>

namespace flexpipe::rt {

/// A decimal integer in [lo, hi]; false (and `value` unchanged) otherwise
/// (strtoll's leading spaces and '+' too: --lr takes neither).
inline bool parseInteger(const char *text, int64_t lo, int64_t hi,
                         int64_t &value) {
  if (!((*text >= '0' && *text <= '9') || *text == '-'))
    return false;
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

/// The most iterations (and iterations between checkpoints) a run takes,
/// and what those options take, said where they are refused.
inline constexpr int64_t kMaxIterations = int64_t(1) << 40;
inline constexpr const char *kIterationsRule =
    "an integer from 1 to 1099511627776 (2^40)";

/// What --lr takes, said where it is refused.
inline constexpr const char *kLearningRateRule =
    "a decimal number, 0 or from 1.2e-38 (a float's smallest normal) to 1e6";

/// A learning rate (kLearningRateRule): one a float holds as given (1e-50
/// trained as 0, and strtod's hexadecimal 0x10 was 16); false (and `value`
/// unchanged) otherwise.
inline bool parseLearningRate(const char *text, float &value) {
  for (const char *c = text; *c; ++c)
    if (!std::strchr("0123456789.eE+-", *c))
      return false;
  double v = 0;
  if (!parseNumber(text, 0, 1e6, v))
    return false;
  // A non-zero number that strtod took to 0 (1e-400) or a float cannot
  // hold; and -0 is 0 (ranks compare the rate's bits).
  bool nonZero = false;
  for (const char *c = text; *c && *c != 'e' && *c != 'E'; ++c)
    nonZero |= *c >= '1' && *c <= '9';
  const float f = static_cast<float>(v);
  if (nonZero && !(f >= std::numeric_limits<float>::min()))
    return false;
  value = nonZero ? f : 0.0f;
  return true;
}

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_LIB_PARSENUMBER_H
