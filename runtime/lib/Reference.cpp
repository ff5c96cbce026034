//===- Reference.cpp - Single-process training ----------------------------===//
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
// Runtime operations (flexpipe.exec) run where the pipeline runs them: the
// description lists every instance, and each runs after the forward of the
// last micro-batch it covers, in micro-batch order per stage, seeing the
// outputs of the stages it reads. To have those outputs, each model is cut
// into consecutive segments at the stages' ends; a model in segments
// computes bitwise what it computes whole.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Reference.h"

#include "OutputFile.h"
#include "ParseNumber.h"
#include "flexpipe/Runtime/Model.h"
#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Runtime/UserOps.h"

#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace flexpipe::rt;

namespace {

/// Where in a model a stage's output is: after the embedding and that many
/// blocks (0 to layers), after the final LayerNorm (layers + 1), or the
/// model's output (a tower's embeddings).
constexpr int64_t kModelOutput = -1;

int64_t outputBoundary(const ScheduleDesc::Stage &stage,
                       const GptConfig &config) {
  if (stage.towerLast())
    return kModelOutput;
  if (stage.finalNorm)
    return config.layers + 1;
  return stage.firstBlock + stage.blocks;
}

/// Whether runtime operations see an output of `stage` (not a
/// vocabulary-parallel part, not the sync stage).
bool hasOutput(const ScheduleDesc::Stage &stage) {
  return !stage.shared() && !stage.sync;
}

/// One model (the GPT or a tower) as consecutive segments, cut after the
/// boundaries in `cuts`.
class Segmented {
public:
  Segmented(const GptConfig &config, const std::set<int64_t> &cuts)
      : config(config) {
    const int64_t layers = config.layers;
    int64_t from = -1; // -1: the start, before the embedding
    auto segment = [&](int64_t to, bool end) {
      const bool embedding = from < 0;
      const int64_t first = std::min(std::max<int64_t>(from, 0), layers);
      const int64_t last = end ? layers : std::min(to, layers);
      const int64_t blocks = std::max<int64_t>(0, last - first);
      if (end && from == layers + 1) {
        // After the final LayerNorm: the LM head alone.
        std::vector<std::unique_ptr<Layer>> head;
        head.push_back(makeLmHead(config));
        segments.emplace_back(std::move(head));
      } else {
        segments.emplace_back(config, first, blocks, embedding, end,
                              !end && to == layers + 1);
      }
      boundaries.push_back(end ? kModelOutput : to);
    };
    for (int64_t cut : cuts) {
      if (cut == kModelOutput)
        continue;
      segment(cut, false);
      from = cut;
    }
    segment(0, true);
  }

  /// Runs the forward; returns the loss of a GPT, `out` is the model's
  /// output; `outputs` gets a copy of the activation at each boundary.
  float forward(int64_t mb, const Batch &batch, Tensor &out,
                std::map<int64_t, Tensor> &outputs) {
    Tensor x;
    float loss = 0;
    for (size_t i = 0; i < segments.size(); ++i) {
      Tensor y;
      loss = segments[i].forward(mb, batch, x, y);
      x = std::move(y);
      if (boundaries[i] != kModelOutput)
        outputs[boundaries[i]] = x;
    }
    out = std::move(x);
    outputs[kModelOutput] = out;
    return loss;
  }

  void backward(int64_t mb, Tensor dout, float scale) {
    for (size_t i = segments.size(); i-- > 0;) {
      Tensor din;
      segments[i].backward(mb, dout, din, scale);
      dout = std::move(din);
    }
  }

  std::vector<Parameter *> parameters() {
    std::vector<Parameter *> all;
    for (Stage &segment : segments)
      for (Parameter *p : segment.parameters())
        all.push_back(p);
    return all;
  }

private:
  GptConfig config;
  std::vector<Stage> segments;
  std::vector<int64_t> boundaries; // after each segment
};

/// What an operation sees in the reference: the outputs kept for the
/// micro-batches its instance reads.
class ReferenceHost final : public OpContext::Host {
public:
  ReferenceHost(const ScheduleDesc &desc, const ScheduleDesc::Exec &exec,
                const std::map<std::pair<int, int64_t>, Tensor> &kept)
      : desc(desc), exec(exec), kept(kept) {}
  TensorView output(int64_t mb) override {
    if (std::find(exec.outputs.begin(), exec.outputs.end(), mb) ==
        exec.outputs.end())
      return {};
    auto it = kept.find({exec.stage, mb});
    if (it == kept.end())
      fail("internal error: the output of stage " + std::to_string(exec.stage) +
           " mb " + std::to_string(mb) + " was not kept");
    TensorView view;
    view.data = it->second.data();
    view.size = it->second.size();
    view.shape = desc.outputShape(exec.stage, view.size);
    return view;
  }
  [[noreturn]] void fail(const std::string &message) override {
    std::fprintf(stderr, "flexpipe-reference: %s\n", message.c_str());
    std::exit(1);
  }

private:
  const ScheduleDesc &desc;
  const ScheduleDesc::Exec &exec;
  const std::map<std::pair<int, int64_t>, Tensor> &kept;
};

int listOperations() {
  for (const std::string &name : registeredOperations())
    std::printf("%s\n", name.c_str());
  const std::vector<std::string> errors = registrationErrors();
  for (const std::string &error : errors)
    std::fprintf(stderr, "error: %s\n", error.c_str());
  return errors.empty() ? 0 : 1;
}

} // namespace

int flexpipe::rt::runReference(int argc, char **argv) {
  if (argc == 2 && std::string(argv[1]) == "--list-operations")
    return listOperations();
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: flexpipe-reference SCHEDULE.txt "
                         "[--iterations N] [--lr X] [--losses FILE] "
                         "[--weights FILE] [--initial-weights FILE] "
                         "[--batches FILE]\n"
                         "       flexpipe-reference --list-operations\n");
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
    std::fprintf(stderr, "flexpipe-reference: %s: %s\n", argv[1],
                 error.c_str());
    return 1;
  }
  int64_t iterations = 10;
  float lr = 1e-3f;
  std::string lossesPath, weightsPath, initialPath, batchesPath;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "flexpipe-reference: '%s' needs a value\n",
                   arg.c_str());
      return 1;
    }
    double number = 0;
    if (arg == "--iterations") {
      if (!parseInteger(argv[++i], 1, int64_t(1) << 40, iterations)) {
        std::fprintf(stderr,
                     "flexpipe-reference: --iterations must be an integer of "
                     "at least 1, got '%s'\n",
                     argv[i]);
        return 1;
      }
    } else if (arg == "--lr") {
      if (!parseNumber(argv[++i], 0, 1e6, number)) {
        std::fprintf(stderr,
                     "flexpipe-reference: --lr must be a number between 0 and "
                     "1e6, got '%s'\n",
                     argv[i]);
        return 1;
      }
      lr = static_cast<float>(number);
    } else if (arg == "--losses")
      lossesPath = argv[++i];
    else if (arg == "--weights")
      weightsPath = argv[++i];
    else if (arg == "--initial-weights")
      initialPath = argv[++i];
    else if (arg == "--batches")
      batchesPath = argv[++i];
    else {
      std::fprintf(stderr, "flexpipe-reference: unknown option '%s'\n",
                   arg.c_str());
      return 1;
    }
  }

  // Runtime operations: those this program was built without are skipped;
  // they only read activations, so training is the same without them.
  if (std::vector<std::string> errors = registrationErrors(); !errors.empty()) {
    std::fprintf(stderr, "flexpipe-reference: %s\n", errors.front().c_str());
    return 1;
  }
  std::set<std::string> skipped;
  for (const ScheduleDesc::Exec &exec : desc.execs)
    if (!findOperation(exec.name) && skipped.insert(exec.name).second)
      std::fprintf(stderr,
                   "flexpipe-reference: note: the schedule runs operation "
                   "@%s, which this program was built without; skipping it "
                   "(operations only read activations, so training is the "
                   "same; the 'reference' that flexpipe-compile --ops builds "
                   "beside the ranks runs it)\n",
                   exec.name.c_str());
  // Which models cut where, which (stage, micro-batch) outputs instances
  // read, and the instances in the order they run: after the forward of the
  // last micro-batch they cover, by stage.
  const int numModels = desc.twoTower() ? 2 : 1;
  std::vector<std::set<int64_t>> cuts(numModels);
  std::set<std::pair<int, int64_t>> read;
  std::vector<size_t> order;
  for (size_t i = 0; i < desc.execs.size(); ++i) {
    const ScheduleDesc::Exec &exec = desc.execs[i];
    const ScheduleDesc::Stage &stage = desc.stage[exec.stage];
    if (!findOperation(exec.name))
      continue;
    order.push_back(i);
    if (exec.outputs.empty() || !hasOutput(stage))
      continue;
    cuts[std::max(stage.tower, 0)].insert(
        outputBoundary(stage, desc.config(exec.stage)));
    for (int64_t mb : exec.outputs)
      read.insert({exec.stage, mb});
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ScheduleDesc::Exec &x = desc.execs[a], &y = desc.execs[b];
    return std::make_pair(x.mb + x.count, x.stage) <
           std::make_pair(y.mb + y.count, y.stage);
  });

  openblas_set_num_threads(1);
  // The GPT, or the two towers, each whole or in segments.
  std::vector<Segmented> models;
  if (desc.twoTower())
    for (int t = 0; t < 2; ++t)
      models.emplace_back(desc.towers[t], cuts[t]);
  else
    models.emplace_back(desc.model, cuts[0]);
  std::vector<Parameter *> parameters;
  for (Segmented &model : models)
    for (Parameter *p : model.parameters())
      parameters.push_back(p);
  // NAME COUNT VALUES... per parameter (scripts/compare-training.py).
  auto failed = [](const std::string &error) {
    std::fprintf(stderr, "flexpipe-reference: %s\n", error.c_str());
    return 1;
  };
  auto writeWeights = [&](const std::string &path) {
    OutputFile file(path);
    if (FILE *f = file.get())
      for (Parameter *p : parameters) {
        std::fprintf(f, "%s %zu", p->name.c_str(), p->value.size());
        for (float x : p->value)
          std::fprintf(f, " %.9g", x);
        std::fprintf(f, "\n");
      }
    return file.commit() ? std::string() : file.error();
  };
  if (!weightsPath.empty())
    if (std::string error = OutputFile::check(weightsPath); !error.empty())
      return failed(error + " (checked before training)");
  if (!initialPath.empty())
    if (std::string error = writeWeights(initialPath); !error.empty())
      return failed(error);
  if (!batchesPath.empty() && desc.twoTower())
    return failed("--batches writes the GPT's batches; this schedule trains "
                  "two towers");
  // Per micro-batch of the GPT: ITERATION MB TOKENS... / TARGETS...
  std::optional<OutputFile> batchesFile, lossesFile;
  if (!batchesPath.empty())
    batchesFile.emplace(batchesPath);
  if (!lossesPath.empty())
    lossesFile.emplace(lossesPath);
  for (auto *file : {&batchesFile, &lossesFile})
    if (*file && !(*file)->get())
      return failed((*file)->error());
  FILE *batches = batchesFile ? batchesFile->get() : nullptr;
  FILE *losses = lossesFile ? lossesFile->get() : nullptr;
  Adam adam;
  adam.lr = lr;
  const int64_t total = static_cast<int64_t>(desc.microbatches) * desc.dp;
  const float scale = 1.0f / static_cast<float>(total);
  for (int64_t it = 0; it < iterations; ++it) {
    double loss = 0;
    std::map<std::pair<int, int64_t>, Tensor> kept;
    size_t next = 0; // into order
    for (int64_t g = 0; g < total; ++g) {
      // Replica r trains on micro-batches [r m, (r + 1) m); its programs
      // number them from 0.
      const int replica = static_cast<int>(g / desc.microbatches);
      const int64_t mb = g % desc.microbatches;
      if (mb == 0) {
        kept.clear();
        next = 0;
      }
      std::vector<std::map<int64_t, Tensor>> outputs(numModels);
      Tensor out[2];
      if (!desc.twoTower()) {
        const Batch batch = makeBatch(desc.model, it, g);
        if (batches) {
          std::fprintf(batches, "%lld %lld", static_cast<long long>(it),
                       static_cast<long long>(g));
          for (int32_t token : batch.tokens)
            std::fprintf(batches, " %d", token);
          std::fprintf(batches, " /");
          for (int32_t target : batch.targets)
            std::fprintf(batches, " %d", target);
          std::fprintf(batches, "\n");
        }
        loss += models[0].forward(g, batch, out[0], outputs[0]);
      } else {
        for (int t = 0; t < 2; ++t)
          models[t].forward(g, makeTowerBatch(desc.towers[t], t, it, g), out[t],
                            outputs[t]);
      }
      for (auto [s, m] : read)
        if (m == mb) {
          const ScheduleDesc::Stage &stage = desc.stage[s];
          kept[{s, m}] = outputs[std::max(stage.tower, 0)].at(
              outputBoundary(stage, desc.config(s)));
        }
      // The instances whose last micro-batch this is.
      for (; next < order.size(); ++next) {
        const ScheduleDesc::Exec &exec = desc.execs[order[next]];
        if (exec.mb + exec.count - 1 > mb)
          break;
        OpContext::Place place;
        place.name = exec.name;
        place.rank = replica * desc.actors + exec.actor;
        place.ranks = desc.actors * desc.dp;
        place.actor = exec.actor;
        place.replica = replica;
        place.iteration = it;
        place.stage = exec.stage;
        place.microbatch = exec.mb;
        place.numMicrobatches = exec.count;
        std::map<std::string, OpAttribute> attributes;
        if (std::string error = decodeOpAttributes(exec.attrs, attributes);
            !error.empty()) {
          std::fprintf(stderr, "flexpipe-reference: exec @%s: %s\n",
                       exec.name.c_str(), error.c_str());
          return 1;
        }
        ReferenceHost host(desc, exec, kept);
        OpContext context(std::move(place), std::move(attributes), host);
        findOperation(exec.name)(context);
      }
      if (!desc.twoTower()) {
        models[0].backward(g, {}, scale);
        continue;
      }
      // Both towers' embeddings, the contrastive loss, and each tower's
      // backward from the gradient of its embeddings.
      Tensor grads[2];
      const GptConfig &tower = desc.towers[0];
      loss += contrastiveLoss(out[0], out[1], tower.microBatch, tower.embed,
                              grads[0], grads[1]);
      for (int t = 0; t < 2; ++t) {
        for (float &x : grads[t])
          x *= scale;
        models[t].backward(g, std::move(grads[t]), scale);
      }
    }
    adam.apply(parameters);
    std::printf("iteration %lld: loss %.6f\n", static_cast<long long>(it),
                loss * scale);
    if (losses)
      std::fprintf(losses, "%.9g\n", loss * scale);
  }
  for (auto *file : {&batchesFile, &lossesFile})
    if (*file && !(*file)->commit())
      return failed((*file)->error());
  if (!weightsPath.empty())
    if (std::string error = writeWeights(weightsPath); !error.empty())
      return failed(error);
  return 0;
}
