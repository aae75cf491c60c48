#include "config/config_yaml.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "util/ascii.h"

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

std::unexpected<Error> EmptyItemError(const std::string& file, const YAML::Node& list, size_t index,
                                      std::string_view what) {
  return ErrorAt(file, list,
                 "item " + std::to_string(index + 1) + " of this list is empty (expected " +
                     std::string(what) + ")");
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

namespace {

std::string FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::string> ReadFileText(const std::string& file, size_t max_bytes) {
  // Non-blocking, so that opening a FIFO (or a device) returns at once instead of waiting for a
  // writer forever, on the thread that also takes SIGTERM; then only a regular file (symlinks
  // followed: Kubernetes mounts ConfigMaps through them) is read.
  const Fd f{::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) return MakeError(file + ": cannot read: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return MakeError(file + ": cannot read: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return MakeError(file + ": not a regular file (" + FileKind(st.st_mode) +
                     "); a config or plan file must be one, or a symlink to one");
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError(file + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      return MakeError(file + ": larger than " + std::to_string(max_bytes >> 20) +
                       " MiB; split it into several files");
    }
  }
  return text;
}

namespace {

// Where each document's root node starts, for at most two documents. yaml-cpp 0.7's LoadAll
// never returns on some inputs (it keeps finding empty documents: tests/fuzz/unfixed has two,
// found by fuzzing), so the documents are counted with the event parser first, and stopped at
// the second: a file holds one.
class RootMarks final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> roots;

  void OnDocumentStart(const YAML::Mark&) override { root_pending_ = true; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& mark) {
    if (root_pending_) roots.push_back(mark);
    root_pending_ = false;
  }
  bool root_pending_ = false;
};

std::unexpected<Error> InvalidYaml(const std::string& file, const YAML::Exception& e) {
  if (e.mark.is_null()) return MakeError(file + ": invalid YAML: " + e.msg);
  return MakeError(file + ":" + std::to_string(e.mark.line + 1) + ":" +
                   std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
}

}  // namespace

Result<YAML::Node> ParseDocument(const std::string& file, const std::string& text) {
  RootMarks marks;
  size_t documents = 0;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (documents < 2 && parser.HandleNextDocument(marks)) ++documents;
  } catch (const YAML::Exception& e) {
    return InvalidYaml(file, e);
  }
  if (documents > 1) {
    const YAML::Mark& at = marks.roots.size() > 1 ? marks.roots[1] : YAML::Mark::null_mark();
    const std::string where = at.is_null() ? file
                                           : file + ":" + std::to_string(at.line + 1) + ":" +
                                                 std::to_string(at.column + 1);
    return MakeError(where + ": a second YAML document; put one per file");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);  // the one document, which the parser above has read to its end
  } catch (const YAML::Exception& e) {
    return InvalidYaml(file, e);
  }
  if (documents == 0 || root.IsNull()) return MakeError(file + ": empty file (expected a mapping)");
  return root;
}

void WarnAt(Warnings& warnings, const std::string& file, const YAML::Node& node,
            std::string_view message) {
  warnings.push_back(Where(file, node) + ": " + std::string(message));
}

bool IsUpstreamKey(std::string_view name) {
  static constexpr std::string_view kKeys[] = {"domain",
                                               "key",
                                               "value",
                                               "descriptors",
                                               "rate_limit",
                                               "unit",
                                               "requests_per_unit",
                                               "unlimited",
                                               "shadow_mode",
                                               "quota_mode",
                                               "name",
                                               "replaces",
                                               "detailed_metric",
                                               "value_to_metric",
                                               "share_threshold",
                                               "metadata"};
  for (std::string_view k : kKeys) {
    if (k == name) return true;
  }
  return false;
}

namespace {

// Merges may nest (a merged mapping with its own `<<`); yaml-cpp lets an anchor refer to
// itself, so the depth is bounded rather than trusted.
constexpr int kMaxMergeDepth = 32;
// Merging the same anchors at every level multiplies the work; a plan file's million
// identities plus room for merges is far more than a real config needs.
constexpr size_t kMaxMergedEntries = 4'000'000;

bool IsMergeKey(const YAML::Node& key) {
  return key.Scalar() == "<<" && (IsPlain(key) || key.Tag() == "tag:yaml.org,2002:merge");
}

class MergeExpander {
 public:
  MergeExpander(const std::string& file, std::string_view what, std::string_view noun)
      : file_(file), what_(what), noun_(noun) {}

  Result<void> Add(const YAML::Node& map, int depth) {
    if (depth > kMaxMergeDepth) {
      return ErrorAt(
          file_, map,
          "merge keys (<<) nest deeper than " + std::to_string(kMaxMergeDepth) + " levels");
    }
    const int owner = next_owner_++;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      if (++visited_ > kMaxMergedEntries) {
        return ErrorAt(file_, key, "merge keys (<<) expand to too many entries");
      }
      if (!key.IsScalar()) {
        return ErrorAt(file_, key,
                       "a key in " + std::string(what_) + " must be a name, not " +
                           std::string(Describe(key)));
      }
      if (IsMergeKey(key)) {
        if (auto ok = Merge(key, it->second, depth); !ok) return ok;
        continue;
      }
      if (auto ok = Set(key, it->second, owner); !ok) return ok;
    }
    return {};
  }

  std::vector<Entry> Take() { return std::move(entries_); }

 private:
  struct Slot {
    size_t index;
    int owner;  // which mapping set it last: a repeat within one mapping is an error
  };

  Result<void> Merge(const YAML::Node& key, const YAML::Node& value, int depth) {
    if (value.IsMap()) return Add(value, depth + 1);
    if (value.IsSequence()) {
      // Backwards, so that the earlier mappings, applied last, win (as in yaml.v2).
      for (size_t i = value.size(); i-- > 0;) {
        const YAML::Node item = value[i];
        if (item.IsNull()) return EmptyItemError(file_, value, i, "a mapping to merge");
        if (!item.IsMap()) return BadMerge(key, item);
        if (auto ok = Add(item, depth + 1); !ok) return ok;
      }
      return {};
    }
    return BadMerge(key, value);
  }

  std::unexpected<Error> BadMerge(const YAML::Node& key, const YAML::Node& value) const {
    // A null node's mark is where the next token starts; the key is where the problem is.
    const YAML::Node& at = value.IsNull() ? key : value;
    return ErrorAt(file_, at,
                   "a merge key (<<) takes a mapping or a list of mappings, not " +
                       std::string(Describe(value)));
  }

  Result<void> Set(const YAML::Node& key, const YAML::Node& value, int owner) {
    const auto [it, inserted] = index_.try_emplace(key.Scalar(), Slot{entries_.size(), owner});
    if (inserted) {
      entries_.emplace_back(key, value);
      return {};
    }
    if (it->second.owner == owner) {
      return ErrorAt(file_, key,
                     std::string(noun_) + (noun_.empty() ? "" : " ") + Quote(key.Scalar()) +
                         " appears twice in " + std::string(what_) + " (first at " +
                         Where(file_, entries_[it->second.index].first) + ")");
    }
    entries_[it->second.index] = {key, value};
    it->second.owner = owner;
    return {};
  }

  const std::string& file_;
  std::string_view what_;
  std::string_view noun_;
  int next_owner_ = 0;
  size_t visited_ = 0;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, Slot> index_;
};

// envoyproxy/ratelimit checks the names inside an ignored field too (validKeys applies to the
// whole document, except under `metadata`), so a typo there is still an error. Lists in its
// format hold only mappings.
class IgnoredChecker {
 public:
  explicit IgnoredChecker(const std::string& file) : file_(file) {}

  Result<void> Check(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth * 4 || ++visited_ > kMaxVisited) {
      return ErrorAt(file_, node, "an ignored field holds too much or nests too deeply");
    }
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        const YAML::Node item = node[i];
        if (item.IsNull()) return EmptyItemError(file_, node, i, "a mapping");
        if (!item.IsMap()) {
          return ErrorAt(
              file_, item,
              "lists in a ratelimit config hold mappings, not " + std::string(Describe(item)));
        }
        if (auto ok = Check(item, depth + 1); !ok) return ok;
      }
      return {};
    }
    if (!node.IsMap()) return {};
    auto entries = MappingEntries(file_, node, "a mapping", "field");
    if (!entries) return std::unexpected(entries.error());
    for (const auto& [key, value] : *entries) {
      if (!IsUpstreamKey(key.Scalar())) {
        return ErrorAt(file_, key, "unknown field " + Quote(key.Scalar()));
      }
      if (key.Scalar() == "metadata") continue;  // free-form, as in ratelimit
      if (auto ok = Check(value, depth + 1); !ok) return ok;
    }
    return {};
  }

 private:
  static constexpr size_t kMaxVisited = 100'000;
  const std::string& file_;
  size_t visited_ = 0;
};

}  // namespace

Result<std::vector<Entry>> MappingEntries(const std::string& file, const YAML::Node& map,
                                          std::string_view what, std::string_view noun) {
  MergeExpander expander(file, what, noun);
  if (auto ok = expander.Add(map, 0); !ok) return std::unexpected(ok.error());
  return expander.Take();
}

Result<void> RequireIdentifyingKey(const std::string& file, const YAML::Node& root,
                                   std::string_view what, std::string_view key) {
  if (!root.IsMap()) return {};  // Fields::Of says what it is, not what it holds
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return {};
  }
  return ErrorAt(file, root,
                 "no '" + std::string(key) + "': not " + std::string(what) +
                     " (its content is not shown, in case it is not a sluice config at all)");
}

Result<Fields> Fields::Of(const std::string& file, const YAML::Node& map, std::string_view what,
                          std::initializer_list<std::string_view> allowed, Warnings* warnings) {
  if (!map.IsMap()) {
    return ErrorAt(file, map,
                   std::string(what) + " must be a mapping, not " + std::string(Describe(map)));
  }
  auto entries = MappingEntries(file, map, what, "field");
  if (!entries) return std::unexpected(entries.error());
  Fields fields;
  for (auto& [key, value] : *entries) {
    const std::string& name = key.Scalar();
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == name;
    if (ok) {
      fields.fields_.emplace_back(key, value);
      continue;
    }
    if (warnings == nullptr || !IsUpstreamKey(name)) {
      return ErrorAt(file, key,
                     "unknown field " + Quote(name) + " in " + std::string(what) +
                         " (expected one of: " + JoinNames(allowed) + ")");
    }
    if (auto checked = IgnoredChecker(file).Check(value, 0); !checked) {
      return std::unexpected(checked.error());
    }
    WarnAt(*warnings, file, key,
           "field " + Quote(name) + " has no meaning in " + std::string(what) +
               "; ignored (envoyproxy/ratelimit ignores it there too)");
  }
  return fields;
}

std::optional<YAML::Node> Fields::Get(std::string_view name) const {
  for (const auto& [k, v] : fields_) {
    if (k.Scalar() == name) {
      if (v.IsNull()) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

bool Fields::Present(std::string_view name) const {
  for (const auto& [k, v] : fields_) {
    if (k.Scalar() == name) return true;
  }
  return false;
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

namespace {

struct YamlInt {
  bool negative = false;
  int base = 10;
  std::string digits;  // without sign, prefix and '_'
};

// The shape of an integer in yaml.v2's resolver: it tries Go's strconv.ParseInt(s, 0, 64)
// on the text with every '_' removed, and only if the text starts with a digit or a sign.
std::optional<YamlInt> SplitYamlInt(std::string_view text) {
  if (text.empty() ||
      !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '+' || text[0] == '-')) {
    return std::nullopt;
  }
  YamlInt n;
  std::string t;
  for (char c : text) {
    if (c != '_') t += c;
  }
  std::string_view v = t;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    n.negative = v[0] == '-';
    v.remove_prefix(1);
  }
  if (v.size() > 1 && v[0] == '0') {
    const char p = util::ToLowerAscii(v[1]);
    n.base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    v.remove_prefix(n.base == 0 ? 1 : 2);
    if (n.base == 0) n.base = 8;  // Go's base 0: a leading 0 is octal
  }
  if (v.empty()) return std::nullopt;
  n.digits = std::string(v);
  return n;
}

}  // namespace

Result<int64_t> ReadInt(const std::string& file, const YAML::Node& node, std::string_view what,
                        Warnings* warnings) {
  if (!node.IsScalar() || !IsPlain(node)) {
    const std::string_view kind = node.IsScalar() ? "a quoted string" : Describe(node);
    return ErrorAt(file, node, std::string(what) + " must be an integer, not " + std::string(kind));
  }
  const std::string& s = node.Scalar();
  const auto parts = SplitYamlInt(s);
  uint64_t magnitude = 0;
  std::from_chars_result r{};
  if (parts) {
    const std::string& d = parts->digits;
    r = std::from_chars(d.data(), d.data() + d.size(), magnitude, parts->base);
    if (r.ec == std::errc() && r.ptr != d.data() + d.size()) r.ec = std::errc::invalid_argument;
  }
  // Anything else (1.5, 1e3, 08, 0x) is a float, a string or a timestamp to yaml.v2, all of
  // which ratelimit refuses for requests_per_unit.
  if (!parts || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)) {
    return ErrorAt(file, node, std::string(what) + " must be an integer, not " + Quote(s));
  }
  const uint64_t limit = parts->negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  if (r.ec == std::errc::result_out_of_range || magnitude > limit) {
    return ErrorAt(file, node, std::string(what) + " " + s + " is out of range");
  }
  const int64_t value =
      parts->negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  const bool leading_zero_octal = parts->base == 8 && s.find_first_of("oO") == std::string::npos;
  if (warnings != nullptr && leading_zero_octal && magnitude >= 8) {
    WarnAt(*warnings, file, node,
           std::string(what) + " " + s +
               " has a leading 0, so YAML 1.1 (and envoyproxy/ratelimit)"
               " reads it as octal: " +
               std::to_string(value));
  }
  return value;
}

Result<bool> ReadBool(const std::string& file, const YAML::Node& node, std::string_view what) {
  static constexpr std::string_view kTrue[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                               "y",    "Y",    "on",   "On",  "ON"};
  static constexpr std::string_view kFalse[] = {"false", "False", "FALSE", "no",  "No", "NO",
                                                "n",     "N",     "off",   "Off", "OFF"};
  if (node.IsScalar() && IsPlain(node)) {
    const std::string& s = node.Scalar();
    for (std::string_view t : kTrue) {
      if (s == t) return true;
    }
    for (std::string_view f : kFalse) {
      if (s == f) return false;
    }
  }
  const std::string shown = node.IsScalar() ? Quote(node.Scalar()) : std::string(Describe(node));
  return ErrorAt(file, node, std::string(what) + " must be true or false, not " + shown);
}

}  // namespace sluice::server::internal
