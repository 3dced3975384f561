#pragma once
// The parsed form of a Jinja template: expressions and statements.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "launch/jinja/value.hpp"

namespace aerie::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args
    kDict,      // args: key, value, key, value, ...
    kAttr,      // args[0].name
    kIndex,     // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]], parts may be null
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..])
    kUnary,     // name ("-", "+", "not") args[0]
    kBinary,    // args[0] name args[1]: + - * / // % ** ~ == != < > <= >= in "not in" and or
    kCond,      // args[1] if args[0] else args[2] (args[2] may be null)
  } kind = kLiteral;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negate = false;  // kTest: "is not"
  int line = 0;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kBreak, kContinue, kMacro } kind = kText;
  std::string text;                                  // kText
  ExprPtr expr;                                      // kOutput value, kFor iterable, kSet value
  std::vector<std::pair<ExprPtr, Body>> branches;    // kIf: (condition, body); else has no condition
  std::vector<std::string> targets;                  // kFor loop names, kSet / kSetBlock name, kMacro name + parameters
  std::string attr;                                  // kSet: "ns.attr" assigns attr of targets[0]
  ExprPtr filter;                                    // kFor: "for x in xs if filter"
  std::vector<ExprPtr> defaults;                     // kMacro: parameter defaults (null: none)
  Body body, else_body;                              // kFor / kSetBlock / kMacro body; kFor's else
  int line = 0;
};

}  // namespace aerie::jinja
