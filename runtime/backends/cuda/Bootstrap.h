//===- Bootstrap.h - Rank start-up and failure watch ------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The host-side half of the CUDA backend's start-up and failure handling,
// in plain C++ so that it is tested on machines without a GPU
// (test/Runtime/BootstrapTest.cpp):
//
// - which rank this process is: from MPI when an MPI launcher started it,
//   otherwise from RANK / WORLD_SIZE / LOCAL_RANK as torchrun sets them;
// - the rendezvous file through which rank 0 hands the NCCL unique id to the
//   others when there is no MPI (FLEXPIPE_NCCL_ID_FILE);
// - which ranks of a machine share a GPU, and so the NCCL_HOSTID each sets;
// - whether a rank on the same machine still runs (its pid and start time);
// - a watchdog thread that stops the process when a check fails or the main
//   thread is stuck in one call for longer than a limit.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_CUDA_BOOTSTRAP_H
#define FLEXPIPE_RUNTIME_BACKENDS_CUDA_BOOTSTRAP_H

#include "flexpipe/Runtime/Schedule.h"

#include "../Timeout.h"
#include "../Watchdog.h"
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace flexpipe::rt {

/// Looks up an environment variable (std::getenv, or a table in tests).
using Getenv = std::function<const char *(const char *)>;

/// The backend's precision (FLEXPIPE_CUDA_MATH). Parameters, their
/// gradients and Adam's moments are fp32 in every mode, and products sum in
/// fp32.
enum class MathMode {
  Fp32, ///< fp32 arrays, full fp32 products (the default)
  Tf32, ///< fp32 arrays, TF32 tensor cores: inputs rounded to 10-bit mantissas
        /// Mixed precision: activations and their gradients stored (and sent
  /// between stages) in bf16, products on bf16 copies of the weights (bf16
  /// tensor cores), fp32 master weights updated by Adam
  Bf16,
};
/// The FLEXPIPE_CUDA_MATH spelling of `mode`.
inline const char *mathModeName(MathMode mode) {
  return mode == MathMode::Tf32   ? "tf32"
         : mode == MathMode::Bf16 ? "bf16"
                                  : "fp32";
}

/// How this process was started and which rank it is.
struct LaunchEnv {
  /// Started by an MPI launcher and the runtime has MPI: rank, world and
  /// local rank come from MPI, the NCCL id from MPI_Bcast.
  bool mpi = false;
  int rank = 0, world = 1, localRank = 0;
  /// The ranks on this machine (LOCAL_WORLD_SIZE, MPI's shared-memory
  /// communicator); 0 when unknown.
  int localWorld = 0;
  std::string idFile;   ///< FLEXPIPE_NCCL_ID_FILE
  std::string runId;    ///< FLEXPIPE_RUN_ID: tells this run's id file apart
  double timeout = kDefaultTimeout; ///< FLEXPIPE_TIMEOUT, seconds
  /// FLEXPIPE_CUDA_MATH: how cuBLAS computes matrix products of the fp32
  /// arrays (fp32, the default, which the numerics tests need).
  MathMode math = MathMode::Fp32;
};

/// Whether an MPI launcher (Open MPI, PMI, PMIx, MVAPICH) started this
/// process.
bool startedByMpi(const Getenv &getenv);

/// Reads FLEXPIPE_BOOTSTRAP (mpi, env or unset: mpi when an MPI launcher
/// started the process and `withMpi`), RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE, FLEXPIPE_NCCL_ID_FILE, FLEXPIPE_RUN_ID,
/// FLEXPIPE_TIMEOUT and FLEXPIPE_CUDA_MATH. Returns "" or what is wrong.
std::string readLaunchEnv(const Getenv &getenv, bool withMpi, LaunchEnv &env);

/// When a rank's `streams` streams (the compute stream and one per channel)
/// outnumber the GPU's hardware queues (`setting`, the value of
/// CUDA_DEVICE_MAX_CONNECTIONS, or nullptr: CUDA's default 8), the warning
/// to print: streams that share a queue run their kernels in the order they
/// were queued, so an NCCL transfer waiting for its peer can hold back one
/// that the peer waits for. "" when every stream has a queue.
std::string sharedQueueWarning(int streams, const char *setting);

/// The hardware queues CUDA gives a process for `setting`, the value of
/// CUDA_DEVICE_MAX_CONNECTIONS (or nullptr): a positive integer, at most
/// kDeviceConnections; anything else leaves CUDA's default, 8. The CUDA
/// emulation makes as many.
int hardwareQueues(const char *setting);
/// Whether `setting` (CUDA_DEVICE_MAX_CONNECTIONS's value) is a positive
/// integer, a number of queues CUDA takes.
bool isQueueCount(const char *setting);

/// The GPU a rank uses, as the ranks tell each other before NCCL's first
/// call.
struct GpuUse {
  std::string host;  ///< the machine's name (gethostname)
  std::string busId; ///< the GPU's PCI bus id (cudaDeviceGetPCIBusId)
};

/// What a rank does about other ranks on its GPU.
struct SharedGpu {
  std::string hostId;  ///< the NCCL_HOSTID to set; "" leaves it as it is
  std::string message; ///< for stderr; "" but on one rank per machine
};

/// NCCL refuses two ranks of one communicator on one GPU ("Duplicate GPU
/// detected") unless they look like different hosts. `all[r]` is rank r's
/// GPU and `rank` this rank. The ranks of a host (`GpuUse::host`) on one GPU
/// (`GpuUse::busId`) take slots 0, 1, ... in rank order; a rank in slot K > 0
/// gets NCCL_HOSTID flexpipe-HOST-slotK, a slot-0 rank keeps the machine's
/// own host id. So ranks on different GPUs of a machine stay one host to
/// NCCL as far as they can (slot 0 of every GPU, slot 1 of every GPU with a
/// second rank, ...), keeping NVLink, P2P and shared memory among them, and
/// NCCL connects the slots over its network transport. The first rank of a
/// host on a shared GPU gets the message saying which GPUs how many ranks
/// share. Nothing when no GPU is shared, `rank` is not in `all`, or
/// `current` (the NCCL_HOSTID already set, or nullptr) is the user's choice.
/// Host names must tell machines apart: two machines of one name would count
/// as one, and their ranks of a slot would look like one host to NCCL.
SharedGpu sharedGpu(const std::vector<GpuUse> &all, int rank,
                    const char *current);

/// sharedGpu without an exchange (no MPI: run-env.sh, torchrun): the ranks
/// of this machine (`env.localWorld`) are assumed to see the same `devices`
/// GPUs, as run-env.sh starts them, so local rank r uses device r mod
/// `devices` and this rank's slot is `env.localRank` / `devices`. Ranks that
/// each see a GPU of their own (a CUDA_VISIBLE_DEVICES per rank) break the
/// assumption; the message says to set NCCL_HOSTID or launch with MPI.
/// Nothing when `devices` < 1 or the local rank count is unknown.
SharedGpu sharedGpuByCount(const LaunchEnv &env, int devices,
                           const std::string &host, const char *current);

/// The rendezvous file: a header, the run id, the world size and the id in
/// hex, so that a file left by another run is never taken for this one.
std::string formatIdFile(const std::string &runId, int world,
                         const std::vector<uint8_t> &id);
/// Returns "" when `text` is a complete file for `runId` and `world` holding
/// `bytes` bytes (then in `id`), otherwise why not.
std::string parseIdFile(const std::string &text, const std::string &runId,
                        int world, size_t bytes, std::vector<uint8_t> &id);
/// Rank 0: writes the file atomically (a temporary file, then rename).
std::string publishId(const std::string &path, const std::string &runId,
                      int world, const std::vector<uint8_t> &id);
/// The other ranks: wait up to `timeout` seconds for the file.
std::string awaitId(const std::string &path, const std::string &runId,
                    int world, size_t bytes, double timeout,
                    std::vector<uint8_t> &id);

/// A process as the other ranks on the same machine see it.
struct ProcessId {
  uint64_t host = 0; ///< machine, boot and pid namespace
  uint64_t pid = 0;
  uint64_t start = 0; ///< start time in clock ticks after boot
};
ProcessId thisProcess();
/// Whether `p`, on this machine, still runs: false once it has exited (a
/// zombie counts as exited) or its pid belongs to another process.
bool processRunning(const ProcessId &p);

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_BACKENDS_CUDA_BOOTSTRAP_H
