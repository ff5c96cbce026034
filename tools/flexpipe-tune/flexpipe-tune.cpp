//===- flexpipe-tune.cpp - Search the schedule space ----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The auto-tuner's command line: read a model and a cluster, search
// (pp, dp, micro-batch size, placement, priorities, vocabulary parallelism,
// gradient separation) with lib/Scheduling/Tuner, print a ranked table, and
// write the results (CSV and JSON), the top K as specs for flexpipe-compile
// (each with a model file of its batch sizes) and a timeline of the best next
// to the Megatron-style 1F1B baseline. Plain C++ (no IR), so this one file is
// built with exceptions for CLI11.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Tuner.h"
#include "flexpipe/Support/InputLimits.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include "../CliChecks.h"
#include "../OutputFile.h"
#include "../ProcessSetup.h"
#include "../ShellQuote.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <climits>
#include <cmath>
#include <optional>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace flexpipe::sched;

namespace {

struct Options {
  std::string model, cluster, profile, output = "flexpipe-tune.out";
  int64_t gpus = 0, globalBatch = 0;
  std::string memoryLimit;
  int top = 5;
  int64_t exact = 16;
  bool exhaustive = false;
  int threads = 0;
  std::vector<std::string> pp, mbs, placements; // comma-separated lists
  std::string vocabParallel = "auto", separation = "auto";
  int64_t separationTop = 8;
  double separationWindow = 1.25;
  bool allowFwdFirst = false;
  std::string progress = "auto";
  std::vector<std::string> plugins, checks, priorities;
};

/// "80GiB", "75e9", "512 MiB", "1.5TB" -> bytes (a decimal number and an
/// optional unit).
std::optional<double> parseBytes(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return std::nullopt;
  }
  // Decimal only: std::stod also reads hexadecimal ("0x10" was 16 bytes).
  if (text.substr(0, pos).find_first_of("xX") != std::string::npos)
    return std::nullopt;
  std::string unit = text.substr(pos);
  std::transform(unit.begin(), unit.end(), unit.begin(), ::tolower);
  const std::pair<const char *, double> units[] = {{"", 1},
                                                   {"b", 1},
                                                   {"kb", 1e3},
                                                   {"mb", 1e6},
                                                   {"gb", 1e9},
                                                   {"tb", 1e12},
                                                   {"kib", 1024.0},
                                                   {"mib", 1048576.0},
                                                   {"gib", 1073741824.0},
                                                   {"tib", 1099511627776.0},
                                                   {"pib", 1125899906842624.0}};
  for (auto [name, scale] : units)
    if (unit == name && value * scale >= 1 && value * scale <= 1e18)
      return value * scale; // (NaN and infinity fail both comparisons)
  return std::nullopt;
}

std::string seconds(double s) { return formatSeconds(s); }
/// Tokens per second: whole tokens, or 3 significant digits below 100
/// (a rate of 1e-58 read 0).
std::string tokenRate(double rate) {
  if (rate >= 100)
    return llvm::formatv("{0:F0}", rate).str();
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.3g", rate);
  return text;
}

/// A stage priority in a CSV cell: "depth_first:8".
std::string stpName(const StagePriority &p) {
  std::string text = stpKeyword(p);
  std::replace(text.begin(), text.end(), ',', ':');
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  return text;
}

/// `text` as a JSON string, quoted and escaped by llvm::json (an error may
/// quote a path with any byte; bytes that are not UTF-8 become U+FFFD).
std::string jsonString(const std::string &text) {
  std::string out;
  llvm::raw_string_ostream(out) << llvm::json::Value(
      llvm::json::isUTF8(text) ? text : llvm::json::fixUTF8(text));
  return out;
}

/// The computation-type and stage priorities in CSV and JSON cells; a plugin
/// priority is custom(name) with no stage priorities.
std::string cttpCell(const Candidate &c) {
  return c.priority.empty() ? cttpKeyword(c.cttp)
                            : "custom(" + c.priority + ")";
}
std::string stpCell(const Candidate &c, const StagePriority &p) {
  return c.priority.empty() ? stpName(p) : "";
}

/// Resolves the plugin hooks named on the command line, or prints what is
/// registered instead and returns false.
template <typename Hook, typename Lookup>
bool resolveHooks(const std::vector<std::string> &names, const char *option,
                  const char *kind, Lookup lookup, std::vector<Hook> &hooks) {
  for (const std::string &name : names) {
    if (const auto *function = lookup(name)) {
      hooks.push_back({name, *function});
      continue;
    }
    const std::vector<std::string> known =
        flexpipe::plugin::Registry::global().names(kind);
    llvm::errs() << "flexpipe-tune: " << option << " " << name << ": no "
                 << kind << " of that name is registered";
    if (known.empty()) {
      llvm::errs() << " (no plugin loaded registers one; load one with "
                      "--load-plugin PATH)\n";
      return false;
    }
    llvm::errs() << " (registered: ";
    for (size_t i = 0; i < known.size(); ++i)
      llvm::errs() << (i ? ", " : "") << known[i];
    llvm::errs() << ")\n";
    return false;
  }
  return true;
}

/// Writes a result file whole, or says why not (OutputFile.h).
bool writeFile(const std::string &path, const std::string &text) {
  return flexpipe::writeOutputFile("flexpipe-tune", path, text);
}

/// One CSV / JSON row per evaluation.
bool writeResults(const std::string &dir, const TuneResult &result) {
  std::string csvText, jsonText;
  llvm::raw_string_ostream csv(csvText), json(jsonText);
  csv << "rank,status,iteration_s,pipeline_s,grad_sync_s,step_s,tokens_per_s,"
         "bubble_ratio,peak_bytes,pp,dp,mbs,microbatches,placement,chunks,"
         "vocab_parallel,cttp,fstp,bstp,separation,error\n";
  json << "[\n";
  bool first = true;
  // Times to 10 significant digits: rows the ranking tells apart (it ties
  // within 1e-9 relative) do not look tied.
  auto row = [&](const Evaluation &e, int rank) {
    const Candidate &c = e.candidate;
    const char *status = e.skipped        ? "skipped"
                         : e.sameSchedule ? "same_schedule"
                         : e.otherJob     ? "other_job"
                         : !e.ok()        ? "unschedulable"
                         : !e.fitsMemory  ? "over_memory"
                                          : "ok";
    std::string error = e.error;
    std::replace(error.begin(), error.end(), '"', '\'');
    std::replace(error.begin(), error.end(), '\n', ' ');
    // Whole bytes, rounded up: the figure as a --memory-limit fits it
    // (vocabulary-parallel peaks are fractional).
    const double peakBytes = std::ceil(e.peakBytes);
    csv << (rank > 0 ? std::to_string(rank) : "") << ',' << status << ','
        << llvm::format("%.9e,%.9e,%.9e,%.9e,%.6e,%.6f,%.0f", e.iterationTime,
                        e.pipelineTime, e.gradSyncTime, e.stepTime,
                        e.tokensPerSecond, e.bubbleRatio, peakBytes)
        << ',' << c.pp << ',' << c.dp << ',' << c.mbs << ',' << c.microbatches
        << ',' << tunePlacementName(c.placement) << ',' << c.chunks << ','
        << (c.vocabParallel ? 1 : 0) << ',' << cttpCell(c) << ','
        << stpCell(c, c.fwd) << ',' << stpCell(c, c.bwd) << ','
        << (c.separation ? 1 : 0) << ",\"" << error << "\"\n";
    json << (first ? "" : ",\n")
         << "  {\"rank\": " << (rank > 0 ? std::to_string(rank) : "null")
         << ", \"status\": \"" << status
         << "\", \"iteration_s\": " << llvm::format("%.9e", e.iterationTime)
         << ", \"pipeline_s\": " << llvm::format("%.9e", e.pipelineTime)
         << ", \"grad_sync_s\": " << llvm::format("%.9e", e.gradSyncTime)
         << ", \"step_s\": " << llvm::format("%.9e", e.stepTime)
         << ", \"tokens_per_s\": " << llvm::format("%.6e", e.tokensPerSecond)
         << ", \"bubble_ratio\": " << llvm::format("%.6f", e.bubbleRatio)
         << ", \"peak_bytes\": " << llvm::format("%.0f", peakBytes)
         << ", \"pp\": " << c.pp << ", \"dp\": " << c.dp
         << ", \"mbs\": " << c.mbs << ", \"microbatches\": " << c.microbatches
         << ", \"placement\": \"" << tunePlacementName(c.placement)
         << "\", \"chunks\": " << c.chunks
         << ", \"vocab_parallel\": " << (c.vocabParallel ? "true" : "false")
         << ", \"cttp\": \"" << cttpCell(c) << "\", \"fstp\": \""
         << stpCell(c, c.fwd) << "\", \"bstp\": \"" << stpCell(c, c.bwd)
         << "\", \"separation\": " << (c.separation ? "true" : "false")
         << ", \"error\": " << jsonString(e.error) << "}";
    first = false;
  };
  int rank = 0;
  for (const Evaluation &e : result.ranked)
    row(e, ++rank);
  for (const Evaluation &e : result.rejected)
    row(e, 0);
  json << "\n]\n";
  return writeFile(dir + "/results.csv", csvText) &&
         writeFile(dir + "/results.json", jsonText);
}

/// Two timelines on one time scale, stacked.
std::string stackSvgs(const std::string &top, const std::string &bottom) {
  auto height = [](const std::string &svg) {
    size_t at = svg.find("height=\"");
    return at == std::string::npos ? 0.0 : std::stod(svg.substr(at + 8));
  };
  const double h1 = height(top), h2 = height(bottom);
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\" height=\""
     << h1 + h2 << "\" viewBox=\"0 0 1200 " << h1 + h2 << "\">\n"
     << top.substr(0, 4) << " y=\"0\"" << top.substr(4) << bottom.substr(0, 4)
     << " y=\"" << h1 << "\"" << bottom.substr(4) << "</svg>\n";
  return os.str();
}

class Progress {
public:
  /// Bar: a bar redrawn in place (a terminal). Lines: a line per tenth of
  /// the search (a log file); with `after`, only once the search has run
  /// that long (the first line then, at once), so that a short search
  /// prints nothing.
  enum class Mode { Off, Bar, Lines };
  Progress(Mode mode, std::chrono::seconds after = std::chrono::seconds(0))
      : mode(mode), quietUntil(std::chrono::steady_clock::now() + after) {}
  void operator()(size_t done, size_t total) {
    if (mode == Mode::Off || total == 0 ||
        (done == lastDone && total == lastTotal))
      return;
    lastDone = done;
    lastTotal = total;
    const int percent = static_cast<int>(100 * done / total);
    if (mode == Mode::Lines) {
      // At each tenth, and as soon as the quiet time is over.
      const bool tenth = percent / 10 != last / 10 || done == total;
      last = percent;
      if (std::chrono::steady_clock::now() < quietUntil || (spoke && !tenth))
        return;
      spoke = true;
      llvm::errs() << "flexpipe-tune: searched " << done << " of " << total
                   << " candidates (" << percent << "%)\n";
      return;
    }
    if (percent == last && done != total)
      return;
    last = percent;
    const int width = 40, filled = width * percent / 100;
    std::string bar(filled, '#');
    bar.resize(width, '.');
    llvm::errs() << "\r[" << bar << "] " << percent << "% " << done << "/"
                 << total << (done == total ? "\n" : "");
    llvm::errs().flush();
  }

private:
  Mode mode;
  std::chrono::steady_clock::time_point quietUntil;
  int last = -1;
  bool spoke = false;
  size_t lastDone = 0, lastTotal = 0;
};

/// The command line, described for CLI11.
void addOptions(CLI::App &app, Options &o) {
  app.add_option("--model", o.model, "Model YAML (docs/CostModel.md)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--cluster", o.cluster, "Cluster YAML (docs/CostModel.md)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--gpus", o.gpus,
                 "GPUs to use (default: the cluster's devices)")
      ->check(flexpipe::integerAtLeast(1))
      ->type_name("N");
  app.add_option("--global-batch", o.globalBatch,
                 "Sequences per iteration (default: the model file's)")
      ->check(flexpipe::integerAtLeast(1, flexpipe::kMaxCount))
      ->type_name("B");
  app.add_option("--profile", o.profile,
                 "A run's profile (rank executables' --profile) whose "
                 "durations replace the analytic ones; only candidates with "
                 "the run's stages (holding the same layers) at its "
                 "micro-batch size are priced (give the run's --pp)")
      ->check(CLI::ExistingFile);
  app.add_option("--memory-limit", o.memoryLimit,
                 "Device memory, e.g. 80GiB or 75e9 (default: the cluster's)")
      ->check([](const std::string &text) -> std::string {
        if (parseBytes(text))
          return {};
        return "'" + text.substr(0, 40) +
               "' is not a size from 1 B to 1e18 B (e.g. 80GiB, 75e9, "
               "512MiB)";
      })
      ->type_name("BYTES");
  app.add_option("--top", o.top,
                 "How many of the best to write as specs and print")
      ->check(flexpipe::integerAtLeast(1))
      ->capture_default_str();
  CLI::Option *exact =
      app.add_option(
             "--exact", o.exact,
             "Simulate every candidate that can still be among the N "
             "fastest (in lower-bound order; the others are skipped, see "
             "docs/Tuning.md); at least --top")
          ->check(flexpipe::integerAtLeast(1))
          ->capture_default_str()
          ->type_name("N");
  app.add_flag("--exhaustive", o.exhaustive,
               "Simulate every fused candidate and every separation variant "
               "the two heuristics choose (no lower-bound skipping; "
               "docs/Tuning.md)")
      ->excludes(exact);
  app.add_option("--threads", o.threads,
                 "Worker threads (default: all hardware threads)")
      ->check(flexpipe::integerAtLeast(0, 4096));
  app.add_option("--pp", o.pp, "Only these pipeline sizes (comma-separated)")
      ->check(flexpipe::commaList(
          flexpipe::integerAtLeast(1, flexpipe::kMaxActors)))
      ->type_name("LIST");
  app.add_option("--mbs", o.mbs,
                 "Only these micro-batch sizes (comma-separated)")
      ->check(
          flexpipe::commaList(flexpipe::integerAtLeast(1, flexpipe::kMaxCount)))
      ->type_name("LIST");
  app.add_option("--placements", o.placements,
                 "Only these placements (comma-separated: one_to_one, "
                 "circular, vshape, bidirectional, vshape_bidirectional)")
      ->check(flexpipe::commaList(
          CLI::IsMember({"one_to_one", "circular", "vshape", "bidirectional",
                         "vshape_bidirectional"})))
      ->type_name("LIST");
  app.add_option("--vocab-parallel", o.vocabParallel,
                 "The MLLM placement (embedding and LM head split along the "
                 "vocabulary over the pipeline): auto tries both")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--separation", o.separation,
                 "Gradient separation: auto tries both (on the variants "
                 "--separation-top and --separation-window choose; "
                 "docs/Tuning.md)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--separation-top", o.separationTop,
                 "Try separation on the variants of this many fastest fused "
                 "candidates (0: all of them; slower, docs/Tuning.md)")
      ->check(flexpipe::integerAtLeast(0))
      ->capture_default_str();
  app.add_option("--separation-window", o.separationWindow,
                 "... and only of those within this factor of the best fused "
                 "time (0: no window)")
      ->check(flexpipe::factorOrZero())
      ->capture_default_str();
  app.add_flag("--allow-fwd-first", o.allowFwdFirst,
               "Also try the forward-first computation-type priority");
  app.add_option("--progress", o.progress,
                 "Progress on standard error: on (a bar), lines (a line per "
                 "tenth of the search), off, or auto: a bar on a terminal, "
                 "else lines once the search has run two minutes")
      ->check(CLI::IsMember({"auto", "on", "lines", "off"}))
      ->capture_default_str();
  app.add_option("--load-plugin", o.plugins,
                 "Load a scheduler plugin (docs/Plugins.md) before anything "
                 "else; repeatable")
      ->allow_extra_args(false)
      ->type_name("PATH");
  app.add_option("--check", o.checks,
                 "Apply a plugin check function to every candidate (the "
                 "baselines included); repeatable, all must agree")
      ->allow_extra_args(false)
      ->type_name("NAME");
  app.add_option("--priority", o.priorities,
                 "Also try a plugin priority: one candidate per placement, "
                 "micro-batch size and the rest with every actor using it "
                 "(written as custom(\"NAME\")); repeatable")
      ->allow_extra_args(false)
      ->type_name("NAME");
  app.add_option("-o,--output", o.output, "Directory for the results")
      ->capture_default_str();
}

/// Loads the --load-plugin libraries; `flags` gets them as flexpipe-compile
/// options for the written specs. Reports and returns false on an error.
bool loadPlugins(const Options &o, std::string &flags) {
  flexpipe::plugin::Registry &plugins = flexpipe::plugin::Registry::global();
  for (const std::string &path : o.plugins) {
    if (std::string error = plugins.load(path); !error.empty()) {
      llvm::errs() << "error: --load-plugin " << error << "\n";
      return false;
    }
    llvm::SmallString<256> absolute;
    if (llvm::sys::fs::real_path(path, absolute))
      absolute = path;
    // The written specs carry the path in a // comment line.
    if (absolute.str().find_first_of("\n\r") != llvm::StringRef::npos) {
      llvm::errs() << "error: --load-plugin " << path
                   << ": the path has a line break; the written specs' "
                      "flexpipe-compile line cannot hold it\n";
      return false;
    }
    flags += " --load-plugin " + flexpipe::shellQuote(absolute.str().str());
  }
  return true;
}

/// The search's options from the command line (hooks, limits, the space);
/// `resolveOptions` fills in the defaults later. Reports and returns false on
/// an error.
bool tuneOptionsOf(const Options &o, const Profile *profile,
                   TuneOptions &options) {
  flexpipe::plugin::Registry &plugins = flexpipe::plugin::Registry::global();
  if (!resolveHooks(
          o.checks, "--check", "check",
          [&](const std::string &name) { return plugins.check(name); },
          options.checks) ||
      !resolveHooks(
          o.priorities, "--priority", "priority",
          [&](const std::string &name) { return plugins.priority(name); },
          options.priorities))
    return false;
  options.gpus = o.gpus;
  options.globalBatch = o.globalBatch;
  if (std::optional<double> bytes = parseBytes(o.memoryLimit))
    options.memoryLimit = *bytes; // (checked while parsing; empty: not given)
  // Each listed value once (--pp 4,4 searched every pp 4 candidate twice).
  auto once = [](auto &list, const auto &value) {
    if (std::find(list.begin(), list.end(), value) == list.end())
      list.push_back(value);
  };
  // (Each item was checked while parsing.)
  for (const std::string &list : o.pp)
    for (const std::string &item : flexpipe::commaItems(list))
      once(options.pp, std::stoll(item));
  for (const std::string &list : o.mbs)
    for (const std::string &item : flexpipe::commaItems(list))
      once(options.mbs, std::stoll(item));
  for (const std::string &list : o.placements)
    for (const std::string &name : flexpipe::commaItems(list))
      for (int p = 0; p < kNumTunePlacements; ++p)
        if (name == tunePlacementName(static_cast<TunePlacement>(p)))
          once(options.placements, static_cast<TunePlacement>(p));
  auto choice = [](const std::string &value) {
    return value == "on"    ? TuneOptions::Choice::On
           : value == "off" ? TuneOptions::Choice::Off
                            : TuneOptions::Choice::Both;
  };
  options.vocabParallel = choice(o.vocabParallel);
  options.separation = choice(o.separation);
  options.allowFwdFirst = o.allowFwdFirst;
  options.separationTop = static_cast<size_t>(o.separationTop);
  options.separationWindow = o.separationWindow;
  options.exact = o.exhaustive ? 0 : std::max<size_t>(o.exact, o.top);
  options.threads = o.threads > 0
                        ? o.threads
                        : std::max(1u, std::thread::hardware_concurrency());
  options.profile = profile;
  return true;
}

/// An earlier run's files in `output` go, so that none of them (a rank-K
/// beyond this run's top, results of a run that then fails) is taken for
/// this run's. A link of such a name is the user's: neither removed nor
/// written through, so the run stops before it removes anything; so does
/// anything else of such a name that is no regular file (a directory was
/// found after the search, a named pipe hung the run), and so does one of
/// this run's `inputs` (a --model rank-K.model.yaml of the earlier run was
/// removed before it was read). Reports and returns false then, and when a
/// file cannot be removed (the files before it are gone then).
bool removeEarlierResults(const std::string &output,
                          llvm::ArrayRef<std::string> inputs) {
  std::vector<std::string> stale;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(output, ec), end; it != end && !ec;
       it.increment(ec)) {
    const llvm::StringRef name = llvm::sys::path::filename(it->path());
    // rank-K as writeSpecs names it: K from 1 (an int), no leading zeros.
    llvm::StringRef number = name;
    unsigned k = 0;
    const bool rankFile =
        number.consume_front("rank-") &&
        (number.consume_back(".mlir") || number.consume_back(".model.yaml")) &&
        !number.getAsInteger(10, k) && k >= 1 && k <= INT_MAX &&
        std::to_string(k) == number;
    if (!rankFile && name != "results.csv" && name != "results.json" &&
        name != "best-vs-1f1b.svg")
      continue;
    if (it->type() == llvm::sys::fs::file_type::symlink_file) {
      llvm::errs() << "flexpipe-tune: " << it->path()
                   << " is a symbolic link, and flexpipe-tune writes a file "
                      "of that name; it does not write through links: "
                      "remove the link or give -o another directory\n";
      return false;
    }
    if (it->type() != llvm::sys::fs::file_type::regular_file) {
      llvm::errs() << "flexpipe-tune: " << it->path()
                   << " is not a regular file, and flexpipe-tune writes "
                      "files of that name and removes an earlier run's: "
                      "remove it or give -o another directory\n";
      return false;
    }
    for (const std::string &input : inputs)
      if (!input.empty() && llvm::sys::fs::equivalent(input, it->path())) {
        llvm::errs() << "flexpipe-tune: " << input
                     << " is an earlier run's result in -o " << output
                     << ", which this run replaces: copy it elsewhere or "
                        "give -o another directory\n";
        return false;
      }
    stale.push_back(it->path());
  }
  for (const std::string &path : stale)
    if (std::error_code ec = llvm::sys::fs::remove(path)) {
      llvm::errs() << "flexpipe-tune: cannot remove " << path
                   << ", an earlier run's result: " << ec.message() << "\n";
      return false;
    }
  return true;
}

/// Where the results go must be a writable directory before the search, not
/// after (an earlier run's files in it are gone: removeEarlierResults ran
/// when it was read). Reports and returns false when it is not.
bool prepareOutput(const std::string &output) {
  if (std::error_code ec = llvm::sys::fs::create_directories(output)) {
    llvm::errs() << "flexpipe-tune: cannot create " << output << ": "
                 << ec.message() << "\n";
    return false;
  }
  if (!llvm::sys::fs::is_directory(output)) {
    llvm::errs() << "flexpipe-tune: -o " << output
                 << " exists and is not a directory; the results are a "
                    "directory of files\n";
    return false;
  }
  // A new file of its own (never an existing one, nor through a link).
  int probeFd = -1;
  llvm::SmallString<128> probe;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          output + "/.flexpipe-tune-probe-%%%%%%", probeFd, probe)) {
    llvm::errs() << "flexpipe-tune: cannot write in " << output << ": "
                 << ec.message() << "\n";
    return false;
  }
  llvm::sys::Process::SafelyCloseFileDescriptor(probeFd);
  llvm::sys::fs::remove(probe);
  return true;
}

/// The summary line, the table of the `top` best and the baselines at their
/// best (pp, dp, mbs).
void printRanking(const ModelConfig &model, const ClusterConfig &cluster,
                  const TuneOptions &resolved, const TuneResult &result,
                  const std::optional<Evaluation> (&baseline)[2],
                  const std::string (&whyNone)[2], size_t top, double elapsed) {
  size_t overMemory = 0, unschedulable = 0, same = 0, otherJob = 0;
  for (const Evaluation &e : result.rejected)
    if (e.sameSchedule)
      ++same;
    else if (e.otherJob)
      ++otherJob;
    else if (!e.skipped)
      (e.ok() ? overMemory : unschedulable)++;
  llvm::outs() << llvm::formatv(
      "flexpipe-tune: {0} on {1}, {2} {12}, global batch {3}, memory limit "
      "{4}\n{5} candidates: {6} simulated, {13} skipped by bound, {7} "
      "separation variants skipped, {8} over memory, {9} unschedulable{14}; "
      "{10:F2} s on {11} thread(s)\n\n",
      model.name, cluster.name, resolved.gpus, resolved.globalBatch,
      resolved.memoryLimit > 0 ? formatBytes(resolved.memoryLimit) : "none",
      result.candidates, result.simulated, result.pruned, overMemory,
      unschedulable, elapsed, resolved.threads,
      cluster.devicesWord(resolved.gpus), result.bounded,
      (same
           ? llvm::formatv(", {0} running a better-ranked one's schedule", same)
                 .str()
           : std::string()) +
          (otherJob
               ? llvm::formatv(", {0} not the profile's job", otherJob).str()
               : std::string()));
  llvm::outs() << llvm::formatv("{0,-5} {1,-11} {2,-11} {3,-7} {4,-10} "
                                "{5,-4} {6,-4} {7,-4} {8,-4} {9}\n",
                                "rank", "iteration", "tokens/s", "bubble",
                                "peak mem", "pp", "dp", "mbs", "m", "schedule");
  auto line = [&](const std::string &label, const Evaluation &e) {
    const Candidate &c = e.candidate;
    llvm::outs() << llvm::formatv(
        "{0,-5} {1,-11} {2,-11} {3,-7} {4,-10} {5,-4} {6,-4} {7,-4} {8,-4} "
        "{9}\n",
        label, seconds(e.iterationTime), tokenRate(e.tokensPerSecond),
        llvm::formatv("{0:F1}%", 100 * e.bubbleRatio).str(),
        formatBytes(e.peakBytes), c.pp, c.dp, c.mbs, c.microbatches,
        describe(c));
  };
  for (size_t i = 0; i < top; ++i)
    line(std::to_string(i + 1), result.ranked[i]);
  const Evaluation &best = result.ranked.front();
  llvm::outs() << "\n";
  const char *names[2] = {"Megatron-LM 1F1B", "T-1F1B (1F1B, vocab-parallel)"};
  for (int vp = 0; vp < 2; ++vp) {
    const ModuleModel &m = model.modules.front();
    const bool possible = !vp || llvm::any_of(resolved.pp, [&](int64_t pp) {
      return m.canSplitVocabulary(pp);
    });
    if (!baseline[vp]) {
      if (!possible)
        llvm::outs() << names[vp]
                     << ": not possible here (it needs an LM head, pp >= 2 "
                        "and a vocabulary of at least pp words)\n";
      else
        llvm::outs() << names[vp] << ": " << whyNone[vp] << "\n";
      continue;
    }
    line(vp ? "T1F1B" : "1F1B", *baseline[vp]);
    // A search restricted (--pp, --placements, ...) may not reach it.
    if (!(best.iterationTime > 0 && baseline[vp]->iterationTime > 0))
      continue; // a profile that prices everything at 0 s: no ratio
    const double ratio = baseline[vp]->iterationTime / best.iterationTime;
    llvm::outs() << llvm::formatv(
        "      best is {0:F2}x {1} than {2} at its best (pp, dp, mbs)\n",
        ratio >= 1 ? ratio : 1 / ratio, ratio >= 1 ? "faster" : "slower",
        names[vp]);
  }
}

/// `path` made absolute and quoted for sh: the reproduce line of rank-K.mlir
/// runs in the output directory, wherever the tuner ran.
std::string absolute(const std::string &path) {
  llvm::SmallString<256> full(path);
  llvm::sys::fs::make_absolute(full);
  llvm::sys::path::remove_dots(full, /*remove_dot_dot=*/true);
  return flexpipe::shellQuote(full);
}

/// rank-K.mlir (a spec flexpipe-compile builds, with its prediction in a
/// comment) and rank-K.model.yaml for each of the `top` best.
bool writeRankSpecs(const Options &o, const ModelConfig &model,
                    const ClusterConfig &cluster, const TuneOptions &resolved,
                    const TuneResult &result, size_t top,
                    const std::string &pluginFlags) {
  for (size_t i = 0; i < top; ++i) {
    const Evaluation &e = result.ranked[i];
    const Candidate &c = e.candidate;
    const std::string stem = o.output + "/rank-" + std::to_string(i + 1);
    std::ostringstream spec;
    spec << "// flexpipe-tune rank " << i + 1 << " for " << model.name << " on "
         << cluster.name << ", " << resolved.gpus << " "
         << cluster.devicesWord(resolved.gpus) << ": pp " << c.pp << " x dp "
         << c.dp << ", micro-batch size " << c.mbs << ", " << c.microbatches
         << " micro-batches\n"
         << "// " << describe(c) << "\n"
         << "// predicted: iteration " << seconds(e.iterationTime)
         << " (pipeline " << seconds(e.pipelineTime)
         << ", collectives after it " << seconds(e.gradSyncTime)
         << ", optimizer step " << seconds(e.stepTime) << "), "
         << tokenRate(e.tokensPerSecond) << " tokens/s, bubble "
         << llvm::formatv("{0:F1}", 100 * e.bubbleRatio).str() << "%, peak "
         << formatBytes(e.peakBytes) << " per device\n"
         << "// flexpipe-compile rank-" << i + 1 << ".mlir --time-model=cost"
         << " --model rank-" << i + 1 << ".model.yaml --cluster "
         << absolute(o.cluster)
         << (o.profile.empty() ? std::string()
                               : " --profile " + absolute(o.profile))
         << " --dp " << c.dp << pluginFlags << " --emit=report\n"
         << specText(c, model, "rank" + std::to_string(i + 1),
                     resolved.separationRounds, o.checks);
    if (!writeFile(stem + ".mlir", spec.str()) ||
        !writeFile(stem + ".model.yaml",
                   formatModel(model, c.mbs, resolved.globalBatch)))
      return false;
  }
  return true;
}

/// best-vs-1f1b.svg: the best next to the Megatron baseline, on one time
/// scale (the best alone when no baseline fits).
bool writeBestVsBaseline(const std::string &output, const ModelConfig &model,
                         const ClusterConfig &cluster,
                         const TuneOptions &resolved, const TuneResult &result,
                         const std::optional<Evaluation> &baseline) {
  const Evaluation &best = result.ranked.front();
  EvaluationDetail evaluated, baseDetail;
  const EvaluationDetail &bestDetail =
      result.bestDetail ? *result.bestDetail : evaluated;
  {
    // The programs: the best's kept from the search where it could be, the
    // re-evaluations side by side.
    std::optional<std::thread> other;
    if (baseline) {
      auto evaluateBaseline = [&] {
        evaluate(baseline->candidate, model, cluster, resolved, &baseDetail);
      };
      if (resolved.threads > 1 && !result.bestDetail)
        other.emplace(evaluateBaseline);
      else
        evaluateBaseline();
    }
    if (!result.bestDetail)
      evaluate(best.candidate, model, cluster, resolved, &evaluated);
    if (other)
      other->join();
  }
  ReportContext context;
  context.title = "best: " + describe(best.candidate);
  // Each title adds what follows its pipeline, as the table does.
  context.after = AfterPipeline{best.gradSyncTime, best.stepTime};
  context.tokensPerIteration =
      static_cast<double>(resolved.globalBatch * model.modules.front().seq);
  std::string svg;
  if (baseline) {
    context.timeSpan =
        std::max(bestDetail.sim.iterationTime, baseDetail.sim.iterationTime);
    ReportContext baseContext = context;
    baseContext.after =
        AfterPipeline{baseline->gradSyncTime, baseline->stepTime};
    baseContext.title = llvm::formatv(
        "Megatron 1F1B, pp {0} x dp {1}, mbs {2}", baseline->candidate.pp,
        baseline->candidate.dp, baseline->candidate.mbs);
    svg = stackSvgs(formatSvg(bestDetail.program, bestDetail.sim,
                              bestDetail.costs, context),
                    formatSvg(baseDetail.program, baseDetail.sim,
                              baseDetail.costs, baseContext));
  } else {
    svg = formatSvg(bestDetail.program, bestDetail.sim, bestDetail.costs,
                    context);
  }
  return writeFile(output + "/best-vs-1f1b.svg", svg);
}

} // namespace

/// What --help says first.
const char *const kAbout =
    "flexpipe-tune: search pipeline configurations for a model on a "
    "cluster and rank them by simulated iteration time.\n"
    "The space (the paper's section 6): pp x dp = GPUs with pp any divisor "
    "(the paper's powers of two for 2, 4, 8, ... GPUs), micro-batch sizes "
    "that divide the global batch, placements "
    "one_to_one, circular (v = 2, 4), vshape, bidirectional and "
    "vshape_bidirectional, each with and without the vocabulary-parallel "
    "embedding and LM head, computation-type priorities bwd_first and "
    "interleaved (fwd_first with --allow-fwd-first), stage priorities "
    "breadth_first and depth_first (with interval pp for circular), "
    "gradient separation on and off. Every candidate is scheduled with "
    "the cost model's durations and simulated; the data-parallel gradient "
    "all-reduce is added; candidates over the memory limit are dropped. "
    "Scheduler plugins (--load-plugin) add check functions (--check) and "
    "priorities (--priority) to the search (docs/Plugins.md).";

int main(int argc, char **argv) {
  // LLVM's signal handlers (and its alternate signal stack) are installed on
  // the first ToolOutputFile; do it here, on the main thread, rather than in
  // the results writer thread, whose exit would leave the stack to the
  // thread library (and to ASan, which unmaps it and aborts).
  llvm::sys::PrintStackTraceOnErrorSignal(argv[0]);
  // A closed standard stream is /dev/null, not the next file opened (the
  // ranking went into results.csv with standard output closed).
  if (std::error_code ec = llvm::sys::Process::FixupStandardFileDescriptors()) {
    std::fprintf(stderr, "flexpipe-tune: %s\n", ec.message().c_str());
    return 1;
  }
  Options o;
  flexpipe::keepFreedMemory();
  CLI::App app{kAbout, "flexpipe-tune"};
  addOptions(app, o);
  if (int exit = flexpipe::parseCommandLine(app, argc, argv); exit >= 0)
    return exit;

  // Before anything can fail (a run stopped by its options, --pp 3 on 4
  // GPUs, left the earlier run's results, where one stopped by its search
  // space did not); the directory itself is made only for a search.
  if (llvm::sys::fs::is_directory(o.output) &&
      !removeEarlierResults(o.output, {o.model, o.cluster, o.profile}))
    return 1;
  std::string pluginFlags; // for flexpipe-compile in the written specs
  ModelConfig model;
  ClusterConfig cluster;
  Profile profile;
  TuneOptions options;
  if (!loadPlugins(o, pluginFlags) ||
      !tuneOptionsOf(o, o.profile.empty() ? nullptr : &profile, options))
    return 1;
  auto loaded = [](llvm::Error error) {
    if (!error)
      return true;
    llvm::errs() << "flexpipe-tune: " << llvm::toString(std::move(error))
                 << "\n";
    return false;
  };
  if (!loaded(loadModel(o.model, model)) ||
      !loaded(loadCluster(o.cluster, cluster)) ||
      (!o.profile.empty() && !loaded(loadProfile(o.profile, profile))))
    return 1;
  const bool terminal = isatty(STDERR_FILENO);
  Progress progress(
      o.progress == "on" || (o.progress == "auto" && terminal)
          ? Progress::Mode::Bar
      : o.progress == "lines" || o.progress == "auto" ? Progress::Mode::Lines
                                                      : Progress::Mode::Off,
      o.progress == "auto" ? std::chrono::minutes(2) : std::chrono::minutes(0));
  options.progress = [&](size_t done, size_t total) { progress(done, total); };

  llvm::Expected<TuneOptions> resolved =
      resolveOptions(model, cluster, options);
  if (!resolved) {
    llvm::errs() << "flexpipe-tune: " << llvm::toString(resolved.takeError())
                 << "\n";
    return 1;
  }
  // A run's profile holds one micro-batch size's durations; where it does
  // not record the size (a hand-written one), other sizes would be priced
  // with them (a search over all read 3x fast). The runtime records it,
  // and candidates of other sizes are then not the profile's job.
  if (!o.profile.empty() && !profile.microBatchSize && resolved->mbs.size() > 1)
    llvm::errs() << "flexpipe-tune: warning: --profile prices every "
                    "micro-batch size with the run's durations, but the "
                    "search has "
                 << resolved->mbs.size()
                 << " sizes; give the run's --mbs to price only its own\n";
  // Every candidate runs on all of them (pp x dp = --gpus): what ranks
  // sharing a node's cores cost depends on it.
  cluster.jobDevices = resolved->gpus;
  // The directories prepareOutput makes, deepest first.
  std::vector<std::string> made;
  for (llvm::StringRef dir = o.output;
       !dir.empty() && !llvm::sys::fs::exists(dir);
       dir = llvm::sys::path::parent_path(dir))
    made.push_back(dir.str());
  if (!prepareOutput(o.output))
    return 1;

  const auto started = std::chrono::steady_clock::now();
  llvm::Expected<TuneResult> tuned = tune(model, cluster, *resolved);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  if (!tuned) {
    llvm::errs() << "flexpipe-tune: " << llvm::toString(tuned.takeError())
                 << "\n";
    for (const std::string &dir : made) // still empty: none is left
      llvm::sys::fs::remove(dir);
    return 1;
  }
  const TuneResult &result = *tuned;
  // The results files need no baselines: with more than one thread they are
  // written meanwhile.
  bool resultsWritten = false;
  std::optional<std::thread> writer;
  auto write = [&] { resultsWritten = writeResults(o.output, result); };
  if (resolved->threads > 1)
    writer.emplace(write);
  // The baselines at their best (pp, dp, mbs): Megatron's 1F1B and T-1F1B.
  std::string whyNone[2];
  const std::optional<Evaluation> baseline[2] = {
      bestBaseline(model, cluster, *resolved, false, &result, &whyNone[0]),
      bestBaseline(model, cluster, *resolved, true, &result, &whyNone[1])};
  if (writer)
    writer->join();
  else
    write();
  // A hook that fails (throws, or answers out of range) stops the tool, as
  // in flexpipe-compile: counted as unschedulable, the tuner exited 0 and
  // said nothing. (results.csv, written, has every candidate's error.)
  for (const Evaluation &e : result.rejected)
    if (e.hookFailed) {
      llvm::errs() << "flexpipe-tune: a plugin hook failed on "
                   << describe(e.candidate) << ": " << e.error
                   << "; no ranking is given\n";
      return 1;
    }
  const size_t top = std::min<size_t>(o.top, result.ranked.size());
  printRanking(model, cluster, *resolved, result, baseline, whyNone, top,
               elapsed);
  if (!resultsWritten ||
      !writeRankSpecs(o, model, cluster, *resolved, result, top, pluginFlags) ||
      !writeBestVsBaseline(o.output, model, cluster, *resolved, result,
                           baseline[0]))
    return 1;
  llvm::outs() << "\nwrote " << o.output << "/results.csv, results.json, "
               << (top == 1
                       ? std::string("rank-1.mlir")
                       : "rank-1.mlir .. rank-" + std::to_string(top) + ".mlir")
               << " (with .model.yaml), "
               << "best-vs-1f1b.svg\n";
  llvm::outs().flush();
  if (std::error_code ec = llvm::outs().error()) {
    llvm::errs() << "flexpipe-tune: cannot write the ranking to standard "
                    "output: "
                 << ec.message() << "\n";
    llvm::outs().clear_error();
    return 1;
  }
  return 0;
}
