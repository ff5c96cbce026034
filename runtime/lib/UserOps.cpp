//===- UserOps.cpp - The table of runtime operations ----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Operations register here during static initialisation (FLEXPIPE_OPERATION
// in UserOps.h), before main and before MPI: the table only records, and
// what is wrong with a registration is reported when a rank starts. Also the
// attribute accessors of OpContext and the decoding of the attributes the
// lowering encodes.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/UserOps.h"

#include "flexpipe/Runtime/Schedule.h"

#include <cerrno>
#include <cstdlib>

using namespace flexpipe::rt;

namespace {

struct Entry {
  OperationFn fn;
  std::string where; // FILE:LINE of the registration
};

/// Built on first use, so registrations from any translation unit's static
/// initialisers find it.
struct Table {
  std::map<std::string, Entry> operations;
  std::vector<std::string> errors;
};
Table &table() {
  static Table instance;
  return instance;
}

const char *kindName(OpAttribute::Kind kind) {
  switch (kind) {
  case OpAttribute::Kind::String:
    return "a string";
  case OpAttribute::Kind::Integer:
    return "an integer";
  case OpAttribute::Kind::Float:
    return "a float";
  case OpAttribute::Kind::Bool:
    return "a boolean";
  case OpAttribute::Kind::Unit:
    return "a unit attribute";
  }
  return "an attribute";
}

} // namespace

/// `text` with every byte that is not printable ASCII, or is a space, '%',
/// '"', '\\', '?' (no trigraphs) or, in a key, '=', written as %XX: safe in
/// a description line and a C string literal (unescape undoes it).
std::string flexpipe::rt::escapeDescriptionText(const std::string &text,
                                                bool key) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7f && c != '%' && c != '"' && c != '\\' && c != '?' &&
        !(key && c == '=')) {
      out += c;
      continue;
    }
    static const char *const digits = "0123456789ABCDEF";
    out += '%';
    out += digits[u >> 4];
    out += digits[u & 15];
  }
  return out;
}

/// Undoes the %XX escapes of `text`; false when one is malformed.
bool flexpipe::rt::unescapeDescriptionText(const std::string &text,
                                           std::string &out) {
  out.clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    auto hex = [](char c) {
      if (c >= '0' && c <= '9')
        return c - '0';
      if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= text.size())
      return false;
    const int high = hex(text[i + 1]), low = hex(text[i + 2]);
    if (high < 0 || low < 0)
      return false;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return true;
}

bool flexpipe::rt::isOperationName(const std::string &name) {
  auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (name.empty() || !letter(name.front()))
    return false;
  for (size_t i = 1; i < name.size(); ++i) {
    const char c = name[i];
    if (!letter(c) && !(c >= '0' && c <= '9') && c != '.' && c != '-')
      return false;
  }
  return true;
}

std::string flexpipe::rt::encodeOpAttribute(const std::string &key, char kind,
                                            const std::string &value) {
  return escapeDescriptionText(key, true) + "=" + kind + ":" +
         escapeDescriptionText(value, false);
}

void flexpipe::rt::registerOperation(const char *name, OperationFn fn,
                                     const char *file, int line) {
  Table &t = table();
  const std::string where =
      std::string(file ? file : "?") + ":" + std::to_string(line);
  if (!name || !isOperationName(name)) {
    t.errors.push_back("the operation registered at " + where +
                       " has the invalid name '" + (name ? name : "") +
                       "'; names match [A-Za-z_][A-Za-z0-9_.-]*");
    return;
  }
  if (!fn) {
    t.errors.push_back("operation @" + std::string(name) +
                       " is registered without a function at " + where);
    return;
  }
  auto [it, inserted] = t.operations.try_emplace(name, Entry{fn, where});
  if (!inserted)
    t.errors.push_back("operation @" + std::string(name) +
                       " is registered twice, at " + it->second.where +
                       " and at " + where);
}

OperationFn flexpipe::rt::findOperation(const std::string &name) {
  auto it = table().operations.find(name);
  return it == table().operations.end() ? nullptr : it->second.fn;
}

std::vector<std::string> flexpipe::rt::registeredOperations() {
  std::vector<std::string> names;
  for (const auto &entry : table().operations)
    names.push_back(entry.first);
  return names;
}

std::vector<std::string> flexpipe::rt::registrationErrors() {
  return table().errors;
}

std::string flexpipe::rt::decodeOpAttributes(
    const std::string &encoded,
    std::map<std::string, OpAttribute> &attributes) {
  attributes.clear();
  size_t at = 0;
  while (at < encoded.size()) {
    size_t end = encoded.find(' ', at);
    if (end == std::string::npos)
      end = encoded.size();
    const std::string entry = encoded.substr(at, end - at);
    at = end + 1;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || entry.size() < eq + 3 ||
        entry[eq + 2] != ':')
      return "malformed attribute '" + entry + "' (expected KEY=K:VALUE)";
    OpAttribute attribute;
    std::string key;
    if (!unescapeDescriptionText(entry.substr(0, eq), key) ||
        !unescapeDescriptionText(entry.substr(eq + 3), attribute.text))
      return "malformed escape in attribute '" + entry + "'";
    char *rest = nullptr;
    errno = 0;
    switch (entry[eq + 1]) {
    case 's':
      attribute.kind = OpAttribute::Kind::String;
      break;
    case 'i':
      attribute.kind = OpAttribute::Kind::Integer;
      std::strtoll(attribute.text.c_str(), &rest, 10);
      if (attribute.text.empty() || *rest != '\0' || errno == ERANGE)
        return "attribute '" + key + "' is not a 64-bit integer: '" +
               attribute.text + "'";
      break;
    case 'f':
      attribute.kind = OpAttribute::Kind::Float;
      std::strtod(attribute.text.c_str(), &rest);
      if (attribute.text.empty() || *rest != '\0')
        return "attribute '" + key + "' is not a float: '" + attribute.text +
               "'";
      break;
    case 'b':
      attribute.kind = OpAttribute::Kind::Bool;
      if (attribute.text != "true" && attribute.text != "false")
        return "attribute '" + key + "' is not true or false: '" +
               attribute.text + "'";
      break;
    case 'u':
      attribute.kind = OpAttribute::Kind::Unit;
      if (!attribute.text.empty())
        return "unit attribute '" + key + "' has a value";
      break;
    default:
      return "attribute '" + key + "' has the unknown kind '" +
             std::string(1, entry[eq + 1]) + "' (s, i, f, b or u)";
    }
    if (!attributes.emplace(key, attribute).second)
      return "attribute '" + key + "' is given twice";
  }
  return {};
}

//===----------------------------------------------------------------------===//
// OpContext
//===----------------------------------------------------------------------===//

TensorView OpContext::getOutput(int64_t mb) const {
  if (mb < place.microbatch || mb >= place.microbatch + place.numMicrobatches)
    fail("asks for the output of micro-batch " + std::to_string(mb) +
         ", which the instance does not cover (it covers " +
         std::to_string(place.microbatch) + " to " +
         std::to_string(place.microbatch + place.numMicrobatches - 1) + ")");
  return host.output(mb);
}

void OpContext::fail(const std::string &message) const {
  host.fail("operation @" + place.name + " on stage " +
            std::to_string(place.stage) + " mb " +
            std::to_string(place.microbatch) + " (rank " +
            std::to_string(place.rank) + ", iteration " +
            std::to_string(place.iteration) + "): " + message);
  std::abort(); // not reached: the host stops the process
}

const OpAttribute &OpContext::require(const std::string &key,
                                      const char *kind) const {
  auto it = attributes.find(key);
  if (it == attributes.end())
    fail(std::string("needs ") + kind + " attribute '" + key + "' (attrs {" +
         key + " = ...} on its flexpipe.instruction)");
  return it->second;
}

std::string OpContext::getString(const std::string &key) const {
  const OpAttribute &a = require(key, "the string");
  if (a.kind != OpAttribute::Kind::String)
    fail("attribute '" + key + "' is " + kindName(a.kind) + ", not a string");
  return a.text;
}

std::string OpContext::getString(const std::string &key,
                                 const std::string &fallback) const {
  return hasAttribute(key) ? getString(key) : fallback;
}

int64_t OpContext::getInt(const std::string &key) const {
  const OpAttribute &a = require(key, "the integer");
  if (a.kind != OpAttribute::Kind::Integer)
    fail("attribute '" + key + "' is " + kindName(a.kind) + ", not an integer");
  return std::strtoll(a.text.c_str(), nullptr, 10);
}

int64_t OpContext::getInt(const std::string &key, int64_t fallback) const {
  return hasAttribute(key) ? getInt(key) : fallback;
}

double OpContext::getFloat(const std::string &key) const {
  const OpAttribute &a = require(key, "the float");
  if (a.kind != OpAttribute::Kind::Float &&
      a.kind != OpAttribute::Kind::Integer)
    fail("attribute '" + key + "' is " + kindName(a.kind) +
         ", not a float or an integer");
  return std::strtod(a.text.c_str(), nullptr);
}

double OpContext::getFloat(const std::string &key, double fallback) const {
  return hasAttribute(key) ? getFloat(key) : fallback;
}

bool OpContext::getBool(const std::string &key) const {
  const OpAttribute &a = require(key, "the boolean");
  if (a.kind == OpAttribute::Kind::Unit)
    return true;
  if (a.kind != OpAttribute::Kind::Bool)
    fail("attribute '" + key + "' is " + kindName(a.kind) + ", not a boolean");
  return a.text == "true";
}

bool OpContext::getBool(const std::string &key, bool fallback) const {
  return hasAttribute(key) ? getBool(key) : fallback;
}
