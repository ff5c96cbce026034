//===- FuzzYaml.cpp - Fuzz target: model, cluster and profile files -------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Any text as each of the three YAML files of docs/CostModel.md. A file that
// is refused gets a located message; one that is read holds finite numbers
// only; a profile that is read prints (formatProfile) and reads back to the
// same values.
//
//===----------------------------------------------------------------------===//

#include "../unit/FormatProfile.h"
#include "FuzzTarget.h"

#include "flexpipe/Scheduling/CostModelYAML.h"

#include <cmath>
#include <optional>
#include <string>

using namespace flexpipe::sched;

namespace {

/// A refusal names the file, a line and a column.
void checkLocated(const std::string &error) {
  FUZZ_CHECK(error.rfind("input.yaml:", 0) == 0, error.c_str());
  FUZZ_CHECK(error.find(": error: ") != std::string::npos, error.c_str());
}

bool isFinite(double x) { return std::isfinite(x); }
bool isFinite(const std::optional<double> &x) {
  return !x || std::isfinite(*x);
}

} // namespace

FLEXPIPE_FUZZ_TARGET(yaml) {
  const std::string text(reinterpret_cast<const char *>(data), size);

  ModelConfig model;
  std::string error = llvm::toString(loadModel("input.yaml", model, &text));
  if (!error.empty())
    checkLocated(error);
  else
    for (const ModuleModel &m : model.modules)
      FUZZ_CHECK(m.layers >= 0 && m.hidden >= 0 && m.seq >= 0, text.c_str());

  ClusterConfig cluster;
  error = llvm::toString(loadCluster("input.yaml", cluster, &text));
  if (!error.empty())
    checkLocated(error);
  else
    FUZZ_CHECK(isFinite(cluster.peakFlops) && isFinite(cluster.memoryBytes) &&
                   isFinite(cluster.intraNode.latency) &&
                   isFinite(cluster.interNode.bandwidth) &&
                   cluster.devices >= 1,
               text.c_str());

  Profile profile;
  error = llvm::toString(loadProfile("input.yaml", profile, &text));
  if (!error.empty()) {
    checkLocated(error);
    return;
  }
  for (const Profile::Stage &s : profile.stages)
    FUZZ_CHECK(isFinite(s.fwd) && isFinite(s.bwd) && isFinite(s.igrad) &&
                   isFinite(s.wgrad) && isFinite(s.activationBytes),
               text.c_str());
  const std::string printed = formatProfile(profile);
  Profile again;
  error = llvm::toString(loadProfile("printed.yaml", again, &printed));
  FUZZ_CHECK(error.empty(), (error + "\n" + printed).c_str());
  FUZZ_CHECK(formatProfile(again) == printed, printed.c_str());
}
