#include "server/config_yaml.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>

namespace sluice::server::internal {
namespace {

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string JoinNames(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

bool IsPlain(const YAML::Node& node) { return node.Tag() == "?"; }

}  // namespace

std::string Where(const std::string& file, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::unexpected<Error> ErrorAt(const std::string& file, const YAML::Node& node,
                               std::string_view message) {
  return MakeError(Where(file, node) + ": " + std::string(message));
}

std::string_view Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "empty";
}

Result<std::string> ReadFileText(const std::string& file, size_t max_bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
  if (!f) return MakeError(file + ": cannot read: " + std::strerror(errno));
  std::string text;
  char buf[65536];
  for (;;) {
    const size_t n = std::fread(buf, 1, sizeof buf, f.get());
    text.append(buf, n);
    if (text.size() > max_bytes) {
      return MakeError(file + ": larger than " + std::to_string(max_bytes >> 20) +
                       " MiB; split it into several files");
    }
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get())) return MakeError(file + ": cannot read: " + std::strerror(errno));
  return text;
}

Result<YAML::Node> ParseDocument(const std::string& file, const std::string& text) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return MakeError(file + ": invalid YAML: " + e.msg);
    return MakeError(file + ":" + std::to_string(e.mark.line + 1) + ":" +
                     std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
  }
  if (docs.empty() || (docs.size() == 1 && docs[0].IsNull())) {
    return MakeError(file + ": empty file (expected a mapping)");
  }
  if (docs.size() > 1) {
    return ErrorAt(file, docs[1], "a second YAML document; put one per file");
  }
  return docs[0];
}

Result<Fields> Fields::Of(const std::string& file, const YAML::Node& map, std::string_view what,
                          std::initializer_list<std::string_view> allowed,
                          std::initializer_list<std::string_view> unsupported) {
  if (!map.IsMap()) {
    return ErrorAt(file, map,
                   std::string(what) + " must be a mapping, not " + std::string(Describe(map)));
  }
  Fields fields;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      return ErrorAt(
          file, key,
          "a key in " + std::string(what) + " must be a name, not " + std::string(Describe(key)));
    }
    const std::string& name = key.Scalar();
    if (fields.Get(name)) {
      return ErrorAt(file, key,
                     "field " + Quote(name) + " appears twice in " + std::string(what) +
                         " (first at " + Where(file, fields.KeyOf(name)) + ")");
    }
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == name;
    if (!ok) {
      for (std::string_view u : unsupported) {
        if (u == name) {
          return ErrorAt(file, key,
                         Quote(name) +
                             " is an envoyproxy/ratelimit field sluice does not "
                             "support (yet); remove it");
        }
      }
      return ErrorAt(file, key,
                     "unknown field " + Quote(name) + " in " + std::string(what) +
                         " (expected one of: " + JoinNames(allowed) + ")");
    }
    fields.fields_.emplace_back(key, it->second);
  }
  return fields;
}

std::optional<YAML::Node> Fields::Get(std::string_view name) const {
  for (const auto& [k, v] : fields_) {
    if (k.Scalar() == name) return v;
  }
  return std::nullopt;
}

YAML::Node Fields::KeyOf(std::string_view name) const {
  for (const auto& [k, v] : fields_) {
    if (k.Scalar() == name) return k;
  }
  return YAML::Node();
}

Result<std::string> ReadString(const std::string& file, const YAML::Node& node,
                               std::string_view what, size_t max_bytes) {
  if (!node.IsScalar()) {
    return ErrorAt(file, node,
                   std::string(what) + " must be a string, not " + std::string(Describe(node)));
  }
  const std::string& s = node.Scalar();
  if (s.empty()) return ErrorAt(file, node, std::string(what) + " must not be empty");
  if (s.size() > max_bytes) {
    return ErrorAt(file, node,
                   std::string(what) + " is longer than " + std::to_string(max_bytes) + " bytes");
  }
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return ErrorAt(file, node, std::string(what) + " contains a control character");
    }
  }
  return s;
}

Result<int64_t> ReadInt(const std::string& file, const YAML::Node& node, std::string_view what) {
  if (!node.IsScalar() || !IsPlain(node)) {
    const std::string_view kind = node.IsScalar() ? "a quoted string" : Describe(node);
    return ErrorAt(file, node, std::string(what) + " must be an integer, not " + std::string(kind));
  }
  const std::string& s = node.Scalar();
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return ErrorAt(file, node, std::string(what) + " " + s + " is out of range");
  }
  if (ec != std::errc() || end != s.data() + s.size()) {
    return ErrorAt(file, node, std::string(what) + " must be an integer, not " + Quote(s));
  }
  return value;
}

Result<bool> ReadBool(const std::string& file, const YAML::Node& node, std::string_view what) {
  if (node.IsScalar() && IsPlain(node)) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  const std::string shown = node.IsScalar() ? Quote(node.Scalar()) : std::string(Describe(node));
  return ErrorAt(file, node, std::string(what) + " must be true or false, not " + shown);
}

}  // namespace sluice::server::internal
