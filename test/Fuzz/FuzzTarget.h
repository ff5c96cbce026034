//===- FuzzTarget.h - One fuzz target, two drivers --------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A fuzz target is written once with FLEXPIPE_FUZZ_TARGET(name) and built two
// ways:
//
// - with FLEXPIPE_LIBFUZZER defined (the fuzz build, scripts/fuzz.sh), it is
//   libFuzzer's LLVMFuzzerTestOneInput, one executable per target;
// - otherwise it registers itself with flexpipe-fuzz-replay (FuzzReplay.cpp),
//   which the ordinary build makes and the test suite runs over the seed and
//   regression corpora in test/Fuzz/corpus/<name>.
//
// FUZZ_CHECK states a property every input must keep (a schedule that the
// pipeline accepted verifies, a file that was read prints and reads back the
// same); a violation prints the property and aborts, which libFuzzer and the
// replay driver both report as a failure with the input that caused it.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_FUZZ_FUZZTARGET_H
#define FLEXPIPE_TEST_FUZZ_FUZZTARGET_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace flexpipe::fuzz {

using TargetFn = void (*)(const uint8_t *data, size_t size);

/// Adds a target to the replay driver's table; returns true.
bool registerTarget(const char *name, TargetFn fn);

[[noreturn]] inline void checkFailed(const char *property, const char *file,
                                     int line, const char *detail) {
  std::fprintf(stderr, "%s:%d: fuzz property violated: %s%s%s\n", file, line,
               property, detail && *detail ? "\n" : "", detail ? detail : "");
  std::fflush(stderr);
  std::abort();
}

} // namespace flexpipe::fuzz

/// Aborts with `property` (and an optional detail string) when it is false.
#define FUZZ_CHECK(property, detail)                                           \
  do {                                                                         \
    if (!(property))                                                           \
      ::flexpipe::fuzz::checkFailed(#property, __FILE__, __LINE__, (detail));  \
  } while (false)

#ifdef FLEXPIPE_LIBFUZZER
#define FLEXPIPE_FUZZ_TARGET(NAME)                                             \
  static void NAME##Target(const uint8_t *data, size_t size);                  \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {    \
    NAME##Target(data, size);                                                  \
    return 0;                                                                  \
  }                                                                            \
  static void NAME##Target(const uint8_t *data, size_t size)
#else
#define FLEXPIPE_FUZZ_TARGET(NAME)                                             \
  static void NAME##Target(const uint8_t *data, size_t size);                  \
  [[maybe_unused]] static const bool NAME##Registered =                        \
      ::flexpipe::fuzz::registerTarget(#NAME, NAME##Target);                   \
  static void NAME##Target(const uint8_t *data, size_t size)
#endif

#endif // FLEXPIPE_TEST_FUZZ_FUZZTARGET_H
