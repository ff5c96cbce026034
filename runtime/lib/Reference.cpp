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
#include "flexpipe/Runtime/Host.h"
#include "flexpipe/Runtime/Model.h"
#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Runtime/UserOps.h"
#include "flexpipe/Support/Layout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
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
  Segmented(const GptConfig &config, const std::set<int64_t> &cuts) {
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

/// flexpipe-reference's command line.
struct ReferenceOptions {
  std::string schedule; ///< the schedule description file
  int64_t iterations = 10;
  float lr = 1e-3f;
  std::string losses, weights, initialWeights, batches;
};

/// Parses the command line. Returns the exit code when the process should
/// stop here (after --help, --list-operations or an error it printed).
std::optional<int> parseReferenceOptions(int argc, char **argv,
                                         ReferenceOptions &o) {
  if (argc == 2 && std::string(argv[1]) == "--list-operations")
    return listOperations();
  // --help where an option may stand (every option takes a value).
  bool help = false;
  for (int i = 1; i < argc && !help; i += i == 1 ? 1 : 2)
    help = std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h";
  if (argc < 2 || help) {
    // --help to stdout (asked for), the reminder after no argument to
    // stderr.
    std::fprintf(help ? stdout : stderr,
                 "usage: flexpipe-reference SCHEDULE.txt [--iterations N] "
                 "[--lr X] [--losses FILE] [--weights FILE] "
                 "[--initial-weights FILE] [--batches FILE]\n"
                 "       flexpipe-reference --list-operations\n"
                 "Trains the schedule's model in one process. Every FILE is "
                 "written: --losses the loss of each iteration, --weights "
                 "the final weights, --initial-weights the weights before "
                 "training, --batches the data of each micro-batch.\n");
    return help ? 0 : 1;
  }
  // The schedule comes first: an option there read as the schedule and its
  // value as an option ("'1' needs a value").
  if (std::string(argv[1]).rfind("-", 0) == 0) {
    std::fprintf(stderr,
                 "flexpipe-reference: the first argument is the schedule "
                 "description (SCHEDULE.txt, or ./%s for a file of that "
                 "name), not the option '%s'\n",
                 argv[1], argv[1]);
    return 1;
  }
  o.schedule = argv[1];
  static const char *const kOptions[] = {"--iterations",      "--lr",
                                         "--losses",          "--weights",
                                         "--initial-weights", "--batches"};
  std::set<std::string> given;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (std::find(std::begin(kOptions), std::end(kOptions), arg) ==
        std::end(kOptions)) {
      std::fprintf(stderr,
                   arg.rfind("-", 0) == 0
                       ? "flexpipe-reference: unknown option '%s'\n"
                       : "flexpipe-reference: unexpected argument '%s' (the "
                         "schedule is the first, and only, argument that is "
                         "not an option)\n",
                   arg.c_str());
      return 1;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "flexpipe-reference: '%s' needs a value\n",
                   arg.c_str());
      return 1;
    }
    // The last of two values won without a word, as in the rank programs.
    if (!given.insert(arg).second) {
      std::fprintf(stderr,
                   "flexpipe-reference: %s is given twice; give it once\n",
                   arg.c_str());
      return 1;
    }
    const char *value = argv[++i];
    // An empty file name would read as the option not given.
    if (!*value && arg != "--iterations" && arg != "--lr") {
      std::fprintf(stderr, "flexpipe-reference: %s needs a file name\n",
                   arg.c_str());
      return 1;
    }
    if (arg == "--iterations") {
      if (!parseInteger(value, 1, kMaxIterations, o.iterations)) {
        std::fprintf(stderr,
                     "flexpipe-reference: --iterations must be %s, got '%s'\n",
                     kIterationsRule, value);
        return 1;
      }
    } else if (arg == "--lr") {
      if (!parseLearningRate(value, o.lr)) {
        std::fprintf(stderr, "flexpipe-reference: --lr must be %s, got '%s'\n",
                     kLearningRateRule, value);
        return 1;
      }
    } else if (arg == "--losses") {
      o.losses = value;
    } else if (arg == "--weights") {
      o.weights = value;
    } else if (arg == "--initial-weights") {
      o.initialWeights = value;
    } else if (arg == "--batches") {
      o.batches = value;
    } else {
      std::fprintf(stderr, "flexpipe-reference: unknown option '%s'\n",
                   arg.c_str());
      return 1;
    }
  }
  return std::nullopt;
}

/// Reads and parses the schedule description; false after a printed error.
bool readDescription(const std::string &path, ScheduleDesc &desc) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    std::fprintf(stderr,
                 "flexpipe-reference: cannot read '%s': it is a directory\n",
                 path.c_str());
    return false;
  }
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "flexpipe-reference: cannot open '%s'\n",
                 path.c_str());
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (std::string error = parseSchedule(text.str(), desc); !error.empty()) {
    std::fprintf(stderr, "flexpipe-reference: %s: %s\n", path.c_str(),
                 error.c_str());
    return false;
  }
  return true;
}

/// Prints `error` as flexpipe-reference's and returns the exit code 1.
int failed(const std::string &error) {
  std::fprintf(stderr, "flexpipe-reference: %s\n", error.c_str());
  return 1;
}

/// The whole model trained on one process, with the schedule's runtime
/// operations run where the ranks would run them.
class ReferenceRun {
public:
  explicit ReferenceRun(const ScheduleDesc &desc) : desc(desc) {}

  /// Which models cut where, which (stage, micro-batch) outputs the
  /// operations read, and the instances in the order they run: after the
  /// forward of the last micro-batch they cover, by stage. Operations this
  /// program was built without are skipped, with a note: they only read
  /// activations, so training is the same without them; but in a program
  /// built `withOperations` (runReference) a missing one is the error
  /// returned.
  std::string plan(bool withOperations);
  /// The GPT, or the two towers, each whole or cut where operations read.
  void makeModels();
  /// One training iteration over every replica's micro-batches; returns the
  /// mean loss, or an error.
  std::optional<double> iteration(int64_t it, float lr, FILE *batches,
                                  std::string &error);
  /// NAME COUNT VALUES... per parameter (scripts/compare-training.py).
  std::string writeWeights(const std::string &path) const;

private:
  /// Runs the operation instances whose last micro-batch is `mb`, from
  /// order[next] on.
  std::string runOperations(int64_t it, int replica, int64_t mb,
                            size_t &next) const;

  const ScheduleDesc &desc;
  const int numModels = desc.twoTower() ? 2 : 1;
  std::vector<std::set<int64_t>> cuts =
      std::vector<std::set<int64_t>>(numModels);
  std::set<std::pair<int, int64_t>> read;
  std::vector<size_t> order;
  std::vector<Segmented> models;
  std::vector<Parameter *> parameters;
  Adam adam;
  /// Outputs kept for the operations, per (stage, micro-batch).
  std::map<std::pair<int, int64_t>, Tensor> kept;
};

std::string ReferenceRun::plan(bool withOperations) {
  std::set<std::string> skipped;
  for (size_t i = 0; i < desc.execs.size(); ++i) {
    const ScheduleDesc::Exec &exec = desc.execs[i];
    const ScheduleDesc::Stage &stage = desc.stage[exec.stage];
    if (!findOperation(exec.name)) {
      // (--emit=cpp's build.sh does not ask --list-operations first.)
      if (withOperations)
        return "the schedule runs operation @" + exec.name +
               ", which none of the --ops files built into this program "
               "defines (flexpipe-reference --list-operations lists them)";
      if (skipped.insert(exec.name).second)
        std::fprintf(stderr,
                     "flexpipe-reference: note: the schedule runs operation "
                     "@%s, which this program was built without; skipping it "
                     "(operations only read activations, so training is the "
                     "same; the 'reference' that flexpipe-compile --ops "
                     "builds beside the ranks runs it)\n",
                     exec.name.c_str());
      continue;
    }
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
  return "";
}

void ReferenceRun::makeModels() {
  if (desc.twoTower())
    for (int t = 0; t < 2; ++t)
      models.emplace_back(desc.towers[t], cuts[t]);
  else
    models.emplace_back(desc.model, cuts[0]);
  for (Segmented &model : models)
    for (Parameter *p : model.parameters())
      parameters.push_back(p);
}

std::string ReferenceRun::writeWeights(const std::string &path) const {
  OutputFile file(path);
  if (FILE *f = file.get())
    for (Parameter *p : parameters) {
      std::fprintf(f, "%s %zu", p->name.c_str(), p->value.size());
      for (float x : p->value)
        std::fprintf(f, " %.9g", x);
      std::fprintf(f, "\n");
    }
  return file.commit() ? std::string() : file.error();
}

std::string ReferenceRun::runOperations(int64_t it, int replica, int64_t mb,
                                        size_t &next) const {
  for (; next < order.size(); ++next) {
    const ScheduleDesc::Exec &exec = desc.execs[order[next]];
    if (exec.mb + exec.count - 1 > mb)
      break;
    OpContext::Place place;
    place.name = exec.name;
    place.rank =
        static_cast<int>(flexpipe::rankOf(exec.actor, replica, desc.dp));
    place.ranks = desc.actors * desc.dp;
    place.actor = exec.actor;
    place.replica = replica;
    place.iteration = it;
    place.stage = exec.stage;
    place.microbatch = exec.mb;
    place.numMicrobatches = exec.count;
    std::map<std::string, OpAttribute> attributes;
    if (std::string error = decodeOpAttributes(exec.attrs, attributes);
        !error.empty())
      return "exec @" + exec.name + ": " + error;
    ReferenceHost host(desc, exec, kept);
    OpContext context(std::move(place), std::move(attributes), host);
    findOperation(exec.name)(context);
  }
  return {};
}

/// ITERATION MB TOKENS... / TARGETS... for one micro-batch of the GPT.
static void writeBatch(FILE *f, int64_t it, int64_t g, const Batch &batch) {
  std::fprintf(f, "%lld %lld", static_cast<long long>(it),
               static_cast<long long>(g));
  for (int32_t token : batch.tokens)
    std::fprintf(f, " %d", token);
  std::fprintf(f, " /");
  for (int32_t target : batch.targets)
    std::fprintf(f, " %d", target);
  std::fprintf(f, "\n");
}

std::optional<double> ReferenceRun::iteration(int64_t it, float lr,
                                              FILE *batches,
                                              std::string &error) {
  adam.lr = lr;
  double loss = 0;
  const int64_t total = static_cast<int64_t>(desc.microbatches) * desc.dp;
  const float scale = 1.0f / static_cast<float>(total);
  size_t next = 0; // into order
  kept.clear();
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
      if (batches)
        writeBatch(batches, it, g, batch);
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
    error = runOperations(it, replica, mb, next);
    if (!error.empty())
      return std::nullopt;
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
  return loss * scale;
}

} // namespace

int flexpipe::rt::runReference(int argc, char **argv, bool withOperations) {
  ReferenceOptions o;
  if (std::optional<int> exit = parseReferenceOptions(argc, argv, o))
    return *exit;
  ScheduleDesc desc;
  if (!readDescription(o.schedule, desc))
    return 1;
  if (std::vector<std::string> errors = registrationErrors(); !errors.empty())
    return failed(errors.front());
  ReferenceRun run(desc);
  if (std::string error = run.plan(withOperations); !error.empty())
    return failed(error);
  prepareHostProcess();
  run.makeModels();
  if (std::string error =
          OutputFile::checkDistinct({{"--losses", o.losses},
                                     {"--weights", o.weights},
                                     {"--initial-weights", o.initialWeights},
                                     {"--batches", o.batches}});
      !error.empty())
    return failed(error + " (checked before training)");
  if (!o.weights.empty())
    if (std::string error = OutputFile::check(o.weights); !error.empty())
      return failed(error + " (checked before training)");
  if (!o.batches.empty() && desc.twoTower())
    return failed("--batches writes the GPT's batches; this schedule trains "
                  "two towers");
  // Every output is checked before the first is written (the initial
  // weights replaced a file, and then --losses in a missing directory
  // stopped the run).
  OutputFile::removeTemporariesOnInterrupt();
  std::optional<OutputFile> batchesFile, lossesFile;
  if (!o.batches.empty())
    batchesFile.emplace(o.batches);
  if (!o.losses.empty())
    lossesFile.emplace(o.losses);
  for (auto *file : {&batchesFile, &lossesFile})
    if (*file && !(*file)->get())
      return failed((*file)->error());
  if (!o.initialWeights.empty())
    if (std::string error = run.writeWeights(o.initialWeights); !error.empty())
      return failed(error);
  FILE *batches = batchesFile ? batchesFile->get() : nullptr;
  FILE *losses = lossesFile ? lossesFile->get() : nullptr;
  std::string diverged; // as the ranks stop
  for (int64_t it = 0; it < o.iterations && diverged.empty(); ++it) {
    std::string error;
    std::optional<double> loss = run.iteration(it, o.lr, batches, error);
    if (!loss)
      return failed(error);
    std::printf("iteration %lld: loss %.6f\n", static_cast<long long>(it),
                *loss);
    if (losses)
      std::fprintf(losses, "%.9g\n", *loss);
    if (!std::isfinite(*loss))
      diverged = "iteration " + std::to_string(it) + ": the loss is " +
                 (std::isnan(*loss) ? "nan" : "infinite") +
                 ", so training stopped: lower --lr, or look at the initial "
                 "weights and at what registered operations do to the "
                 "activations";
  }
  for (auto *file : {&batchesFile, &lossesFile})
    if (*file && !(*file)->commit())
      return failed((*file)->error());
  if (!o.weights.empty())
    if (std::string error = run.writeWeights(o.weights); !error.empty())
      return failed(error);
  // The loss lines reached the standard output (into a full disk they were
  // lost, and the tool exited 0), as the ranks check.
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    return failed("cannot write the standard output (a full disk?); lines "
                  "of this run are lost");
  return diverged.empty() ? 0 : failed(diverged);
}
