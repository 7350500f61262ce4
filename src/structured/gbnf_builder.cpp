#include "structured/gbnf_builder.h"

#include <cstdio>

namespace loom::structured {

std::string GbnfBuilder::unique_name(std::string_view name) {
  std::string base;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    base += ok ? c : '-';
  }
  if (base.empty()) base = "r";
  if (!rules_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "-" + std::to_string(i);
    if (!rules_.count(n)) return n;
  }
}

std::string GbnfBuilder::add_rule(std::string_view name, std::string_view body) {
  std::string n = unique_name(name);
  rules_[n] = std::string(body);
  order_.push_back(n);
  return n;
}

std::string GbnfBuilder::reserve(std::string_view name) {
  std::string n = unique_name(name);
  rules_[n] = "";
  order_.push_back(n);
  return n;
}

void GbnfBuilder::define(const std::string& reserved_name, std::string_view body) {
  rules_[reserved_name] = std::string(body);
}

std::string GbnfBuilder::str() const {
  std::string out;
  auto emit = [&](const std::string& n) { out += n + " ::= " + rules_.at(n) + "\n"; };
  if (rules_.count("root")) emit("root");
  for (const std::string& n : order_)
    if (n != "root") emit(n);
  return out;
}

std::string GbnfBuilder::literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02X", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace loom::structured
