//===- CostModelYAML.h - Model, cluster and profile files -------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Readers for the YAML files of docs/CostModel.md. Every problem (a missing or
// unknown key, a wrong type, a value out of range, bad YAML) is reported as
// "FILE:LINE:COLUMN: error: ..." naming the key; nothing throws past these
// functions (yaml-cpp's exceptions stay inside their translation unit).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_COSTMODELYAML_H
#define FLEXPIPE_SCHEDULING_COSTMODELYAML_H

#include "flexpipe/Scheduling/CostModel.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace flexpipe::sched {

/// Whether `name` can name a model, cluster or profile (its `name` key):
/// kConfigNameRule.
bool isConfigName(llvm::StringRef name);
inline constexpr const char *kConfigNameRule =
    "non-empty, one line without control characters";

/// What is wrong with a model, cluster or profile file, at a place in it
/// (line 0: the file as a whole, which could not be read). Its message reads
/// "FILE[:LINE:COLUMN]: error: WHAT", as the drivers print it; a pass reports
/// WHAT at that place instead.
class FileError : public llvm::ErrorInfo<FileError> {
public:
  FileError(std::string path, int line, int column, std::string what)
      : path(std::move(path)), line(line), column(column),
        what(std::move(what)) {}

  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

  std::string path;
  int line, column; // 1-based; 0: none
  std::string what;
  static char ID;
};

/// Each returns success or a FileError that names the file, line and
/// column. With `text`, that is the file's contents and `path` only names
/// it in messages (the fuzz targets read from memory).
llvm::Error loadModel(const std::string &path, ModelConfig &model,
                      const std::string *text = nullptr);
llvm::Error loadCluster(const std::string &path, ClusterConfig &cluster,
                        const std::string *text = nullptr);
llvm::Error loadProfile(const std::string &path, Profile &profile,
                        const std::string *text = nullptr);

/// The cost files of one run, read once by the driver and shared by every
/// step that prices something: a model and a cluster (together) and a
/// profile (alone, or over the model's durations).
struct CostInputs {
  std::optional<ModelConfig> model;
  std::optional<ClusterConfig> cluster;
  std::optional<Profile> profile;

  bool hasModel() const { return model && cluster; }
  const Profile *profileOrNull() const { return profile ? &*profile : nullptr; }
};

/// Reads the files that are named (an empty path: none). A model needs a
/// cluster and the other way round; the error says which is missing or what
/// a file gets wrong.
llvm::Error loadCostInputs(const std::string &modelPath,
                           const std::string &clusterPath,
                           const std::string &profilePath, CostInputs &inputs);

/// A model file of `model`'s first module at micro-batch size `mbs` and
/// global batch `globalBatch`, which loadModel reads back (flexpipe-tune's
/// candidates, flexpipe-profile's calibration jobs).
std::string formatModel(const ModelConfig &model, int64_t mbs,
                        int64_t globalBatch);
/// A cluster file that loadCluster reads back to the same configuration
/// (flexpipe-profile writes its measurements with it).
std::string formatCluster(const ClusterConfig &cluster);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_COSTMODELYAML_H
