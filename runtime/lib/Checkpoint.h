//===- Checkpoint.h - What a rank saves to resume training ------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A rank program's checkpoints (--checkpoint, --resume; docs/Runtime.md,
// "Checkpoint and resume"): one binary file per rank and generation,
// DIR/iter-K.rankR after K completed iterations, with what the run must
// match to resume it (schedule, model, ranks), the losses so far and the
// device's state (weights, Adam's moments and step count) bit for bit. Files
// are written to a temporary, flushed to disk and renamed, so a file of that
// name is always whole; a checksum catches the rest. The executor
// (Executor.cpp) runs the protocol between the ranks.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_LIB_CHECKPOINT_H
#define FLEXPIPE_RUNTIME_LIB_CHECKPOINT_H

#include "flexpipe/Runtime/Device.h"
#include "flexpipe/Runtime/Schedule.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flexpipe::rt {

struct Checkpoint {
  /// The run that wrote it (drawn at each launch, a resumed one too): one
  /// generation's files are of one run. Files of two runs in a directory
  /// (a fresh run killed while it replaced an older one's generation)
  /// resumed a model stitched from both.
  uint64_t run = 0;
  // What a run must match to resume from the file.
  uint64_t scheduleHash = 0;
  std::string scheduleName;
  /// modelText() of the schedule.
  std::string model;
  int32_t actors = 0, dp = 0, ranks = 0, rank = 0;
  // Where training stands.
  /// Completed iterations: the next iteration, and so the data position
  /// (batches are a function of the iteration), is this.
  int64_t iterations = 0;
  /// --lr of the run that wrote it.
  float lr = 0;
  /// How its device computed (Device::precision's name: fp32, tf32, bf16);
  /// empty in a version-2 file, which did not record it.
  std::string precision;
  /// The loss of every completed iteration.
  std::vector<double> losses;
  DeviceState state;
};

/// The model of `desc` as text, its `model` and `tower` lines' sizes: what
/// a checkpoint's model must equal.
std::string modelText(const ScheduleDesc &desc);

/// DIR/iter-K.rankR.
std::string checkpointPath(const std::string &dir, int64_t iterations,
                           int rank);

/// Whether `name` (a file name, no directory) is one a checkpoint directory
/// holds: iter-K.rankR, or a temporary of one while it is written.
bool isCheckpointName(const std::string &name);

/// Creates `dir` and missing parents; "" or why not.
std::string makeDirectories(const std::string &dir);

/// Writes `checkpoint` to `path` whole or not at all: a temporary beside it,
/// flushed to disk, renamed over it, the directory flushed. "" or why not.
std::string writeCheckpoint(const std::string &path,
                            const Checkpoint &checkpoint);

/// Reads `path` and checks that it is a whole checkpoint file of this
/// format (magic, version, sizes within the file, checksum); "" or what is
/// wrong, naming the file. Reads nothing outside what the file holds.
std::string readCheckpoint(const std::string &path, Checkpoint &checkpoint);

/// "" when `found` (read from `path`) continues the run `expected` describes
/// (its identity: ranks, actors, dp, rank, model, schedule), else what
/// differs.
std::string checkpointMismatch(const std::string &path, const Checkpoint &found,
                               const Checkpoint &expected);

/// The generations K of rank `rank`'s files DIR/iter-K.rankR, ascending, in
/// `mine`; every file's (K, R) of any rank, sorted, in `all`. Temporaries
/// and other names are skipped. "" or why `dir` cannot be read.
std::string listCheckpoints(const std::string &dir, int rank,
                            std::vector<int64_t> &mine,
                            std::vector<std::pair<int64_t, int>> &all);

/// Removes rank `rank`'s files DIR/iter-K.rankR for every K but `keep`.
void removeCheckpointsExcept(const std::string &dir, int rank, int64_t keep);

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_LIB_CHECKPOINT_H
