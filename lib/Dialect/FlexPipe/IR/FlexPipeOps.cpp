//===- FlexPipeOps.cpp - FlexPipe operations ------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Custom assembly directives and verifiers of the spec and schedule levels.
// Diagnostics say what is wrong and what would be right.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Plugin.h"
#include "flexpipe/Support/InputLimits.h"
#include "flexpipe/Support/StageGraph.h"

#include "Parsing.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <tuple>

using namespace mlir;
using namespace flexpipe;
using flexpipe::detail::identifierAt;
using flexpipe::detail::parseOptionalPlainInteger;
using flexpipe::detail::parsePlainInteger;

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// An enum attribute written as its bare keyword (`one_to_one`), with an
/// error that lists the valid keywords.
template <typename EnumAttrT>
static ParseResult parseEnumKeyword(OpAsmParser &parser, EnumAttrT &attr) {
  using EnumT = decltype(std::declval<EnumAttrT>().getValue());
  llvm::SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (std::optional<EnumT> value = symbolizeEnum<EnumT>(keyword)) {
    attr = EnumAttrT::get(parser.getContext(), *value);
    return success();
  }
  InFlightDiagnostic diag = parser.emitError(loc)
                            << "unknown keyword '" << keyword
                            << "'; expected one of:";
  for (unsigned i = 0;; ++i) {
    StringRef name = stringifyEnum(static_cast<EnumT>(i));
    if (name.empty())
      break;
    diag << (i ? ", " : " ") << name;
  }
  return diag;
}

template <typename EnumAttrT>
static void printEnumKeyword(OpAsmPrinter &printer, Operation *,
                             EnumAttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

/// A count written as a bare integer (`actors(4)`), with an error that says
/// what the count is instead of MLIR's generic attribute message (`(4)`
/// would otherwise read as a function type).
static ParseResult parseCount(OpAsmParser &parser, IntegerAttr &attr,
                              StringRef what) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  int64_t value = 0;
  OptionalParseResult parsed = parseOptionalPlainInteger(parser, value);
  if (!parsed.has_value())
    return parser.emitError(loc)
           << "expected the number of " << what << ", an integer";
  if (failed(*parsed))
    return failure();
  attr = parser.getBuilder().getI64IntegerAttr(value);
  return success();
}

static void printCount(OpAsmPrinter &printer, Operation *, IntegerAttr attr,
                       StringRef) {
  printer << attr.getInt();
}

/// A bound written as a number literal, integer or not (`memory_bound(4)`
/// or `memory_bound(2.5)`); MLIR's float attribute syntax refuses the
/// decimal integer. A hexadecimal literal is the double's bits, as MLIR
/// prints a double that no decimal spelling gives back exactly. The integer
/// is read from its spelling: MLIR's integer parser also takes `true`, and
/// hands back a width that does not say the sign.
static ParseResult parseBound(OpAsmParser &parser, FloatAttr &attr) {
  // (The sign apart: the integer parser takes `-` and then only an integer.)
  const bool negative = succeeded(parser.parseOptionalMinus());
  llvm::SMLoc loc = parser.getCurrentLocation();
  APInt integer;
  OptionalParseResult parsed = parser.parseOptionalInteger(integer);
  double value = 0;
  if (!parsed.has_value()) {
    if (parser.parseFloat(value))
      return failure();
  } else if (failed(*parsed)) {
    return failure();
  } else {
    StringRef spelling(loc.getPointer(),
                       parser.getCurrentLocation().getPointer() -
                           loc.getPointer());
    spelling = spelling.trim();
    // MLIR reads `2e3` as the integer 2 and a word `e3`, `2e-3` as 2, `e`
    // and -3 (its floats have a point): that read "expected ')'".
    const char *exponent = spelling.end(), *q = exponent;
    if (exponent == parser.getCurrentLocation().getPointer() &&
        (*q == 'e' || *q == 'E')) {
      q += (q[1] == '+' || q[1] == '-') ? 2 : 1;
      const char *digits = q;
      while (llvm::isDigit(*q))
        ++q;
      if (q > digits && !llvm::isAlnum(*q) && *q != '_' && *q != '.') {
        const std::string number = (negative ? "-" : "") + spelling.str(),
                          written =
                              number + StringRef(exponent, q - exponent).str();
        return parser.emitError(loc)
               << "write the bound " << written << " with a decimal point ("
               << number << ".0" << StringRef(exponent, q - exponent)
               << "): MLIR reads " << written << " as " << number
               << " and more";
      }
    }
    uint64_t bits = 0;
    if (spelling.consume_front("0x")) {
      if (spelling.getAsInteger(16, bits))
        return parser.emitError(loc)
               << "a hexadecimal bound is a double's 64 bits, not 0x"
               << spelling;
      value = llvm::bit_cast<double>(bits);
    } else if (!llvm::to_float(spelling, value)) {
      return parser.emitError(loc) << "expected a number, not " << spelling;
    }
  }
  attr = parser.getBuilder().getF64FloatAttr(negative ? -value : value);
  return success();
}

namespace {
/// One optional clause of an op's syntax: its keyword and how to parse what
/// follows it.
struct Clause {
  StringRef keyword;
  llvm::function_ref<ParseResult()> parse;
};

/// Prints each clause after a space. The formats put an empty literal
/// before the directive (no space of their own), so that an op without
/// clauses prints no trailing space.
struct ClausePrinter {
  OpAsmPrinter &printer;
  OpAsmPrinter &operator()(StringRef keyword) {
    return printer << " " << keyword;
  }
};
} // namespace

/// Optional clauses in any order, each at most once. The list ends at the
/// first token that starts no clause. A bare word without a dot there is no
/// op name either (inside a pipeline, ops are `flexpipe.*`), nor the op's
/// trailing `loc(...)`: it is refused as a misspelled clause, where MLIR
/// would call it an unknown op, or, among `before`, as one of the op's
/// words that come before the clauses.
static ParseResult parseClauses(OpAsmParser &parser, ArrayRef<Clause> clauses,
                                ArrayRef<StringRef> before = {}) {
  SmallVector<StringRef> keywords;
  for (const Clause &clause : clauses)
    keywords.push_back(clause.keyword);
  llvm::StringSet<> seen;
  while (true) {
    llvm::SMLoc loc = parser.getCurrentLocation();
    StringRef keyword;
    if (failed(parser.parseOptionalKeyword(&keyword, keywords))) {
      StringRef word = identifierAt(loc);
      if (word.empty() || word.contains('.') || word == "loc")
        return success();
      if (llvm::is_contained(before, word))
        return parser.emitError(loc)
               << "'" << word << "' comes before the clauses ("
               << llvm::join(keywords, ", ") << ")";
      return parser.emitError(loc)
             << "unknown clause '" << word
             << "'; expected one of: " << llvm::join(keywords, ", ");
    }
    if (!seen.insert(keyword).second)
      return parser.emitError(loc) << "'" << keyword << "' appears twice";
    if (llvm::find_if(clauses, [&](const Clause &clause) {
          return clause.keyword == keyword;
        })->parse())
      return failure();
  }
}

// Clause parsers, for `parseClauses`: each writes the attribute it was
// made for.

/// A clause that is its keyword alone: sets `flag`.
static auto flagClause(OpAsmParser &parser, UnitAttr &flag) {
  return [parser = &parser, flag = &flag] {
    *flag = parser->getBuilder().getUnitAttr();
    return success();
  };
}

/// `keyword value`, or with `parenthesized`, `keyword(value)`.
template <typename AttrT>
static auto valueClause(OpAsmParser &parser, AttrT &attr, Type type = {},
                        bool parenthesized = false) {
  return [parser = &parser, attr = &attr, type, parenthesized] {
    if (parenthesized && parser->parseLParen())
      return failure();
    if (parser->parseCustomAttributeWithFallback(*attr, type))
      return failure();
    return failure(parenthesized && parser->parseRParen());
  };
}

/// `keyword(integer)`.
static auto countClause(OpAsmParser &parser, IntegerAttr &attr) {
  return valueClause(parser, attr, parser.getBuilder().getI64Type(), true);
}

/// `flexpipe.optimize`'s clauses.
static ParseResult parseOptimizations(OpAsmParser &parser, UnitAttr &split,
                                      UnitAttr &separation, UnitAttr &async,
                                      FloatAttr &bound, IntegerAttr &rounds) {
  auto boundClause = [&] {
    return failure(parser.parseLParen() || parseBound(parser, bound) ||
                   parser.parseRParen());
  };
  return parseClauses(parser,
                      {{"split_backward", flagClause(parser, split)},
                       {"gradient_separation", flagClause(parser, separation)},
                       {"async_comm", flagClause(parser, async)},
                       {"memory_bound", boundClause},
                       {"max_rounds", countClause(parser, rounds)}});
}

static void printOptimizations(OpAsmPrinter &printer, Operation *,
                               UnitAttr split, UnitAttr separation,
                               UnitAttr async, FloatAttr bound,
                               IntegerAttr rounds) {
  ClausePrinter clause{printer};
  if (split)
    clause("split_backward");
  if (separation)
    clause("gradient_separation");
  if (async)
    clause("async_comm");
  if (bound) {
    clause("memory_bound(");
    printer.printFloat(bound.getValue());
    printer << ")";
  }
  if (rounds)
    clause("max_rounds(") << rounds.getInt() << ")";
}

/// `flexpipe.module`'s optional clauses.
static ParseResult
parseModuleClauses(OpAsmParser &parser, UnitAttr &bidirectional,
                   IntegerAttr &chunks, DenseI64ArrayAttr &map,
                   DenseI64ArrayAttr &actors, DenseI64ArrayAttr &partition,
                   ArrayAttr &inputs, ModelConfigAttr &model,
                   UnitAttr &vocabParallel) {
  Type none = parser.getBuilder().getType<NoneType>();
  return parseClauses(parser,
                      {{"bidirectional", flagClause(parser, bidirectional)},
                       {"chunks", countClause(parser, chunks)},
                       {"map", valueClause(parser, map)},
                       {"actors", valueClause(parser, actors)},
                       {"partition", valueClause(parser, partition)},
                       {"inputs", valueClause(parser, inputs, none)},
                       {"model", valueClause(parser, model)},
                       {"vocab_parallel", flagClause(parser, vocabParallel)}},
                      {"layers", "placement"});
}

static void printModuleClauses(OpAsmPrinter &printer, Operation *,
                               UnitAttr bidirectional, IntegerAttr chunks,
                               DenseI64ArrayAttr map, DenseI64ArrayAttr actors,
                               DenseI64ArrayAttr partition, ArrayAttr inputs,
                               ModelConfigAttr model, UnitAttr vocabParallel) {
  ClausePrinter clause{printer};
  if (bidirectional)
    clause("bidirectional");
  if (chunks)
    clause("chunks(") << chunks.getInt() << ")";
  for (auto [keyword, array] :
       {std::pair{"map", map}, {"actors", actors}, {"partition", partition}})
    if (array) {
      clause(keyword) << " ";
      printer.printStrippedAttrOrType(array);
    }
  if (inputs) {
    clause("inputs") << " ";
    printer.printAttributeWithoutType(inputs);
  }
  if (model) {
    clause("model");
    printer.printStrippedAttrOrType(model);
  }
  if (vocabParallel)
    clause("vocab_parallel");
}

/// `flexpipe.instruction`'s optional clauses; counts of 1 are the defaults
/// and are not printed.
static ParseResult parseInstructionClauses(OpAsmParser &parser,
                                           IntegerAttr &prev, IntegerAttr &next,
                                           IntegerAttr &unit, UnitAttr &async,
                                           DictionaryAttr &attrs) {
  return parseClauses(parser,
                      {{"prev", countClause(parser, prev)},
                       {"next", countClause(parser, next)},
                       {"unit", countClause(parser, unit)},
                       {"async", flagClause(parser, async)},
                       {"attrs", valueClause(parser, attrs)}},
                      {"kind", "on"});
}

static void printInstructionClauses(OpAsmPrinter &printer, Operation *,
                                    IntegerAttr prev, IntegerAttr next,
                                    IntegerAttr unit, UnitAttr async,
                                    DictionaryAttr attrs) {
  ClausePrinter clause{printer};
  for (auto [keyword, count] :
       {std::pair{"prev", prev}, {"next", next}, {"unit", unit}})
    if (count && count.getInt() != 1)
      clause(keyword) << "(" << count.getInt() << ")";
  if (async)
    clause("async");
  if (attrs) {
    clause("attrs") << " ";
    printer.printAttributeWithoutType(attrs);
  }
}

/// `flexpipe.priority`'s clauses.
static ParseResult parsePriorityClauses(OpAsmParser &parser, CttpAttr &cttp,
                                        StpAttr &fstp, StpAttr &bstp,
                                        StringAttr &custom) {
  Type none = parser.getBuilder().getType<NoneType>();
  return parseClauses(parser,
                      {{"cttp", valueClause(parser, cttp)},
                       {"fstp", valueClause(parser, fstp)},
                       {"bstp", valueClause(parser, bstp)},
                       {"custom", valueClause(parser, custom, none, true)}},
                      {"actors"});
}

static void printPriorityClauses(OpAsmPrinter &printer, Operation *,
                                 CttpAttr cttp, StpAttr fstp, StpAttr bstp,
                                 StringAttr custom) {
  ClausePrinter clause{printer};
  if (cttp) {
    clause("cttp");
    printer.printStrippedAttrOrType(cttp);
  }
  for (auto [keyword, stp] : {std::pair{"fstp", fstp}, {"bstp", bstp}})
    if (stp) {
      clause(keyword);
      printer.printStrippedAttrOrType(stp);
    }
  if (custom) {
    clause("custom(");
    printer.printAttributeWithoutType(custom);
    printer << ")";
  }
}

/// `@stage` or `@module[index]`.
static ParseResult parseStageRef(OpAsmParser &parser, FlatSymbolRefAttr &stage,
                                 IntegerAttr &index) {
  StringAttr name;
  if (parser.parseSymbolName(name))
    return failure();
  stage = FlatSymbolRefAttr::get(name);
  if (succeeded(parser.parseOptionalLSquare())) {
    int64_t value;
    if (parsePlainInteger(parser, value) || parser.parseRSquare())
      return failure();
    index = parser.getBuilder().getI64IntegerAttr(value);
  }
  return success();
}

static void printStageRef(OpAsmPrinter &printer, Operation *,
                          FlatSymbolRefAttr stage, IntegerAttr index) {
  printer.printSymbolName(stage.getValue());
  if (index)
    printer << '[' << index.getInt() << ']';
}

/// A built-in instruction type keyword or a registered `@instruction`.
static ParseResult parseInstRef(OpAsmParser &parser, StringAttr &inst) {
  if (succeeded(parser.parseOptionalSymbolName(inst)))
    return success();
  llvm::SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (!isBuiltinInstructionName(keyword))
    return parser.emitError(loc)
           << "unknown instruction type '" << keyword
           << "'; expected fwd, bwd, igrad, wgrad or a registered @instruction";
  inst = parser.getBuilder().getStringAttr(keyword);
  return success();
}

static void printInstRef(OpAsmPrinter &printer, Operation *, StringAttr inst) {
  if (isBuiltinInstructionName(inst.getValue()))
    printer << inst.getValue();
  else
    printer.printSymbolName(inst.getValue());
}

/// MLIR folds an affine map's constant subexpressions while it parses them,
/// in wrapping 64-bit arithmetic (`4611686018427387905 * 4` becomes 4;
/// `(pp + pp + pp + pp) * 2^62` becomes 0 through the coefficient 4 it
/// makes of the sum), and the limit's checked evaluation sees only the
/// folded map. So the map's text, from `begin`, is bounded here, where it
/// can still be seen: the product of its constants (decimal or hex, each
/// counted as at least 2) and of 2 for each use of a name (what repeated
/// names add up to) at most 2^62. No fold can then wrap, and the printed
/// map reads back. The map is written inline: an alias's was folded before.
static ParseResult checkAffineLiterals(OpAsmParser &parser, llvm::SMLoc begin) {
  const char *text = begin.getPointer();
  const llvm::StringRef rest(text);
  // Comments and white space are skipped as MLIR's lexer skips them: a `>`
  // in a comment ended the scan, and what followed went unchecked.
  auto skipBlank = [&](size_t i) {
    while (i < rest.size()) {
      if (llvm::isSpace(rest[i]))
        ++i;
      else if (rest.substr(i).starts_with("//"))
        i = std::min(rest.find('\n', i), rest.size());
      else
        break;
    }
    return i;
  };
  if (!rest.starts_with("affine_map") ||
      !rest.substr(skipBlank(strlen("affine_map"))).starts_with("<"))
    return parser.emitError(begin)
           << "write an in-flight affine map inline, as affine_map<...>: "
              "MLIR folded an alias's constants, in wrapping arithmetic, "
              "before they could be checked";
  AffineLiteralBudget budget;
  int depth = 0;
  for (size_t i = skipBlank(0); i < rest.size(); i = skipBlank(i)) {
    const char c = rest[i];
    if (c == '<' || c == '(' || c == '[') {
      depth += c == '<';
      ++i;
      continue;
    }
    if (c == '>' && (i == 0 || rest[i - 1] != '-')) {
      if (--depth == 0)
        break; // the map's closing '>'
      ++i;
      continue;
    }
    const bool number = llvm::isDigit(c);
    if (!number && !llvm::isAlpha(c) && c != '_') {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < rest.size() && (llvm::isAlnum(rest[i]) || rest[i] == '_'))
      ++i;
    const llvm::StringRef token = rest.slice(start, i);
    std::optional<uint64_t> magnitude; // a name
    if (number) {
      uint64_t value = 0;
      const bool hex = token.starts_with_insensitive("0x");
      if (token.drop_front(hex ? 2 : 0).getAsInteger(hex ? 16 : 10, value))
        value = UINT64_MAX;
      magnitude = value;
    } else if (start == 0 || token == "floordiv" || token == "ceildiv" ||
               token == "mod") {
      continue; // `affine_map` itself and the operators
    }
    if (!budget.take(magnitude))
      return parser.emitError(llvm::SMLoc::getFromPointer(text + start))
             << AffineLiteralBudget::exceeded(token, "in-flight affine map");
  }
  return success();
}

/// An integer, a list `[a, b, ...]`, or an `affine_map<...>`.
static ParseResult parseInflightLimit(OpAsmParser &parser, Attribute &limit) {
  Builder &builder = parser.getBuilder();
  int64_t value;
  OptionalParseResult integer = parseOptionalPlainInteger(parser, value);
  if (integer.has_value()) {
    if (failed(*integer))
      return failure();
    limit = builder.getI64IntegerAttr(value);
    return success();
  }
  if (succeeded(parser.parseOptionalLSquare())) {
    SmallVector<int64_t> values;
    if (failed(parser.parseOptionalRSquare())) {
      if (parser.parseCommaSeparatedList([&] {
            return parsePlainInteger(parser, values.emplace_back());
          }) ||
          parser.parseRSquare())
        return failure();
    }
    limit = builder.getDenseI64ArrayAttr(values);
    return success();
  }
  if (succeeded(parser.parseOptionalKeyword("rule"))) {
    std::string name;
    if (parser.parseLParen() || parser.parseString(&name) ||
        parser.parseRParen())
      return failure();
    limit = builder.getStringAttr(name);
    return success();
  }
  llvm::SMLoc loc = parser.getCurrentLocation();
  Attribute attr;
  if (parser.parseAttribute(attr))
    return failure();
  if (!isa<AffineMapAttr>(attr))
    return parser.emitError(loc)
           << "expected an in-flight limit: an integer, a list [a, b, ...], "
              "an affine_map<...> or rule(\"name\")";
  limit = attr;
  return checkAffineLiterals(parser, loc);
}

static void printInflightLimit(OpAsmPrinter &printer, Operation *,
                               Attribute limit) {
  if (auto value = dyn_cast<IntegerAttr>(limit)) {
    printer << value.getInt();
  } else if (auto list = dyn_cast<DenseI64ArrayAttr>(limit)) {
    printer << '[';
    llvm::interleaveComma(list.asArrayRef(), printer);
    printer << ']';
  } else if (auto rule = dyn_cast<StringAttr>(limit)) {
    printer << "rule(";
    printer.printString(rule.getValue());
    printer << ')';
  } else {
    // Inline rather than as a `#map` alias: the map is the point of the op.
    printer << "affine_map<";
    cast<AffineMapAttr>(limit).getValue().print(printer.getStream());
    printer << '>';
  }
}

/// An op's attribute dictionary (`{...}`, or `attributes {...}` before a
/// region) holds attributes the op's syntax does not write. MLIR sets an
/// inherent attribute named there over the value the syntax wrote
/// (`actors(1) attributes {actors = 4}` had 4 actors): the names of the
/// op's own attributes (`own`, its getAttributeNames()) are reserved there.
/// (Those of every FlexPipe op were: a discardable `id` on a pipeline, which
/// the generic form takes, printed as text that did not read back.)
static ParseResult parseOwnAttrDict(OpAsmParser &parser, NamedAttrList &attrs,
                                    ArrayRef<StringRef> own,
                                    bool withKeyword = false) {
  const llvm::SMLoc loc = parser.getCurrentLocation();
  NamedAttrList parsed;
  if (failed(withKeyword ? parser.parseOptionalAttrDictWithKeyword(parsed)
                         : parser.parseOptionalAttrDict(parsed)))
    return failure();
  if (parsed.empty())
    return success();
  for (const NamedAttribute &attr : parsed) {
    if (llvm::is_contained(own, attr.getName().getValue()))
      return parser.emitError(loc)
             << "'" << attr.getName().getValue()
             << "' is reserved in an attribute dictionary: it names an "
                "attribute of a FlexPipe op, which MLIR would set over what "
                "the op's syntax says; write the op's own values in its "
                "syntax, and other attributes with a dialect prefix (such as "
                "'flexpipe.note')";
    attrs.push_back(attr);
  }
  return success();
}
/// The discardable attributes only: the op's own are in its syntax.
static void printOwnAttrDict(OpAsmPrinter &printer, Operation *op,
                             DictionaryAttr, ArrayRef<StringRef>,
                             bool withKeyword = false) {
  ArrayRef<NamedAttribute> attrs =
      op->getDiscardableAttrDictionary().getValue();
  if (withKeyword)
    printer.printOptionalAttrDictWithKeyword(attrs);
  else
    printer.printOptionalAttrDict(attrs);
}

/// `[a -> b, c -> d, ...]`, stored flat as [a, b, c, d].
static ParseResult parseEdges(OpAsmParser &parser, DenseI64ArrayAttr &edges) {
  SmallVector<int64_t> flat;
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&] {
        return failure(parsePlainInteger(parser, flat.emplace_back()) ||
                       parser.parseArrow() ||
                       parsePlainInteger(parser, flat.emplace_back()));
      }))
    return failure();
  edges = parser.getBuilder().getDenseI64ArrayAttr(flat);
  return success();
}

static void printEdges(OpAsmPrinter &printer, Operation *,
                       DenseI64ArrayAttr edges) {
  ArrayRef<int64_t> flat = edges.asArrayRef();
  printer << '[';
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    printer << (i ? ", " : "") << flat[i] << " -> " << flat[i + 1];
  printer << ']';
}

//===----------------------------------------------------------------------===//
// Shared verification helpers
//===----------------------------------------------------------------------===//

/// Actor `id` of `numActors`, a negative one counted from the last (-1 is
/// the last actor): how per-actor priorities name actors.
static int64_t resolveActorId(int64_t id, int64_t numActors) {
  return id < 0 ? id + numActors : id;
}

/// Checks a list of actor ids: at least `minSize` entries, each in
/// [0, numActors) (or, `fromEnd`, in [-numActors, -1] counting back from
/// the last actor), none twice.
static LogicalResult verifyActorList(Operation *op, StringRef what,
                                     ArrayRef<int64_t> ids, int64_t numActors,
                                     size_t minSize, bool fromEnd = false) {
  if (ids.size() < minSize)
    return op->emitOpError() << what << " must list at least " << minSize
                             << " actors, but lists " << ids.size();
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t id : ids) {
    const int64_t actor = fromEnd ? resolveActorId(id, numActors) : id;
    if (actor < 0 || actor >= numActors) {
      InFlightDiagnostic diag = op->emitOpError()
                                << what << " names actor " << id
                                << ", but the mesh has actors 0 to "
                                << numActors - 1;
      if (fromEnd)
        diag << " (-1 to " << -numActors << " counting from the last)";
      return diag;
    }
    if (!seen.insert(actor).second) {
      InFlightDiagnostic diag = op->emitOpError()
                                << what << " lists actor " << actor;
      if (actor != id)
        diag << " (as " << id << ")";
      return diag << " twice";
    }
  }
  return success();
}

/// The first of `actors` that `module` does not run on, or none.
static std::optional<int64_t> actorOutside(ModalityOp module,
                                           ArrayRef<int64_t> actors) {
  SmallVector<int64_t> group = module.getActorIds();
  for (int64_t actor : actors)
    if (!llvm::is_contained(group, actor))
      return actor;
  return std::nullopt;
}

/// Module-local stage index `index` (negative counts back from the end of the
/// first direction) as an index in [0, total), or std::nullopt if out of
/// range.
static std::optional<int64_t>
normalizeStageIndex(int64_t index, int64_t perDirection, int64_t total) {
  if (index < 0)
    index += perDirection;
  if (index < 0 || index >= total)
    return std::nullopt;
  return index;
}

/// The module `symbol` names from `from`; an error at `from` when it names
/// none. Lookups go through `symbols`, which indexes the pipeline's symbol
/// table once: a spec has one op per registered stage, instruction and
/// dependency, and a linear search per reference made verifying it quadratic.
static FailureOr<ModalityOp> lookupModuleOrFail(SymbolTableCollection &symbols,
                                                Operation *from,
                                                FlatSymbolRefAttr symbol) {
  if (auto module = symbols.lookupNearestSymbolFrom<ModalityOp>(from, symbol))
    return module;
  return from->emitOpError()
         << "refers to " << symbol
         << ", which is not a flexpipe.module of this pipeline";
}

/// The module `symbol` names from `from` and its placement; an error at
/// `from` when it names none or the placement is invalid (the module
/// reports why).
static FailureOr<std::pair<ModalityOp, sched::ModulePlacement>>
lookupPlacedModule(SymbolTableCollection &symbols, Operation *from,
                   FlatSymbolRefAttr symbol) {
  FailureOr<ModalityOp> module = lookupModuleOrFail(symbols, from, symbol);
  if (failed(module))
    return failure();
  std::optional<sched::ModulePlacement> placed =
      llvm::expectedToOptional(module->computePlacement());
  if (!placed)
    return from->emitOpError()
           << "refers to module " << symbol << ", whose placement is invalid";
  return std::make_pair(*module, std::move(*placed));
}

static int64_t asSigned(uint64_t value) { return static_cast<int64_t>(value); }

/// `diag` with `note` attached at `first`, the earlier op it conflicts with.
static InFlightDiagnostic withNote(InFlightDiagnostic &&diag, Operation *first,
                                   const Twine &note) {
  diag.attachNote(first->getLoc()) << note;
  return std::move(diag);
}

/// Chunks per actor a placement may ask for (kMaxActors and kMaxCount:
/// InputLimits.h).
constexpr int64_t kMaxChunks = 4096;

/// `value` of `what` is at most `max`.
static LogicalResult verifyAtMost(Operation *op, const char *what,
                                  int64_t value, int64_t max) {
  if (value <= max)
    return success();
  return op->emitOpError() << "has " << value << " " << what
                           << "; FlexPipe handles at most " << max;
}

/// A count an op holds: what one and many are called, its value and the
/// most FlexPipe handles.
struct CountLimit {
  const char *one, *many;
  int64_t value, max;
};

/// Every count is at least one, then each is at most its max.
static LogicalResult verifyCounts(Operation *op, ArrayRef<CountLimit> counts) {
  for (const CountLimit &c : counts)
    if (c.value < 1)
      return op->emitOpError()
             << "needs at least one " << c.one << ", got " << c.value;
  for (const CountLimit &c : counts)
    if (failed(verifyAtMost(op, c.many, c.value, c.max)))
      return failure();
  return success();
}

/// A resolved stage reference: the symbol and the normalized module-local
/// index (-1 for a registered stage).
using StageKey = std::pair<StringAttr, int64_t>;

/// Resolves `@stage` / `@module[i]` named by `op`. `role` starts the
/// diagnostic ("the source", ...).
static FailureOr<StageKey> resolveStageRef(SymbolTableCollection &symbols,
                                           Operation *op, StringRef role,
                                           FlatSymbolRefAttr symbol,
                                           std::optional<uint64_t> rawIndex) {
  Operation *target = symbols.lookupNearestSymbolFrom(op, symbol);
  std::optional<int64_t> index;
  if (rawIndex)
    index = asSigned(*rawIndex);
  if (isa_and_nonnull<StageOp>(target)) {
    if (index)
      return op->emitOpError()
             << role << " stage " << symbol
             << " is a registered flexpipe.stage; drop the index [" << *index
             << "]";
    return StageKey{symbol.getAttr(), -1};
  }
  if (auto module = dyn_cast_or_null<ModalityOp>(target)) {
    if (!index)
      return op->emitOpError()
             << role << " stage " << symbol
             << " is a module; name one of its stages as " << symbol << "[i]";
    std::optional<sched::ModulePlacement> placed =
        llvm::expectedToOptional(module.computePlacement());
    if (!placed)
      return op->emitOpError() << role << " stage refers to module " << symbol
                               << ", whose placement is invalid";
    std::optional<int64_t> normalized = normalizeStageIndex(
        *index, placed->stagesPerDirection, placed->numStages());
    if (!normalized)
      return op->emitOpError()
             << role << " stage " << symbol << "[" << *index
             << "] is out of range: the module has " << placed->numStages()
             << " stages (indices " << -placed->stagesPerDirection << " to "
             << placed->numStages() - 1 << ")";
    return StageKey{symbol.getAttr(), *normalized};
  }
  return op->emitOpError() << role << " stage " << symbol
                           << " names no flexpipe.module or flexpipe.stage of "
                              "this pipeline";
}

/// An asynchronous transfer's token is waited exactly once.
static LogicalResult verifyToken(Operation *op, Value token) {
  if (!token)
    return success();
  size_t uses = std::distance(token.use_begin(), token.use_end());
  if (uses == 1)
    return success();
  if (uses == 0)
    return op->emitOpError()
           << "returns a token that is never waited; add a flexpipe.wait on "
              "it before the data is used (or drop the result to make the "
              "transfer blocking)";
  return op->emitOpError() << "returns a token that is waited " << uses
                           << " times; wait on it exactly once";
}

//===----------------------------------------------------------------------===//
// PipelineOp
//===----------------------------------------------------------------------===//

LogicalResult PipelineOp::verify() {
  return verifyCounts(*this,
                      {{"actor", "actors", asSigned(getActors()), kMaxActors},
                       {"micro-batch", "micro-batches",
                        asSigned(getMicrobatches()), kMaxCount}});
}

int64_t PipelineOp::getNumStages() {
  int64_t total = 0;
  for (auto module : getBody().getOps<ModalityOp>())
    if (auto placed = llvm::expectedToOptional(module.computePlacement()))
      total += placed->numStages();
  return total;
}

/// Extra dependencies must not form a cycle. Reports one error with a note at
/// each dependency of the first cycle found.
static LogicalResult verifyAcyclicDependencies(PipelineOp pipeline,
                                               SymbolTableCollection &symbols) {
  using Node = std::tuple<StringAttr, StringAttr, int64_t>;
  llvm::DenseMap<Node, unsigned> ids;
  SmallVector<SmallVector<std::pair<unsigned, DependencyOp>>> successors;
  auto nodeOf = [&](StringAttr inst, FlatSymbolRefAttr stage,
                    std::optional<uint64_t> index) -> FailureOr<unsigned> {
    FailureOr<StageKey> key =
        resolveStageRef(symbols, pipeline, "a", stage, index);
    if (failed(key))
      return failure();
    auto [it, inserted] =
        ids.try_emplace(Node{inst, key->first, key->second}, ids.size());
    if (inserted)
      successors.emplace_back();
    return it->second;
  };
  for (auto dep : pipeline.getBody().getOps<DependencyOp>()) {
    FailureOr<unsigned> from =
        nodeOf(dep.getSrcInstAttr(), dep.getSrcStageAttr(), dep.getSrcIndex());
    FailureOr<unsigned> to =
        nodeOf(dep.getDstInstAttr(), dep.getDstStageAttr(), dep.getDstIndex());
    if (failed(from) || failed(to))
      return failure();
    successors[*from].push_back({*to, dep});
  }

  // Iterative depth-first search; `stack` holds the current branch: each
  // node, its next successor and the edge into it.
  enum Color : uint8_t { White, Gray, Black };
  SmallVector<Color> color(successors.size(), White);
  for (unsigned root = 0; root < successors.size(); ++root) {
    if (color[root] != White)
      continue;
    SmallVector<std::tuple<unsigned, unsigned, DependencyOp>> stack{
        {root, 0, DependencyOp()}};
    color[root] = Gray;
    while (!stack.empty()) {
      auto &[node, next, into] = stack.back();
      if (next == successors[node].size()) {
        color[node] = Black;
        stack.pop_back();
        continue;
      }
      auto [succ, dep] = successors[node][next++];
      if (color[succ] == Gray) {
        // The cycle is the part of the branch after `succ`, plus `dep`.
        auto start = stack.begin();
        while (std::get<0>(*start) != succ)
          ++start;
        InFlightDiagnostic diag =
            dep.emitOpError()
            << "closes a cycle of extra dependencies, so none of its "
               "instructions can ever be scheduled; remove one of them";
        for (auto it = std::next(start); it != stack.end(); ++it)
          diag.attachNote(std::get<2>(*it).getLoc()) << "part of the cycle";
        return diag;
      }
      if (color[succ] == White) {
        color[succ] = Gray;
        stack.push_back({succ, 0, dep});
      }
    }
  }
  return success();
}

/// The priority ops of `pipeline`: no two set one field for one scope (two
/// modules' that disagree on a shared actor are the spec builder's to find:
/// it evaluates their counts).
static LogicalResult verifyPriorities(PipelineOp pipeline) {
  // No two priority ops set the same field for the same scope.
  using PriorityKey = std::tuple<StringAttr, int64_t, unsigned>;
  llvm::DenseMap<PriorityKey, PriorityOp> prioritySeen;
  for (auto priority : pipeline.getBody().getOps<PriorityOp>()) {
    StringAttr module =
        priority.getModuleAttr() ? priority.getModuleAttr().getAttr() : nullptr;
    SmallVector<int64_t> actors{-1};
    if (priority.getActorIds())
      actors = priority.getResolvedActorIds();
    const char *fields[] = {"cttp", "fstp", "bstp", "a custom priority"};
    bool present[] = {static_cast<bool>(priority.getCttpAttr()),
                      static_cast<bool>(priority.getFstpAttr()),
                      static_cast<bool>(priority.getBstpAttr()),
                      static_cast<bool>(priority.getCustomAttr())};
    for (int64_t actor : actors) {
      for (unsigned field = 0; field < 4; ++field) {
        if (!present[field])
          continue;
        auto [it, inserted] = prioritySeen.try_emplace(
            PriorityKey{module, actor, field}, priority);
        if (inserted)
          continue;
        InFlightDiagnostic diag = priority.emitOpError()
                                  << "sets " << fields[field] << " again for ";
        if (actor >= 0)
          diag << "actor " << actor;
        else if (module)
          diag << "module @" << module.getValue();
        else
          diag << "the whole pipeline";
        diag << "; set each priority once per scope (use `actors [...]` to "
                "override single actors)";
        return withNote(std::move(diag), it->second, "first set here");
      }
    }
  }

  return success();
}

LogicalResult PipelineOp::verifyRegions() {
  SymbolTableCollection symbols;
  bool hasModule = false;
  for (Operation &op : getBody().front()) {
    if (!isa<ModalityOp, ShareOp, StageOp, InstructionOp, DependencyOp, CheckOp,
             PriorityOp, InflightOp, OptimizeOp>(op))
      return op.emitOpError()
             << "cannot appear in a flexpipe.pipeline, which holds only "
                "spec-level ops (module, share, stage, instruction, "
                "dependency, check, priority, inflight, optimize)";
    hasModule |= isa<ModalityOp>(op);
    if (isa<OptimizeOp>(op) && &op != *getBody().getOps<OptimizeOp>().begin())
      return op.emitOpError()
             << "repeats flexpipe.optimize; a pipeline has at most one";
  }
  if (!hasModule)
    return emitOpError() << "declares no flexpipe.module; a pipeline needs at "
                            "least one module to place on its actors";

  // Every actor holds at least one stage.
  const int64_t numActors = asSigned(getActors());
  llvm::BitVector used(numActors);
  for (Operation &op : getBody().front()) {
    if (auto module = dyn_cast<ModalityOp>(op)) {
      std::optional<sched::ModulePlacement> placed =
          llvm::expectedToOptional(module.computePlacement());
      if (!placed)
        return failure(); // The module reported it.
      for (int64_t actor : placed->actorOf)
        if (actor >= 0 && actor < numActors)
          used.set(actor);
    } else if (auto stage = dyn_cast<StageOp>(op)) {
      for (int64_t actor : stage.getActorIds())
        if (actor >= 0 && actor < numActors)
          used.set(actor);
    }
  }
  if (int firstIdle = used.find_first_unset(); firstIdle >= 0)
    return emitOpError()
           << "leaves actor " << firstIdle
           << " without any stage; every actor of the mesh must hold at least "
              "one (check the modules' actor groups, chunks and maps, or "
              "lower actors())";

  // A stage is shared once (the schedule has one actor list per stage).
  llvm::DenseMap<std::pair<StringAttr, int64_t>, ShareOp> sharedSeen;
  for (auto share : getBody().getOps<ShareOp>()) {
    auto module = symbols.lookupNearestSymbolFrom<ModalityOp>(
        share, share.getModuleAttr());
    std::optional<sched::ModulePlacement> placed =
        module ? llvm::expectedToOptional(module.computePlacement())
               : std::nullopt;
    if (!placed)
      continue; // the share reported it
    std::optional<int64_t> stage =
        normalizeStageIndex(asSigned(share.getStage()),
                            placed->stagesPerDirection, placed->numStages());
    if (!stage)
      continue;
    auto [it, inserted] = sharedSeen.try_emplace(
        {share.getModuleAttr().getAttr(), *stage}, share);
    if (inserted)
      continue;
    return withNote(share.emitOpError()
                        << "shares stage " << *stage << " of module "
                        << share.getModuleAttr()
                        << " again; give each stage one flexpipe.share",
                    it->second, "first shared here");
  }

  if (failed(verifyPriorities(*this)))
    return failure();

  // One in-flight limit per (module, scope).
  llvm::DenseMap<std::pair<StringAttr, unsigned>, InflightOp> inflightSeen;
  for (auto inflight : getBody().getOps<InflightOp>()) {
    StringAttr module =
        inflight.getModuleAttr() ? inflight.getModuleAttr().getAttr() : nullptr;
    auto [it, inserted] = inflightSeen.try_emplace(
        {module, static_cast<unsigned>(inflight.getScope())}, inflight);
    if (inserted)
      continue;
    return withNote(inflight.emitOpError()
                        << "repeats a "
                        << stringifyInflightScope(inflight.getScope())
                        << " limit for the same scope; keep one of the two",
                    it->second, "first limit here");
  }

  return verifyAcyclicDependencies(*this, symbols);
}

//===----------------------------------------------------------------------===//
// ModalityOp
//===----------------------------------------------------------------------===//

SmallVector<int64_t> ModalityOp::getActorIds() {
  if (std::optional<ArrayRef<int64_t>> group = getActorGroup())
    return llvm::to_vector(*group);
  auto pipeline = (*this)->getParentOfType<PipelineOp>();
  int64_t numActors = pipeline ? std::max<int64_t>(0, pipeline.getActors()) : 0;
  return llvm::to_vector(llvm::seq<int64_t>(0, numActors));
}

sched::PlacementSpec ModalityOp::getPlacementSpec() {
  sched::PlacementSpec spec;
  spec.kind = toSched<sched::PlacementKind>(getPlacement());
  const int64_t defaultChunks =
      spec.kind == sched::PlacementKind::Circular ||
              spec.kind == sched::PlacementKind::VShape
          ? 2
          : 1;
  spec.chunks = getChunks() ? asSigned(*getChunks()) : defaultChunks;
  spec.bidirectional = getBidirectional();
  SmallVector<int64_t> actors = getActorIds();
  spec.actors.assign(actors.begin(), actors.end());
  if (std::optional<ArrayRef<int64_t>> map = getStageMap())
    spec.stageMap.assign(map->begin(), map->end());
  return spec;
}

llvm::Expected<sched::ModulePlacement> ModalityOp::computePlacement() {
  return sched::place(getPlacementSpec());
}

SmallVector<int64_t> ModalityOp::getLayersPerStage(int64_t stagesPerDirection) {
  if (std::optional<ArrayRef<int64_t>> partition = getPartition())
    return llvm::to_vector(*partition);
  return llvm::to_vector(
      sched::evenPartition(asSigned(getLayers()), stagesPerDirection));
}

LogicalResult ModalityOp::verify() {
  auto pipeline = (*this)->getParentOfType<PipelineOp>();
  const int64_t layers = asSigned(getLayers());
  if (failed(verifyCounts(*this, {{"layer", "layers", layers, kMaxCount}})) ||
      (getChunks() && failed(verifyAtMost(*this, "chunks",
                                          asSigned(*getChunks()), kMaxChunks))))
    return failure();
  if (std::optional<ArrayRef<int64_t>> group = getActorGroup())
    if (failed(verifyActorList(*this, "the actor group", *group,
                               asSigned(pipeline.getActors()), 1)))
      return failure();
  const bool isExplicit = getPlacement() == PlacementKind::Explicit;
  if (isExplicit && !getStageMap())
    return emitOpError() << "placement(explicit) needs `map [...]` giving the "
                            "actor of each stage";
  if (!isExplicit && getStageMap())
    return emitOpError() << "`map` is only valid with placement(explicit), not "
                            "placement("
                         << stringifyPlacementKind(getPlacement()) << ")";
  if (getChunks() && asSigned(*getChunks()) < 1)
    return emitOpError() << "chunks must be at least 1, got "
                         << asSigned(*getChunks());

  llvm::Expected<sched::ModulePlacement> placed = computePlacement();
  if (!placed)
    return emitOpError() << llvm::toString(placed.takeError());
  const int64_t perDirection = placed->stagesPerDirection;

  if (std::optional<ArrayRef<int64_t>> partition = getPartition()) {
    if (static_cast<int64_t>(partition->size()) != perDirection)
      return emitOpError() << "partition lists " << partition->size()
                           << " stages, but the placement makes "
                           << perDirection
                           << " stages per direction; give one layer count "
                              "per stage";
    int64_t sum = 0;
    for (auto [stage, count] : llvm::enumerate(*partition)) {
      if (count < 0)
        return emitOpError() << "partition gives stage " << stage
                             << " a negative layer count (" << count << ")";
      if (count > layers) // also keeps the sum from overflowing
        return emitOpError()
               << "partition gives stage " << stage << " " << count
               << " layers, but the module has " << layers;
      sum += count;
    }
    if (sum != layers)
      return emitOpError() << "partition sums to " << sum
                           << " layers, but the module has " << layers;
  } else if (layers < perDirection) {
    return emitOpError() << "cannot split " << layers << " layers over "
                         << perDirection
                         << " stages with at least one layer each; add "
                            "layers, use fewer stages, or give `partition "
                            "[...]`";
  }
  if (const size_t actors = getActorIds().size();
      getVocabParallel() && actors < 2)
    return emitOpError() << "is vocab_parallel, which splits the token "
                            "embedding and LM head over its actors and needs "
                            "at least 2, but it has "
                         << actors;
  if (getBidirectional() && asSigned(pipeline.getMicrobatches()) < 2)
    return emitOpError()
           << "is bidirectional, which splits micro-batches between two "
              "directions and needs at least 2, but the pipeline has "
           << asSigned(pipeline.getMicrobatches());
  return success();
}

LogicalResult ModalityOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (ArrayAttr inputs = getInputsAttr()) {
    for (auto [i, attr] : llvm::enumerate(inputs)) {
      auto symbol = cast<FlatSymbolRefAttr>(attr);
      if (llvm::is_contained(inputs.getValue().take_front(i), attr))
        return emitOpError() << "takes input from " << symbol
                             << " twice; list each module once";
      auto input = symbols.lookupNearestSymbolFrom<ModalityOp>(*this, symbol);
      if (!input)
        return emitOpError() << "takes input from " << symbol
                             << ", which is not a flexpipe.module of this "
                                "pipeline";
      if (input == *this)
        return emitOpError() << "cannot take its own output as input";
      if (getBidirectional() || input.getBidirectional())
        return emitOpError() << "connects to module " << symbol
                             << ", but bidirectional modules cannot be "
                                "connected to other modules";
      if (getVocabParallel() || input.getVocabParallel())
        return emitOpError() << "connects to module " << symbol
                             << ", but a vocab_parallel module (token "
                                "embedding in, loss out) cannot be "
                                "connected to other modules";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ShareOp
//===----------------------------------------------------------------------===//

LogicalResult ShareOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto found = lookupPlacedModule(symbols, *this, getModuleAttr());
  if (failed(found))
    return failure();
  auto &[module, placement] = *found;
  const sched::ModulePlacement *placed = &placement;
  std::optional<int64_t> stage = normalizeStageIndex(
      asSigned(getStage()), placed->stagesPerDirection, placed->numStages());
  if (!stage)
    return emitOpError() << "names stage " << asSigned(getStage())
                         << ", but module " << getModuleAttr() << " has "
                         << placed->numStages() << " stages";
  auto pipeline = (*this)->getParentOfType<PipelineOp>();
  if (failed(verifyActorList(*this, "a shared stage", getActorIds(),
                             asSigned(pipeline.getActors()), 2)))
    return failure();
  if (std::optional<int64_t> actor = actorOutside(module, getActorIds()))
    return emitOpError() << "shares the stage with actor " << *actor
                         << ", which is not one of module " << getModuleAttr()
                         << "'s actors";
  int64_t home = placed->actorOf[*stage];
  if (!llvm::is_contained(getActorIds(), home))
    return emitOpError() << "must include actor " << home
                         << ", where the placement puts stage " << *stage;
  return success();
}

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

LogicalResult StageOp::verify() {
  auto pipeline = (*this)->getParentOfType<PipelineOp>();
  return verifyActorList(*this, "a registered stage", getActorIds(),
                         asSigned(pipeline.getActors()), 1);
}

//===----------------------------------------------------------------------===//
// InstructionOp
//===----------------------------------------------------------------------===//

LogicalResult InstructionOp::verify() {
  if (isBuiltinInstructionName(getSymName()))
    return emitOpError() << "cannot take the name @" << getSymName()
                         << ", which is reserved for the built-in instruction; "
                            "choose another name";
  for (auto [name, value] :
       {std::pair<const char *, int64_t>{"prev", asSigned(getPrev())},
        {"next", asSigned(getNext())},
        {"unit", asSigned(getUnit())}})
    if (value < 1 || value > kMaxCount)
      return emitOpError() << name << " must be between 1 and " << kMaxCount
                           << " (the most micro-batches a pipeline has), got "
                           << value;
  if (getAsync() && getKind() == RegisteredKind::Compute)
    return emitOpError() << "is a kind(compute) instruction, which each actor "
                            "runs on its own; only all_gather and gather can "
                            "be async";
  return success();
}

LogicalResult InstructionOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<StageKey> stage =
      resolveStageRef(symbols, *this, "its", getStageAttr(), getStageIndex());
  if (failed(stage))
    return failure();
  if (getKind() != RegisteredKind::Compute) {
    auto registered =
        symbols.lookupNearestSymbolFrom<StageOp>(*this, getStageAttr());
    if (!registered || registered.getActorIds().size() < 2)
      return emitOpError()
             << "is a kind(" << stringifyRegisteredKind(getKind())
             << ") instruction, which synchronises several actors; attach it "
                "to a registered flexpipe.stage that lists at least two";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// DependencyOp
//===----------------------------------------------------------------------===//

/// Checks one endpoint: the instruction exists and, when registered, is named
/// with the stage it is attached to.
static FailureOr<StageKey> verifyEndpoint(SymbolTableCollection &symbols,
                                          DependencyOp op, StringRef role,
                                          StringAttr inst,
                                          FlatSymbolRefAttr stage,
                                          std::optional<uint64_t> index) {
  FailureOr<StageKey> key = resolveStageRef(symbols, op, role, stage, index);
  if (failed(key) || isBuiltinInstructionName(inst.getValue()))
    return key;
  auto registered = symbols.lookupNearestSymbolFrom<InstructionOp>(
      op, FlatSymbolRefAttr::get(inst));
  if (!registered)
    return op.emitOpError() << role << " instruction @" << inst.getValue()
                            << " is neither a built-in type (fwd, bwd, igrad, "
                               "wgrad) nor a registered flexpipe.instruction";
  FailureOr<StageKey> attached =
      resolveStageRef(symbols, registered, "its", registered.getStageAttr(),
                      registered.getStageIndex());
  if (failed(attached))
    return failure();
  if (*attached != *key)
    return op.emitOpError()
           << role << " instruction @" << inst.getValue()
           << " is attached to stage " << registered.getStageAttr()
           << (attached->second >= 0
                   ? "[" + std::to_string(attached->second) + "]"
                   : std::string())
           << "; name that stage here";
  return key;
}

LogicalResult DependencyOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<StageKey> src =
      verifyEndpoint(symbols, *this, "the source", getSrcInstAttr(),
                     getSrcStageAttr(), getSrcIndex());
  if (failed(src))
    return failure();
  FailureOr<StageKey> dst =
      verifyEndpoint(symbols, *this, "the destination", getDstInstAttr(),
                     getDstStageAttr(), getDstIndex());
  if (failed(dst))
    return failure();
  if (*src == *dst && getSrcInst() == getDstInst())
    return emitOpError() << "makes an instruction depend on itself, which can "
                            "never be satisfied";
  return success();
}

//===----------------------------------------------------------------------===//
// PriorityOp
//===----------------------------------------------------------------------===//

LogicalResult PriorityOp::verify() {
  if (getCustomAttr()) {
    if (getCttpAttr() || getFstpAttr() || getBstpAttr())
      return emitOpError() << "combines custom(\"" << getCustom().value()
                           << "\") with cttp, fstp or bstp; a custom priority "
                              "replaces the step function those configure, "
                              "so give it alone";
    if (getCustom()->empty())
      return emitOpError() << "names an empty custom priority";
  } else if (!getCttpAttr() && !getFstpAttr() && !getBstpAttr()) {
    return emitOpError() << "sets no priority; give at least one of cttp<...>, "
                            "fstp<...>, bstp<...> or custom(\"name\")";
  }
  if (std::optional<ArrayRef<int64_t>> ids = getActorIds()) {
    auto pipeline = (*this)->getParentOfType<PipelineOp>();
    return verifyActorList(*this, "a per-actor priority", *ids,
                           asSigned(pipeline.getActors()), 1,
                           /*fromEnd=*/true);
  }
  return success();
}

SmallVector<int64_t> PriorityOp::getResolvedActorIds() {
  SmallVector<int64_t> ids;
  if (std::optional<ArrayRef<int64_t>> written = getActorIds()) {
    const int64_t numActors =
        asSigned((*this)->getParentOfType<PipelineOp>().getActors());
    for (int64_t id : *written)
      ids.push_back(resolveActorId(id, numActors));
  }
  return ids;
}

LogicalResult PriorityOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (!getModuleAttr())
    return success();
  FailureOr<ModalityOp> module =
      lookupModuleOrFail(symbols, *this, getModuleAttr());
  if (failed(module))
    return failure();
  if (std::optional<int64_t> actor =
          actorOutside(*module, getResolvedActorIds()))
    return emitOpError() << "overrides actor " << *actor
                         << ", which is not one of module " << getModuleAttr()
                         << "'s actors";
  return success();
}

//===----------------------------------------------------------------------===//
// InflightOp
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>> InflightOp::evaluate(int64_t numActors,
                                                     int64_t numStages,
                                                     int64_t numMicrobatches) {
  const InflightScope scope = getScope();
  const bool isGlobal = scope == InflightScope::Global;
  const char *unit = scope == InflightScope::PerStage ? "stage" : "actor";
  const int64_t count = isGlobal                           ? 1
                        : scope == InflightScope::PerStage ? numStages
                                                           : numActors;
  // What limit `index` is for (a global limit has no actor or stage).
  auto entry = [&](int64_t index) {
    return isGlobal ? std::string("the scope")
                    : std::string(unit) + " " + std::to_string(index);
  };
  SmallVector<int64_t> limits;
  Attribute limit = getLimit();
  if (auto value = dyn_cast<IntegerAttr>(limit)) {
    limits.assign(count, value.getInt());
  } else if (auto list = dyn_cast<DenseI64ArrayAttr>(limit)) {
    if (isGlobal)
      return emitOpError() << "gives a global limit as a list; a global limit "
                              "is one number (or an affine map without "
                              "dimensions)";
    if (list.size() != count)
      return emitOpError() << "lists " << list.size()
                           << " limits, but the scope has " << count << " "
                           << unit << "s; give one per " << unit;
    limits.assign(list.asArrayRef().begin(), list.asArrayRef().end());
  } else if (auto rule = dyn_cast<StringAttr>(limit)) {
    const plugin::InflightRule *function =
        plugin::Registry::global().inflightRule(rule.str());
    if (!function) {
      InFlightDiagnostic diag =
          emitOpError() << "uses in-flight rule \"" << rule.getValue()
                        << "\", which no loaded plugin registers; load it with "
                           "--load-plugin";
      std::vector<std::string> known =
          plugin::Registry::global().names("inflight rule");
      if (!known.empty())
        diag << " (registered: " << llvm::join(known, ", ") << ")";
      return diag;
    }
    plugin::InflightQuery query;
    query.numActors = numActors;
    query.numStages = numStages;
    query.numMicrobatches = numMicrobatches;
    for (int64_t index = 0; index < count; ++index) {
      query.index = index;
      limits.push_back((*function)(query));
      if (std::string failure = sched::takeHookFailure(); !failure.empty())
        return emitOpError() << failure;
    }
  } else {
    AffineMap map = cast<AffineMapAttr>(limit).getValue();
    const unsigned dims = isGlobal ? 0 : 1;
    if (map.getNumDims() != dims ||
        (map.getNumSymbols() != 3 && map.getNumSymbols() != 4) ||
        map.getNumResults() != 1)
      return emitOpError() << "expects an affine map of the form "
                           << (isGlobal ? "()[pp, s, m] -> (limit)"
                                        : "(i)[pp, s, m] -> (limit)")
                           << " (" << dims
                           << " dimension, 3 symbols, 1 result; a fourth "
                              "symbol, round, is optional), got "
                           << AffineMapAttr::get(map);
    MLIRContext *ctx = getContext();
    SmallVector<AffineExpr> symbols =
        countSymbolValues(ctx, numActors, numStages, numMicrobatches);
    for (int64_t index = 0; index < count; ++index) {
      SmallVector<AffineExpr> dimValues;
      if (!isGlobal)
        dimValues.push_back(getAffineConstantExpr(index, ctx));
      AffineExpr value =
          map.getResult(0).replaceDimsAndSymbols(dimValues, symbols);
      auto constant = dyn_cast<AffineConstantExpr>(value);
      if (!constant)
        return emitOpError()
               << "cannot evaluate " << AffineMapAttr::get(map) << " for "
               << entry(index) << " (a division by zero, or past 64 bits)";
      limits.push_back(constant.getValue());
    }
  }
  for (auto [index, value] : llvm::enumerate(limits)) {
    if (value >= 1)
      continue;
    InFlightDiagnostic diag = emitOpError();
    // A plugin's rule is named: its answer, not the spec's text, is wrong.
    if (auto rule = dyn_cast<StringAttr>(limit))
      diag << "the in-flight rule '" << rule.getValue() << "' ";
    return diag << "gives " << entry(index) << " an in-flight limit of "
                << value
                << "; every limit must be at least 1 (1 runs one micro-batch "
                   "at a time)";
  }
  return limits;
}

/// Whether `map` as MLIR prints it passes checkAffineLiterals: its names
/// (the dimension and symbol lists and every use) and constants multiply
/// to at most 2^62. (A product by -1 prints as a negation, no constant.)
static bool printsWithinLiteralBudget(AffineMap map) {
  AffineLiteralBudget budget;
  bool within = true;
  for (unsigned i = 0; i < map.getNumDims() + map.getNumSymbols(); ++i)
    within = within && budget.take(std::nullopt);
  std::function<void(AffineExpr)> count = [&](AffineExpr expr) {
    if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
      within = within && budget.take(llvm::AbsoluteValue(constant.getValue()));
    } else if (auto binary = dyn_cast<AffineBinaryOpExpr>(expr)) {
      count(binary.getLHS());
      auto factor = dyn_cast<AffineConstantExpr>(binary.getRHS());
      if (!(binary.getKind() == AffineExprKind::Mul && factor &&
            factor.getValue() == -1))
        count(binary.getRHS());
    } else {
      within = within && budget.take(std::nullopt);
    }
  };
  for (AffineExpr result : map.getResults())
    count(result);
  return within;
}

LogicalResult InflightOp::verifySymbolUses(SymbolTableCollection &symbols) {
  // The custom form's parser refuses such a map (its constants fold in
  // wrapping arithmetic); one read from the generic form or bytecode would
  // print as text that does not read back.
  if (auto map = dyn_cast<AffineMapAttr>(getLimit());
      map && !printsWithinLiteralBudget(map.getValue()))
    return emitOpError()
           << "has an in-flight affine map whose constants and names multiply "
              "past 2^62: its custom form could not be read back (MLIR folds "
              "such constants in wrapping arithmetic); use smaller constants";
  auto pipeline = (*this)->getParentOfType<PipelineOp>();
  int64_t numActors = asSigned(pipeline.getActors());
  int64_t numStages = 0;
  if (getModuleAttr()) {
    auto placed = lookupPlacedModule(symbols, *this, getModuleAttr());
    if (failed(placed))
      return failure();
    numActors = static_cast<int64_t>(placed->first.getActorIds().size());
    numStages = placed->second.numStages();
  } else {
    numStages = pipeline.getNumStages();
  }
  // A plugin rule is evaluated when the spec is scheduled (the plugin may
  // not be loaded where the IR is only parsed); an empty name was refused
  // only then.
  if (auto rule = dyn_cast<StringAttr>(getLimit()))
    return rule.getValue().empty()
               ? emitOpError() << "names an empty in-flight rule; "
                                  "rule(\"NAME\") names a plugin's rule"
               : success();
  return evaluate(numActors, numStages, asSigned(pipeline.getMicrobatches()));
}

//===----------------------------------------------------------------------===//
// ScheduleOp
//===----------------------------------------------------------------------===//

SmallVector<std::pair<int64_t, int64_t>> ScheduleOp::getEdgeList() {
  SmallVector<std::pair<int64_t, int64_t>> edges;
  if (std::optional<ArrayRef<int64_t>> flat = getEdges()) {
    for (size_t i = 0; i + 1 < flat->size(); i += 2)
      edges.push_back({(*flat)[i], (*flat)[i + 1]});
    return edges;
  }
  for (int64_t stage = 0; stage + 1 < asSigned(getStages()); ++stage)
    edges.push_back({stage, stage + 1});
  return edges;
}

LogicalResult ScheduleOp::verify() {
  const int64_t numStages = asSigned(getStages());
  if (failed(verifyCounts(
          *this, {{"actor", "actors", asSigned(getActors()), kMaxActors},
                  {"stage", "stages", numStages, kMaxCount},
                  {"micro-batch", "micro-batches", asSigned(getMicrobatches()),
                   kMaxCount}})))
    return failure();
  if (std::optional<ArrayRef<int64_t>> flat = getEdges()) {
    if (flat->size() % 2 != 0)
      return emitOpError() << "has an odd number of edge endpoints; edges are "
                              "(from, to) pairs";
    SmallVector<std::pair<int64_t, int64_t>> edges = getEdgeList();
    if (std::optional<EdgeProblem> bad = findEdgeProblem(numStages, edges)) {
      switch (bad->kind) {
      case EdgeProblem::OutOfRange:
        return emitOpError() << "has an edge " << bad->from << " -> " << bad->to
                             << " outside the stages 0 to " << numStages - 1;
      case EdgeProblem::SelfEdge:
        return emitOpError()
               << "has an edge from stage " << bad->from << " to itself";
      case EdgeProblem::Repeated:
        // (A stage would wait for the same input twice: the run stopped.)
        return emitOpError() << "has the edge " << bad->from << " -> "
                             << bad->to << " twice; give each edge once";
      }
    }
    if (StageGraph<int64_t>(numStages, edges).hasCycle())
      return emitOpError() << "has a cycle in its stage edges; the stage graph "
                              "must be a DAG";
  }
  if (ArrayAttr info = getStageInfoAttr();
      info && static_cast<int64_t>(info.size()) != numStages)
    return emitOpError() << "has " << info.size() << " stage_info entries for "
                         << numStages << " stages; give one per stage";
  if (std::optional<ArrayRef<int64_t>> shared = getShared()) {
    llvm::SmallDenseSet<int64_t> seen;
    for (int64_t stage : *shared) {
      if (stage < 0 || stage >= numStages)
        return emitOpError()
               << "marks stage " << stage
               << " shared, but the schedule has stages 0 to " << numStages - 1;
      if (!seen.insert(stage).second)
        return emitOpError() << "marks stage " << stage << " shared twice";
    }
  }
  return success();
}

namespace {
/// An actor's instructions by (op name, registered instruction, stage,
/// micro-batch, peer), for the verifier to find one repeated. Keys are
/// packed into 16 bytes: the (stage, micro-batch) cell under 2^40 with an op
/// name index above it; the registered instruction's index (fewer than the
/// computations, under 2^24) and the peer (+1 for -1, under 2^20)
/// (kMaxCount, kMaxActors). Sorted per actor rather than hashed: a table of
/// a large schedule's millions made each lookup a cache miss, and a hash
/// that kept an actor's ops in neighbouring buckets had long probe runs at
/// some sizes (1F1B on 32 actors verified twice as slowly at 16,000
/// micro-batches as at 17,000). A computation that runs once per schedule
/// is checked here too: on another actor, the stage's home check says so.
class RepeatFinder {
public:
  explicit RepeatFinder(int64_t numMicrobatches)
      : numMicrobatches(numMicrobatches) {}
  void add(Operation &op, const void *registered, int64_t stage, int64_t mb,
           int64_t peer) {
    entries.push_back(
        {indexOf(nameIndex, op.getName().getAsOpaquePointer()) << 40 |
             (static_cast<uint64_t>(stage) * numMicrobatches + mb),
         indexOf(registeredIndex, registered) << 20 |
             static_cast<uint64_t>(peer + 1),
         static_cast<uint32_t>(entries.size()), &op});
  }
  /// Of the instructions added since the last call, the repeat whose second
  /// occurrence comes first: (first, second); empty where none repeats.
  std::optional<std::pair<Operation *, Operation *>> take() {
    llvm::sort(entries, [](const Entry &x, const Entry &y) {
      return std::tie(x.cell, x.fields, x.position) <
             std::tie(y.cell, y.fields, y.position);
    });
    std::optional<std::pair<Operation *, Operation *>> found;
    uint32_t at = UINT32_MAX;
    for (size_t k = 1; k < entries.size(); ++k) {
      const Entry &first = entries[k - 1], &second = entries[k];
      if (first.cell == second.cell && first.fields == second.fields &&
          second.position < at) {
        at = second.position;
        found = {first.op, second.op};
      }
    }
    entries.clear();
    return found;
  }

private:
  struct Entry {
    uint64_t cell, fields;
    uint32_t position;
    Operation *op;
  };
  using Indices = llvm::SmallDenseMap<const void *, uint64_t, 16>;
  static uint64_t indexOf(Indices &indices, const void *pointer) {
    return indices.try_emplace(pointer, indices.size()).first->second;
  }
  int64_t numMicrobatches;
  std::vector<Entry> entries;
  Indices nameIndex, registeredIndex;
};
} // namespace

LogicalResult ScheduleOp::verifyRegions() {
  const int64_t numActors = asSigned(getActors());
  const int64_t numStages = asSigned(getStages());
  const int64_t numMicrobatches = asSigned(getMicrobatches());

  SmallVector<ActorOp> byId(numActors);
  for (Operation &op : getBody().front()) {
    auto actor = dyn_cast<ActorOp>(op);
    if (!actor)
      return op.emitOpError() << "cannot appear directly in a "
                                 "flexpipe.schedule, which holds only "
                                 "flexpipe.actor regions";
    int64_t id = asSigned(actor.getId());
    if (id < 0 || id >= numActors)
      return actor.emitOpError()
             << "has id " << id << ", but the schedule has actors 0 to "
             << numActors - 1;
    if (byId[id])
      return withNote(actor.emitOpError() << "repeats actor " << id
                                          << "; each actor has one program",
                      byId[id], "first program of actor " + Twine(id));
    byId[id] = actor;
  }
  for (int64_t id = 0; id < numActors; ++id)
    if (!byId[id])
      return emitOpError() << "has no program for actor " << id
                           << "; give every actor a flexpipe.actor region (an "
                              "idle actor's may be empty)";

  llvm::SmallDenseSet<int64_t> shared;
  if (std::optional<ArrayRef<int64_t>> list = getShared())
    shared.insert(list->begin(), list->end());

  llvm::DenseMap<int64_t, std::pair<int64_t, Operation *>> computeHome;
  llvm::DenseMap<std::pair<int64_t, int64_t>, Operation *> fullBackward;
  llvm::DenseMap<std::pair<int64_t, int64_t>,
                 std::pair<Operation *, Operation *>>
      splitBackward; // (igrad, wgrad)
  auto onceGlobally = [&](InstructionOpInterface inst) {
    return inst.isCompute() && !shared.contains(inst.getStageId());
  };
  RepeatFinder repeats(numMicrobatches);
  for (ActorOp actor : byId) {
    const int64_t actorId = asSigned(actor.getId());
    for (Operation &op : actor.getBody().front()) {
      if (isa<WaitOp>(op))
        continue;
      auto inst = dyn_cast<InstructionOpInterface>(op);
      if (!inst)
        return op.emitOpError() << "cannot appear in a flexpipe.actor, which "
                                   "holds only flexpipe instructions";
      const int64_t stage = inst.getStageId(), mb = inst.getMicrobatchId();
      if (stage < 0 || stage >= numStages)
        return op.emitOpError()
               << "works on stage " << stage
               << ", but the schedule has stages 0 to " << numStages - 1;
      if (mb < 0 || mb >= numMicrobatches)
        return op.emitOpError() << "works on micro-batch " << mb
                                << ", but the schedule has micro-batches 0 to "
                                << numMicrobatches - 1;

      const void *registered = nullptr;
      if (auto exec = dyn_cast<ExecOp>(op))
        registered = exec.getInstructionAttr().getAttr().getAsOpaquePointer();
      repeats.add(op, registered, stage, mb, inst.getPeerActor());
      if (!onceGlobally(inst))
        continue;
      auto [home, isNew] = computeHome.try_emplace(stage, actorId, &op);
      if (!isNew && home->second.first != actorId)
        return withNote(
            op.emitOpError()
                << "runs stage " << stage << " on actor " << actorId
                << ", but actor " << home->second.first
                << " already runs it; a stage lives on one actor unless the "
                   "schedule lists it in `shared [...]`",
            home->second.second, "stage " + Twine(stage) + " runs here");
      std::pair<int64_t, int64_t> item{stage, mb};
      if (isa<BwdOp>(op))
        fullBackward[item] = &op;
      else if (isa<IgradOp>(op))
        splitBackward[item].first = &op;
      else if (isa<WgradOp>(op))
        splitBackward[item].second = &op;
    }
    if (auto repeat = repeats.take()) {
      auto [first, second] = *repeat;
      auto inst = cast<InstructionOpInterface>(second);
      return withNote(second->emitOpError()
                          << "repeats stage " << inst.getStageId()
                          << " micro-batch " << inst.getMicrobatchId()
                          << (onceGlobally(inst)
                                  ? "; each instruction runs once "
                                    "per stage and micro-batch"
                                  : " on the same actor and peer"),
                      first, "first occurrence");
    }
  }

  for (auto &[item, split] : splitBackward) {
    auto [igrad, wgrad] = split;
    Operation *some = igrad ? igrad : wgrad;
    if (Operation *bwd = fullBackward.lookup(item))
      return withNote(some->emitOpError()
                          << "splits the backward of stage " << item.first
                          << " micro-batch " << item.second
                          << ", which also runs as a full flexpipe.bwd; use "
                             "either bwd or igrad + wgrad",
                      bwd, "full backward here");
    if (!igrad || !wgrad)
      return some->emitOpError()
             << "has no matching "
             << (igrad ? "flexpipe.wgrad" : "flexpipe.igrad") << " for stage "
             << item.first << " micro-batch " << item.second
             << "; a split backward needs both halves";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

/// The enclosing actor's id and the schedule's actor count.
static std::pair<int64_t, int64_t> actorContext(Operation *op) {
  auto actor = op->getParentOfType<ActorOp>();
  auto schedule = actor ? actor->getParentOfType<ScheduleOp>() : ScheduleOp();
  return {actor ? asSigned(actor.getId()) : -1,
          schedule ? asSigned(schedule.getActors()) : 0};
}

/// The point-to-point ops' verifier (their ODS class defines verify()).
static LogicalResult verifyP2P(Operation *op, int64_t peer, Value token) {
  auto [self, numActors] = actorContext(op);
  if (peer < 0 || peer >= numActors)
    return op->emitOpError()
           << "names peer actor " << peer
           << ", but the schedule has actors 0 to " << numActors - 1;
  if (peer == self)
    return op->emitOpError()
           << "names its own actor " << self
           << " as the peer; same-actor edges need no communication";
  return verifyToken(op, token);
}

static LogicalResult verifyCollective(Operation *op, ArrayRef<int64_t> group,
                                      Value token) {
  auto [self, numActors] = actorContext(op);
  if (failed(verifyActorList(op, "the group", group, numActors, 2)))
    return failure();
  // (The verifier took any order, and only the lowering refused one.)
  if (!llvm::is_sorted(group))
    return op->emitOpError() << "lists its group out of order; list the "
                                "actors in ascending order, the order the "
                                "runtime gathers their parts in";
  if (!llvm::is_contained(group, self))
    return op->emitOpError() << "runs on actor " << self
                             << ", which is not in its group; list it";
  return verifyToken(op, token);
}

LogicalResult AllGatherOp::verify() {
  return verifyCollective(*this, getGroup(), getToken());
}

LogicalResult GatherOp::verify() {
  if (failed(verifyCollective(*this, getGroup(), getToken())))
    return failure();
  if (!llvm::is_contained(getGroup(), asSigned(getRoot())))
    return emitOpError() << "gathers to root " << asSigned(getRoot())
                         << ", which is not in its group";
  return success();
}

LogicalResult ExecOp::verify() {
  // An empty symbol prints as @<<INVALID EMPTY SYMBOL>>, which does not
  // parse back.
  if (getInstruction().empty())
    return emitOpError() << "names no instruction (an empty symbol)";
  return verifyToken(*this, getToken());
}

#define GET_OP_CLASSES
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOps.cpp.inc"

//===----------------------------------------------------------------------===//
// OptimizeOp
//===----------------------------------------------------------------------===//

/// What `flexpipe.optimize` may ask for, on the spec's op and as a
/// schedule's attribute (which the passes read in place of their options).
static LogicalResult verifyOptimizations(Operation *op, bool split,
                                         bool separation, bool async,
                                         FloatAttr boundAttr,
                                         std::optional<int64_t> rounds) {
  if (!split && !separation && !async)
    return op->emitOpError()
           << "names no optimization; expected split_backward, "
              "gradient_separation or async_comm";
  if (boundAttr) {
    const double bound = boundAttr.getValueAsDouble();
    if (!separation)
      return op->emitOpError()
             << "has a memory_bound but no gradient_separation, the only "
                "optimization it bounds";
    if (!(bound > 0) || !std::isfinite(bound))
      return op->emitOpError()
             << "memory_bound must be a positive, finite number (omit it "
                "for the schedule's own peak), not "
             << bound;
  }
  if (rounds) {
    if (!separation)
      return op->emitOpError() << "has max_rounds but no gradient_separation, "
                                  "the only optimization that has rounds";
    if (*rounds < 0)
      return op->emitOpError()
             << "max_rounds must not be negative, not " << *rounds;
  }
  return success();
}

LogicalResult OptimizeOp::verify() {
  return verifyOptimizations(*this, getSplitBackward(), getGradientSeparation(),
                             getAsyncComm(), getMemoryBoundAttr(),
                             getMaxRounds());
}

LogicalResult
FlexPipeDialect::verifyOperationAttribute(Operation *op,
                                          NamedAttribute attribute) {
  if (attribute.getName() != "flexpipe.optimize")
    return success();
  // A hand-written or edited schedule's request: its memory_bound of NaN
  // switched the bound off and overrode the pass option, unchecked.
  auto requested = dyn_cast<DictionaryAttr>(attribute.getValue());
  if (!isa<ScheduleOp>(op) || !requested)
    return op->emitOpError() << "has flexpipe.optimize, which only a "
                                "flexpipe.schedule carries, as a dictionary";
  bool flags[3] = {false, false, false};
  const StringRef names[3] = {"split_backward", "gradient_separation",
                              "async_comm"};
  FloatAttr bound;
  std::optional<int64_t> rounds;
  for (NamedAttribute entry : requested) {
    const StringRef key = entry.getName().getValue();
    const auto *flag = llvm::find(names, key);
    // The widths the passes read (an i128 was truncated, a ui8 is not
    // signless for getInt()).
    auto integer = dyn_cast<IntegerAttr>(entry.getValue());
    const bool ok = flag != std::end(names) ? isa<UnitAttr>(entry.getValue())
                    : key == "memory_bound"
                        ? static_cast<bool>(
                              bound = dyn_cast<FloatAttr>(entry.getValue())) &&
                              bound.getType().isF64()
                        : key == "max_rounds" && integer &&
                              integer.getType().isSignlessInteger(64);
    if (!ok)
      return op->emitOpError()
             << "has flexpipe.optimize with '" << key << " = "
             << entry.getValue()
             << "'; it holds split_backward, gradient_separation and "
                "async_comm (unit), memory_bound (an f64) and max_rounds "
                "(an i64)";
    if (flag != std::end(names))
      flags[flag - std::begin(names)] = true;
    else if (key == "max_rounds")
      rounds = integer.getInt();
  }
  return verifyOptimizations(op, flags[0], flags[1], flags[2], bound, rounds);
}
