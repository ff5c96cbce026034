//===- flexpipe-reference.cpp - Single-process training -------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Trains the same model on the same data as a compiled pipeline, in one
// process and without pipelining: every micro-batch of every replica through
// the whole model (both towers and the contrastive loss of a two-tower
// model), one Adam step per iteration. Pipelined runs must match its losses
// and final weights.
//
// Usage: flexpipe-reference SCHEDULE.txt [--iterations N] [--lr X]
//                           [--losses FILE] [--weights FILE]
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Model.h"
#include "flexpipe/Runtime/Schedule.h"

#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace flexpipe::rt;

int main(int argc, char **argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: flexpipe-reference SCHEDULE.txt "
                         "[--iterations N] [--lr X] [--losses FILE] "
                         "[--weights FILE]\n");
    return argc < 2 ? 1 : 0;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "flexpipe-reference: cannot open '%s'\n", argv[1]);
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  ScheduleDesc desc;
  if (std::string error = parseSchedule(text.str(), desc); !error.empty()) {
    std::fprintf(stderr, "flexpipe-reference: %s: %s\n", argv[1], error.c_str());
    return 1;
  }
  int64_t iterations = 10;
  float lr = 1e-3f;
  std::string lossesPath, weightsPath;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "flexpipe-reference: '%s' needs a value\n",
                   arg.c_str());
      return 1;
    }
    if (arg == "--iterations")
      iterations = std::atoll(argv[++i]);
    else if (arg == "--lr")
      lr = static_cast<float>(std::atof(argv[++i]));
    else if (arg == "--losses")
      lossesPath = argv[++i];
    else if (arg == "--weights")
      weightsPath = argv[++i];
    else {
      std::fprintf(stderr, "flexpipe-reference: unknown option '%s'\n",
                   arg.c_str());
      return 1;
    }
  }
  openblas_set_num_threads(1);
  // The GPT, or the two towers, each whole.
  std::vector<Stage> models;
  if (desc.twoTower())
    for (const GptConfig &tower : desc.towers)
      models.emplace_back(tower, 0, tower.layers, true, true);
  else
    models.emplace_back(desc.model, 0, desc.model.layers, true, true);
  std::vector<Parameter *> parameters;
  for (Stage &model : models)
    for (Parameter *p : model.parameters())
      parameters.push_back(p);
  Adam adam;
  adam.lr = lr;
  const int64_t total = static_cast<int64_t>(desc.microbatches) * desc.dp;
  const float scale = 1.0f / static_cast<float>(total);
  FILE *losses = lossesPath.empty() ? nullptr : std::fopen(lossesPath.c_str(), "w");
  for (int64_t it = 0; it < iterations; ++it) {
    double loss = 0;
    for (int64_t mb = 0; mb < total; ++mb) {
      Tensor out, din;
      if (!desc.twoTower()) {
        loss += models[0].forward(mb, makeBatch(desc.model, it, mb), {}, out);
        models[0].backward(mb, {}, din, scale);
        continue;
      }
      // Both towers' embeddings, the contrastive loss, and each tower's
      // backward from the gradient of its embeddings.
      Tensor embeddings[2], grads[2];
      for (int t = 0; t < 2; ++t)
        models[t].forward(mb, makeTowerBatch(desc.towers[t], t, it, mb), {},
                          embeddings[t]);
      const GptConfig &tower = desc.towers[0];
      loss += contrastiveLoss(embeddings[0], embeddings[1], tower.microBatch,
                              tower.embed, grads[0], grads[1]);
      for (int t = 0; t < 2; ++t) {
        for (float &g : grads[t])
          g *= scale;
        models[t].backward(mb, grads[t], din, scale);
      }
    }
    adam.apply(parameters);
    std::printf("iteration %lld: loss %.6f\n", static_cast<long long>(it),
                loss * scale);
    if (losses)
      std::fprintf(losses, "%.9g\n", loss * scale);
  }
  if (losses)
    std::fclose(losses);
  if (!weightsPath.empty()) {
    FILE *f = std::fopen(weightsPath.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "flexpipe-reference: cannot write '%s'\n",
                   weightsPath.c_str());
      return 1;
    }
    for (Parameter *p : parameters) {
      std::fprintf(f, "%s %zu", p->name.c_str(), p->value.size());
      for (float x : p->value)
        std::fprintf(f, " %.9g", x);
      std::fprintf(f, "\n");
    }
    std::fclose(f);
  }
  return 0;
}
