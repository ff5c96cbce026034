//===- Schedule.cpp - The schedule description rank programs embed --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Schedule.h"

#include <algorithm>
#include <map>
#include <sstream>

using namespace flexpipe::rt;

std::string flexpipe::rt::parseSchedule(const std::string &text,
                                        ScheduleDesc &desc) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  auto fail = [&](const std::string &what) {
    return "schedule description line " + std::to_string(number) + ": " + what;
  };
  bool header = false;
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
      words >> desc.name;
    } else if (key == "hash") {
      words >> desc.hash;
    } else if (key == "actors") {
      words >> desc.actors;
    } else if (key == "stages") {
      words >> desc.stages;
      desc.stage.assign(desc.stages, {});
    } else if (key == "microbatches") {
      words >> desc.microbatches;
    } else if (key == "dp") {
      words >> desc.dp;
    } else if (key == "model") {
      std::string item;
      while (words >> item) {
        const size_t eq = item.find('=');
        if (eq == std::string::npos)
          return fail("expected key=value, got '" + item + "'");
        const std::string k = item.substr(0, eq);
        const int64_t v = std::stoll(item.substr(eq + 1));
        if (k == "vocab")
          desc.model.vocab = v;
        else if (k == "seq")
          desc.model.seq = v;
        else if (k == "hidden")
          desc.model.hidden = v;
        else if (k == "heads")
          desc.model.heads = v;
        else if (k == "layers")
          desc.model.layers = v;
        else if (k == "microbatch")
          desc.model.microBatch = v;
        else if (k == "seed")
          desc.model.seed = static_cast<uint64_t>(v);
        else
          return fail("unknown model key '" + k + "'");
      }
    } else if (key == "stage") {
      int id;
      ScheduleDesc::Stage s;
      int first = 0, last = 0;
      std::string actorWord, blocksWord, flagsWord;
      words >> id >> actorWord >> s.actor >> blocksWord >> s.firstBlock >>
          s.blocks >> flagsWord >> first >> last;
      if (!words || actorWord != "actor" || blocksWord != "blocks" ||
          flagsWord != "first_last")
        return fail("expected 'stage ID actor A blocks FIRST COUNT first_last "
                    "F L [shared A0 A1 ...]'");
      if (id < 0 || id >= static_cast<int>(desc.stage.size()))
        return fail("stage " + std::to_string(id) + " out of range");
      s.first = first;
      s.last = last;
      std::string sharedWord;
      if (words >> sharedWord) {
        if (sharedWord != "shared")
          return fail("expected 'shared' after the flags, got '" + sharedWord +
                      "'");
        for (int a; words >> a;)
          s.actors.push_back(a);
        if (!words.eof() || s.actors.size() < 2 ||
            !std::is_sorted(s.actors.begin(), s.actors.end()) ||
            s.actors.front() != s.actor)
          return fail("a shared stage lists at least two actors, sorted, the "
                      "first its 'actor'");
        words.clear();
      } else {
        s.actors = {s.actor};
        words.clear(std::ios::eofbit);
      }
      desc.stage[id] = s;
    } else if (key == "edge") {
      int from, to;
      words >> from >> to;
      if (!words)
        return fail("expected 'edge FROM TO'");
      desc.edges.push_back({from, to});
    } else {
      return fail("unknown key '" + key + "'");
    }
    if (words.fail() && key != "model" && key != "stage")
      return fail("bad value");
  }
  if (!header)
    return "the schedule description is empty";
  // The final LayerNorm is not part of a vocabulary-parallel head: the stage
  // that feeds the head holds it.
  for (auto [from, to] : desc.edges)
    if (from >= 0 && from < desc.stages && to >= 0 && to < desc.stages &&
        desc.stage[to].vocabHead())
      desc.stage[from].finalNorm = true;
  return {};
}

int ScheduleDesc::Stage::part(int a) const {
  auto it = std::find(actors.begin(), actors.end(), a);
  return it == actors.end() ? -1 : static_cast<int>(it - actors.begin());
}
