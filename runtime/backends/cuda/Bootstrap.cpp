//===- Bootstrap.cpp - Starting ranks: environment, rendezvous, watchdog --===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "Bootstrap.h"

#include "flexpipe/Support/Hash.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <unistd.h>

using namespace flexpipe::rt;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A non-negative decimal integer, or -1.
long long parseCount(const char *text) {
  if (!text || !*text)
    return -1;
  long long value = 0;
  for (const char *c = text; *c; ++c) {
    if (*c < '0' || *c > '9' || value > (1LL << 40))
      return -1;
    value = value * 10 + (*c - '0');
  }
  return value;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The state letter and start time (field 22) of /proc/PID/stat.
bool readStat(uint64_t pid, char &state, uint64_t &start) {
  const std::string text = readFile("/proc/" + std::to_string(pid) + "/stat");
  // The command name (field 2) is in parentheses and may hold anything.
  const size_t close = text.rfind(')');
  if (close == std::string::npos)
    return false;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  // Fields 3 (state) to 22 (starttime).
  for (int index = 3; index <= 22; ++index) {
    if (!(fields >> field))
      return false;
    if (index == 3)
      state = field.empty() ? '?' : field[0];
  }
  start = std::strtoull(field.c_str(), nullptr, 10);
  return true;
}

} // namespace

bool flexpipe::rt::startedByMpi(const Getenv &getenv) {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                           "PMI_RANK", "MV2_COMM_WORLD_SIZE"})
    if (const char *value = getenv(name); value && *value)
      return true;
  return false;
}

std::string flexpipe::rt::readLaunchEnv(const Getenv &getenv, bool withMpi,
                                        LaunchEnv &env) {
  auto value = [&](const char *name) -> const char * {
    const char *v = getenv(name);
    return v && *v ? v : nullptr;
  };
  if (const char *timeout = value("FLEXPIPE_TIMEOUT"))
    if (std::string error =
            parseSeconds("FLEXPIPE_TIMEOUT", timeout, env.timeout);
        !error.empty())
      return error;
  if (const char *math = value("FLEXPIPE_CUDA_MATH")) {
    const std::string mode = math;
    bool known = false;
    for (MathMode m : {MathMode::Fp32, MathMode::Tf32, MathMode::Bf16})
      if (mode == mathModeName(m)) {
        env.math = m;
        known = true;
      }
    if (!known)
      return "FLEXPIPE_CUDA_MATH must be 'fp32' (fp32 arrays and products, "
             "the default), 'tf32' (TF32 tensor cores) or 'bf16' (mixed "
             "precision: bf16 activations and products, fp32 master "
             "weights), not '" +
             mode + "'";
  }
  const char *bootstrap = value("FLEXPIPE_BOOTSTRAP");
  const std::string mode = bootstrap ? bootstrap : "";
  if (!mode.empty() && mode != "mpi" && mode != "env")
    return "FLEXPIPE_BOOTSTRAP must be 'mpi' or 'env', not '" + mode + "'";
  const bool byMpi = startedByMpi(getenv);
  if (mode == "mpi" || (mode.empty() && byMpi && withMpi)) {
    if (!withMpi)
      return "FLEXPIPE_BOOTSTRAP is 'mpi', but this runtime was built "
             "without MPI; start the ranks with run-env.sh";
    env.mpi = true;
    return {};
  }
  const char *rank = value("RANK"), *world = value("WORLD_SIZE");
  if (!rank && !world) {
    if (byMpi && mode.empty())
      return "an MPI launcher started this rank, but this runtime was built "
             "without MPI; start the ranks with run-env.sh (RANK, "
             "WORLD_SIZE) instead";
    env.rank = 0;
    env.world = 1;
    env.localRank = 0;
    return {};
  }
  if (!rank || !world)
    return std::string("set both RANK and WORLD_SIZE (only ") +
           (rank ? "RANK" : "WORLD_SIZE") + " is set)";
  const long long r = parseCount(rank), w = parseCount(world);
  if (w < 1 || w > 1 << 20)
    return "WORLD_SIZE must be a positive integer, not '" + std::string(world) +
           "'";
  if (r < 0 || r >= w)
    return "RANK must be an integer from 0 to WORLD_SIZE - 1 = " +
           std::to_string(w - 1) + ", not '" + std::string(rank) + "'";
  env.rank = static_cast<int>(r);
  env.world = static_cast<int>(w);
  env.localRank = env.rank;
  if (const char *local = value("LOCAL_RANK")) {
    const long long l = parseCount(local);
    if (l < 0 || l > 1 << 20)
      return "LOCAL_RANK must be a non-negative integer, not '" +
             std::string(local) + "'";
    env.localRank = static_cast<int>(l);
  }
  if (const char *local = value("LOCAL_WORLD_SIZE")) {
    const long long l = parseCount(local);
    if (l < 1 || l > 1 << 20 || env.localRank >= l)
      return "LOCAL_WORLD_SIZE must be a positive integer above LOCAL_RANK (" +
             std::to_string(env.localRank) + "), not '" + std::string(local) +
             "'";
    env.localWorld = static_cast<int>(l);
  }
  if (const char *file = value("FLEXPIPE_NCCL_ID_FILE"))
    env.idFile = file;
  if (const char *run = value("FLEXPIPE_RUN_ID"))
    env.runId = run;
  if (env.world > 1 && env.idFile.empty())
    return "WORLD_SIZE is " + std::to_string(env.world) +
           ": set FLEXPIPE_NCCL_ID_FILE to a file name every rank can reach "
           "(rank 0 writes the NCCL id there; run-env.sh sets it)";
  for (char c : env.runId)
    if (c == ' ' || c == '\n' || c == '\t')
      return "FLEXPIPE_RUN_ID must not contain white space";
  return {};
}

bool flexpipe::rt::isQueueCount(const char *setting) {
  if (!setting || !*setting)
    return false;
  char *end = nullptr;
  const long value = std::strtol(setting, &end, 10);
  return *end == '\0' && value > 0;
}

int flexpipe::rt::hardwareQueues(const char *setting) {
  // CUDA keeps at most kDeviceConnections queues, whatever is asked.
  if (isQueueCount(setting))
    return static_cast<int>(
        std::min<long>(std::strtol(setting, nullptr, 10), kDeviceConnections));
  return 8; // CUDA's default
}

std::string flexpipe::rt::sharedQueueWarning(int streams, const char *setting) {
  const int queues = hardwareQueues(setting);
  if (streams <= queues)
    return {};
  return std::to_string(streams) +
         " streams (compute and one per channel) share the GPU's " +
         std::to_string(queues) +
         " hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, at most 32): "
         "kernels on streams that share a queue wait for each other, so a "
         "transfer waiting for its peer may hold back one that the peer "
         "waits for, and the run may hang (with one queue the CUDA "
         "emulation hangs interleaved, V-shape, bidirectional, ZB-V and "
         "ZB-H1 schedules so); unset "
         "it, and the backend uses 32, or set it to at least " +
         std::to_string(streams);
}

SharedGpu flexpipe::rt::sharedGpu(const std::vector<GpuUse> &all, int rank,
                                  const char *current) {
  if (current || rank < 0 || static_cast<size_t>(rank) >= all.size())
    return {};
  const GpuUse &mine = all[rank];
  // This host's GPUs, in the order of their first ranks, and their rank
  // counts; this rank's slot: the ranks before it on its GPU.
  std::vector<std::pair<std::string, int>> gpus;
  auto gpuOf = [&](const GpuUse &use) {
    return std::find_if(gpus.begin(), gpus.end(), [&](const auto &gpu) {
      return gpu.first == use.busId;
    });
  };
  int slot = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].host != mine.host)
      continue;
    auto gpu = gpuOf(all[r]);
    if (gpu == gpus.end())
      gpu = gpus.insert(gpus.end(), {all[r].busId, 0});
    ++gpu->second;
    if (static_cast<int>(r) < rank && all[r].busId == mine.busId)
      ++slot;
  }
  // The host's first rank on a shared GPU says so.
  int firstSharing = -1;
  for (size_t r = 0; r < all.size() && firstSharing < 0; ++r)
    if (all[r].host == mine.host && gpuOf(all[r])->second > 1)
      firstSharing = static_cast<int>(r);
  SharedGpu result;
  if (slot > 0)
    result.hostId = "flexpipe-" + mine.host + "-slot" + std::to_string(slot);
  if (rank != firstSharing)
    return result;
  std::vector<std::string> shared;
  for (const auto &[busId, ranks] : gpus)
    if (ranks > 1)
      shared.push_back(std::to_string(ranks) + " ranks share GPU " + busId);
  std::string list = shared.front();
  for (size_t i = 1; i < shared.size(); ++i)
    list += (i + 1 == shared.size() ? " and " : ", ") + shared[i];
  result.message =
      "on " + mine.host + ", " + list +
      ": NCCL accepts ranks on one GPU only as different hosts, so the "
      "second and later ranks on a GPU set NCCL_HOSTID=flexpipe-" +
      mine.host +
      "-slotK (K: the rank's place on its GPU), and NCCL connects those "
      "slots through its network transport (sockets without InfiniBand), "
      "not NVLink or shared memory";
  return result;
}

SharedGpu flexpipe::rt::sharedGpuByCount(const LaunchEnv &env, int devices,
                                         const std::string &host,
                                         const char *current) {
  if (devices < 1 || env.localWorld < 1)
    return {};
  std::vector<GpuUse> assumed;
  for (int r = 0; r < env.localWorld; ++r)
    assumed.push_back({host, "device " + std::to_string(r % devices)});
  SharedGpu result = sharedGpu(assumed, env.localRank, current);
  if (!result.message.empty())
    result.message +=
        " (counted from LOCAL_WORLD_SIZE=" + std::to_string(env.localWorld) +
        " and the " + std::to_string(devices) +
        " GPU(s) this rank sees, assuming that every rank of "
        "the machine sees them; where each rank sees a GPU of "
        "its own, launch with MPI, or set NCCL_HOSTID to the "
        "machine's name on its ranks)";
  return result;
}

std::string flexpipe::rt::formatIdFile(const std::string &runId, int world,
                                       const std::vector<uint8_t> &id) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t byte : id) {
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  return "flexpipe-nccl-id 1\nrun " + (runId.empty() ? "-" : runId) +
         "\nworld " + std::to_string(world) + "\nid " + hex + "\n";
}

std::string flexpipe::rt::parseIdFile(const std::string &text,
                                      const std::string &runId, int world,
                                      size_t bytes, std::vector<uint8_t> &id) {
  std::istringstream in(text);
  std::string header, version, runKey, run, worldKey, idKey, hex, end;
  int fileWorld = 0;
  in >> header >> version >> runKey >> run >> worldKey >> fileWorld >> idKey >>
      hex;
  if (!in || header != "flexpipe-nccl-id" || version != "1" ||
      runKey != "run" || worldKey != "world" || idKey != "id" || text.empty() ||
      text.back() != '\n')
    return "incomplete or not a FlexPipe NCCL id file";
  if (in >> end)
    return "unexpected text after the id";
  if (run != (runId.empty() ? "-" : runId))
    return "written by another run ('" + run + "', this run is '" +
           (runId.empty() ? "-" : runId) + "')";
  if (fileWorld != world)
    return "written for " + std::to_string(fileWorld) +
           " ranks, this run has " + std::to_string(world);
  if (hex.size() != 2 * bytes)
    return "the id has " + std::to_string(hex.size() / 2) +
           " bytes, expected " + std::to_string(bytes);
  std::vector<uint8_t> decoded(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9')
        return c - '0';
      if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
      return -1;
    };
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return "the id is not lower-case hex";
    decoded[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  id = std::move(decoded);
  return {};
}

std::string flexpipe::rt::publishId(const std::string &path,
                                    const std::string &runId, int world,
                                    const std::vector<uint8_t> &id) {
  const std::string temporary =
      path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  FILE *f = std::fopen(temporary.c_str(), "w");
  if (!f)
    return "cannot write '" + temporary + "': " + std::strerror(errno);
  const std::string text = formatIdFile(runId, world, id);
  const bool written =
      std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!written || !flushed || !closed) {
    std::remove(temporary.c_str());
    return "cannot write '" + temporary + "': " + std::strerror(errno);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    std::remove(temporary.c_str());
    return "cannot rename '" + temporary + "' to '" + path + "': " + error;
  }
  return {};
}

std::string flexpipe::rt::awaitId(const std::string &path,
                                  const std::string &runId, int world,
                                  size_t bytes, double timeout,
                                  std::vector<uint8_t> &id) {
  const double deadline = now() + timeout;
  std::string problem = "it does not exist";
  while (true) {
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      problem = parseIdFile(text.str(), runId, world, bytes, id);
      if (problem.empty())
        return {};
    }
    if (now() > deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", timeout);
  return "waited " + std::string(seconds) +
         " s (FLEXPIPE_TIMEOUT) for rank 0 to write the NCCL id to '" + path +
         "' (FLEXPIPE_NCCL_ID_FILE), but " + problem +
         "; is rank 0 running, and do all ranks see the same file?";
}

ProcessId flexpipe::rt::thisProcess() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  char ns[256] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (n > 0)
    ns[n] = '\0';
  std::string boot = readFile("/proc/sys/kernel/random/boot_id");
  ProcessId self;
  self.host = flexpipe::fnv1a(std::string(name) + "|" + ns + "|" + boot);
  self.pid = static_cast<uint64_t>(::getpid());
  char state = '?';
  readStat(self.pid, state, self.start);
  return self;
}

bool flexpipe::rt::processRunning(const ProcessId &p) {
  char state = '?';
  uint64_t start = 0;
  if (!readStat(p.pid, state, start))
    return false;
  return state != 'Z' && state != 'X' && start == p.start;
}
