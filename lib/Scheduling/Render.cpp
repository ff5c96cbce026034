//===- Render.cpp - Reports, SVG timelines and Chrome traces --------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Simulator.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

using namespace flexpipe::sched;

namespace {

/// `value` with `digits` decimals, however long (1e62 s has 63 digits).
std::string fixed(double value, int digits) {
  std::string text(std::snprintf(nullptr, 0, "%.*f", digits, value), '\0');
  std::snprintf(text.data(), text.size() + 1, "%.*f", digits, value);
  return text;
}

/// `value` with `digits` significant digits ("0.0005105", "6.003e-07").
std::string significant(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
  return buffer;
}

/// `unit` ("steps", "units") for `value` of it: "1 step".
std::string counted(double value, const std::string &unit) {
  return value == 1 && unit.size() > 1 && unit.back() == 's'
             ? unit.substr(0, unit.size() - 1)
             : unit;
}

/// A count of steps, units or memory: whole where it is within rounding of
/// a whole number (a sum of thirds, 11.999..., read "12.00 units" beside
/// "12 units"), else with two decimals.
std::string count(double value) {
  const double whole = std::round(value);
  return std::fabs(value - whole) <= 1e-9 * std::max(1.0, std::fabs(value))
             ? fixed(whole, 0)
             : fixed(value, 2);
}

/// A time in the costs' unit, readable.
std::string time(double value, const SimCosts &costs) {
  if (costs.unit != "s")
    return count(value) + " " +
           counted(std::round(value * 100) / 100, costs.unit);
  return formatSeconds(value);
}

/// An axis label: as few digits as the tick spacing needs.
std::string tick(double value, double step, const SimCosts &costs) {
  const bool seconds = costs.unit == "s";
  const bool ms = seconds && step < 1;
  const double shown = ms ? value * 1e3 : value;
  const double spacing = ms ? step * 1e3 : step;
  const int digits = spacing >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(spacing)));
  return fixed(shown, digits) + " " +
         (ms        ? "ms"
          : seconds ? "s"
                    : counted(std::round(shown * 1e9) / 1e9, costs.unit));
}

/// Memory: bytes with a model or a profile of every stage's activations
/// (in GiB, or MiB, KiB or B below one of them: a tiny model's memory read
/// 0.00 GiB), counts in SimCosts::memoryUnit without.
std::string memory(double value, const SimCosts &costs) {
  // Counts: whole stage-micro-batches under the step model, fractions of
  // M_B under the cost model (4.5 was printed as "4", 3.5 as "4").
  if (!costs.memoryInBytes)
    return count(value) + " " + costs.memoryUnit;
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  for (; unit < 3 && std::fabs(value) >= 1024; ++unit)
    value /= 1024;
  return fixed(value, unit == 0 ? 0 : 2) + " " + units[unit];
}

/// `text` left-aligned in `width` columns, and at least one space after it
/// (a value as wide as its column ran into the next: '47185982.915
/// s5898310.984 s').
std::string pad(const std::string &text, size_t width) {
  return text + std::string(text.size() < width ? width - text.size() : 1, ' ');
}

/// What a trace calls op `i` of `ops`: a wait is named after the transfer
/// or collective it completes (posted earlier on the same actor with its
/// token), whose stage and micro-batch it carries (a wait has neither).
ProgOp traced(const Program &p, const std::vector<ProgOp> &ops, size_t i,
              std::string &name) {
  ProgOp op = ops[i];
  name = actionName(op, &p);
  if (op.kind != OpKind::Wait)
    return op;
  for (size_t j = i; j-- > 0;)
    if (ops[j].kind != OpKind::Wait && ops[j].token == op.token) {
      name = "wait " + actionName(ops[j], &p);
      op.stage = ops[j].stage;
      op.mb = ops[j].mb;
      op.peer = ops[j].peer;
      return op;
    }
  name = "wait";
  return op;
}

/// An actor's timeline boxes: runs [first, last] of its work. Work at
/// least a pixel wide is a box of its own; narrower work that follows with
/// no visible gap (under half a pixel) shares a box up to a pixel wide. A
/// timeline of 10^5 micro-batches is then the size of its plot, not of its
/// program (1F1B with 262144 micro-batches drew 380 MB of sub-pixel boxes).
std::vector<std::pair<size_t, size_t>>
pixelRuns(const std::vector<ProgOp> &ops, const std::vector<double> &start,
          const std::vector<double> &end,
          llvm::function_ref<double(double)> x) {
  std::vector<std::pair<size_t, size_t>> runs;
  bool open = false; // the last run is narrow and may take more
  double runX0 = 0, runX1 = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!isWork(ops[i].kind))
      continue;
    const double x0 = x(start[i]), x1 = x(end[i]);
    const bool narrow = x1 - x0 < 1;
    if (open && narrow && x0 - runX1 < 0.5 && x1 - runX0 <= 1) {
      runs.back().second = i;
      runX1 = std::max(runX1, x1);
      continue;
    }
    runs.emplace_back(i, i);
    open = narrow;
    runX0 = x0;
    runX1 = x1;
  }
  return runs;
}

/// The tooltip of a box that holds actor `a`'s work `first` to `last`
/// ("37 instructions (19 fwd, 18 bwd), stages 0 to 1, micro-batches
/// 100 to 118, 1.200 s to 1.210 s") and the time its work takes by kind and
/// stage, which colours it.
std::pair<std::string, std::vector<std::pair<ProgOp, double>>>
sharedBox(const Program &p, const SimResult &r, int32_t a, size_t first,
          size_t last, const SimCosts &costs) {
  const std::vector<ProgOp> &ops = p.actors[a];
  std::vector<std::pair<ProgOp, double>> shares; // by kind and stage
  size_t perKind[static_cast<size_t>(OpKind::Wait) + 1] = {};
  size_t count = 0;
  int32_t stages[2] = {ops[first].stage, ops[first].stage};
  int64_t mbs[2] = {ops[first].mb, ops[first].mb};
  for (size_t i = first; i <= last; ++i) {
    const ProgOp &op = ops[i];
    if (!isWork(op.kind))
      continue;
    ++count;
    ++perKind[static_cast<size_t>(op.kind)];
    stages[0] = std::min(stages[0], op.stage);
    stages[1] = std::max(stages[1], op.stage);
    mbs[0] = std::min<int64_t>(mbs[0], op.mb);
    mbs[1] = std::max<int64_t>(mbs[1], op.mb);
    auto it = llvm::find_if(shares, [&](const auto &share) {
      return share.first.kind == op.kind && share.first.stage == op.stage;
    });
    if (it == shares.end())
      it = shares.emplace(it, op, 0.0);
    it->second += r.end[a][i] - r.start[a][i];
  }
  std::string kinds;
  for (size_t k = 0; k < std::size(perKind); ++k)
    if (perKind[k])
      kinds += (kinds.empty() ? "" : ", ") + std::to_string(perKind[k]) + " " +
               opKindName(static_cast<OpKind>(k));
  auto range = [](const char *one, const char *many, int64_t lo, int64_t hi) {
    return lo == hi ? std::string(one) + " " + std::to_string(lo)
                    : std::string(many) + " " + std::to_string(lo) + " to " +
                          std::to_string(hi);
  };
  return {std::to_string(count) + " instructions (" + kinds + "), " +
              range("stage", "stages", stages[0], stages[1]) + ", " +
              range("micro-batch", "micro-batches", mbs[0], mbs[1]) + ", " +
              time(r.start[a][first], costs) + " to " +
              time(r.end[a][last], costs),
          shares};
}

/// Base colours per type; stages shade them from dark (first) to light.
/// Registered instructions (exec) last, in the legend only where the program
/// has one.
struct Colour {
  const char *name;
  int rgb[3];
};
constexpr Colour kColours[] = {{"forward", {0x4e, 0x79, 0xa7}},
                               {"backward", {0x59, 0xa1, 0x4f}},
                               {"input gradient", {0xf2, 0x8e, 0x2b}},
                               {"weight gradient", {0xb0, 0x7a, 0xa1}},
                               {"registered", {0x79, 0x70, 0x6e}}};

/// A box's colour: the mean of its work's shades (by kind and stage of
/// `numStages`), weighted by time (or equally, where none takes any).
std::string shade(llvm::ArrayRef<std::pair<ProgOp, double>> shares,
                  int32_t numStages) {
  const bool timed =
      llvm::any_of(shares, [](const auto &share) { return share.second > 0; });
  double rgb[3] = {0, 0, 0}, total = 0;
  for (const auto &[op, time] : shares) {
    const double weight = timed ? time : 1;
    const Colour &c =
        kColours[isCompute(op.kind) ? static_cast<int>(op.kind) : 4];
    const double t =
        numStages > 1 ? 0.45 * static_cast<double>(op.stage) / (numStages - 1)
                      : 0;
    for (int k = 0; k < 3; ++k)
      rgb[k] += weight * (c.rgb[k] + (255 - c.rgb[k]) * t);
    total += weight;
  }
  char buffer[16];
  std::snprintf(
      buffer, sizeof(buffer), "#%02x%02x%02x", static_cast<int>(rgb[0] / total),
      static_cast<int>(rgb[1] / total), static_cast<int>(rgb[2] / total));
  return buffer;
}

/// Text for XML: markup characters escaped, and every character XML 1.0
/// cannot hold written as U+FFFD: control characters (a quoted symbol name
/// may have them; line breaks too, as the text is drawn on one line),
/// U+FFFE and U+FFFF, and bytes that are no UTF-8 (`@"a\FFb"`).
std::string escape(llvm::StringRef text) {
  std::string out;
  llvm::raw_string_ostream os(out);
  const auto *p = reinterpret_cast<const llvm::UTF8 *>(text.begin());
  const auto *end = reinterpret_cast<const llvm::UTF8 *>(text.end());
  while (p < end) {
    const llvm::UTF8 *start = p;
    llvm::UTF32 c = 0;
    const bool valid =
        llvm::convertUTF8Sequence(&p, end, &c, llvm::strictConversion) ==
        llvm::conversionOK;
    if (!valid)
      p = start + 1;
    if (!valid || (c < 0x20 && c != '\t') || c == 0xFFFE || c == 0xFFFF)
      os << "\xEF\xBF\xBD";
    else
      llvm::printHTMLEscaped(
          llvm::StringRef(reinterpret_cast<const char *>(start), p - start),
          os);
  }
  return out;
}

/// The iteration's time, and when something follows the pipeline, how it
/// adds up: "T = pipeline P + gradient sync G + optimizer step S", each
/// part after the pipeline only where it is not 0. The report's line and the
/// picture's title say the same.
std::string iterationTime(double pipeline, const SimCosts &costs,
                          const ReportContext &context) {
  const std::optional<AfterPipeline> &after = context.after;
  if (!after || after->gradSync + after->step <= 0)
    return time(pipeline, costs);
  std::string text = time(pipeline + after->gradSync + after->step, costs) +
                     " = pipeline " + time(pipeline, costs);
  if (after->gradSync > 0)
    text += " + gradient sync " + time(after->gradSync, costs);
  if (after->step > 0)
    text += " + optimizer step " + time(after->step, costs);
  return text;
}

} // namespace

std::string flexpipe::sched::formatSeconds(double value) {
  // Where the rounding carries into the next unit, the next unit: 0.9999996
  // s read "1000.000 ms", 0.99995 ms "1.0000 ms".
  auto roundsTo = [](double x, int digits) {
    const double scale = std::pow(10.0, digits);
    return std::round(x * scale) / scale;
  };
  if (std::fabs(roundsTo(value * 1e3, 3)) >= 1000)
    return fixed(value, 3) + " s";
  // Below a millisecond with 4 significant digits, without an exponent: a
  // 0.4 us message read "0.000 ms", a busy time of 1.049 us "0.001 ms", and
  // 43.69 ns "4.369e-05 ms" (milliseconds kept, which scripts and tests
  // read as [0-9.]+). Below a femtosecond nothing this models takes so
  // long: floating-point noise, read as 0.
  const double ms = value * 1e3;
  if (std::isnan(ms) || std::fabs(ms) < 1e-12)
    return fixed(std::isnan(ms) ? ms : 0.0, 3) + " ms";
  auto digitsFor = [](double x) {
    return std::max(3,
                    3 - static_cast<int>(std::floor(std::log10(std::fabs(x)))));
  };
  int digits = digitsFor(ms);
  digits = digitsFor(roundsTo(ms, digits));
  return fixed(ms, digits) + " ms";
}

std::string flexpipe::sched::formatSymbol(const std::string &name) {
  auto bareStart = [](char c) { return llvm::isAlpha(c) || c == '_'; };
  auto bareRest = [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
  };
  if (!name.empty() && bareStart(name[0]) && llvm::all_of(name, bareRest))
    return "@" + name;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "@\"";
  llvm::printEscapedString(name, os);
  os << '"';
  return text;
}

std::string flexpipe::sched::formatShape(const Program &p) {
  auto count = [](int64_t n, const char *one, const char *many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  return count(p.numActors, "actor", "actors") + ", " +
         count(p.numStages, "stage", "stages") + ", " +
         count(p.numMicrobatches, "micro-batch", "micro-batches");
}

std::string flexpipe::sched::formatReport(const Program &p,
                                          const SimResult &r,
                                          const SimCosts &costs,
                                          const ReportContext &context) {
  std::ostringstream os;
  os << "schedule " << formatSymbol(context.name) << ": " << formatShape(p)
     << "\n";
  double iteration = r.iterationTime;
  if (context.after && context.after->gradSync + context.after->step > 0) {
    iteration += context.after->gradSync + context.after->step;
    os << "iteration time " << iterationTime(r.iterationTime, costs, context)
       << "\n";
    os << "pipeline bubble ratio ";
  } else {
    os << "iteration time " << time(iteration, costs) << ", bubble ratio ";
  }
  os << fixed(100 * r.bubbleRatio(), 1) << "% (idle share of all actors' time)";
  if (context.tokensPerIteration > 0 && costs.unit == "s" && iteration > 0) {
    // Whole tokens where there are many; a very slow model read "0 tokens/s".
    const double rate = context.tokensPerIteration / iteration;
    os << ", " << (rate >= 100 ? fixed(rate, 0) : significant(rate, 4))
       << " tokens/s per pipeline";
  }
  os << "\n";
  if (context.replica > 0)
    os << "the pipeline of data-parallel replica " << context.replica << " of "
       << context.replicas << ", the slowest (its devices' links and cores)\n";
  os << "\n";
  const bool bytes = costs.memoryInBytes;
  os << pad("actor", 7) << pad("busy", 14) << pad("idle", 14)
     << pad("bubble", 9) << pad("peak act.", 13)
     << (bytes ? pad("static", 12) + pad("total", 12) : std::string()) << "\n";
  double peak = 0, total = 0;
  for (int32_t a = 0; a < p.numActors; ++a) {
    peak = std::max(peak, r.peakActivation[a]);
    total = std::max(total, r.totalBytes[a]);
    os << pad(std::to_string(a), 7) << pad(time(r.busy[a], costs), 14)
       << pad(time(r.idle[a], costs), 14)
       << pad(fixed(100 * r.bubble[a], 1) + "%", 9)
       << pad(memory(r.peakActivation[a], costs), 13);
    if (bytes)
      os << pad(memory(r.staticBytes[a], costs), 12)
         << pad(memory(r.totalBytes[a], costs), 12)
         << (r.overMemory[a] ? "OVER DEVICE MEMORY" : "");
    os << "\n";
  }
  os << pad("max", 7) << pad("", 14) << pad("", 14) << pad("", 9)
     << pad(memory(peak, costs), 13)
     << (bytes ? pad("", 12) + pad(memory(total, costs), 12) : std::string())
     << "\n";
  for (int32_t a = 0; a < p.numActors; ++a)
    if (r.overMemory[a])
      os << "warning: actor " << a << " needs " << memory(r.totalBytes[a], costs)
         << " but a device has " << memory(costs.memoryLimit, costs) << "\n";

  // The computations (registered ones too) on the critical path.
  std::vector<std::string> path;
  for (auto [actor, index] : r.criticalPath) {
    const ProgOp &op = p.actors[actor][index];
    if (isWork(op.kind))
      path.push_back(actionName(op, &p));
  }
  os << "\ncritical path (" << path.size()
     << (path.size() == 1 ? " computation): " : " computations): ");
  const size_t shown = 24;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path.size() > shown && i == shown / 2) {
      os << "... -> ";
      i = path.size() - shown / 2;
    }
    os << path[i] << (i + 1 < path.size() ? " -> " : "\n");
  }
  if (path.empty())
    os << "\n";
  return os.str();
}

std::string flexpipe::sched::formatSvg(const Program &p, const SimResult &r,
                                       const SimCosts &costs,
                                       const ReportContext &context) {
  const double width = 1200, left = 80, right = 20, top = 70;
  const double rowHeight = p.numActors <= 8 ? 30 : p.numActors <= 16 ? 20 : 14;
  const double rowGap = 4;
  const double plotWidth = width - left - right;
  const double height =
      top + p.numActors * (rowHeight + rowGap) + 50;
  const double span = context.timeSpan > 0    ? context.timeSpan
                      : r.iterationTime > 0 ? r.iterationTime
                                            : 1;
  auto x = [&](double t) { return left + plotWidth * t / span; };

  const bool anyExec = llvm::any_of(p.actors, [](const auto &ops) {
    return llvm::any_of(
        ops, [](const ProgOp &op) { return op.kind == OpKind::Exec; });
  });
  auto solid = [&](OpKind kind, int32_t stage) {
    ProgOp op;
    op.kind = kind;
    op.stage = stage;
    return shade({{op, 1.0}}, p.numStages);
  };

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << ' '
     << height << "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const std::string title =
      (context.title.empty() ? formatSymbol(context.name) : context.title) +
      ": " + formatShape(p) + "; iteration " +
      iterationTime(r.iterationTime, costs, context) +
      (context.after && context.after->gradSync + context.after->step > 0
           ? ", pipeline bubble "
           : ", bubble ") +
      fixed(100 * r.bubbleRatio(), 1) + "%";
  // A long schedule name ran past the right edge: a title wider than the
  // plot (about 8.5 px a character in bold 15 px Helvetica) is squeezed to
  // fit it.
  const double titleWidth = 8.5 * static_cast<double>(title.size());
  os << "<text x=\"" << left
     << "\" y=\"22\" font-size=\"15\" "
        "font-weight=\"bold\"";
  if (titleWidth > plotWidth)
    os << " textLength=\"" << plotWidth
       << "\" lengthAdjust=\"spacingAndGlyphs\"";
  os << ">" << escape(title) << "</text>\n";
  // Legend.
  double lx = left;
  for (int k = 0; k < (anyExec ? 5 : 4); ++k) {
    const OpKind kind = k < 4 ? static_cast<OpKind>(k) : OpKind::Exec;
    os << "<rect x=\"" << lx << "\" y=\"34\" width=\"14\" height=\"14\" fill=\""
       << solid(kind, 0) << "\"/>";
    os << "<text x=\"" << lx + 18 << "\" y=\"46\" font-size=\"12\">"
       << kColours[k].name << "</text>\n";
    lx += 140;
  }
  os << "<text x=\"" << lx << "\" y=\"46\" font-size=\"12\" fill=\"#555\">"
        "darker: earlier stage; label: micro-batch; gaps: bubbles</text>\n";

  // Rows.
  for (int32_t a = 0; a < p.numActors; ++a) {
    const double y = top + a * (rowHeight + rowGap);
    os << "<text x=\"" << left - 8 << "\" y=\"" << y + rowHeight * 0.68
       << "\" font-size=\"" << std::min(12.0, rowHeight * 0.6)
       << "\" text-anchor=\"end\">actor " << a << "</text>\n";
    os << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << plotWidth
       << "\" height=\"" << rowHeight << "\" fill=\"#f2f2f2\"/>\n";
    const auto runs = pixelRuns(p.actors[a], r.start[a], r.end[a], x);
    for (size_t k = 0; k < runs.size(); ++k) {
      const auto [i, last] = runs[k];
      const double x0 = x(r.start[a][i]);
      double x1 = x(r.end[a][last]);
      // Work under a pixel, shared or alone: a box without the white edge
      // (half a pixel of stroke covered a box of 0.5 to 1 px whole: a busy
      // 1F1B of 1000 micro-batches read all white), at least half a pixel
      // wide as every box (shared work of no time drew 0 px: nothing),
      // reaching half a pixel under the next one where the gap is
      // invisible, so that a busy stretch shows no seams.
      const bool narrow = i != last || x1 - x0 < 1;
      if (narrow) {
        if (k + 1 < runs.size() && x(r.start[a][runs[k + 1].first]) - x1 < 0.5)
          x1 = x(r.start[a][runs[k + 1].first]) + 0.5;
        x1 = std::max(x1, x0 + 0.5);
      }
      if (i != last) {
        const auto [title, shares] = sharedBox(p, r, a, i, last, costs);
        os << "<rect x=\"" << fixed(x0, 2) << "\" y=\"" << y << "\" width=\""
           << fixed(x1 - x0, 2) << "\" height=\"" << rowHeight << "\" fill=\""
           << shade(shares, p.numStages) << "\"><title>" << escape(title)
           << "</title></rect>\n";
        continue;
      }
      const double w = std::max(0.5, x1 - x0);
      const ProgOp &op = p.actors[a][i];
      os << "<rect x=\"" << fixed(x0, 2) << "\" y=\"" << y << "\" width=\""
         << fixed(w, 2) << "\" height=\"" << rowHeight << "\" fill=\""
         << solid(op.kind, op.stage) << "\""
         << (narrow ? "" : " stroke=\"white\" stroke-width=\"0.5\"")
         << "><title>"
         << escape((op.kind == OpKind::Exec && op.inst >= 0 &&
                            static_cast<size_t>(op.inst) < p.instructions.size()
                        ? "exec @" + p.instructions[op.inst]
                        : std::string(opKindName(op.kind))) +
                   " stage " + std::to_string(op.stage) + " micro-batch " +
                   std::to_string(op.mb) + ", " + time(r.start[a][i], costs) +
                   " to " + time(r.end[a][i], costs))
         << "</title></rect>";
      const std::string text = std::to_string(op.mb);
      if (w >= 7.0 * text.size() && rowHeight >= 12)
        os << "<text x=\"" << fixed(x0 + w / 2, 2) << "\" y=\""
           << y + rowHeight * 0.68 << "\" font-size=\""
           << std::min(11.0, rowHeight * 0.55)
           << "\" text-anchor=\"middle\" fill=\"white\">" << text << "</text>";
      os << "\n";
    }
  }

  // Time axis with about ten ticks.
  const double axisY = top + p.numActors * (rowHeight + rowGap) + 6;
  os << "<line x1=\"" << left << "\" y1=\"" << axisY << "\" x2=\""
     << left + plotWidth << "\" y2=\"" << axisY
     << "\" stroke=\"black\" stroke-width=\"1\"/>\n";
  const double raw = span / 10;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double candidate : {1.0, 2.0, 5.0, 10.0})
    if (candidate * magnitude >= raw) {
      step = candidate * magnitude;
      break;
    }
  // At most a dozen ticks, whatever the span (a non-finite one gets none).
  const bool finite = std::isfinite(span) && std::isfinite(step) && step > 0;
  // (The slack is relative: 1e-9 s was more than a sub-microsecond span.)
  for (double t = 0; finite && t <= span * (1 + 1e-9) && t <= 12 * step;
       t += step) {
    os << "<line x1=\"" << fixed(x(t), 2) << "\" y1=\"" << axisY << "\" x2=\""
       << fixed(x(t), 2) << "\" y2=\"" << axisY + 5
       << "\" stroke=\"black\"/><text x=\"" << fixed(x(t), 2) << "\" y=\""
       << axisY + 18 << "\" font-size=\"11\" text-anchor=\"middle\">"
       << escape(tick(t, step, costs)) << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::string flexpipe::sched::formatTrace(const Program &p, const SimResult &r,
                                         const SimCosts &costs,
                                         const ReportContext &context) {
  // Trace timestamps are microseconds; a step is shown as one millisecond.
  const double scale = costs.unit == "s" ? 1e6 : 1e3;
  std::ostringstream os;
  // Whole doubles, and each duration the difference of the scaled ends, so
  // that an event ends where it ends and no event of an actor overlaps the
  // next one (at 12 digits, ts and dur rounded apart overlapped).
  os.precision(17);
  // Names are quoted and escaped as JSON strings (a schedule's symbol may
  // hold any character), and so written whole: the viewer shows the name,
  // not MLIR's escapes of it.
  auto quoted = [](const std::string &text) {
    std::string out;
    llvm::raw_string_ostream(out) << llvm::json::Value(text);
    return out;
  };
  os << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"schedule\": "
     << quoted(context.name) << ", \"time_unit\": " << quoted(costs.unit)
     << "}, \"traceEvents\": [\n";
  os << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
        "{\"name\": "
     << quoted("@" + context.name) << "}}";
  for (int32_t a = 0; a < p.numActors; ++a)
    os << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": "
       << a << ", \"args\": {\"name\": \"actor " << a << "\"}}";
  for (int32_t a = 0; a < p.numActors; ++a)
    for (size_t i = 0; i < p.actors[a].size(); ++i) {
      std::string name;
      const ProgOp op = traced(p, p.actors[a], i, name);
      os << ",\n{\"name\": " << quoted(name) << ", \"cat\": \""
         << opKindName(op.kind)
         << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << a
         << ", \"ts\": " << r.start[a][i] * scale
         << ", \"dur\": " << r.end[a][i] * scale - r.start[a][i] * scale
         << ", \"args\": {\"stage\": " << op.stage << ", \"mb\": " << op.mb;
      if (op.peer >= 0)
        os << ", \"peer\": " << op.peer;
      os << "}}";
    }
  os << "\n]}\n";
  return os.str();
}
