#include "cli/lvm_report_select.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>

namespace volstack::cli::lvmcli {

namespace {

enum class Op { kMatch, kNotMatch, kEq, kNe, kGe, kGt, kLe, kLt };

// The value of a number, size or percent cell ("" -> nullopt).
std::optional<double> CellNumber(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  return v;
}

// lvm2's "close enough" for sizes given with decimals (7.34M against 7340032 bytes).
bool Equal(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

}  // namespace

struct Selection::Node {
  enum class Kind { kAnd, kOr, kNot, kCmp } kind = Kind::kCmp;
  std::vector<std::shared_ptr<const Node>> children;
  // kCmp
  FieldRef field;
  Op op = Op::kEq;
  std::string text;
  double number = 0;
  std::shared_ptr<std::regex> regex;

  bool Eval(const FieldValue& value) const {
    switch (kind) {
      case Kind::kAnd:
        for (const auto& c : children) {
          if (!c->Eval(value)) return false;
        }
        return true;
      case Kind::kOr:
        for (const auto& c : children) {
          if (c->Eval(value)) return true;
        }
        return false;
      case Kind::kNot:
        return !children[0]->Eval(value);
      case Kind::kCmp:
        break;
    }
    const std::string cell = value(field.index);
    if (field.type == FieldType::kString) {
      switch (op) {
        case Op::kEq:
          return cell == text;
        case Op::kNe:
          return cell != text;
        case Op::kMatch:
          return std::regex_search(cell, *regex);
        case Op::kNotMatch:
          return !std::regex_search(cell, *regex);
        default:
          return false;
      }
    }
    const auto v = CellNumber(cell);
    if (!v) return op == Op::kNe;  // an undefined value equals nothing
    switch (op) {
      case Op::kEq:
        return Equal(*v, number);
      case Op::kNe:
        return !Equal(*v, number);
      case Op::kGe:
        return *v >= number || Equal(*v, number);
      case Op::kGt:
        return *v > number && !Equal(*v, number);
      case Op::kLe:
        return *v <= number || Equal(*v, number);
      case Op::kLt:
        return *v < number && !Equal(*v, number);
      default:
        return false;
    }
  }
};

namespace {

class Parser {
 public:
  Parser(std::string_view text, const FieldResolver& resolve, std::vector<int>* fields)
      : s_(text), resolve_(resolve), fields_(fields) {}

  Result<std::shared_ptr<const Selection::Node>> Parse() {
    VS_ASSIGN_OR_RETURN(auto root, Or());
    SkipSpace();
    if (pos_ < s_.size()) {
      return Error(s_[pos_] == ')' ? "Unexpected right parenthesis" : "Expecting logical operator");
    }
    return root;
  }

 private:
  using NodePtr = std::shared_ptr<const Selection::Node>;
  using Kind = Selection::Node::Kind;

  Status Error(const std::string& what, size_t at = std::string::npos) const {
    const size_t from = std::min(at == std::string::npos ? pos_ : at, s_.size());
    return Status::InvalidArgument(what + "\nSelection syntax error at '" +
                                   std::string(s_.substr(from)) +
                                   "'.\nUse 'help' for selection to get more help.");
  }

  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) pos_++;
  }

  bool Eat(std::string_view token) {
    SkipSpace();
    if (s_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  NodePtr Join(Kind kind, std::vector<NodePtr> children) {
    if (children.size() == 1) return children[0];
    auto n = std::make_shared<Selection::Node>();
    n->kind = kind;
    n->children = std::move(children);
    return n;
  }

  Result<NodePtr> Or() {
    std::vector<NodePtr> terms;
    while (true) {
      VS_ASSIGN_OR_RETURN(auto t, And());
      terms.push_back(std::move(t));
      if (!Eat("||") && !Eat("#")) break;
    }
    return Join(Kind::kOr, std::move(terms));
  }

  Result<NodePtr> And() {
    std::vector<NodePtr> terms;
    while (true) {
      VS_ASSIGN_OR_RETURN(auto t, Unary());
      terms.push_back(std::move(t));
      if (!Eat("&&") && !Eat(",")) break;
    }
    return Join(Kind::kAnd, std::move(terms));
  }

  Result<NodePtr> Group() {
    if (++depth_ > 64) return Error("Selection nested too deeply");
    VS_ASSIGN_OR_RETURN(auto inner, Or());
    if (!Eat(")")) return Error("Missing right parenthesis");
    depth_--;
    return inner;
  }

  Result<NodePtr> Unary() {
    SkipSpace();
    if (Eat("!")) {
      if (!Eat("("))
        return Error("Syntax error: left parenthesis expected at '" + std::string(s_.substr(pos_)) +
                     "'");
      VS_ASSIGN_OR_RETURN(auto inner, Group());
      auto n = std::make_shared<Selection::Node>();
      n->kind = Kind::kNot;
      n->children = {std::move(inner)};
      return NodePtr(n);
    }
    if (Eat("(")) return Group();
    return Comparison();
  }

  Result<NodePtr> Comparison() {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      pos_++;
    }
    if (pos_ == start) return Error("Expecting field name");
    const std::string name(s_.substr(start, pos_ - start));
    auto field = resolve_(name);
    if (!field) return Error("Unrecognised selection field: " + name, start);
    auto n = std::make_shared<Selection::Node>();
    n->field = *field;
    static const std::pair<const char*, Op> kOps[] = {
        {"=~", Op::kMatch}, {"!~", Op::kNotMatch}, {"!=", Op::kNe}, {">=", Op::kGe},
        {"<=", Op::kLe},    {"=", Op::kEq},        {">", Op::kGt},  {"<", Op::kLt}};
    bool found = false;
    for (const auto& [tok, op] : kOps) {
      if (Eat(tok)) {
        n->op = op;
        found = true;
        break;
      }
    }
    if (!found)
      return Error("Unrecognised comparison operator: " + std::string(s_.substr(pos_, 2)), start);
    VS_ASSIGN_OR_RETURN(n->text, Value(start));
    const std::string where = std::string(s_.substr(start, pos_ - start));
    const bool string_op = n->op == Op::kMatch || n->op == Op::kNotMatch;
    const bool order_op = n->op != Op::kEq && n->op != Op::kNe && !string_op;
    if (field->type == FieldType::kString) {
      if (order_op) {
        return Error(
            "Operator can be used only with number, size, time or percent fields: " + where, start);
      }
      if (string_op) {
        try {
          n->regex = std::make_shared<std::regex>(n->text, std::regex::extended);
        } catch (const std::regex_error&) {
          return Error("Failed to parse regex value for selection field " + name + ".", start);
        }
      }
    } else {
      if (string_op) {
        return Error("Operator can be used only with string or string list fields: " + where,
                     start);
      }
      auto v = ParseNumber(n->text, field->type);
      if (!v)
        return Error("Failed to parse numeric value for selection field " + name + ".", start);
      n->number = *v;
    }
    fields_->push_back(field->index);
    return NodePtr(n);
  }

  // A number; sizes take an optional unit (MiB when absent), percents an optional '%'.
  static std::optional<double> ParseNumber(const std::string& text, FieldType type) {
    if (text.empty()) return std::nullopt;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || !std::isfinite(v)) return std::nullopt;
    std::string_view rest(end);
    if (type == FieldType::kPercent) {
      if (rest == "%") rest = {};
    } else if (type == FieldType::kSize) {
      double unit = 1024.0 * 1024.0;
      if (rest.size() == 1) {
        static const std::string_view kUnits = "kmgtpe";
        const char c = rest[0];
        const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == 'b') {
          unit = 1;
        } else if (lower == 's') {
          unit = 512;
        } else if (size_t p = kUnits.find(lower); p != std::string_view::npos) {
          unit = std::pow(c == lower ? 1024.0 : 1000.0, static_cast<double>(p + 1));
        } else {
          return std::nullopt;
        }
        rest = {};
      }
      v *= unit;
    }
    if (!rest.empty()) return std::nullopt;
    return v;
  }

  Result<std::string> Value(size_t start) {
    SkipSpace();
    if (pos_ < s_.size() && (s_[pos_] == '"' || s_[pos_] == '\'')) {
      const char q = s_[pos_];
      const size_t end = s_.find(q, pos_ + 1);
      if (end == std::string_view::npos) return Error("Missing end quote", start);
      std::string v(s_.substr(pos_ + 1, end - pos_ - 1));
      pos_ = end + 1;
      return v;
    }
    if (pos_ < s_.size() && (s_[pos_] == '[' || s_[pos_] == '{')) {
      return Error("String lists are not supported in selection", start);
    }
    const size_t from = pos_;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (std::isspace(static_cast<unsigned char>(c)) || c == ')' || c == ',' || c == '#' ||
          s_.substr(pos_, 2) == "&&" || s_.substr(pos_, 2) == "||") {
        break;
      }
      pos_++;
    }
    if (pos_ == from) return Error("Expecting value", start);
    return std::string(s_.substr(from, pos_ - from));
  }

  std::string_view s_;
  const FieldResolver& resolve_;
  std::vector<int>* fields_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Selection> Selection::Parse(std::string_view text, const FieldResolver& resolve) {
  Selection sel;
  Parser p(text, resolve, &sel.fields_);
  VS_ASSIGN_OR_RETURN(sel.root_, p.Parse());
  return sel;
}

bool Selection::Matches(const FieldValue& value) const { return root_->Eval(value); }

Result<std::vector<SortKey>> ParseSortKeys(const std::vector<std::string>& args,
                                           const FieldResolver& resolve) {
  std::vector<SortKey> keys;
  for (const auto& arg : args) {
    size_t start = 0;
    while (start <= arg.size()) {
      size_t comma = arg.find(',', start);
      if (comma == std::string::npos) comma = arg.size();
      std::string name = arg.substr(start, comma - start);
      start = comma + 1;
      if (name.empty()) continue;
      SortKey k;
      if (name[0] == '-' || name[0] == '+') {
        k.descending = name[0] == '-';
        name = name.substr(1);
      }
      auto f = resolve(name);
      if (!f) return Status::InvalidArgument("Unrecognised field: " + name);
      k.field = *f;
      keys.push_back(k);
    }
  }
  return keys;
}

int CompareRows(const std::vector<SortKey>& keys, const FieldValue& a, const FieldValue& b) {
  for (const auto& k : keys) {
    const std::string va = a(k.field.index), vb = b(k.field.index);
    int c = 0;
    if (k.field.type == FieldType::kString) {
      c = va.compare(vb);
    } else {
      const double na = CellNumber(va).value_or(-1), nb = CellNumber(vb).value_or(-1);
      c = na < nb ? -1 : na > nb ? 1 : 0;
    }
    if (c != 0) return k.descending ? -c : c;
  }
  return 0;
}

}  // namespace volstack::cli::lvmcli
