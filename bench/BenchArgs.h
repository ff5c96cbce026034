//===- BenchArgs.h - The benchmarks' time budget argument -------*- C++ -*-===//
//
// Part of the FlexPipe project.
//
//===----------------------------------------------------------------------===//
//
// The seconds each benchmark row measures for, as its optional argument:
// a positive number; anything else prints the usage and makes the
// benchmark exit 1 rather than measure for 0 s (--help prints it and exits
// 0).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_BENCH_BENCHARGS_H
#define FLEXPIPE_BENCH_BENCHARGS_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace flexpipe::bench {

/// Whether `text` asks for the usage (-h, --help); prints it then.
inline bool printsUsage(const char *text, const char *usage) {
  const bool help = !std::strcmp(text, "-h") || !std::strcmp(text, "--help");
  if (help)
    std::printf("usage: %s\n", usage);
  return help;
}

/// `text` as a positive, finite number of seconds, or none after printing
/// why and `usage` to standard error.
inline std::optional<double> parseSeconds(const char *name, const char *text,
                                          const char *usage) {
  char *end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(seconds) ||
      seconds <= 0) {
    std::fprintf(stderr,
                 "%s: the seconds per row must be a positive number, got "
                 "'%s'\nusage: %s\n",
                 name, text, usage);
    return std::nullopt;
  }
  return seconds;
}

} // namespace flexpipe::bench

#endif // FLEXPIPE_BENCH_BENCHARGS_H
