//===- CliChecks.h - Command-line checks shared by the tools ----*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// CLI11 validators with short messages: CLI::PositiveNumber answers `0` with
// the whole range of a double (309 digits).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TOOLS_CLICHECKS_H
#define FLEXPIPE_TOOLS_CLICHECKS_H

#include "Version.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace flexpipe {

/// An integer of at least `min` (1: "POSITIVE", 0: "NONNEGATIVE") and at
/// most `max`.
inline CLI::Validator integerAtLeast(int64_t min, int64_t max = INT32_MAX) {
  return CLI::Validator(
      [min, max](std::string &text) -> std::string {
        char *end = nullptr;
        errno = 0;
        const long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0')
          return "'" + text.substr(0, 40) + "' is not an integer";
        // (Past long long: out of range, not "not an integer".)
        if (errno == ERANGE && value > 0)
          return "must be at most " + std::to_string(max) + ", got " +
                 text.substr(0, 40);
        if (value < min)
          return "must be " +
                 std::string(min == 1 ? "a positive integer"
                                      : "at least " + std::to_string(min)) +
                 ", got " + text;
        if (value > max)
          return "must be at most " + std::to_string(max) + ", got " + text;
        return {};
      },
      min == 1   ? "POSITIVE"
      : min == 0 ? "NONNEGATIVE"
                 : "INTEGER");
}

/// A finite number greater than 0 (seconds, a tolerance) and at most `max`.
inline CLI::Validator positiveNumber(double max = HUGE_VAL) {
  return CLI::Validator(
      [max](std::string &text) -> std::string {
        char *end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0')
          return "'" + text.substr(0, 40) + "' is not a number";
        // (ERANGE below 1 is an underflow: a denormal is a number, 0 too
        // small to write.)
        if ((errno != 0 && std::fabs(value) >= 1) || !std::isfinite(value))
          return "'" + text.substr(0, 40) + "' is not a finite number";
        if (errno != 0 && value == 0)
          return "'" + text.substr(0, 40) +
                 "' is too close to 0 for a double (the least above 0 is "
                 "4.9e-324)";
        if (!(value > 0))
          return "must be a positive number, got " + text;
        if (value > max) {
          std::ostringstream limit;
          limit << max;
          return "must be at most " + limit.str() + ", got " +
                 text.substr(0, 40);
        }
        return {};
      },
      "POSITIVE");
}

/// 0 (no limit) or a finite factor of at least 1.
inline CLI::Validator factorOrZero() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        char *end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value) ||
            !(value == 0 || value >= 1))
          return "must be 0 (no limit) or a factor of at least 1, got " +
                 text.substr(0, 40);
        return {};
      },
      "FACTOR");
}

/// The items of a comma-separated list, empty ones included.
inline std::vector<std::string> commaItems(const std::string &text) {
  std::vector<std::string> items(1);
  for (char c : text) {
    if (c == ',')
      items.emplace_back();
    else
      items.back() += c;
  }
  return items;
}

/// A comma-separated list whose every item passes `item`. (CLI11's own
/// delimiter drops empty items silently: `--pp 1,,2` would read as 1,2.)
inline CLI::Validator commaList(CLI::Validator item) {
  const std::string name = "LIST";
  return CLI::Validator(
      [item](std::string &text) -> std::string {
        for (std::string part : commaItems(text)) {
          if (part.empty())
            return "'" + text.substr(0, 40) + "' has an empty item";
          if (std::string error = item(part); !error.empty())
            return error;
        }
        return {};
      },
      name);
}

/// Parses the command line: -1 to go on, else the exit code (0 after
/// --help). An option written `--name=` with nothing after the `=` is an
/// error: CLI11 reads it as `--name` and takes the next argument as its
/// value (`--load-plugin= spec.mlir` loaded the spec as a plugin).
///
/// An option that takes a value followed by another of the tool's options
/// is an error too: `-o --emit=text` took `--emit=text` as the output
/// directory and compiled into it. So is an option of one value given twice
/// (CLI11 said "--threads: At Most 1 required but received 2").
inline int parseCommandLine(CLI::App &app, int argc, char **argv) {
  app.set_version_flag("--version", versionText(app.get_name().c_str()),
                       "Print the tool's FlexPipe release and revision");
  auto optionNamed = [&](const std::string &arg) -> const CLI::Option * {
    if (arg.size() < 2 || arg[0] != '-')
      return nullptr;
    return app.get_option_no_throw(arg.substr(0, arg.find('=')));
  };
  std::map<const CLI::Option *, std::string> seen;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--")
      break;
    if (arg.size() > 3 && arg.compare(0, 2, "--") == 0 &&
        arg.find('=') == arg.size() - 1) {
      std::cerr << app.get_name() << ": " << arg
                << " gives an empty value; write a value after the '=' or "
                   "leave the option out\n";
      return 1;
    }
    const CLI::Option *option = optionNamed(arg);
    if (option && option->get_items_expected_max() == 1 &&
        option->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw) {
      const std::string name = arg.substr(0, arg.find('='));
      auto [earlier, first] = seen.try_emplace(option, name);
      if (!first) {
        std::cerr << app.get_name() << ": " << name << " is given twice"
                  << (earlier->second == name
                          ? ""
                          : " (as " + earlier->second + " before)")
                  << "; give it once\n";
        return 1;
      }
    }
    const std::string next = i + 1 < argc ? argv[i + 1] : "";
    if (option && arg.find('=') == std::string::npos &&
        option->get_items_expected_min() > 0 && optionNamed(next) &&
        next != "--help" && next != "-h") {
      std::cerr << app.get_name() << ": " << arg << " needs a value, but '"
                << argv[i + 1]
                << "' after it is an option; give the value first (a path "
                   "that starts with '-' as ./-name)\n";
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &error) {
    // --help and --version as CLI11 prints them; an error on one line with
    // the tool's name, as the tools' own errors are.
    if (error.get_exit_code() == 0)
      return app.exit(error);
    std::cerr << app.get_name() << ": " << error.what() << "\n";
    return 1;
  }
  return -1;
}

} // namespace flexpipe

#endif // FLEXPIPE_TOOLS_CLICHECKS_H
