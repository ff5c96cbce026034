//===- Checkpoint.cpp - What a rank saves to resume training --------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The file format (docs/Runtime.md has the table): host byte order, every
// integer fixed-width, floats and doubles as their bits.
//
//   "FLXPCKPT" u32 version
//   u64 run
//   u64 schedule hash, str schedule name, str model
//   i32 actors, dp, ranks, rank
//   i64 iterations, f32 lr, str precision (from version 3)
//   u64 n, f64 losses[n]
//   i64 Adam's step
//   u64 parameters, each: str name, u64 n, f32 value[n], m[n], v[n]
//   u64 FNV-1a of every byte before it
//
// where str is u32 length and the bytes.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "OutputFile.h"
#include "flexpipe/Support/Hash.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string_view>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace flexpipe::rt;

namespace {

constexpr char kMagic[8] = {'F', 'L', 'X', 'P', 'C', 'K', 'P', 'T'};
/// 2: the run id, and the checksum from FNV-1a's own offset basis; 3: the
/// precision. Version 2 is read too.
constexpr uint32_t kVersion = 3;

class Writer {
public:
  template <typename T> void put(T value) {
    bytes.append(reinterpret_cast<const char *>(&value), sizeof value);
  }
  void putString(const std::string &text) {
    put(static_cast<uint32_t>(text.size()));
    bytes += text;
  }
  void putFloats(const std::vector<float> &values) {
    bytes.append(reinterpret_cast<const char *>(values.data()),
                 values.size() * sizeof(float));
  }
  std::string bytes;
};

/// Reads fields in order and never past `end`; a read that does not fit
/// fails and names the field.
class Reader {
public:
  Reader(const std::string &bytes, size_t end) : bytes(bytes), end(end) {}
  size_t left() const { return end - at; }
  bool raw(void *into, size_t size, const char *what) {
    if (size > left())
      return fail(what);
    if (size)
      std::memcpy(into, bytes.data() + at, size);
    at += size;
    return true;
  }
  template <typename T> bool get(T &value, const char *what) {
    return raw(&value, sizeof value, what);
  }
  bool getString(std::string &text, const char *what) {
    uint32_t size = 0;
    if (!get(size, what))
      return false;
    if (size > left())
      return fail(what);
    text.assign(bytes.data() + at, size);
    at += size;
    return true;
  }
  bool getFloats(std::vector<float> &values, uint64_t count, const char *what) {
    if (count > left() / sizeof(float))
      return fail(what);
    values.resize(count);
    return raw(values.data(), count * sizeof(float), what);
  }
  /// The field a read ran out of bytes in.
  std::string missing;

private:
  bool fail(const char *what) {
    missing = what;
    return false;
  }
  const std::string &bytes;
  size_t end, at = 0;
};

std::string parentOf(const std::string &path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// The K and R of a name iter-K.rankR (K >= 1); `temporary` also accepts
/// OutputFile's temporaries of one, iter-K.rankR.tmpPID.
bool parseName(const std::string &name, int64_t &k, int &r,
               bool temporary = false) {
  auto number = [&](size_t &at, int64_t &value) {
    const size_t start = at;
    value = 0;
    while (at < name.size() && at - start < 18 && name[at] >= '0' &&
           name[at] <= '9')
      value = value * 10 + (name[at++] - '0');
    // Names are written without leading zeros; iter-06 was listed, then
    // looked for as iter-6.
    return at > start && (name[start] != '0' || at == start + 1) &&
           (at == name.size() || name[at] < '0' || name[at] > '9');
  };
  if (name.compare(0, 5, "iter-") != 0)
    return false;
  size_t at = 5;
  int64_t rank = 0;
  if (!number(at, k) || k < 1 || name.compare(at, 5, ".rank") != 0)
    return false;
  at += 5;
  if (!number(at, rank) || rank > 1 << 30)
    return false;
  r = static_cast<int>(rank);
  if (at == name.size())
    return !temporary;
  if (!temporary || name.compare(at, 4, ".tmp") != 0)
    return false;
  at += 4;
  int64_t pid = 0;
  return number(at, pid) && at == name.size();
}

std::string describeRanks(const Checkpoint &c) {
  return std::to_string(c.ranks) + " ranks (" + std::to_string(c.actors) +
         " actors x dp " + std::to_string(c.dp) + ")";
}

} // namespace

std::string flexpipe::rt::stateMismatch(
    const DeviceState &state,
    const std::vector<std::pair<std::string, size_t>> &expected) {
  if (state.adamStep < 0)
    return "Adam's step count is " + std::to_string(state.adamStep);
  std::map<std::string, size_t> sizes(expected.begin(), expected.end());
  std::set<std::string> seen;
  for (const DeviceState::Parameter &p : state.parameters) {
    auto it = sizes.find(p.name);
    if (it == sizes.end())
      return "it holds parameter '" + p.name +
             "', which this rank does not train";
    if (!seen.insert(p.name).second)
      return "it holds parameter '" + p.name + "' twice";
    if (p.value.size() != it->second)
      return "its parameter '" + p.name + "' has " +
             std::to_string(p.value.size()) + " values, this rank's " +
             std::to_string(it->second);
    if (p.m.size() != it->second || p.v.size() != it->second)
      return "the Adam moments of its parameter '" + p.name + "' have " +
             std::to_string(p.m.size()) + " and " + std::to_string(p.v.size()) +
             " values, the parameter " + std::to_string(it->second);
  }
  for (const auto &[name, size] : expected)
    if (!seen.count(name))
      return "it has no parameter '" + name + "', which this rank trains";
  return {};
}

std::string flexpipe::rt::modelText(const ScheduleDesc &desc) {
  auto sizes = [](const GptConfig &c) {
    return "vocab=" + std::to_string(c.vocab) +
           " seq=" + std::to_string(c.seq) +
           " hidden=" + std::to_string(c.hidden) +
           " heads=" + std::to_string(c.heads) +
           " layers=" + std::to_string(c.layers);
  };
  const GptConfig &m = desc.model;
  std::string text = desc.twoTower() ? "" : sizes(m) + " ";
  text += "microbatch=" + std::to_string(m.microBatch) +
          " seed=" + std::to_string(m.seed);
  if (m.embed)
    text += " embed=" + std::to_string(m.embed);
  for (const GptConfig &tower : desc.towers)
    text += "; tower " + tower.prefix.substr(0, tower.prefix.size() - 1) + " " +
            sizes(tower);
  return text;
}

std::string flexpipe::rt::checkpointPath(const std::string &dir,
                                         int64_t iterations, int rank) {
  return dir + "/iter-" + std::to_string(iterations) + ".rank" +
         std::to_string(rank);
}

bool flexpipe::rt::isCheckpointName(const std::string &name) {
  int64_t k = 0;
  int r = 0;
  return parseName(name, k, r, /*temporary=*/true) ||
         parseName(name, k, r, /*temporary=*/false);
}

std::string flexpipe::rt::makeDirectories(const std::string &dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/')
      continue;
    const std::string prefix = dir.substr(0, at);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)
      return "cannot create directory '" + prefix +
             "': " + std::strerror(errno);
  }
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0)
    return "cannot create directory '" + dir + "': " + std::strerror(errno);
  if (!S_ISDIR(info.st_mode))
    return "'" + dir + "' is not a directory";
  return {};
}

std::string flexpipe::rt::writeCheckpoint(const std::string &path,
                                          const Checkpoint &c) {
  Writer w;
  w.bytes.append(kMagic, sizeof kMagic);
  w.put(kVersion);
  w.put(c.run);
  w.put(c.scheduleHash);
  w.putString(c.scheduleName);
  w.putString(c.model);
  w.put(c.actors);
  w.put(c.dp);
  w.put(c.ranks);
  w.put(c.rank);
  w.put(c.iterations);
  w.put(c.lr);
  w.putString(c.precision);
  w.put(static_cast<uint64_t>(c.losses.size()));
  for (double loss : c.losses)
    w.put(loss);
  w.put(c.state.adamStep);
  w.put(static_cast<uint64_t>(c.state.parameters.size()));
  for (const DeviceState::Parameter &p : c.state.parameters) {
    w.putString(p.name);
    w.put(static_cast<uint64_t>(p.value.size()));
    w.putFloats(p.value);
    w.putFloats(p.m);
    w.putFloats(p.v);
  }
  w.put(flexpipe::fnv1a(w.bytes));

  OutputFile file(path);
  FILE *f = file.get();
  if (!f)
    return file.error();
  const bool written =
      std::fwrite(w.bytes.data(), 1, w.bytes.size(), f) == w.bytes.size() &&
      std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  if (!written)
    return "cannot write '" + path + "': " + std::strerror(errno);
  if (!file.commit())
    return file.error();
  // The rename itself reaches the disk with the directory.
  const int dir = ::open(parentOf(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return {};
}

namespace {
/// The fields after the magic and the version, from `r`, of a file of
/// format `version`; false where the bytes run out (r.missing says in
/// which).
bool readFields(Reader &r, Checkpoint &c, uint32_t version) {
  char header[sizeof kMagic + sizeof(uint32_t)];
  uint64_t losses = 0, parameters = 0;
  if (!(r.raw(header, sizeof header, "header") && r.get(c.run, "header") &&
        r.get(c.scheduleHash, "header") &&
        r.getString(c.scheduleName, "header") &&
        r.getString(c.model, "header") && r.get(c.actors, "header") &&
        r.get(c.dp, "header") && r.get(c.ranks, "header") &&
        r.get(c.rank, "header") && r.get(c.iterations, "header") &&
        r.get(c.lr, "header") &&
        (version < 3 || r.getString(c.precision, "header")) &&
        r.get(losses, "losses")))
    return false;
  if (losses > r.left() / sizeof(double)) {
    r.missing = "losses";
    return false;
  }
  c.losses.resize(losses);
  if (!(r.raw(c.losses.data(), losses * sizeof(double), "losses") &&
        r.get(c.state.adamStep, "optimizer state") &&
        r.get(parameters, "parameters")))
    return false;
  c.state.parameters.clear();
  for (uint64_t i = 0; i < parameters; ++i) {
    DeviceState::Parameter p;
    uint64_t count = 0;
    if (!(r.getString(p.name, "parameters") && r.get(count, "parameters") &&
          r.getFloats(p.value, count, "parameters") &&
          r.getFloats(p.m, count, "parameters") &&
          r.getFloats(p.v, count, "parameters")))
      return false;
    c.state.parameters.push_back(std::move(p));
  }
  return true;
}
} // namespace

std::string flexpipe::rt::readCheckpoint(const std::string &path,
                                         Checkpoint &c) {
  std::string bytes;
  {
    // Not a FIFO or a device: opening one blocks (a rank waited there until
    // the others' FLEXPIPE_TIMEOUT blamed it, naming no file).
    struct stat info;
    if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
      return "cannot read checkpoint '" + path + "': it is " +
             (S_ISDIR(info.st_mode)
                  ? "a directory"
                  : "not a regular file (a FIFO, socket or device)");
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f)
      return "cannot read checkpoint '" + path + "': " + std::strerror(errno);
    char chunk[1 << 16];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0)
      bytes.append(chunk, n);
    const bool failed = std::ferror(f);
    const int error = errno;
    std::fclose(f);
    if (failed)
      return "cannot read checkpoint '" + path + "': " + std::strerror(error);
  }
  const std::string file = "checkpoint '" + path + "'";
  const size_t size = bytes.size();
  if (bytes.compare(0, sizeof kMagic, kMagic, std::min(size, sizeof kMagic)) !=
      0)
    return "'" + path + "' is not a FlexPipe checkpoint";
  constexpr size_t kSmallest = sizeof kMagic + sizeof(uint32_t);
  if (size < kSmallest + sizeof(uint64_t))
    return file + " is truncated (" + std::to_string(size) + " bytes)";
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + sizeof kMagic, sizeof version);
  // The checksum is the file's last 8 bytes.
  const size_t end = size - sizeof(uint64_t);
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + end, sizeof stored);
  const bool checksumOk =
      flexpipe::fnv1a(std::string_view(bytes).substr(0, end)) == stored;
  // A damaged version field read as another format's. Version 1 summed
  // from the legacy basis.
  const bool earlier =
      version == 1 && flexpipe::fnv1a(std::string_view(bytes).substr(0, end),
                                      flexpipe::kFnv1aLegacyOffset) == stored;
  if (version != kVersion && version != 2)
    return file + (checksumOk || earlier ? " has" : " is corrupt or has") +
           " format version " + std::to_string(version) +
           "; this runtime reads versions 2 and " + std::to_string(kVersion) +
           (earlier ? " (an earlier FlexPipe's: train again, or resume with "
                      "the FlexPipe that wrote it)"
                    : "");

  Reader r(bytes, end);
  const bool whole = readFields(r, c, version);
  // A file cut at or inside its checksum read its parameters' end as the
  // checksum ("ending inside its parameters"): its fields are whole
  // without the 8 bytes, with fewer than 8 left.
  if (!whole && !checksumOk) {
    Checkpoint shorter;
    Reader all(bytes, size);
    if (readFields(all, shorter, version) && all.left() < sizeof(uint64_t))
      return file + " is truncated (" + std::to_string(size) +
             " bytes, ending " + (all.left() == 0 ? "before" : "inside") +
             " its checksum)";
  }
  if (!whole)
    return file + " is " + (checksumOk ? "corrupt" : "truncated or corrupt") +
           " (" + std::to_string(size) + " bytes, ending inside its " +
           r.missing + ")";
  if (!checksumOk || r.left() != 0)
    return file + " is corrupt: its checksum does not match its contents";
  if (c.losses.size() !=
      static_cast<size_t>(std::max<int64_t>(0, c.iterations)))
    return file + " is inconsistent: " + std::to_string(c.losses.size()) +
           " losses for " + std::to_string(c.iterations) + " iterations";
  return {};
}

std::string flexpipe::rt::checkpointMismatch(const std::string &path,
                                             const Checkpoint &found,
                                             const Checkpoint &expected) {
  const std::string file = "checkpoint '" + path + "'";
  if (found.ranks != expected.ranks || found.actors != expected.actors ||
      found.dp != expected.dp)
    return file + " was written by " + describeRanks(found) +
           "; this run has " + describeRanks(expected) +
           ": resume with the ranks that wrote it";
  if (found.rank != expected.rank)
    return file + " holds rank " + std::to_string(found.rank) +
           "'s state, not rank " + std::to_string(expected.rank) +
           "'s: every rank resumes from its own file";
  if (found.model != expected.model)
    return file + " is of another model (" + found.model +
           "); this program trains " + expected.model;
  if (found.scheduleHash != expected.scheduleHash)
    return file + " was written by another schedule (" + found.scheduleName +
           ", hash " + std::to_string(found.scheduleHash) +
           "); this program runs " + expected.scheduleName + ", hash " +
           std::to_string(expected.scheduleHash) +
           ": resume with executables compiled from the same spec and options";
  return {};
}

std::string
flexpipe::rt::listCheckpoints(const std::string &dir, int rank,
                              std::vector<int64_t> &mine,
                              std::vector<std::pair<int64_t, int>> &all) {
  mine.clear();
  all.clear();
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return "cannot read directory '" + dir + "': " + std::strerror(errno);
  while (const dirent *entry = ::readdir(d)) {
    int64_t k = 0;
    int r = 0;
    if (!parseName(entry->d_name, k, r))
      continue;
    all.push_back({k, r});
    if (r == rank)
      mine.push_back(k);
  }
  ::closedir(d);
  std::sort(mine.begin(), mine.end());
  std::sort(all.begin(), all.end());
  return {};
}

void flexpipe::rt::removeCheckpointsExcept(const std::string &dir, int rank,
                                           int64_t keep) {
  std::vector<std::string> stale;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (const dirent *entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      int64_t k = 0;
      int r = -1;
      // Other generations of this rank; temporaries a killed run left.
      if ((parseName(name, k, r) && r == rank && k != keep) ||
          (parseName(name, k, r, true) && r == rank))
        stale.push_back(name);
    }
    ::closedir(d);
  }
  for (const std::string &name : stale)
    std::remove((dir + "/" + name).c_str());
}
