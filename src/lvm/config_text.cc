#include "lvm/config_text.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace volstack::lvm {

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Status ParseItems(ConfigNode* parent, int depth, bool top) {
    if (depth > kMaxConfigDepth) return Error("sections nested too deeply");
    while (true) {
      const int newlines = SkipSpace();
      if (pos_ >= s_.size()) {
        if (top) return Status::Ok();
        return Error("unexpected end of text inside section '" + parent->key + "'");
      }
      if (s_[pos_] == '}') {
        if (top) return Error("unbalanced '}'");
        pos_++;
        return Status::Ok();
      }
      if (++nodes_ > kMaxNodes) return Error("too many items");
      ConfigNode node;
      node.blank_before = newlines >= 2;
      VS_ASSIGN_OR_RETURN(node.key, Identifier());
      node.compact = pos_ < s_.size() && s_[pos_] == '=';
      SkipSpace();
      if (pos_ >= s_.size()) return Error("unexpected end of text after '" + node.key + "'");
      if (s_[pos_] == '{') {
        pos_++;
        node.is_section = true;
        VS_RETURN_IF_ERROR(ParseItems(&node, depth + 1, false));
      } else if (s_[pos_] == '=') {
        pos_++;
        VS_RETURN_IF_ERROR(ParseValue(&node));
      } else {
        return Error("expected '=' or '{' after '" + node.key + "'");
      }
      parent->children.push_back(std::move(node));
    }
  }

 private:
  static constexpr size_t kMaxNodes = 1 << 20;

  Status Error(const std::string& what) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); i++) line += s_[i] == '\n';
    return Status::Corruption("metadata text line " + std::to_string(line) + ": " + what);
  }

  // Returns how many line ends it skipped.
  int SkipSpace() {
    int newlines = 0;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') pos_++;
      } else if (std::isspace(static_cast<unsigned char>(c)) || c == '\0') {
        newlines += c == '\n';
        pos_++;
      } else {
        break;
      }
    }
    return newlines;
  }

  Result<std::string> Identifier() {
    size_t start = pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (std::isspace(static_cast<unsigned char>(c)) || c == '#' || c == '=' || c == '{' ||
          c == '}' || c == '\0') {
        break;
      }
      pos_++;
    }
    if (pos_ == start) return Error("expected a key");
    return std::string(s_.substr(start, pos_ - start));
  }

  Status ParseValue(ConfigNode* node) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '[') {
      pos_++;
      node->is_array = true;
      bool multiline = SkipSpace() > 0;
      if (pos_ < s_.size() && s_[pos_] == ']') {
        pos_++;
        return Status::Ok();
      }
      uint32_t row = 0;  // values on the current line
      auto finish = [&] {
        if (!multiline) return;
        if (row > 0) node->rows.push_back(row);
      };
      while (true) {
        if (node->values.size() >= kMaxNodes) return Error("array too long");
        VS_ASSIGN_OR_RETURN(auto v, Scalar());
        node->values.push_back(std::move(v));
        row++;
        SkipSpace();
        if (pos_ >= s_.size()) return Error("unterminated array");
        if (s_[pos_] == ']') {
          pos_++;
          finish();
          return Status::Ok();
        }
        if (s_[pos_] != ',') return Error("expected ',' or ']' in array");
        pos_++;
        if (SkipSpace() > 0) {
          node->rows.push_back(row);
          multiline = true;
          row = 0;
        }
        if (pos_ < s_.size() && s_[pos_] == ']') {  // trailing comma
          pos_++;
          finish();
          return Status::Ok();
        }
      }
    }
    VS_ASSIGN_OR_RETURN(auto v, Scalar());
    node->values.push_back(std::move(v));
    return Status::Ok();
  }

  Result<ConfigValue> Scalar() {
    SkipSpace();
    if (pos_ >= s_.size()) return Error("expected a value");
    ConfigValue v;
    char c = s_[pos_];
    if (c == '"') {
      pos_++;
      while (true) {
        if (pos_ >= s_.size()) return Error("unterminated string");
        char d = s_[pos_++];
        if (d == '"') break;
        if (d == '\\') {
          if (pos_ >= s_.size()) return Error("unterminated string");
          d = s_[pos_++];
        }
        v.text += d;
      }
      return v;
    }
    if (c == '\'') {
      pos_++;
      size_t end = s_.find('\'', pos_);
      if (end == std::string_view::npos) return Error("unterminated string");
      v.text = std::string(s_.substr(pos_, end - pos_));
      pos_ = end + 1;
      return v;
    }
    size_t start = pos_;
    while (pos_ < s_.size()) {
      char d = s_[pos_];
      if (std::isspace(static_cast<unsigned char>(d)) || d == ',' || d == ']' || d == '#' ||
          d == '}' || d == '{' || d == '=' || d == '\0' || d == '[' || d == '"') {
        break;
      }
      pos_++;
    }
    if (pos_ == start) return Error("expected a value");
    std::string word(s_.substr(start, pos_ - start));
    size_t digits_from = (word[0] == '-' || word[0] == '+') ? 1 : 0;
    bool numeric = word.size() > digits_from;
    int dots = 0;
    for (size_t i = digits_from; i < word.size(); i++) {
      if (word[i] == '.') {
        dots++;
      } else if (!std::isdigit(static_cast<unsigned char>(word[i]))) {
        numeric = false;
      }
    }
    if (numeric && dots == 0) {
      errno = 0;
      char* end = nullptr;
      long long n = std::strtoll(word.c_str(), &end, 10);
      if (errno == ERANGE || *end != '\0')
        return Error("number out of range: " + word.substr(0, 40));
      v.type = ConfigValue::Type::kInt;
      v.integer = n;
    } else if (numeric && dots == 1) {
      v.type = ConfigValue::Type::kFloat;
      v.text = word;
    } else {
      v.text = word;  // a bare string
    }
    return v;
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t nodes_ = 0;
};

}  // namespace

const ConfigNode* ConfigNode::Find(std::string_view k) const {
  const ConfigNode* found = nullptr;
  for (const auto& c : children) {
    if (c.key == k) found = &c;
  }
  return found;
}

const ConfigNode* ConfigNode::FindSection(std::string_view k) const {
  const ConfigNode* n = Find(k);
  return n && n->is_section ? n : nullptr;
}

Result<int64_t> ConfigNode::GetInt(std::string_view k) const {
  const ConfigNode* n = Find(k);
  if (!n) return Status::NotFound("'" + key + "': missing '" + std::string(k) + "'");
  if (n->is_section || n->is_array || n->values.size() != 1 ||
      n->values[0].type != ConfigValue::Type::kInt) {
    return Status::Corruption("'" + key + "': '" + std::string(k) + "' is not an integer");
  }
  return n->values[0].integer;
}

Result<uint64_t> ConfigNode::GetUint(std::string_view k, uint64_t max) const {
  VS_ASSIGN_OR_RETURN(int64_t v, GetInt(k));
  if (v < 0 || static_cast<uint64_t>(v) > max) {
    return Status::Corruption("'" + key + "': '" + std::string(k) + "' out of range (" +
                              std::to_string(v) + ")");
  }
  return static_cast<uint64_t>(v);
}

Result<std::string> ConfigNode::GetString(std::string_view k) const {
  const ConfigNode* n = Find(k);
  if (!n) return Status::NotFound("'" + key + "': missing '" + std::string(k) + "'");
  if (n->is_section || n->is_array || n->values.size() != 1 ||
      n->values[0].type != ConfigValue::Type::kString) {
    return Status::Corruption("'" + key + "': '" + std::string(k) + "' is not a string");
  }
  return n->values[0].text;
}

Result<std::vector<std::string>> ConfigNode::GetStringList(std::string_view k) const {
  const ConfigNode* n = Find(k);
  if (!n) return Status::NotFound("'" + key + "': missing '" + std::string(k) + "'");
  if (n->is_section) {
    return Status::Corruption("'" + key + "': '" + std::string(k) + "' is a section");
  }
  std::vector<std::string> out;
  for (const auto& v : n->values) {
    if (v.type != ConfigValue::Type::kString) {
      return Status::Corruption("'" + key + "': '" + std::string(k) + "' holds a non-string");
    }
    out.push_back(v.text);
  }
  return out;
}

Result<ConfigNode> ParseConfig(std::string_view text) {
  if (text.size() > kMaxConfigTextSize) return Status::Corruption("metadata text too large");
  ConfigNode root;
  root.is_section = true;
  Parser parser(text);
  VS_RETURN_IF_ERROR(parser.ParseItems(&root, 0, true));
  return root;
}

namespace {

std::string FormatValue(const ConfigValue& v) {
  switch (v.type) {
    case ConfigValue::Type::kInt:
      return std::to_string(v.integer);
    case ConfigValue::Type::kFloat:
      return v.text;
    case ConfigValue::Type::kString:
      break;
  }
  return QuoteConfigString(v.text);
}

}  // namespace

void WriteConfigItem(const ConfigNode& node, int indent, bool tabs, std::string* out) {
  auto line = [&](int depth, const std::string& s) {
    if (tabs) out->append(depth, '\t');
    *out += s;
    *out += '\n';
  };
  if (node.blank_before) *out += '\n';
  if (node.is_section) {
    line(indent, node.key + " {");
    for (const auto& c : node.children) WriteConfigItem(c, indent + 1, tabs, out);
    line(indent, "}");
    return;
  }
  const std::string assign = node.key + (node.compact ? "=" : " = ");
  if (!node.is_array) {
    line(indent, assign + (node.values.empty() ? "\"\"" : FormatValue(node.values[0])));
    return;
  }
  auto join = [&](size_t from, size_t n) {
    std::string s;
    for (size_t i = from; i < from + n && i < node.values.size(); i++) {
      s += (i > from ? (node.compact ? "," : ", ") : "") + FormatValue(node.values[i]);
    }
    return s;
  };
  if (node.rows.empty() || node.values.empty()) {
    line(indent, assign + "[" + join(0, node.values.size()) + "]");
    return;
  }
  // lvm2's area lists (out_areas): "[" alone, one line per area, "," after all but the last.
  line(indent, assign + "[");
  size_t at = 0;
  for (size_t r = 0; r < node.rows.size() && at < node.values.size(); r++) {
    const size_t n = r + 1 == node.rows.size() ? node.values.size() - at : node.rows[r];
    if (n == 0) continue;
    line(indent + 1, join(at, n) + (at + n < node.values.size() ? "," : ""));
    at += n;
  }
  line(indent, "]");
}

std::string QuoteConfigString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace volstack::lvm
