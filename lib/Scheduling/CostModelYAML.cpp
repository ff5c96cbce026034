//===- CostModelYAML.cpp - Model, cluster and profile files ---------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Built with -fexceptions (yaml-cpp throws); every exception is caught here.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/CostModelYAML.h"

#include "flexpipe/Support/InputLimits.h"
#include "flexpipe/Support/ReadInput.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

using namespace flexpipe::sched;
using flexpipe::kMaxActors;
using flexpipe::kMaxCount;
using flexpipe::kMaxDimension;

namespace {

/// The largest number a model, cluster or profile file may hold (1 EB, 1e18
/// FLOP/s, 1e18 s): far beyond any real machine, small enough that sums over
/// millions of instructions stay finite. Rates (FLOP/s, bytes/s) are at
/// least 1, so that what they divide stays within it too.
constexpr double kLargestNumber = 1e18;
/// kLargestNumber for the keys that take an integer.
constexpr int64_t kLargestInteger = 1000000000000000000;
static_assert(static_cast<double>(kLargestInteger) == kLargestNumber);

/// The top-level keys of each kind of file.
constexpr const char *kModelKeys[] = {
    "name",   "dtype", "attention", "global_batch_size", "micro_batch_size",
    "modules"};
constexpr const char *kClusterKeys[] = {
    "name",       "device_kind", "devices",      "devices_per_node",
    "peak_flops", "efficiency",  "memory_bytes", "intra_node",
    "inter_node", "measured"};
constexpr const char *kProfileKeys[] = {
    "micro_batch_size",  "modules",     "stages",        "messages",
    "default_message_s", "optimizer_s", "instruction_s", "exec_s"};

/// Thrown inside this file only: where in the file (0: nowhere) and what.
struct Problem {
  int line, column;
  std::string what;
};

class Reader {
public:
  Reader(std::string path, const std::string *text)
      : path(std::move(path)), text(text) {}

  [[noreturn]] void fail(const YAML::Mark &mark, const std::string &what) const {
    throw Problem{std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1,
                  what};
  }
  /// FILE:LINE:COLUMN of `mark` (a null node, an empty file, has no place:
  /// its file's start).
  std::string place(const YAML::Mark &mark) const {
    return path + ':' + std::to_string(std::max(mark.line, 0) + 1) + ':' +
           std::to_string(std::max(mark.column, 0) + 1);
  }

  /// A mapping whose keys are all in `allowed`. At a file's top level
  /// (`otherKinds`: the other kinds of file and their keys), an unknown key
  /// in a file whose keys all belong to another kind says which it reads as.
  void expectMap(
      const YAML::Node &node, const std::string &what,
      llvm::ArrayRef<const char *> allowed,
      llvm::ArrayRef<std::pair<const char *, llvm::ArrayRef<const char *>>>
          otherKinds = {}) const {
    if (!node.IsMap())
      fail(node.Mark(), what + " must be a mapping of keys to values");
    for (const auto &entry : node)
      if (!entry.first.IsScalar())
        fail(entry.first.Mark(), "a key in " + what +
                                     " must be a name, not a list, a mapping "
                                     "or empty");
    std::set<std::string> keys(allowed.begin(), allowed.end()), seen;
    auto readsAs = [&]() -> std::string {
      for (const auto &[kind, kindKeys] : otherKinds) {
        std::set<std::string> known(kindKeys.begin(), kindKeys.end());
        if (llvm::all_of(node, [&](const auto &entry) {
              return known.count(entry.first.template as<std::string>());
            }))
          return std::string("; its keys are those of a ") + kind + " file";
      }
      return "";
    };
    for (const auto &entry : node) {
      const std::string key = entry.first.as<std::string>();
      // YAML forbids a key twice in one mapping; yaml-cpp would keep the
      // first silently.
      if (!seen.insert(key).second)
        fail(entry.first.Mark(), "key '" + key + "' appears twice in " + what);
      if (keys.count(key))
        continue;
      std::string list;
      for (const char *k : allowed)
        list += std::string(list.empty() ? "" : ", ") + k;
      fail(entry.first.Mark(), "unknown key '" + key + "' in " + what +
                                   "; expected one of: " + list + readsAs());
    }
  }

  YAML::Node required(const YAML::Node &map, const char *key,
                      const std::string &what) const {
    YAML::Node node = map[key];
    if (!node)
      fail(map.Mark(), "missing key '" + std::string(key) + "' in " + what);
    return node;
  }

  /// integer() and number() of the value of `key` in `map`, which must have
  /// it (required()).
  int64_t requiredInteger(const YAML::Node &map, const char *key,
                          const std::string &what, int64_t min,
                          int64_t max = kLargestInteger) const {
    return integer(required(map, key, what), key, min, max);
  }
  double requiredNumber(const YAML::Node &map, const char *key,
                        const std::string &what, double min) const {
    return number(required(map, key, what), key, min);
  }

  /// An integer in [min, max]; `max` is at most kLargestNumber, as every
  /// number in the files (9223372036854775807 devices per node passed).
  int64_t integer(const YAML::Node &node, const char *key, int64_t min,
                  int64_t max = kLargestInteger) const {
    notQuoted(node, key, "an integer");
    // yaml-cpp reads a leading 0 as octal (YAML 1.1): 010 was 8, 08 no
    // integer at all.
    const std::string written = scalar(node);
    const llvm::StringRef digits = llvm::StringRef(written).ltrim("+-");
    if (digits.size() > 1 && digits[0] == '0' && llvm::isDigit(digits[1]))
      fail(node.Mark(), "key '" + std::string(key) + "' is written '" +
                            written +
                            "' with a leading 0, which YAML 1.1 reads as "
                            "octal; write the decimal number without it");
    auto outOfRange = [&](bool below, const std::string &got) {
      fail(node.Mark(), "key '" + std::string(key) + "' must be " +
                            (below ? "at least " + std::to_string(min)
                                   : "at most " + std::to_string(max)) +
                            ", got " + got);
    };
    int64_t value;
    try {
      value = node.as<int64_t>();
    } catch (const YAML::Exception &) {
      // Digits past int64_t's range are out of range, not no integer.
      if (!digits.empty() && written.size() - digits.size() <= 1 &&
          llvm::all_of(digits, llvm::isDigit))
        outOfRange(written[0] == '-', written);
      fail(node.Mark(), "key '" + std::string(key) +
                            "' must be an integer, got '" + written + "'");
    }
    if (value < min || value > max)
      outOfRange(value < min, std::to_string(value));
    return value;
  }

  /// true or false.
  bool boolean(const YAML::Node &node, const char *key) const {
    notQuoted(node, key, "true or false");
    try {
      return node.as<bool>();
    } catch (const YAML::Exception &) {
      fail(node.Mark(), "key '" + std::string(key) +
                            "' must be true or false, got '" + scalar(node) +
                            "'");
    }
  }

  /// A quoted scalar is a string in YAML, not a number ("0.5" passed).
  void notQuoted(const YAML::Node &node, const char *key,
                 const char *kind) const {
    if (node.IsScalar() && node.Tag() == "!")
      fail(node.Mark(), "key '" + std::string(key) + "' must be " + kind +
                            ", got the string \"" + scalar(node) +
                            "\"; write it without quotes");
  }

  /// A number of at least `min` (and at most kLargestNumber in size).
  double number(const YAML::Node &node, const char *key, double min) const {
    notQuoted(node, key, "a number");
    double value;
    try {
      value = node.as<double>();
    } catch (const YAML::Exception &) {
      fail(node.Mark(), "key '" + std::string(key) +
                            "' must be a number, got '" + scalar(node) + "'");
    }
    // Infinite, NaN and absurdly large values would overflow the
    // simulation's sums; no duration, size, rate or memory needs more.
    if (!std::isfinite(value) || std::fabs(value) > kLargestNumber) {
      std::ostringstream os;
      os << "key '" << key << "' must be a finite number of at most "
         << kLargestNumber << ", got '" << scalar(node) << "'";
      fail(node.Mark(), os.str());
    }
    if (!(value >= min)) {
      std::ostringstream os;
      os << "key '" << key << "' must be at least " << min << ", got " << value;
      fail(node.Mark(), os.str());
    }
    return value;
  }

  /// number() of the value of `key` in `map` into `out`, where it is there.
  template <typename T>
  void optionalNumber(const YAML::Node &map, const char *key, double min,
                      T &out) const {
    if (YAML::Node node = map[key])
      out = number(node, key, min);
  }

  std::string string(const YAML::Node &node, const char *key) const {
    if (!node.IsScalar())
      fail(node.Mark(), "key '" + std::string(key) + "' must be a string");
    return node.as<std::string>();
  }

  /// A name: a non-empty string on one line (the tools write it into
  /// comments and other files).
  std::string name(const YAML::Node &node) const {
    std::string text = string(node, "name");
    if (!isConfigName(text))
      fail(node.Mark(), "key 'name' must be " + std::string(kConfigNameRule));
    return text;
  }

  /// The name of a file without a `name` key: its stem, or `fallback`
  /// where that would be no name (empty, control characters).
  static std::string nameOf(const std::string &path, const char *fallback) {
    const std::string stem = llvm::sys::path::stem(path).str();
    return isConfigName(stem) ? stem : fallback;
  }

  static std::string scalar(const YAML::Node &node) {
    if (node.IsScalar())
      return node.Scalar();
    return node.IsSequence() ? "a list" : node.IsMap() ? "a mapping" : "null";
  }

  YAML::Node load() const {
    std::string contents;
    if (text) {
      contents = *text;
    } else {
      // A directory or a file that opens and then fails to read
      // (/proc/self/mem) is an error with the reason: a stream threw
      // std::ios_base::failure there, which nothing caught.
      // (An endless device, /dev/zero, read until memory ran out.)
      llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
          flexpipe::readInputFile(path, flexpipe::kMaxConfigBytes);
      if (!buffer)
        throw Problem{0, 0,
                      "cannot read the file: " +
                          flexpipe::readInputError(buffer.getError())};
      contents = (*buffer)->getBuffer().str();
    }
    checkCharacters(contents);
    try {
      YAML::Node root = YAML::Load(contents);
      // A second document ("---") would be ignored without a word (an
      // empty one after a trailing "---" holds nothing to ignore). Read
      // event by event, two documents at most: yaml-cpp 0.7's LoadAll
      // loops on some malformed streams (found by fuzzing).
      std::istringstream in(contents);
      YAML::Parser parser(in);
      Content first, second;
      if (parser.HandleNextDocument(first) &&
          parser.HandleNextDocument(second) && second.mark)
        fail(*second.mark, "a second YAML document; the file must hold one");
      return root;
    } catch (const YAML::ParserException &e) {
      fail(e.mark, "invalid YAML: " + e.msg);
    }
  }

  /// YAML text has no control characters but tabs and line ends. yaml-cpp
  /// drops a NUL byte without a word ("\0foo: 1" read as an unknown key
  /// 'oo') or calls it an escape, and a DEL is invisible in its messages.
  /// UTF-16 and UTF-32 text, which yaml-cpp reads, is left to it: its first
  /// bytes hold a byte order mark or a NUL (the YAML spec's detection).
  static void checkCharacters(const std::string &contents) {
    const llvm::StringRef start = llvm::StringRef(contents).take_front(4);
    if (start.starts_with("\xfe\xff") || start.starts_with("\xff\xfe") ||
        start.contains('\0'))
      return;
    int line = 1, column = 1;
    for (unsigned char c : contents) {
      if (c == '\n') {
        ++line;
        column = 1;
        continue;
      }
      if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
        char byte[8];
        std::snprintf(byte, sizeof byte, "0x%02x", c);
        throw Problem{line, column,
                      std::string("the file holds a control character (byte ") +
                          byte +
                          "), which YAML text cannot hold: is it a binary "
                          "file?"};
      }
      ++column;
    }
  }

  /// Where a document's first content is, if it has any besides nulls.
  struct Content : YAML::EventHandler {
    std::optional<YAML::Mark> mark;
    void at(const YAML::Mark &m) {
      if (!mark)
        mark = m;
    }
    void OnDocumentStart(const YAML::Mark &) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark &, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark &m, YAML::anchor_t) override { at(m); }
    void OnScalar(const YAML::Mark &m, const std::string &, YAML::anchor_t,
                  const std::string &) override {
      at(m);
    }
    void OnSequenceStart(const YAML::Mark &m, const std::string &,
                         YAML::anchor_t, YAML::EmitterStyle::value) override {
      at(m);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark &m, const std::string &, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {
      at(m);
    }
    void OnMapEnd() override {}
  };

  const std::string path;
  const std::string *text; // the contents, when given instead of read
};

template <typename Fn> llvm::Error guarded(const std::string &path, Fn fn) {
  try {
    fn();
  } catch (const Problem &problem) {
    return llvm::make_error<FileError>(path, problem.line, problem.column,
                                       problem.what);
  } catch (const YAML::Exception &e) {
    return llvm::make_error<FileError>(path, e.mark.line + 1, e.mark.column + 1,
                                       e.msg);
  }
  return llvm::Error::success();
}

Link readLink(const Reader &r, const YAML::Node &node, const char *what) {
  r.expectMap(node, what, {"bandwidth_bytes_per_s", "latency_s"});
  Link link;
  link.bandwidth = r.requiredNumber(node, "bandwidth_bytes_per_s", what, 1);
  link.latency = r.requiredNumber(node, "latency_s", what, 0);
  return link;
}

/// A list under `key` of `node`, each entry read by `entry`.
template <typename Fn>
void readList(const Reader &r, const YAML::Node &node, const char *key,
              Fn entry) {
  if (!node.IsSequence())
    r.fail(node.Mark(), "key '" + std::string(key) + "' must be a list");
  for (const YAML::Node &item : node)
    entry(item);
}

/// A module's `hidden`, `heads`, `seq` and `vocab` (0: no embedding; 0 when
/// absent unless `vocabRequired`) into `shape`, held to checkModelShape.
/// `what` names the module in messages.
template <typename Shape>
void readShape(const Reader &r, const YAML::Node &node, const std::string &what,
               bool vocabRequired, Shape &shape) {
  const YAML::Node hidden = r.required(node, "hidden", what);
  shape.hidden = r.integer(hidden, "hidden", 1, kMaxDimension);
  shape.heads = r.requiredInteger(node, "heads", what, 1, kMaxDimension);
  shape.seq = r.requiredInteger(node, "seq", what, 1, kMaxDimension);
  shape.vocab = 0;
  if (vocabRequired || node["vocab"])
    shape.vocab = r.requiredInteger(node, "vocab", what, 0, kMaxDimension);
  if (std::string error = flexpipe::checkModelShape(
          shape.hidden, shape.heads, shape.seq, shape.vocab, /*minVocab=*/0);
      !error.empty())
    r.fail(hidden.Mark(), what + ": " + error);
}

/// The `measured` section of a cluster file (flexpipe-profile writes it).
MachineProfile readMeasured(const Reader &r, const YAML::Node &node) {
  const std::string what = "the measured section";
  r.expectMap(node, what,
              {"cores_per_node", "time_slice_s", "handoff_s",
               "optimizer_s_per_parameter", "allreduce", "contention",
               "layers"});
  MachineProfile m;
  if (node["cores_per_node"])
    m.coresPerNode = r.integer(node["cores_per_node"], "cores_per_node", 1);
  if (YAML::Node slice = node["time_slice_s"]) {
    m.timeSlice = r.number(slice, "time_slice_s", 0);
    if (m.timeSlice > 0 && m.timeSlice < MachineProfile::kMinTimeSlice) {
      std::ostringstream os;
      os << "key 'time_slice_s' must be 0 (cores shared without turns) or "
            "at least "
         << MachineProfile::kMinTimeSlice << " s (OS schedulers give "
         << "milliseconds), got " << m.timeSlice;
      r.fail(slice.Mark(), os.str());
    }
  }
  r.optionalNumber(node, "handoff_s", 0, m.handoff);
  r.optionalNumber(node, "optimizer_s_per_parameter", 0,
                   m.optimizerPerParameter);
  if (YAML::Node allReduce = node["allreduce"])
    m.allReduce = readLink(r, allReduce, "allreduce");
  if (YAML::Node contention = node["contention"])
    readList(r, contention, "contention", [&](const YAML::Node &item) {
      const std::string cwhat = "a contention point";
      r.expectMap(item, cwhat,
                  {"ranks", "slowdown", "latency_s", "overhead_s",
                   "instruction_s", "hidden", "heads", "seq"});
      MachineProfile::Contention c;
      c.ranks = r.requiredInteger(item, "ranks", cwhat, 1);
      // Computing beside others is never faster than alone (the profiler
      // writes at least 1; below it, a step could take no time).
      c.slowdown = r.requiredNumber(item, "slowdown", cwhat, 1);
      r.optionalNumber(item, "latency_s", 0, c.latency);
      r.optionalNumber(item, "overhead_s", 0, c.overhead);
      r.optionalNumber(item, "instruction_s", 0, c.instruction);
      if (item["hidden"] || item["heads"] || item["seq"]) {
        Profile::ModuleShape shape; // (no vocab: the keys refuse one)
        readShape(r, item, cwhat, /*vocabRequired=*/false, shape);
        c.hidden = shape.hidden;
        c.heads = shape.heads;
        c.seq = shape.seq;
        // What the machine does around computations is no shape's.
        for (const char *key : {"latency_s", "overhead_s", "instruction_s"})
          if (YAML::Node v = item[key]; v && r.number(v, key, 0) != 0)
            r.fail(v.Mark(), std::string("key '") + key +
                                 "' belongs to the points without a shape "
                                 "(hidden, heads, seq), which every model "
                                 "shares; a shaped point's would be ignored");
      }
      // Each shape's points (those without one are a shape too) by
      // increasing ranks from 1: below its first point a shape is priced
      // at that point (a file from 2 slowed a rank computing alone).
      auto previous = std::find_if(
          m.contention.rbegin(), m.contention.rend(), [&](const auto &p) {
            return p.hidden == c.hidden && p.heads == c.heads && p.seq == c.seq;
          });
      if (previous == m.contention.rend() && c.ranks != 1)
        r.fail(item.Mark(), "a shape's contention points start at ranks 1 "
                            "(a rank computing alone), not " +
                                std::to_string(c.ranks));
      else if (previous != m.contention.rend() && c.ranks <= previous->ranks)
        r.fail(item.Mark(),
               "contention points of one shape must have increasing ranks");
      m.contention.push_back(c);
    });
  // Taking a core over costs less than what a slice gets done at the
  // largest slowdown, or a computation taking turns on a core never
  // finishes (the simulation checks the rate of each layout too).
  if (const double limit = m.handoffLimit(); m.handoff >= limit) {
    std::ostringstream os;
    os << "key 'handoff_s' must be below time_slice_s ";
    if (limit < m.timeSlice)
      os << "over the largest contention slowdown (" << m.timeSlice << " s / "
         << m.timeSlice / limit << " = " << limit << " s)";
    else
      os << "(" << m.timeSlice << " s)";
    os << ", got " << m.handoff
       << ": a computation would lose each slice it gets to the hand-over";
    r.fail(node["handoff_s"].Mark(), os.str());
  }
  if (YAML::Node layers = node["layers"])
    readList(r, layers, "layers", [&](const YAML::Node &item) {
      const std::string lwhat = "a measured layer";
      r.expectMap(item, lwhat,
                  {"kind", "hidden", "heads", "seq", "vocab", "micro_batch",
                   "fwd_s", "igrad_s", "wgrad_s"});
      MeasuredLayer l;
      YAML::Node kind = r.required(item, "kind", lwhat);
      const std::string name = r.string(kind, "kind");
      if (name == "block")
        l.kind = MeasuredLayer::Block;
      else if (name == "embedding")
        l.kind = MeasuredLayer::Embedding;
      else if (name == "head")
        l.kind = MeasuredLayer::Head;
      else
        r.fail(kind.Mark(), "key 'kind' must be block, embedding or head, "
                            "got '" +
                                name + "'");
      l.hidden = r.requiredInteger(item, "hidden", lwhat, 1);
      l.seq = r.requiredInteger(item, "seq", lwhat, 1);
      // A key of the other kinds would be ignored without a word.
      const char *other = l.kind == MeasuredLayer::Block ? "vocab" : "heads";
      if (item[other])
        r.fail(item[other].Mark(), "key '" + std::string(other) +
                                       "' is not for a layer of kind " + name);
      if (l.kind == MeasuredLayer::Block)
        l.heads = r.requiredInteger(item, "heads", lwhat, 1);
      else
        l.vocab = r.requiredInteger(item, "vocab", lwhat, 1);
      l.microBatch = r.requiredInteger(item, "micro_batch", lwhat, 1);
      l.fwd = r.requiredNumber(item, "fwd_s", lwhat, 0);
      l.igrad = r.requiredNumber(item, "igrad_s", lwhat, 0);
      l.wgrad = r.requiredNumber(item, "wgrad_s", lwhat, 0);
      for (const MeasuredLayer &other : m.layers)
        if (other.kind == l.kind && other.hidden == l.hidden &&
            other.seq == l.seq && other.heads == l.heads &&
            other.vocab == l.vocab && other.microBatch == l.microBatch)
          r.fail(item.Mark(), "this layer is measured twice at micro_batch " +
                                  std::to_string(l.microBatch) +
                                  " (same kind and shape)");
      m.layers.push_back(l);
    });
  return m;
}

} // namespace

char flexpipe::sched::FileError::ID = 0;

void flexpipe::sched::FileError::log(llvm::raw_ostream &os) const {
  os << path;
  if (line > 0)
    os << ':' << line << ':' << column;
  os << ": error: " << what;
}

bool flexpipe::sched::isConfigName(llvm::StringRef name) {
  return !name.empty() &&
         llvm::none_of(name, [](unsigned char c) { return c < 0x20; });
}

llvm::Error flexpipe::sched::loadModel(const std::string &path,
                                       ModelConfig &model,
                                       const std::string *text) {
  return guarded(path, [&] {
    Reader r(path, text);
    YAML::Node root = r.load();
    const std::string what = "the model file";
    r.expectMap(root, what, kModelKeys,
                {{"cluster", kClusterKeys}, {"profile", kProfileKeys}});
    model.name =
        root["name"] ? r.name(root["name"]) : Reader::nameOf(path, "model");
    if (YAML::Node dtype = root["dtype"]) {
      model.dtype = r.string(dtype, "dtype");
      if (model.dtype == "bf16" || model.dtype == "fp16")
        model.dtypeBytes = 2;
      else if (model.dtype == "fp32")
        model.dtypeBytes = 4;
      else
        r.fail(dtype.Mark(), "key 'dtype' must be bf16, fp16 or fp32, got '" +
                                 model.dtype + "'");
    }
    if (YAML::Node attention = root["attention"]) {
      const std::string a = r.string(attention, "attention");
      if (a != "materialized" && a != "flash")
        r.fail(attention.Mark(),
               "key 'attention' must be materialized or flash, got '" + a +
                   "'");
      model.flashAttention = a == "flash";
    }
    YAML::Node gbs = r.required(root, "global_batch_size", what);
    model.globalBatchSize = r.integer(gbs, "global_batch_size", 1);
    if (model.globalBatchSize > kMaxCount)
      r.fail(gbs.Mark(), "global_batch_size " +
                             std::to_string(model.globalBatchSize) +
                             " is more than the " + std::to_string(kMaxCount) +
                             " micro-batches a schedule may have");
    YAML::Node mbs = r.required(root, "micro_batch_size", what);
    model.microBatchSize = r.integer(mbs, "micro_batch_size", 1);
    if (model.globalBatchSize % model.microBatchSize != 0)
      r.fail(gbs.Mark(), "global_batch_size " +
                             std::to_string(model.globalBatchSize) +
                             " is not a multiple of micro_batch_size " +
                             std::to_string(model.microBatchSize));
    YAML::Node modules = r.required(root, "modules", what);
    if (!modules.IsSequence() || modules.size() == 0)
      r.fail(modules.Mark(), "key 'modules' must be a non-empty list");
    model.modules.clear();
    for (const YAML::Node &node : modules) {
      const std::string mwhat = "a module";
      r.expectMap(node, mwhat,
                  {"name", "layers", "hidden", "heads", "seq", "vocab",
                   "lm_head"});
      ModuleModel m;
      m.name = r.name(r.required(node, "name", mwhat));
      const std::string named = "module '" + m.name + "'";
      m.layers = r.requiredInteger(node, "layers", named, 1, kMaxCount);
      readShape(r, node, named, /*vocabRequired=*/false, m);
      m.lmHead = m.vocab > 0;
      if (YAML::Node head = node["lm_head"]) {
        m.lmHead = r.boolean(head, "lm_head");
        if (m.lmHead && m.vocab == 0)
          r.fail(head.Mark(), "module '" + m.name +
                                  "' has an LM head but no vocab");
      }
      if (model.module(m.name))
        r.fail(node.Mark(), "module '" + m.name + "' is defined twice");
      model.modules.push_back(m);
    }
  });
}

llvm::Error flexpipe::sched::loadCluster(const std::string &path,
                                         ClusterConfig &cluster,
                                         const std::string *text) {
  return guarded(path, [&] {
    Reader r(path, text);
    YAML::Node root = r.load();
    const std::string what = "the cluster file";
    r.expectMap(root, what, kClusterKeys,
                {{"model", kModelKeys}, {"profile", kProfileKeys}});
    cluster.name =
        root["name"] ? r.name(root["name"]) : Reader::nameOf(path, "cluster");
    if (YAML::Node kind = root["device_kind"]) {
      cluster.deviceKind = r.string(kind, "device_kind");
      if (cluster.deviceKind != "gpu" && cluster.deviceKind != "cpu")
        r.fail(kind.Mark(), "key 'device_kind' must be 'gpu' or 'cpu', got '" +
                                cluster.deviceKind + "'");
    }
    // A job's actors and replicas are each at most kMaxActors.
    cluster.devices = r.requiredInteger(root, "devices", what, 1, kMaxActors);
    cluster.devicesPerNode =
        r.requiredInteger(root, "devices_per_node", what, 1);
    cluster.peakFlops = r.requiredNumber(root, "peak_flops", what, 1);
    YAML::Node efficiency = r.required(root, "efficiency", what);
    // Durations are FLOPs / (peak_flops x efficiency), the product as is:
    // an efficiency of at least 1 / kLargestNumber keeps them finite (1e-300
    // priced a tiny GPT's iteration at inf s, 1e-320 failed verification).
    cluster.efficiency = r.number(efficiency, "efficiency", 1 / kLargestNumber);
    if (cluster.efficiency > 1)
      r.fail(efficiency.Mark(), "key 'efficiency' is a fraction of the peak "
                                "and must be at most 1");
    cluster.memoryBytes = r.requiredNumber(root, "memory_bytes", what, 1);
    cluster.intraNode =
        readLink(r, r.required(root, "intra_node", what), "intra_node");
    cluster.interNode =
        readLink(r, r.required(root, "inter_node", what), "inter_node");
    if (YAML::Node measured = root["measured"])
      cluster.measured = readMeasured(r, measured);
  });
}

llvm::Error flexpipe::sched::loadProfile(const std::string &path,
                                         Profile &profile,
                                         const std::string *text) {
  return guarded(path, [&] {
    Reader r(path, text);
    YAML::Node root = r.load();
    const std::string what = "the profile file";
    r.expectMap(root, what, kProfileKeys,
                {{"model", kModelKeys}, {"cluster", kClusterKeys}});
    YAML::Node stages = r.required(root, "stages", what);
    profile.path = path;
    profile.microBatchSize.reset();
    if (YAML::Node mbs = root["micro_batch_size"]) {
      profile.microBatchSize = r.integer(mbs, "micro_batch_size", 1);
      profile.microBatchPlace = r.place(mbs.Mark());
    }
    profile.modules.clear();
    if (YAML::Node modules = root["modules"]) {
      profile.modulesPlace = r.place(modules.Mark());
      readList(r, modules, "modules", [&](const YAML::Node &node) {
        const std::string mwhat = "a profiled module";
        r.expectMap(node, mwhat, {"hidden", "heads", "seq", "vocab"});
        Profile::ModuleShape m;
        readShape(r, node, mwhat, /*vocabRequired=*/true, m);
        profile.modules.push_back(m);
      });
    }
    profile.stages.clear();
    readList(r, stages, "stages", [&](const YAML::Node &node) {
      const std::string swhat = "a profiled stage";
      r.expectMap(node, swhat,
                  {"stage", "layers", "first", "last", "actors", "fwd_s",
                   "bwd_s", "igrad_s", "wgrad_s", "activation_bytes",
                   "weight_grad_bytes"});
      Profile::Stage s;
      s.stage = r.requiredInteger(node, "stage", swhat, 0);
      if (node["layers"])
        s.layers = r.integer(node["layers"], "layers", 0, kMaxCount);
      if (node["first"])
        s.first = r.boolean(node["first"], "first");
      if (node["last"])
        s.last = r.boolean(node["last"], "last");
      if (YAML::Node actors = node["actors"]) {
        readList(r, actors, "actors", [&](const YAML::Node &actor) {
          s.actors.push_back(r.integer(actor, "actors", 0, kMaxActors - 1));
        });
        if (!std::is_sorted(s.actors.begin(), s.actors.end()) ||
            std::adjacent_find(s.actors.begin(), s.actors.end()) !=
                s.actors.end())
          r.fail(actors.Mark(), "key 'actors' must list each actor once, in "
                                "ascending order");
      }
      s.fwd = r.requiredNumber(node, "fwd_s", swhat, 0);
      s.bwd = r.requiredNumber(node, "bwd_s", swhat, 0);
      // Without a measured split, the backward divides evenly.
      s.igrad =
          node["igrad_s"] ? r.number(node["igrad_s"], "igrad_s", 0) : s.bwd / 2;
      if (node["wgrad_s"])
        s.wgrad = r.number(node["wgrad_s"], "wgrad_s", 0);
      else if (s.igrad <= s.bwd)
        s.wgrad = s.bwd - s.igrad;
      else
        r.fail(node["igrad_s"].Mark(),
               "igrad_s exceeds bwd_s, and the weight gradient (bwd_s - "
               "igrad_s when wgrad_s is not given) would take negative time; "
               "give wgrad_s, or an igrad_s within bwd_s");
      r.optionalNumber(node, "activation_bytes", 0, s.activationBytes);
      if (node["weight_grad_bytes"]) {
        if (!s.activationBytes)
          r.fail(node["weight_grad_bytes"].Mark(),
                 "weight_grad_bytes needs the stage's activation_bytes (what "
                 "its input gradient trades for the weight-gradient state)");
        s.weightGradBytes =
            r.number(node["weight_grad_bytes"], "weight_grad_bytes", 0);
      }
      if (profile.stage(s.stage))
        r.fail(node.Mark(), "stage " + std::to_string(s.stage) +
                                " is profiled twice");
      s.place = r.place(node.Mark());
      profile.stages.push_back(s);
    });
    // Present, even as an empty list, it prices the messages
    // (Profile::pricesMessages).
    profile.listsMessages = static_cast<bool>(root["messages"]);
    if (YAML::Node messages = root["messages"])
      readList(r, messages, "messages", [&](const YAML::Node &node) {
        const std::string mwhat = "a profiled message";
        r.expectMap(node, mwhat, {"from", "to", "seconds"});
        Profile::Message m;
        m.from = r.requiredInteger(node, "from", mwhat, 0);
        m.to = r.requiredInteger(node, "to", mwhat, 0);
        m.seconds = r.requiredNumber(node, "seconds", mwhat, 0);
        if (m.from == m.to)
          r.fail(node.Mark(), "a message from actor " + std::to_string(m.from) +
                                  " to itself (an actor sends none)");
        for (const Profile::Message &other : profile.messages)
          if (other.from == m.from && other.to == m.to)
            r.fail(node.Mark(), "messages from actor " +
                                    std::to_string(m.from) + " to actor " +
                                    std::to_string(m.to) +
                                    " are profiled twice");
        m.place = r.place(node.Mark());
        profile.messages.push_back(m);
      });
    r.optionalNumber(root, "default_message_s", 0, profile.defaultMessageTime);
    profile.optimizerStep.clear();
    if (YAML::Node steps = root["optimizer_s"]) {
      if (!steps.IsSequence())
        r.fail(steps.Mark(),
               "key 'optimizer_s' must be a list of seconds, one per actor");
      profile.optimizerPlace = r.place(steps.Mark());
      for (const YAML::Node &step : steps)
        profile.optimizerStep.push_back(r.number(step, "optimizer_s", 0));
    }
    profile.instructionOverhead.reset();
    r.optionalNumber(root, "instruction_s", 0, profile.instructionOverhead);
    profile.execSeconds.reset();
    r.optionalNumber(root, "exec_s", 0, profile.execSeconds);
  });
}

/// `text` as a YAML scalar: bare when it is a plain word (letters, digits,
/// '_', '-', '.'), else double-quoted (names may hold any character).
static std::string yamlQuoted(const std::string &text) {
  // Plain where YAML reads it back as this string: a name, not a number
  // or one of YAML 1.1's null and boolean words (a plain `null` read back
  // as no name).
  static const char *const kWords[] = {"null", "true", "false", "yes", "no",
                                       "on",   "off",  "y",     "n"};
  const std::string lower = llvm::StringRef(text).lower();
  if (!text.empty() &&
      (std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_') &&
      llvm::all_of(text,
                   [](unsigned char c) {
                     return std::isalnum(c) || c == '_' || c == '-' || c == '.';
                   }) &&
      llvm::none_of(kWords, [&](const char *w) { return lower == w; }))
    return text;
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      out += {'\\', static_cast<char>(c)};
    else if (c < 0x20 || c == 0x7f)
      out += llvm::formatv("\\x{0:x-2}", static_cast<unsigned>(c)).str();
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string flexpipe::sched::formatModel(const ModelConfig &model,
                                         int64_t mbs, int64_t globalBatch) {
  std::ostringstream os;
  const ModuleModel &m = model.modules.front();
  os << "# " << model.name << " at micro-batch size " << mbs
     << ", global batch " << globalBatch << "\n"
     << "name: " << yamlQuoted(model.name) << "\n"
     << "dtype: " << model.dtype << "\n"
     << (model.flashAttention ? "attention: flash\n" : "")
     << "global_batch_size: " << globalBatch << "\n"
     << "micro_batch_size: " << mbs << "\n"
     << "modules:\n"
     << "  - name: " << yamlQuoted(m.name) << "\n"
     << "    layers: " << m.layers << "\n"
     << "    hidden: " << m.hidden << "\n"
     << "    heads: " << m.heads << "\n"
     << "    seq: " << m.seq << "\n"
     << "    vocab: " << m.vocab << "\n";
  if (!m.lmHead)
    os << "    lm_head: false\n";
  return os.str();
}

std::string flexpipe::sched::formatCluster(const ClusterConfig &cluster) {
  std::ostringstream os;
  os.precision(12);
  os << "name: " << yamlQuoted(cluster.name) << "\n"
     << "device_kind: " << cluster.deviceKind << "\n"
     << "devices: " << cluster.devices << "\n"
     << "devices_per_node: " << cluster.devicesPerNode << "\n"
     << "peak_flops: " << cluster.peakFlops << "\n"
     << "efficiency: " << cluster.efficiency << "\n"
     << "memory_bytes: " << cluster.memoryBytes << "\n";
  for (auto [key, link] : {std::pair{"intra_node", &cluster.intraNode},
                           std::pair{"inter_node", &cluster.interNode}})
    os << key << ":\n  bandwidth_bytes_per_s: " << link->bandwidth
       << "\n  latency_s: " << link->latency << "\n";
  const MachineProfile &m = cluster.measured;
  if (m.empty() && m.coresPerNode == 0)
    return os.str();
  os << "measured:\n";
  if (m.coresPerNode > 0)
    os << "  cores_per_node: " << m.coresPerNode << "\n";
  if (m.timeSlice > 0)
    os << "  time_slice_s: " << m.timeSlice << "\n";
  // Beside the slice whenever there is one (0: measured as nothing).
  if (m.timeSlice > 0 || m.handoff > 0)
    os << "  handoff_s: " << m.handoff << "\n";
  os << "  optimizer_s_per_parameter: " << m.optimizerPerParameter << "\n";
  if (m.allReduce.bandwidth > 0)
    os << "  allreduce: {bandwidth_bytes_per_s: " << m.allReduce.bandwidth
       << ", latency_s: " << m.allReduce.latency << "}\n";
  if (!m.contention.empty()) {
    os << "  contention:\n";
    for (const MachineProfile::Contention &c : m.contention) {
      os << "    - {";
      if (c.hidden > 0)
        os << "hidden: " << c.hidden << ", heads: " << c.heads
           << ", seq: " << c.seq << ", ";
      os << "ranks: " << c.ranks << ", slowdown: " << c.slowdown
         << ", latency_s: " << c.latency << ", overhead_s: " << c.overhead;
      if (c.instruction > 0)
        os << ", instruction_s: " << c.instruction;
      os << "}\n";
    }
  }
  if (!m.layers.empty()) {
    os << "  layers:\n";
    for (const MeasuredLayer &l : m.layers) {
      os << "    - {kind: "
         << (l.kind == MeasuredLayer::Block       ? "block"
             : l.kind == MeasuredLayer::Embedding ? "embedding"
                                                  : "head")
         << ", hidden: " << l.hidden << ", seq: " << l.seq;
      if (l.kind == MeasuredLayer::Block)
        os << ", heads: " << l.heads;
      else
        os << ", vocab: " << l.vocab;
      os << ", micro_batch: " << l.microBatch << ", fwd_s: " << l.fwd
         << ", igrad_s: " << l.igrad << ", wgrad_s: " << l.wgrad << "}\n";
    }
  }
  return os.str();
}

llvm::Error flexpipe::sched::loadCostInputs(const std::string &modelPath,
                                            const std::string &clusterPath,
                                            const std::string &profilePath,
                                            CostInputs &inputs) {
  if (modelPath.empty() != clusterPath.empty())
    return llvm::createStringError(
        modelPath.empty()
            ? "a cluster file needs a model file (the cluster prices a model)"
            : "a model file needs a cluster file (device throughput, memory "
              "and links)");
  if (!modelPath.empty()) {
    ModelConfig model;
    ClusterConfig cluster;
    if (llvm::Error error = loadModel(modelPath, model))
      return error;
    if (llvm::Error error = loadCluster(clusterPath, cluster))
      return error;
    inputs.model = std::move(model);
    inputs.cluster = std::move(cluster);
  }
  if (!profilePath.empty()) {
    Profile profile;
    if (llvm::Error error = loadProfile(profilePath, profile))
      return error;
    inputs.profile = std::move(profile);
  }
  return llvm::Error::success();
}
