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
#include <string>

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

/// The seconds per row of a benchmark whose one optional argument they are
/// (default 1), or none when it should exit with `exitCode` instead: 0
/// after --help, 1 after a wrong argument (both said).
inline std::optional<double> secondsPerRow(int argc, char **argv,
                                           const char *name, int &exitCode) {
  std::string usage = std::string(name) + " [SECONDS_PER_ROW, default 1]";
  exitCode = 0;
  if (argc == 2 && printsUsage(argv[1], usage.c_str()))
    return std::nullopt;
  exitCode = 1;
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s\n", usage.c_str());
    return std::nullopt;
  }
  return argc > 1 ? parseSeconds(name, argv[1], usage.c_str()) : 1.0;
}

} // namespace flexpipe::bench

#endif // FLEXPIPE_BENCH_BENCHARGS_H
