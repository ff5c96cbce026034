//===- BootstrapTest.cpp - The CUDA backend's host-side start-up ----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Catch2 tests of runtime/backends/cuda/Bootstrap.cpp, which needs no GPU:
// launch environment, rendezvous file, process liveness and the watchdog;
// and of Timeout.h's rule that a wait gives up only without progress.
// Run by test/Runtime/bootstrap.test.
//
//===----------------------------------------------------------------------===//

#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "Bootstrap.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using namespace flexpipe::rt;

namespace {

/// An environment from a table.
Getenv table(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char *name) -> const char * {
    auto it = values.find(name);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

std::string launch(std::map<std::string, std::string> values, LaunchEnv &env,
                   bool withMpi = true) {
  env = LaunchEnv();
  return readLaunchEnv(table(std::move(values)), withMpi, env);
}

std::string temporaryPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/flexpipe-bootstrap-" +
         std::to_string(::getpid()) + "-" + name;
}

std::vector<uint8_t> sampleId() {
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = static_cast<uint8_t>(i * 37 + 11);
  return id;
}

} // namespace

TEST_CASE("launch environment: torchrun variables", "[bootstrap]") {
  LaunchEnv env;
  CHECK(launch({{"RANK", "3"},
                {"WORLD_SIZE", "4"},
                {"LOCAL_RANK", "1"},
                {"FLEXPIPE_NCCL_ID_FILE", "/shared/id"},
                {"FLEXPIPE_RUN_ID", "job42"},
                {"FLEXPIPE_TIMEOUT", "12.5"}},
               env) == "");
  CHECK_FALSE(env.mpi);
  CHECK(env.rank == 3);
  CHECK(env.world == 4);
  CHECK(env.localRank == 1);
  CHECK(env.idFile == "/shared/id");
  CHECK(env.runId == "job42");
  CHECK(env.timeout == 12.5);
}

TEST_CASE("launch environment: defaults and errors", "[bootstrap]") {
  LaunchEnv env;
  // Nothing set: one rank.
  CHECK(launch({}, env) == "");
  CHECK(env.rank == 0);
  CHECK(env.world == 1);
  CHECK(env.timeout == 300);
  // LOCAL_RANK defaults to RANK; one rank needs no id file.
  CHECK(launch({{"RANK", "0"}, {"WORLD_SIZE", "1"}}, env) == "");
  CHECK(
      launch(
          {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"FLEXPIPE_NCCL_ID_FILE", "f"}},
          env) == "");
  CHECK(env.localRank == 1);

  CHECK(launch({{"RANK", "1"}, {"WORLD_SIZE", "2"}}, env) ==
        "WORLD_SIZE is 2: set FLEXPIPE_NCCL_ID_FILE to a file name every rank "
        "can reach (rank 0 writes the NCCL id there; run-env.sh sets it)");
  CHECK(launch({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, env) ==
        "RANK must be an integer from 0 to WORLD_SIZE - 1 = 1, not '2'");
  CHECK(launch({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, env) ==
        "RANK must be an integer from 0 to WORLD_SIZE - 1 = 1, not '-1'");
  CHECK(launch({{"RANK", "0"}, {"WORLD_SIZE", "two"}}, env) ==
        "WORLD_SIZE must be a positive integer, not 'two'");
  CHECK(launch({{"RANK", "0"}}, env) ==
        "set both RANK and WORLD_SIZE (only RANK is set)");
  CHECK(launch({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "x"}},
               env) == "LOCAL_RANK must be a non-negative integer, not 'x'");
  CHECK(launch({{"FLEXPIPE_TIMEOUT", "0"}}, env) ==
        "FLEXPIPE_TIMEOUT must be a positive number of seconds, not '0'");
  CHECK(launch({{"FLEXPIPE_TIMEOUT", "5s"}}, env) ==
        "FLEXPIPE_TIMEOUT must be a positive number of seconds, not '5s'");
  CHECK(launch({{"FLEXPIPE_BOOTSTRAP", "pmi"}}, env) ==
        "FLEXPIPE_BOOTSTRAP must be 'mpi' or 'env', not 'pmi'");
  // Full fp32 products unless tensor cores are asked for.
  for (MathMode mode : {MathMode::Tf32, MathMode::Bf16, MathMode::Fp32}) {
    LaunchEnv math;
    CHECK(launch({}, math) == "");
    CHECK(math.math == MathMode::Fp32);
    CHECK(launch({{"FLEXPIPE_CUDA_MATH", mathModeName(mode)}}, math) == "");
    CHECK(math.math == mode);
  }
  LaunchEnv math;
  CHECK(launch({{"FLEXPIPE_CUDA_MATH", "fp16"}}, math) ==
        "FLEXPIPE_CUDA_MATH must be 'fp32' (fp32 arrays and products, the "
        "default), 'tf32' (TF32 tensor cores) or 'bf16' (mixed precision: bf16 "
        "activations and products, fp32 master weights), not 'fp16'");
}

TEST_CASE("launch environment: MPI launchers", "[bootstrap]") {
  LaunchEnv env;
  CHECK(startedByMpi(table({{"OMPI_COMM_WORLD_SIZE", "4"}})));
  CHECK(startedByMpi(table({{"PMI_SIZE", "2"}})));
  CHECK(startedByMpi(table({{"PMIX_RANK", "0"}})));
  CHECK_FALSE(startedByMpi(table({{"RANK", "0"}})));

  CHECK(launch({{"OMPI_COMM_WORLD_SIZE", "4"}}, env) == "");
  CHECK(env.mpi);
  // The environment wins when asked for, even under mpirun.
  CHECK(launch({{"OMPI_COMM_WORLD_SIZE", "4"}, {"FLEXPIPE_BOOTSTRAP", "env"}},
               env) == "");
  CHECK_FALSE(env.mpi);
  // Without MPI in the runtime.
  CHECK(launch({{"OMPI_COMM_WORLD_SIZE", "4"}}, env, false) ==
        "an MPI launcher started this rank, but this runtime was built "
        "without MPI; start the ranks with run-env.sh (RANK, WORLD_SIZE) "
        "instead");
  CHECK(launch({{"OMPI_COMM_WORLD_SIZE", "2"},
                {"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"FLEXPIPE_NCCL_ID_FILE", "f"}},
               env, false) == "");
  CHECK(env.rank == 1);
  CHECK(launch({{"FLEXPIPE_BOOTSTRAP", "mpi"}}, env, false) ==
        "FLEXPIPE_BOOTSTRAP is 'mpi', but this runtime was built without MPI; "
        "start the ranks with run-env.sh");
}

TEST_CASE("rendezvous file: format and parse", "[bootstrap]") {
  const std::vector<uint8_t> id = sampleId();
  const std::string text = formatIdFile("run7", 4, id);
  CHECK(text.rfind("flexpipe-nccl-id 1\nrun run7\nworld 4\nid 0b30", 0) == 0);
  std::vector<uint8_t> read;
  CHECK(parseIdFile(text, "run7", 4, id.size(), read) == "");
  CHECK(read == id);
  CHECK(parseIdFile(formatIdFile("", 2, id), "", 2, id.size(), read) == "");

  CHECK(parseIdFile(text, "run8", 4, id.size(), read) ==
        "written by another run ('run7', this run is 'run8')");
  CHECK(parseIdFile(text, "run7", 2, id.size(), read) ==
        "written for 4 ranks, this run has 2");
  CHECK(parseIdFile(text, "run7", 4, 64, read) ==
        "the id has 128 bytes, expected 64");
  // A file still being written (no rename seen yet) is not taken.
  CHECK(parseIdFile(text.substr(0, text.size() - 10), "run7", 4, id.size(),
                    read) == "incomplete or not a FlexPipe NCCL id file");
  CHECK(parseIdFile("", "run7", 4, id.size(), read) ==
        "incomplete or not a FlexPipe NCCL id file");
}

TEST_CASE("rendezvous file: publish and await", "[bootstrap]") {
  const std::string path = temporaryPath("id");
  std::remove(path.c_str());
  const std::vector<uint8_t> id = sampleId();
  std::vector<uint8_t> read;

  // Nobody writes: a clear error after the timeout.
  const std::string error = awaitId(path, "r", 2, id.size(), 0.2, read);
  CHECK(error.find("waited 0.2 s (FLEXPIPE_TIMEOUT) for rank 0 to write the "
                   "NCCL id to '" +
                   path + "' (FLEXPIPE_NCCL_ID_FILE), but it does not exist") ==
        0);

  // A stale file of another run is ignored until this run's file replaces it.
  REQUIRE(publishId(path, "old", 2, std::vector<uint8_t>(id.size(), 1)) == "");
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(publishId(path, "new", 2, id) == "");
  });
  CHECK(awaitId(path, "new", 2, id.size(), 10, read) == "");
  writer.join();
  CHECK(read == id);
  std::remove(path.c_str());

  CHECK(publishId("/nonexistent-dir/id", "r", 2, id)
            .find("cannot write '/nonexistent-dir/id.tmp.") == 0);
}

TEST_CASE("process liveness", "[bootstrap]") {
  const ProcessId self = thisProcess();
  CHECK(self.pid == static_cast<uint64_t>(::getpid()));
  CHECK(self.start > 0);
  CHECK(processRunning(self));
  CHECK(thisProcess().host == self.host);
  // Another start time: the pid was reused by another process.
  ProcessId other = self;
  other.start += 1;
  CHECK_FALSE(processRunning(other));

  // A child that has exited counts as exited, reaped or not (a zombie).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::_Exit(0);
  }
  ProcessId peer;
  for (int tries = 0; tries < 100 && peer.start == 0; ++tries) {
    // The child's start time, as the child would report it.
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)),
                     std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream fields(text.substr(close + 1));
    std::string field;
    for (int index = 3; index <= 22 && fields >> field; ++index)
      ;
    peer = {self.host, static_cast<uint64_t>(child), std::stoull(field)};
  }
  CHECK(processRunning(peer));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK_FALSE(processRunning(peer)); // a zombie until reaped
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK_FALSE(processRunning(peer));
}

TEST_CASE("watchdog", "[bootstrap]") {
  using namespace std::chrono_literals;
  std::mutex mutex;
  std::vector<std::string> failures;
  auto record = [&](const std::string &failure) {
    std::lock_guard<std::mutex> lock(mutex);
    failures.push_back(failure);
  };
  auto failed = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return failures;
  };

  SECTION("a failing check, still failing after the grace period") {
    std::atomic<int> calls{0};
    Watchdog watchdog([&] { return ++calls > 2 ? "rank 1 has exited" : ""; },
                      record, 0.02, 0.1);
    for (int i = 0; i < 200 && failed().empty(); ++i)
      std::this_thread::sleep_for(10ms);
    REQUIRE(failed().size() == 1);
    CHECK(failed()[0] == "rank 1 has exited");
  }
  SECTION("a check that recovers within the grace period") {
    std::atomic<int> calls{0};
    Watchdog watchdog([&] { return ++calls == 3 ? "blip" : ""; }, record, 0.02,
                      0.2);
    std::this_thread::sleep_for(400ms);
    CHECK(failed().empty());
  }
  SECTION("quiet stops the checks") {
    Watchdog watchdog([] { return "rank 1 has exited"; }, record, 0.02, 0.1);
    watchdog.quiet();
    std::this_thread::sleep_for(300ms);
    CHECK(failed().empty());
  }
  SECTION("a scope longer than its limit") {
    Watchdog watchdog([] { return ""; }, record, 0.02);
    {
      Watchdog::Scope scope(&watchdog, "initialising NCCL", 0.1);
      for (int i = 0; i < 200 && failed().empty(); ++i)
        std::this_thread::sleep_for(10ms);
    }
    REQUIRE(failed().size() == 1);
    CHECK(failed()[0].find(" s while initialising NCCL (FLEXPIPE_TIMEOUT); a "
                           "peer rank may have died or hung") !=
          std::string::npos);
  }
  SECTION("scopes within their limit, and no scope at all") {
    Watchdog watchdog([] { return ""; }, record, 0.02);
    for (int i = 0; i < 5; ++i) {
      Watchdog::Scope scope(&watchdog, "a quick call", 0.2);
      std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(300ms);
    CHECK(failed().empty());
    Watchdog::Scope none(nullptr, "nothing", 0); // no watchdog: no effect
  }
  SECTION("scopes opened and closed while the watchdog looks") {
    // It read a scope's name, then times the closing scope had reset to the
    // outermost zeros, and stopped a healthy rank ("no progress for
    // 68743 s"); polling every microsecond, at once.
    Watchdog watchdog([] { return ""; }, record, 1e-6);
    const auto end = std::chrono::steady_clock::now() + 300ms;
    while (std::chrono::steady_clock::now() < end && failed().empty()) {
      Watchdog::Scope scope(&watchdog, "the gradient all-reduce", 300);
      Watchdog::Scope inner(&watchdog, "a transfer", 300);
    }
    CHECK(failed().empty());
  }
}

TEST_CASE("timeout: the message says how long, below a second too",
          "[timeout]") {
  CHECK(noProgressFor(300.4) == "no progress for 300 s");
  CHECK(noProgressFor(3.2) == "no progress for 3 s");
  CHECK(noProgressFor(0.0012) == "no progress for 0.0012 s");
}

TEST_CASE("timeout: measured from the last progress", "[timeout]") {
  // A fake clock: seconds passed to each poll.
  ProgressDeadline deadline(10, 100.0);
  CHECK(!deadline.expired(105, 0));
  CHECK(!deadline.expired(110, 0)); // 10 s idle: not more than the timeout
  CHECK(deadline.expired(110.5, 0));
  CHECK(deadline.idle(110.5) == 10.5);

  // Progress (a larger count) restarts the clock, however long the wait.
  ProgressDeadline moving(10, 0.0);
  size_t completed = 0;
  for (double now = 1; now < 1000; now += 9)
    REQUIRE(!moving.expired(now, ++completed));
  CHECK(moving.idle(1000) < 10);
  // Then nothing completes for longer than the timeout.
  CHECK(!moving.expired(1000, completed));
  CHECK(moving.expired(1009.5, completed));
  CHECK(moving.idle(1009.5) == Approx(18.5)); // since the poll at 991

  // The count at the start is the baseline, not progress.
  ProgressDeadline late(10, 0.0, 7);
  CHECK(late.expired(11, 7));
  CHECK(!late.expired(12, 8));
}

namespace {
/// sharedGpu's host id for each rank of `all`.
std::vector<std::string> hostIds(const std::vector<GpuUse> &all,
                                 const char *current = nullptr) {
  std::vector<std::string> ids;
  for (size_t r = 0; r < all.size(); ++r)
    ids.push_back(sharedGpu(all, static_cast<int>(r), current).hostId);
  return ids;
}
/// The ranks of `all` with a message.
std::vector<int> speakers(const std::vector<GpuUse> &all) {
  std::vector<int> ranks;
  for (size_t r = 0; r < all.size(); ++r)
    if (!sharedGpu(all, static_cast<int>(r), nullptr).message.empty())
      ranks.push_back(static_cast<int>(r));
  return ranks;
}
} // namespace

TEST_CASE("shared GPUs: a host id for each further rank on a GPU",
          "[bootstrap]") {
  using Ids = std::vector<std::string>;
  const std::string a = "0000:1a:00.0", b = "0000:3b:00.0", c = "0000:5c:00.0",
                    d = "0000:7d:00.0";
  // Four ranks, each with a GPU of its own that it sees as device 0 (Slurm
  // --gpus-per-task=1): no host id, no message, so NCCL keeps NVLink, P2P
  // and shared memory among them.
  const std::vector<GpuUse> own = {
      {"node1", a}, {"node1", b}, {"node1", c}, {"node1", d}};
  CHECK(hostIds(own) == Ids{"", "", "", ""});
  CHECK(speakers(own).empty());

  // Four ranks on one GPU: four slots, so four hosts to NCCL.
  const std::vector<GpuUse> one = {
      {"node1", a}, {"node1", a}, {"node1", a}, {"node1", a}};
  CHECK(hostIds(one) == Ids{"", "flexpipe-node1-slot1", "flexpipe-node1-slot2",
                            "flexpipe-node1-slot3"});
  CHECK(speakers(one) == std::vector<int>{0});
  const std::string message = sharedGpu(one, 0, nullptr).message;
  CHECK(message.find("on node1, 4 ranks share GPU 0000:1a:00.0: ") == 0);
  CHECK(message.find("NCCL_HOSTID=flexpipe-node1-slotK") != std::string::npos);

  // Four ranks on two GPUs (device local rank mod 2): two slots; the ranks
  // on different GPUs share a slot's host id.
  const std::vector<GpuUse> two = {
      {"node1", a}, {"node1", b}, {"node1", a}, {"node1", b}};
  CHECK(hostIds(two) ==
        Ids{"", "", "flexpipe-node1-slot1", "flexpipe-node1-slot1"});
  CHECK(sharedGpu(two, 0, nullptr)
            .message.find("on node1, 2 ranks share GPU 0000:1a:00.0 and 2 "
                          "ranks share GPU 0000:3b:00.0: ") == 0);
  // Only the ranks on the shared GPU move; the first that shares speaks.
  const std::vector<GpuUse> partly = {
      {"node1", b}, {"node1", a}, {"node1", c}, {"node1", a}};
  CHECK(hostIds(partly) == Ids{"", "", "", "flexpipe-node1-slot1"});
  CHECK(speakers(partly) == std::vector<int>{1});

  // Two hosts: slots count per host, one bus id on two hosts is two GPUs.
  const std::vector<GpuUse> hosts = {{"node1", a}, {"node1", a}, {"node2", a},
                                     {"node2", b}, {"node2", a}, {"node1", b}};
  CHECK(hostIds(hosts) ==
        Ids{"", "flexpipe-node1-slot1", "", "", "flexpipe-node2-slot1", ""});
  CHECK(speakers(hosts) == std::vector<int>{0, 2});
  const std::vector<GpuUse> apart = {{"node1", a}, {"node2", a}};
  CHECK(hostIds(apart) == Ids{"", ""});
  CHECK(speakers(apart).empty());

  // The user's NCCL_HOSTID stays, and nobody speaks.
  CHECK(hostIds(one, "mine") == Ids{"", "", "", ""});
  CHECK(sharedGpu(one, 0, "mine").message.empty());
  // A rank outside the records: nothing to decide.
  CHECK(sharedGpu(one, 4, nullptr).hostId.empty());
  CHECK(sharedGpu(one, -1, nullptr).hostId.empty());
  CHECK(sharedGpu({}, 0, nullptr).hostId.empty());
}

TEST_CASE("shared GPUs without MPI: the slot counted from the local rank",
          "[bootstrap]") {
  LaunchEnv env;
  REQUIRE(launch({{"RANK", "5"},
                  {"WORLD_SIZE", "8"},
                  {"LOCAL_RANK", "1"},
                  {"LOCAL_WORLD_SIZE", "4"},
                  {"FLEXPIPE_NCCL_ID_FILE", "/shared/id"}},
                 env) == "");
  CHECK(env.localWorld == 4);
  // Four ranks on this machine: a GPU each needs no host id.
  CHECK(sharedGpuByCount(env, 4, "node1", nullptr).hostId == "");
  CHECK(sharedGpuByCount(env, 8, "node1", nullptr).hostId == "");
  // Local rank 1 of 4: slot 1 on one GPU; slot 0 on two or three (device
  // 1, its first rank).
  CHECK(sharedGpuByCount(env, 1, "node1", nullptr).hostId ==
        "flexpipe-node1-slot1");
  CHECK(sharedGpuByCount(env, 2, "node1", nullptr).hostId == "");
  CHECK(sharedGpuByCount(env, 3, "node1", nullptr).hostId == "");
  // Local rank 3: slot 3 on one GPU, slot 1 on two (device 1, with local
  // rank 1, which keeps the machine's host id) and on three (device 0).
  env.localRank = 3;
  CHECK(sharedGpuByCount(env, 1, "node1", nullptr).hostId ==
        "flexpipe-node1-slot3");
  CHECK(sharedGpuByCount(env, 2, "node1", nullptr).hostId ==
        "flexpipe-node1-slot1");
  CHECK(sharedGpuByCount(env, 3, "node1", nullptr).hostId ==
        "flexpipe-node1-slot1");
  CHECK(sharedGpuByCount(env, 1, "node1", nullptr).message.empty());
  // Local rank 0 speaks, and says what it counted.
  env.localRank = 0;
  const SharedGpu first = sharedGpuByCount(env, 2, "node1", nullptr);
  CHECK(first.hostId == "");
  CHECK(first.message.find("on node1, 2 ranks share GPU device 0 and 2 "
                           "ranks share GPU device 1: ",
                           0) == 0);
  CHECK(first.message.find("counted from LOCAL_WORLD_SIZE=4 and the 2 "
                           "GPU(s) this rank sees") != std::string::npos);
  CHECK(sharedGpuByCount(env, 4, "node1", nullptr).message.empty());
  // The user's NCCL_HOSTID stays.
  env.localRank = 3;
  CHECK(sharedGpuByCount(env, 1, "node1", "mine").hostId == "");
  // No GPU, or an unknown local rank count: nothing to decide.
  CHECK(sharedGpuByCount(env, 0, "node1", nullptr).hostId == "");
  LaunchEnv unknown;
  REQUIRE(launch({{"RANK", "1"},
                  {"WORLD_SIZE", "2"},
                  {"FLEXPIPE_NCCL_ID_FILE", "/shared/id"}},
                 unknown) == "");
  CHECK(unknown.localWorld == 0);
  CHECK(sharedGpuByCount(unknown, 1, "node1", nullptr).hostId == "");
  // LOCAL_WORLD_SIZE must hold LOCAL_RANK.
  CHECK(launch({{"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"LOCAL_RANK", "1"},
                {"LOCAL_WORLD_SIZE", "1"},
                {"FLEXPIPE_NCCL_ID_FILE", "/shared/id"}},
               env) == "LOCAL_WORLD_SIZE must be a positive integer above "
                       "LOCAL_RANK (1), not '1'");
}

TEST_CASE("streams beyond the GPU's hardware queues are warned about",
          "[bootstrap]") {
  // What the backend asks for unless the user set it: every stream of a
  // rank with up to 31 channels has a queue.
  CHECK(sharedQueueWarning(kDeviceConnections,
                           std::to_string(kDeviceConnections).c_str()) == "");
  // CUDA's default, 8 queues, when the variable is unset or unreadable.
  CHECK(sharedQueueWarning(8, nullptr) == "");
  CHECK(sharedQueueWarning(8, "lots") == "");
  const std::string warning = sharedQueueWarning(9, nullptr);
  CHECK(warning.find("9 streams (compute and one per channel) share the "
                     "GPU's 8 hardware queues") == 0);
  CHECK(warning.find("may hang") != std::string::npos);
  // A user's smaller setting (Megatron-style 1) is kept, and warned about.
  CHECK(sharedQueueWarning(1, "1") == "");
  CHECK(sharedQueueWarning(3, "1").find("3 streams") == 0);
  CHECK(sharedQueueWarning(3, "1").find("set it to at least 3") !=
        std::string::npos);
  // A setting above CUDA's largest counts as that: it hides nothing.
  CHECK(sharedQueueWarning(kDeviceConnections, "64") == "");
  CHECK(sharedQueueWarning(kDeviceConnections + 1, "64")
            .find("share the GPU's 32 hardware queues") != std::string::npos);
  // The queues themselves (what the CUDA emulation makes): CUDA's 8 for
  // anything but a positive integer, at most 32.
  CHECK(hardwareQueues(nullptr) == 8);
  CHECK(hardwareQueues("") == 8);
  CHECK(hardwareQueues("0") == 8);
  CHECK(hardwareQueues("-1") == 8);
  CHECK(hardwareQueues("abc") == 8);
  CHECK(hardwareQueues("4x") == 8);
  CHECK(hardwareQueues("1") == 1);
  CHECK(hardwareQueues("64") == kDeviceConnections);
  // More streams than any GPU has queues: an error, not advice.
  CHECK(tooManyChannels(kDeviceConnections - 1) == "");
  CHECK(tooManyChannels(kDeviceConnections + 3)
            .find("takes part in 35 message channels, more than the 31 the "
                  "CUDA backend can give a rank") == 0);
}
