//===- Schedule.cpp - The schedule description rank programs embed --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Support/Hash.h"
#include "flexpipe/Support/InputLimits.h"
#include "flexpipe/Support/Layout.h"
#include "flexpipe/Support/StageGraph.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

using namespace flexpipe::rt;

namespace {

/// Reads `key=value` items into `config` (the model line's and a tower
/// line's); returns an error or "".
std::string readSizes(std::istringstream &words, GptConfig &config,
                      bool tower) {
  std::string item;
  while (words >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return "expected key=value, got '" + item + "'";
    const std::string k = item.substr(0, eq), text = item.substr(eq + 1);
    // The seed is unsigned (the writer prints a uint64_t); out of range is
    // refused, not clamped (every seed from 2^63 up read as 2^63 - 1).
    char *end = nullptr;
    errno = 0;
    const bool seed = k == "seed" && !tower;
    const unsigned long long u =
        seed && text[0] != '-' ? std::strtoull(text.c_str(), &end, 10) : 0;
    const long long v = seed ? 0 : std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || !end || *end != '\0')
      return "expected an integer in '" + item + "'";
    if (errno == ERANGE)
      return "'" + item + "' is out of range for a 64-bit integer";
    if (k == "vocab")
      config.vocab = v;
    else if (k == "seq")
      config.seq = v;
    else if (k == "hidden")
      config.hidden = v;
    else if (k == "heads")
      config.heads = v;
    else if (k == "layers")
      config.layers = v;
    else if (k == "microbatch" && !tower)
      config.microBatch = v;
    else if (k == "seed" && !tower)
      config.seed = static_cast<uint64_t>(u);
    else if (k == "embed" && !tower)
      config.embed = v;
    else
      return std::string("unknown ") + (tower ? "tower" : "model") + " key '" +
             k + "'";
  }
  words.clear(std::ios::eofbit);
  return {};
}

/// 'exec NAME stage S actor A mb M count C outputs LIST [ATTRIBUTES]', LIST
/// '-' or ascending micro-batches separated by commas.
std::string readExec(std::istringstream &words, ScheduleDesc &desc) {
  const char *expected = "expected 'exec NAME stage S actor A mb M count C "
                         "outputs M0,M1,...|- [KEY=K:VALUE ...]'";
  ScheduleDesc::Exec exec;
  std::string stageWord, actorWord, mbWord, countWord, outputsWord, list;
  words >> exec.name >> stageWord >> exec.stage >> actorWord >> exec.actor >>
      mbWord >> exec.mb >> countWord >> exec.count >> outputsWord >> list;
  if (!words || stageWord != "stage" || actorWord != "actor" ||
      mbWord != "mb" || countWord != "count" || outputsWord != "outputs")
    return expected;
  if (exec.stage < 0 || exec.actor < 0 || exec.mb < 0 || exec.count < 1)
    return "exec " + exec.name +
           ": stage, actor and mb must not be negative, count at least 1";
  if (list != "-") {
    std::istringstream items(list);
    for (std::string item; std::getline(items, item, ',');) {
      char *end = nullptr;
      const long long mb = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || mb < exec.mb ||
          mb >= exec.mb + exec.count ||
          (!exec.outputs.empty() && mb <= exec.outputs.back()))
        return "exec " + exec.name + ": outputs '" + list +
               "' must be ascending micro-batches of the instance";
      exec.outputs.push_back(mb);
    }
  }
  std::getline(words, exec.attrs);
  if (!exec.attrs.empty() && exec.attrs.front() == ' ')
    exec.attrs.erase(0, 1);
  std::map<std::string, OpAttribute> attributes;
  if (std::string error = decodeOpAttributes(exec.attrs, attributes);
      !error.empty())
    return "exec " + exec.name + ": " + error;
  desc.execs.push_back(std::move(exec));
  return {};
}

/// What one process can hold: the limits of the compiler's verifiers
/// (docs/Rationale.md, "Sizes"), and tensors of at most 2^31 floats.
using flexpipe::kMaxActors;
using flexpipe::kMaxCount;
constexpr int64_t kMaxTensor = int64_t(1) << 31;

/// Sizes of a model (or tower) `what` that the layers can be built with.
std::string checkSizes(const GptConfig &c, const std::string &what) {
  if (std::string error =
          flexpipe::checkModelShape(c.hidden, c.heads, c.seq, c.vocab);
      !error.empty())
    return what + " " + error;
  if (c.layers < 1 || c.layers > kMaxCount)
    return what + " layers must be between 1 and " + std::to_string(kMaxCount) +
           ", got " + std::to_string(c.layers);
  // The largest tensors: the embedding or head table, the MLP's hidden
  // activations and the attention probabilities.
  const double largest = std::max(
      {double(c.vocab) * c.hidden, double(c.microBatch) * c.seq * 4 * c.hidden,
       double(c.microBatch) * c.heads * c.seq * c.seq});
  if (largest > double(kMaxTensor)) {
    // Up to 2^72 floats: printed from the double, not through an integer.
    char floats[48];
    std::snprintf(floats, sizeof floats, "%.0f", largest);
    return what + " needs a tensor of " + floats +
           " floats; one process holds at most 2^31";
  }
  return {};
}

/// The checks of a whole description that no single line shows: counts in
/// range, every stage declared once with its actors and blocks in range,
/// edges between stages.
std::string checkStructure(const ScheduleDesc &desc,
                           const std::vector<char> &declared) {
  auto range = [](const char *name, int64_t value, int64_t max) {
    return value < 1 || value > max
               ? std::string(name) + " " + std::to_string(value) +
                     " must be between 1 and " + std::to_string(max)
               : std::string();
  };
  for (const std::string &error :
       {range("actors", desc.actors, kMaxActors),
        range("dp", desc.dp, kMaxActors),
        range("stages", desc.stages, kMaxCount),
        range("microbatches", desc.microbatches, kMaxCount)})
    if (!error.empty())
      return error;
  if (int64_t(desc.actors) * desc.dp > kMaxActors)
    return "actors x dp = " + std::to_string(int64_t(desc.actors) * desc.dp) +
           " ranks; at most " + std::to_string(kMaxActors);
  if (desc.towers.empty())
    if (std::string error = checkSizes(desc.model, "model"); !error.empty())
      return error;
  for (const GptConfig &tower : desc.towers)
    if (std::string error = checkSizes(
            tower, "tower " + tower.prefix.substr(0, tower.prefix.size() - 1));
        !error.empty())
      return error;
  for (int s = 0; s < desc.stages; ++s) {
    const ScheduleDesc::Stage &stage = desc.stage[s];
    const std::string name = "stage " + std::to_string(s);
    if (!declared[s])
      return name + " has no 'stage' line";
    for (int a : stage.actors)
      if (a < 0 || a >= desc.actors)
        return name + " names actor " + std::to_string(a) + ", but there are " +
               std::to_string(desc.actors);
    const GptConfig &c = desc.config(s);
    if (stage.firstBlock < 0 || stage.blocks < 0 ||
        int64_t(stage.firstBlock) + stage.blocks > c.layers)
      return name + " holds blocks " + std::to_string(stage.firstBlock) +
             " to " + std::to_string(stage.firstBlock + stage.blocks - 1) +
             ", but the model has " + std::to_string(c.layers) + " layers";
  }
  // Every block of the model (of each tower) is held by some stage: a
  // description that left some out would train a smaller model than it
  // names.
  std::map<int, std::vector<char>> held; // by tower (-1: the model)
  for (int s = 0; s < desc.stages; ++s) {
    const ScheduleDesc::Stage &stage = desc.stage[s];
    if (stage.sync)
      continue;
    std::vector<char> &blocks = held[stage.tower];
    blocks.resize(desc.config(s).layers, 0);
    std::fill_n(blocks.begin() + stage.firstBlock, stage.blocks, 1);
  }
  for (const auto &[tower, blocks] : held)
    if (auto missing = std::find(blocks.begin(), blocks.end(), 0);
        missing != blocks.end())
      return "block " + std::to_string(missing - blocks.begin()) + " of " +
             (tower < 0 ? std::string("the model")
                        : "tower " + std::to_string(tower)) +
             " is held by no stage";
  // Edges join two stages, each pair once, without a cycle (for two-tower
  // descriptions too: only the single model's chain check had Kahn's
  // algorithm, and a repeated edge, which the compiler refuses, passed).
  if (std::optional<flexpipe::EdgeProblem> bad =
          flexpipe::findEdgeProblem(desc.stages, desc.edges))
    return "edge " + std::to_string(bad->from) + " " + std::to_string(bad->to) +
           (bad->kind == flexpipe::EdgeProblem::Repeated
                ? " is given twice"
                : " does not join two of the " + std::to_string(desc.stages) +
                      " stages");
  if (flexpipe::StageGraph<int>(desc.stages, desc.edges).hasCycle())
    return "the edges form a cycle";
  return {};
}

/// The checks of a two-tower description that no single line shows.
std::string checkTowers(ScheduleDesc &desc) {
  if (desc.towers.size() != 2)
    return "a two-tower model needs exactly two 'tower' lines, got " +
           std::to_string(desc.towers.size());
  if (desc.model.embed < 1)
    return "a two-tower model needs 'embed=N' (N >= 1) on its model line";
  for (GptConfig &tower : desc.towers) {
    tower.microBatch = desc.model.microBatch;
    tower.seed = desc.model.seed;
    tower.embed = desc.model.embed;
  }
  int syncs = 0;
  std::vector<int> firsts(2), lasts(2);
  for (int s = 0; s < desc.stages; ++s) {
    const ScheduleDesc::Stage &stage = desc.stage[s];
    if (stage.sync) {
      ++syncs;
      continue;
    }
    if (stage.tower < 0 || stage.tower > 1)
      return "stage " + std::to_string(s) +
             " belongs to no tower ('tower 0' or 'tower 1')";
    if (stage.shared())
      return "stage " + std::to_string(s) +
             " is shared; a two-tower model has no shared stages";
    firsts[stage.tower] += stage.first;
    lasts[stage.tower] += stage.last;
  }
  if (syncs != 1)
    return "a two-tower model needs one sync stage, got " +
           std::to_string(syncs);
  for (int t = 0; t < 2; ++t)
    if (firsts[t] != 1 || lasts[t] != 1)
      return "tower " + std::to_string(t) +
             " needs exactly one first and one last stage";
  std::vector<int> ends = {desc.stage[desc.towerLastStage(0)].actor,
                           desc.stage[desc.towerLastStage(1)].actor};
  std::sort(ends.begin(), ends.end());
  const int sync = desc.syncStage();
  if (desc.stage[sync].actors != ends || ends[0] == ends[1])
    return "sync stage " + std::to_string(sync) +
           " must list the two different actors of the towers' last stages";
  for (auto [from, to] : desc.edges)
    if (from < 0 || from >= desc.stages || to < 0 || to >= desc.stages ||
        desc.stage[from].sync || desc.stage[to].sync ||
        desc.stage[from].tower != desc.stage[to].tower)
      return "edge " + std::to_string(from) + " " + std::to_string(to) +
             " leaves its tower";
  return {};
}

/// A 'stage' line after its key: the stage, its clauses ('shared A0 A1 ...',
/// 'tower T', 'sync A0 A1') and their rules. Returns an error or "".
std::string readStage(std::istringstream &words, ScheduleDesc &desc,
                      std::vector<char> &declared) {
  int id;
  ScheduleDesc::Stage s;
  int first = 0, last = 0;
  std::string actorWord, blocksWord, flagsWord;
  words >> id >> actorWord >> s.actor >> blocksWord >> s.firstBlock >>
      s.blocks >> flagsWord >> first >> last;
  if (!words || actorWord != "actor" || blocksWord != "blocks" ||
      flagsWord != "first_last")
    return "expected 'stage ID actor A blocks FIRST COUNT first_last "
           "F L [shared A0 A1 ...] [tower T] [sync A0 A1]'";
  if (id < 0 || id >= static_cast<int>(desc.stage.size()))
    return "stage " + std::to_string(id) + " out of range";
  if (declared[id]++)
    return "stage " + std::to_string(id) + " is declared twice";
  s.first = first;
  s.last = last;
  // Clauses after the flags: 'shared A0 A1 ...', 'tower T', 'sync A0 A1'.
  std::vector<std::string> rest;
  for (std::string word; words >> word;)
    rest.push_back(word);
  words.clear(std::ios::eofbit);
  // An actor or tower number: up to 9 digits (an int; the range is
  // checked with the rest of the structure).
  auto isNumber = [](const std::string &w) {
    return !w.empty() && w.size() <= 9 &&
           w.find_first_not_of("0123456789") == std::string::npos;
  };
  bool tower = false;
  for (size_t i = 0; i < rest.size();) {
    const std::string clause = rest[i++];
    std::vector<int> numbers;
    for (; i < rest.size() && isNumber(rest[i]); ++i)
      numbers.push_back(std::stoi(rest[i]));
    if ((clause == "shared" || clause == "sync") && s.actors.empty() &&
        numbers.size() >= 2 && std::is_sorted(numbers.begin(), numbers.end()) &&
        std::adjacent_find(numbers.begin(), numbers.end()) == numbers.end() &&
        numbers.front() == s.actor) {
      s.actors = numbers;
      s.sync = clause == "sync";
    } else if (clause == "shared" || clause == "sync") {
      return "a " + clause +
             " stage lists at least two actors once, sorted, the "
             "first its 'actor'";
    } else if (clause == "tower" && !tower && numbers.size() == 1) {
      s.tower = numbers.front();
      tower = true;
    } else {
      return "expected 'shared A0 A1 ...', 'tower T' or 'sync A0 A1' "
             "after the flags, got '" +
             clause + "'";
    }
  }
  if (s.actors.empty())
    s.actors = {s.actor};
  if (s.sync &&
      (s.blocks != 0 || s.first || s.last || tower || s.actors.size() != 2))
    return "a sync stage holds no blocks, is neither first nor last, "
           "belongs to no tower and lists two actors";
  desc.stage[id] = s;
  return {};
}

/// Who sums the gradients of a piece of the model (a block, the embedding,
/// the head) held more than once: a device sums those of its own stages by
/// parameter name; between actors, a stage exchanges with its one copy
/// (areCopies); vocabulary-parallel stages split over the same actors hold
/// the same slices. Any other holding would train each holder apart without
/// a word (an up direction cut 3 + 1 against 2 + 2, a third direction, an
/// embedding whole in one direction and sliced in the other).
std::string checkCopies(const ScheduleDesc &desc) {
  const int layers = static_cast<int>(desc.model.layers);
  std::vector<std::vector<int>> holders(layers + 2); // blocks, embedding, head
  for (int s = 0; s < desc.stages; ++s) {
    const ScheduleDesc::Stage &stage = desc.stage[s];
    for (int b = stage.firstBlock; b < stage.firstBlock + stage.blocks; ++b)
      holders[b].push_back(s);
    if (stage.first)
      holders[layers].push_back(s);
    if (stage.last)
      holders[layers + 1].push_back(s);
  }
  for (int piece = 0; piece < layers + 2; ++piece) {
    const std::vector<int> &h = holders[piece];
    if (h.size() < 2)
      continue;
    const ScheduleDesc::Stage &one = desc.stage[h[0]];
    auto sameActors = [&](int s) { return desc.stage[s].actors == one.actors; };
    auto onOneActor = [&](int s) {
      return !desc.stage[s].shared() && desc.stage[s].actor == one.actor;
    };
    if ((one.shared() && std::all_of(h.begin(), h.end(), sameActors)) ||
        std::all_of(h.begin(), h.end(), onOneActor) ||
        (h.size() == 2 && areCopies(one, desc.stage[h[1]])))
      continue;
    std::string stages;
    for (size_t i = 0; i < h.size(); ++i) {
      const ScheduleDesc::Stage &stage = desc.stage[h[i]];
      stages += (i == 0             ? ""
                 : i + 1 < h.size() ? ", "
                                    : " and ") +
                std::to_string(h[i]) + " (actor" + (stage.shared() ? "s" : "");
      for (int a : stage.actors)
        stages += " " + std::to_string(a);
      stages += ")";
    }
    const std::string what = piece < layers ? "block " + std::to_string(piece)
                             : piece == layers ? std::string("the embedding")
                                               : std::string("the LM head");
    return what + " is held by stages " + stages +
           ", whose gradients would never be summed: copies of a piece "
           "must sit on one actor, or be one stage and its copy on another "
           "actor (the same blocks, first and last), or, vocabulary-"
           "parallel, be split over the same actors";
  }
  return {};
}

/// A single model's stages (no towers) form its pipelines: every block is
/// held by as many stages (one per direction, k), k stages are first and k
/// last, each edge hands the blocks on where they stop (an embedding's
/// output to block 0, the last block's to the head), every stage but the
/// first ones has an input and every one but the last ones an output
/// (checkStructure refused cycles). A description the compiler did not
/// write gets the first of these that fails (each once trained without a
/// word).
std::string checkChain(const ScheduleDesc &desc) {
  std::vector<int> holders(desc.model.layers, 0);
  int firsts = 0, lasts = 0;
  for (const ScheduleDesc::Stage &stage : desc.stage) {
    for (int b = stage.firstBlock; b < stage.firstBlock + stage.blocks; ++b)
      ++holders[b];
    firsts += stage.first;
    lasts += stage.last;
  }
  const int k = holders.empty() ? 1 : holders.front();
  for (size_t b = 1; b < holders.size(); ++b)
    if (holders[b] != k)
      return "block " + std::to_string(b) + " of the model is held by " +
             std::to_string(holders[b]) + " stages and block 0 by " +
             std::to_string(k) + "; each block once per pipeline direction";
  if (firsts != k || lasts != k)
    return std::to_string(firsts) + " first and " + std::to_string(lasts) +
           " last stages for " + std::to_string(k) +
           " pipeline direction(s); one of each per direction";
  if (std::string error = checkCopies(desc); !error.empty())
    return error;
  std::vector<int> inputs(desc.stages, 0), outputs(desc.stages, 0);
  for (auto [from, to] : desc.edges) {
    const ScheduleDesc::Stage &u = desc.stage[from], &v = desc.stage[to];
    if (v.firstBlock != u.firstBlock + u.blocks)
      return "edge " + std::to_string(from) + " " + std::to_string(to) +
             " hands the output after block " +
             std::to_string(u.firstBlock + u.blocks - 1) + " to stage " +
             std::to_string(to) + ", which starts at block " +
             std::to_string(v.firstBlock);
    ++outputs[from];
    ++inputs[to];
  }
  for (int s = 0; s < desc.stages; ++s) {
    const ScheduleDesc::Stage &stage = desc.stage[s];
    if (!stage.first && inputs[s] == 0)
      return "stage " + std::to_string(s) +
             " is not a first stage but no edge leads to it";
    if (!stage.last && outputs[s] == 0)
      return "stage " + std::to_string(s) +
             " is not a last stage but no edge leaves it";
  }
  return {};
}

/// The whole description after its last line: stages declared, towers or
/// none, the structure, the execs' ranges; marks the stage that holds the
/// final LayerNorm. Returns an error or "".
std::string checkDescription(ScheduleDesc &desc,
                             const std::vector<char> &declared) {
  if (declared.empty())
    return "no 'stages' line";
  // Sequences in a micro-batch are a count (a global batch of single
  // sequences is at most kMaxCount); a two-tower model's towers take the
  // model line's.
  if (desc.model.microBatch < 1 || desc.model.microBatch > kMaxCount)
    return "model microbatch must be between 1 and " +
           std::to_string(kMaxCount) + ", got " +
           std::to_string(desc.model.microBatch);
  if (!desc.towers.empty()) {
    if (std::string error = checkTowers(desc); !error.empty())
      return error;
  } else {
    for (int s = 0; s < desc.stages; ++s)
      if (desc.stage[s].tower >= 0 || desc.stage[s].sync)
        return "stage " + std::to_string(s) +
               " names a tower or is a sync stage, but the model has no "
               "'tower' lines";
  }
  if (std::string error = checkStructure(desc, declared); !error.empty())
    return error;
  if (desc.towers.empty())
    if (std::string error = checkChain(desc); !error.empty())
      return error;
  if (desc.program >= desc.actors)
    return "the 'program' line names actor " + std::to_string(desc.program) +
           ", but the schedule has " + std::to_string(desc.actors) + " actors";
  if (!desc.predictedPeak.empty() &&
      desc.predictedPeak.size() != static_cast<size_t>(desc.actors))
    return "the 'predicted' line has " +
           std::to_string(desc.predictedPeak.size()) + " numbers for " +
           std::to_string(desc.actors) + " actors";
  for (const ScheduleDesc::Exec &exec : desc.execs)
    if (exec.stage >= desc.stages || exec.actor >= desc.actors ||
        exec.mb + exec.count > desc.microbatches)
      return "exec " + exec.name + " stage " + std::to_string(exec.stage) +
             " actor " + std::to_string(exec.actor) + " mb " +
             std::to_string(exec.mb) + " count " + std::to_string(exec.count) +
             " lies outside the schedule's stages, actors or micro-batches";
  // The final LayerNorm is not part of a vocabulary-parallel head: the stage
  // that feeds the head holds it.
  for (auto [from, to] : desc.edges)
    if (from >= 0 && from < desc.stages && to >= 0 && to < desc.stages &&
        desc.stage[to].vocabHead())
      desc.stage[from].finalNorm = true;
  return {};
}

} // namespace

std::string flexpipe::rt::parseSchedule(const std::string &text,
                                        ScheduleDesc &desc) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  auto fail = [&](const std::string &what) {
    return "schedule description line " + std::to_string(number) + ": " + what;
  };
  bool header = false;
  // flexpipe-compile writes 'hash' and 'check' together; a hand-written
  // description (tests, docs) may have neither.
  int hashLine = 0;
  bool checked = false;
  std::vector<char> declared; // per stage: its 'stage' line was read
  while (std::getline(in, line)) {
    ++number;
    if (line.empty())
      continue;
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (!header) {
      if (line != "flexpipe-schedule 1")
        return fail("expected 'flexpipe-schedule 1'");
      header = true;
      continue;
    }
    if (key == "name") {
      std::string word;
      words >> word;
      if (!unescapeDescriptionText(word, desc.name))
        return fail("the name '" + word + "' has a malformed %XX escape");
    } else if (key == "program") {
      words >> desc.program;
      if (words && desc.program < 0)
        return fail("program must name an actor, got " +
                    std::to_string(desc.program));
    } else if (key == "hash") {
      words >> desc.hash;
      hashLine = number;
    } else if (key == "check") {
      // The check sum of everything after this line (Hash.h's FNV-1a).
      uint64_t expected = 0;
      words >> expected;
      const std::streamoff at = in.tellg();
      const std::string_view rest =
          at < 0 ? std::string_view() : std::string_view(text).substr(at);
      if (words && fnv1a(rest) != expected)
        return fail(fnv1a(rest, flexpipe::kFnv1aLegacyOffset) == expected
                        ? "the description was written by an earlier "
                          "FlexPipe (its check sum starts from FNV-1a's "
                          "mistyped offset basis); compile the spec again"
                        : "the description does not match its check sum: it "
                          "was changed after flexpipe-compile wrote it; "
                          "compile the spec again");
      checked = true;
    } else if (key == "actors") {
      words >> desc.actors;
    } else if (key == "stages") {
      words >> desc.stages;
      if (!words || desc.stages < 1 || desc.stages > kMaxCount)
        return fail("stages must be between 1 and " +
                    std::to_string(kMaxCount));
      desc.stage.assign(desc.stages, {});
      declared.assign(desc.stages, 0);
    } else if (key == "microbatches") {
      words >> desc.microbatches;
    } else if (key == "dp") {
      words >> desc.dp;
    } else if (key == "model") {
      if (std::string error = readSizes(words, desc.model, false);
          !error.empty())
        return fail(error);
    } else if (key == "tower") {
      std::string name;
      if (!(words >> name))
        return fail("expected 'tower NAME vocab=V seq=S hidden=H heads=N "
                    "layers=L'");
      GptConfig tower;
      tower.prefix = name + ".";
      if (std::string error = readSizes(words, tower, true); !error.empty())
        return fail(error);
      desc.towers.push_back(tower);
    } else if (key == "stage") {
      if (std::string error = readStage(words, desc, declared); !error.empty())
        return fail(error);
    } else if (key == "edge") {
      int from, to;
      words >> from >> to;
      if (!words)
        return fail("expected 'edge FROM TO'");
      desc.edges.push_back({from, to});
    } else if (key == "exec") {
      if (std::string error = readExec(words, desc); !error.empty())
        return fail(error);
    } else if (key == "predicted") {
      std::string what;
      double bytes = 0;
      words >> what;
      while (words >> bytes)
        desc.predictedPeak.push_back(bytes);
      if (what != "peak_activation" || !words.eof() ||
          desc.predictedPeak.empty())
        return fail("expected 'predicted peak_activation BYTES...', one "
                    "number per actor");
      words.clear(std::ios::eofbit);
    } else {
      return fail("unknown key '" + key + "'");
    }
    if (words.fail() && key != "model" && key != "stage" && key != "exec")
      return fail("bad value");
  }
  if (!header)
    return "schedule description: empty";
  if (hashLine && !checked) {
    number = hashLine;
    return fail("a 'hash' line without the 'check' line flexpipe-compile "
                "writes after it: the description was changed");
  }
  if (std::string error = checkDescription(desc, declared); !error.empty())
    return "schedule description: " + error;
  return {};
}

int ScheduleDesc::syncStage() const {
  for (int s = 0; s < stages; ++s)
    if (stage[s].sync)
      return s;
  return -1;
}

int ScheduleDesc::towerLastStage(int tower) const {
  for (int s = 0; s < stages; ++s)
    if (stage[s].tower == tower && stage[s].last)
      return s;
  return -1;
}

int ScheduleDesc::Stage::part(int a) const {
  auto it = std::find(actors.begin(), actors.end(), a);
  return it == actors.end() ? -1 : static_cast<int>(it - actors.begin());
}

std::vector<int64_t>
flexpipe::rt::ScheduleDesc::outputShape(int s, size_t size) const {
  const GptConfig &c = config(s);
  if (stage[s].towerLast() &&
      size == static_cast<size_t>(c.microBatch * c.embed))
    return {c.microBatch, c.embed};
  if (size == static_cast<size_t>(c.tokens() * c.hidden))
    return {c.microBatch, c.seq, c.hidden};
  return {static_cast<int64_t>(size)};
}

std::string flexpipe::rt::formatScheduleBody(const ScheduleDesc &desc) {
  std::ostringstream body;
  body << "name " << escapeDescriptionText(desc.name, false) << "\n"
       << "actors " << desc.actors << "\n"
       << "stages " << desc.stages << "\n"
       << "microbatches " << desc.microbatches << "\n"
       << "dp " << desc.dp << "\n";
  const GptConfig &m = desc.model;
  if (desc.twoTower()) {
    body << "model microbatch=" << m.microBatch << " seed=" << m.seed
         << " embed=" << m.embed << "\n";
    for (const GptConfig &t : desc.towers) {
      std::string name = t.prefix;
      if (!name.empty() && name.back() == '.')
        name.pop_back();
      body << "tower " << name << " vocab=" << t.vocab << " seq=" << t.seq
           << " hidden=" << t.hidden << " heads=" << t.heads
           << " layers=" << t.layers << "\n";
    }
  } else {
    body << "model vocab=" << m.vocab << " seq=" << m.seq
         << " hidden=" << m.hidden << " heads=" << m.heads
         << " layers=" << m.layers << " microbatch=" << m.microBatch
         << " seed=" << m.seed << "\n";
  }
  for (size_t s = 0; s < desc.stage.size(); ++s) {
    const ScheduleDesc::Stage &stage = desc.stage[s];
    body << "stage " << s << " actor " << stage.actor << " blocks "
         << stage.firstBlock << " " << stage.blocks << " first_last "
         << stage.first << " " << stage.last;
    if (stage.shared() || stage.sync) {
      body << (stage.sync ? " sync" : " shared");
      for (int a : stage.actors)
        body << " " << a;
    }
    if (stage.tower >= 0)
      body << " tower " << stage.tower;
    body << "\n";
  }
  for (auto [from, to] : desc.edges)
    body << "edge " << from << " " << to << "\n";
  for (const ScheduleDesc::Exec &exec : desc.execs) {
    body << "exec " << exec.name << " stage " << exec.stage << " actor "
         << exec.actor << " mb " << exec.mb << " count " << exec.count
         << " outputs ";
    if (exec.outputs.empty())
      body << "-";
    for (size_t i = 0; i < exec.outputs.size(); ++i)
      body << (i ? "," : "") << exec.outputs[i];
    if (!exec.attrs.empty())
      body << " " << exec.attrs;
    body << "\n";
  }
  if (!desc.predictedPeak.empty()) {
    body << "predicted peak_activation";
    for (double bytes : desc.predictedPeak)
      body << " " << static_cast<int64_t>(std::llround(bytes));
    body << "\n";
  }
  return body.str();
}

std::string flexpipe::rt::withScheduleHeader(const std::string &body,
                                             uint64_t hash) {
  return "flexpipe-schedule 1\nhash " + std::to_string(hash) + "\ncheck " +
         std::to_string(fnv1a(body)) + "\n" + body;
}

std::string flexpipe::rt::forProgram(const std::string &description,
                                     int actor) {
  const size_t header = description.find('\n');
  if (header == std::string::npos)
    return description;
  std::string text = description;
  text.insert(header + 1, "program " + std::to_string(actor) + "\n");
  return text;
}

bool flexpipe::rt::areCopies(const ScheduleDesc::Stage &a,
                             const ScheduleDesc::Stage &b) {
  // (A module's empty middle stage holds nothing: two of them are no
  // copies, and exchanged empty gradients.)
  auto holds = [](const ScheduleDesc::Stage &s) {
    return s.blocks > 0 || s.first || s.last || s.finalNorm;
  };
  return holds(a) && !a.shared() && !b.shared() && !a.sync && !b.sync &&
         a.tower == b.tower && a.actor != b.actor &&
         a.firstBlock == b.firstBlock && a.blocks == b.blocks &&
         a.first == b.first && a.last == b.last && a.finalNorm == b.finalNorm;
}

std::vector<std::pair<int, int>> flexpipe::rt::actorPairs(const ScheduleDesc &d,
                                                          int from, int to) {
  std::vector<std::pair<int, int>> pairs;
  for (int a : d.stage[from].actors)
    for (int b : d.stage[to].actors)
      if (a != b)
        pairs.push_back({a, b});
  return pairs;
}

std::vector<MessageChannel> flexpipe::rt::channelsOf(const ScheduleDesc &d) {
  std::vector<MessageChannel> channels;
  for (int r = 0; r < d.dp; ++r) {
    auto rank = [&](int actor) {
      return static_cast<int>(flexpipe::rankOf(actor, r, d.dp));
    };
    auto exchange = [&](int a, int b) {
      channels.push_back(
          {rank(std::min(a, b)), rank(std::max(a, b)), kExchangeTag, true});
    };
    for (auto [from, to] : d.edges)
      for (auto [a, b] : actorPairs(d, from, to)) {
        channels.push_back({rank(a), rank(b), messageTag(false, from)});
        channels.push_back({rank(b), rank(a), messageTag(true, to)});
        exchange(a, b);
      }
    for (int s = 0; s < d.stages; ++s)
      for (int other = s + 1; other < d.stages; ++other)
        if (areCopies(d.stage[s], d.stage[other]))
          exchange(d.stage[s].actor, d.stage[other].actor);
  }
  std::sort(channels.begin(), channels.end());
  channels.erase(std::unique(channels.begin(), channels.end()), channels.end());
  return channels;
}

std::vector<int> flexpipe::rt::channelsPerActor(const ScheduleDesc &d) {
  std::vector<int> count(d.actors, 0);
  for (const MessageChannel &c : channelsOf(d)) {
    // Channels never cross replicas: count replica 0's.
    if (flexpipe::replicaOfRank(c.from, d.dp) == 0)
      ++count[flexpipe::actorOfRank(c.from, d.dp)];
    if (flexpipe::replicaOfRank(c.to, d.dp) == 0)
      ++count[flexpipe::actorOfRank(c.to, d.dp)];
  }
  return count;
}

std::string flexpipe::rt::unsupportedStages(const ScheduleDesc &desc,
                                            bool vocabParallel, bool twoTower) {
  if (!vocabParallel && desc.vocabParallel())
    return "vocabulary-parallel stages (a shared token embedding or LM head)";
  if (!twoTower && desc.twoTower())
    return "the two-tower model (towers joined by a contrastive loss)";
  return {};
}

std::string flexpipe::rt::tooManyChannels(int channels) {
  if (channels < kDeviceConnections)
    return {};
  return "takes part in " + std::to_string(channels) +
         " message channels, more than the " +
         std::to_string(kDeviceConnections - 1) +
         " the CUDA backend can give a rank: the compute stream and each "
         "channel's stream need a hardware queue of their own, a GPU has " +
         std::to_string(kDeviceConnections) +
         ", and streams that share a queue can hold back a transfer the peer "
         "waits for (the run would hang); give the actor fewer stages "
         "(chunks) or neighbours, or use the cpu backend";
}
