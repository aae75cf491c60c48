// Canonical request paths: RFC 3986 5.4's reference resolution examples (the merged path each
// resolves to, which remove_dot_segments must turn into the RFC's answer), every spelling of
// /v1/search that issue 29 found escaping a limit, the options, and the refusals.
#include "util/canonical_path.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace sluice::util {
namespace {

using Opts = PathNormalize;

std::string Path(std::string_view target, const Opts& options = {}) {
  const auto t = CanonicalTarget(target, options);
  EXPECT_TRUE(t.has_value()) << target << ": " << (t ? "" : t.error());
  return t ? t->path : "<error>";
}

std::string Error(std::string_view target, const Opts& options = {}) {
  const auto t = CanonicalTarget(target, options);
  EXPECT_FALSE(t.has_value()) << target << " gave " << (t ? t->path : "");
  return t ? "" : t.error();
}

// Base URI "http://a/b/c/d;p?q". Each reference, merged with the base's path as 5.2.3 says (the
// base path up to its last '/', then the reference), is the target here; the expected path is
// the one in the RFC's resolved URI.
TEST(CanonicalPath, Rfc3986NormalExamples) {
  const std::vector<std::pair<std::string_view, std::string_view>> cases = {
      {"/b/c/g", "/b/c/g"},      // "g"
      {"/b/c/./g", "/b/c/g"},    // "./g"
      {"/b/c/g/", "/b/c/g/"},    // "g/"
      {"/g", "/g"},              // "/g"
      {"/b/c/d;p", "/b/c/d;p"},  // "?y" keeps the base path
      {"/b/c/;x", "/b/c/;x"},    // ";x"
      {"/b/c/g;x", "/b/c/g;x"},  // "g;x"
      {"/b/c/.", "/b/c/"},       // "."
      {"/b/c/./", "/b/c/"},      // "./"
      {"/b/c/..", "/b/"},        // ".."
      {"/b/c/../", "/b/"},       // "../"
      {"/b/c/../g", "/b/g"},     // "../g"
      {"/b/c/../..", "/"},       // "../.."
      {"/b/c/../../", "/"},      // "../../"
      {"/b/c/../../g", "/g"},    // "../../g"
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(Path(in), want) << in;
  // "g?y" and "g#s": the query is not the path; the fragment is dropped.
  const auto q = CanonicalTarget("/b/c/g?y", {});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->path, "/b/c/g");
  EXPECT_EQ(q->query, "y");
  EXPECT_EQ(Path("/b/c/g#s"), "/b/c/g");
  const auto qf = CanonicalTarget("/b/c/g?y#s", {});
  ASSERT_TRUE(qf);
  EXPECT_EQ(qf->query, "y");
}

TEST(CanonicalPath, Rfc3986AbnormalExamples) {
  const std::vector<std::pair<std::string_view, std::string_view>> cases = {
      {"/b/c/../../../g", "/g"},     // "../../../g": never above the root
      {"/b/c/../../../../g", "/g"},  // "../../../../g"
      {"/./g", "/g"},                // "/./g"
      {"/../g", "/g"},               // "/../g"
      {"/b/c/g.", "/b/c/g."},        // "g."
      {"/b/c/.g", "/b/c/.g"},        // ".g"
      {"/b/c/g..", "/b/c/g.."},      // "g.."
      {"/b/c/..g", "/b/c/..g"},      // "..g"
      {"/b/c/./../g", "/b/g"},       // "./../g"
      {"/b/c/./g/.", "/b/c/g/"},     // "./g/."
      {"/b/c/g/./h", "/b/c/g/h"},    // "g/./h"
      {"/b/c/g/../h", "/b/c/h"},     // "g/../h"
      {"/b/c/g;x=1/./y", "/b/c/g;x=1/y"},
      {"/b/c/g;x=1/../y", "/b/c/y"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(Path(in), want) << in;
  const auto q = CanonicalTarget("/b/c/g?y/./x", {});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->path, "/b/c/g");
  EXPECT_EQ(q->query, "y/./x");  // dot segments in a query are the query's
  EXPECT_EQ(Path("/b/c/g#s/../x"), "/b/c/g");
}

// RFC 3986 6.2.2: case and percent-encoding normalisation.
TEST(CanonicalPath, PercentEncodingNormalisation) {
  EXPECT_EQ(Path("/%7Euser/%7euser"), "/~user/~user");
  EXPECT_EQ(Path("/a%2db%2Ec%5fd"), "/a-b.c_d");
  EXPECT_EQ(Path("/%e2%82%ac"), "/%E2%82%AC");     // not unreserved: kept, upper-cased
  EXPECT_EQ(Path("/a%3bb"), "/a%3Bb");             // an escaped ';' is data, not a parameter
  EXPECT_EQ(Path("/\xe2\x82\xac"), "/%E2%82%AC");  // raw and escaped bytes are one spelling
  EXPECT_EQ(Path("/a b\"<>\\^`{|}"), "/a%20b%22%3C%3E%5C%5E%60%7B%7C%7D");
  EXPECT_EQ(Path("/!$&'()*+,;=:@"), "/!$&'()*+,;=:@");  // sub-delims and ':' '@' as they are
  EXPECT_EQ(Path("/%2e%2E/a/%2e/b"), "/a/b");           // escaped dots are dot segments
}

TEST(CanonicalPath, EverySpellingOfTheIssue) {
  for (std::string_view s :
       {"/v1/search", "/v1/%73earch", "/v1//search", "/v1/./search", "/v1/../v1/search",
        "//v1/search", "/v1/search#f", "http://h/v1/search", "HTTPS://h:8443/v1/search?x#y",
        "/v1/%73%65%61%72%63%68", "/v1/x/../search", "///v1///search"}) {
    EXPECT_EQ(Path(s), "/v1/search") << s;
  }
  // Routers disagree on these: by default each is its own path.
  EXPECT_EQ(Path("/v1/search/"), "/v1/search/");
  EXPECT_EQ(Path("/v1/search;a"), "/v1/search;a");
  EXPECT_EQ(Path("/V1/search"), "/V1/search");
  const Opts loose{.trailing_slash = Opts::TrailingSlash::kStrip,
                   .path_params = Opts::PathParams::kStrip,
                   .path_case = Opts::PathCase::kLower};
  for (std::string_view s : {"/v1/search/", "/v1/search;a", "/V1/search", "/V1/SEARCH;a=b/",
                             "/v1;x/search", "/v1/search/.", "/v1/%53earch"}) {
    EXPECT_EQ(Path(s, loose), "/v1/search") << s;
  }
  for (std::string_view s : {"/v1/searchx", "/v1/search%2F", "/v1/search%20", "/v1/searc"}) {
    EXPECT_NE(Path(s), "/v1/search") << s;
    EXPECT_NE(Path(s, loose), "/v1/search") << s;
  }
  EXPECT_EQ(Path("/", loose), "/");  // the root keeps its slash
}

TEST(CanonicalPath, PathParamsStripLikeTomcat) {
  const Opts strip{.path_params = Opts::PathParams::kStrip};
  EXPECT_EQ(Path("/admin/..;/v1/search", strip), "/v1/search");  // "..;" is ".."
  EXPECT_EQ(Path("/admin/..;/v1/search"), "/admin/..;/v1/search");
  EXPECT_EQ(Path("/a;x/;y/b;z", strip), "/a/b");
}

TEST(CanonicalPath, EscapedSlashes) {
  EXPECT_EQ(Path("/v1%2Fsearch"), "/v1%2Fsearch");
  EXPECT_EQ(Path("/v1%2fsearch"), "/v1%2Fsearch");
  const Opts decode{.escaped_slashes = Opts::EscapedSlashes::kDecode};
  EXPECT_EQ(Path("/v1%2fsearch", decode), "/v1/search");
  EXPECT_EQ(Path("/v1%2F%2F..%2Fv1%2Fsearch", decode), "/v1/search");
  const Opts reject{.escaped_slashes = Opts::EscapedSlashes::kReject};
  EXPECT_NE(Error("/v1%2Fsearch", reject).find("escaped slash"), std::string::npos);
  EXPECT_EQ(Path("/v1/search", reject), "/v1/search");
}

TEST(CanonicalPath, RefusesWhatHasNoCanonicalForm) {
  EXPECT_NE(Error("/v1/%zzsearch").find("'%zz'"), std::string::npos);
  EXPECT_NE(Error("/v1/search%").find("bad percent-escape"), std::string::npos);
  EXPECT_NE(Error("/v1/search%4").find("bad percent-escape"), std::string::npos);
  EXPECT_NE(Error("/v1/%00search").find("NUL"), std::string::npos);
  EXPECT_NE(Error(std::string_view("/v1/\0search", 11)).find("NUL"), std::string::npos);
  EXPECT_NE(Error("v1/search").find("neither a path"), std::string::npos);
  EXPECT_NE(Error("*").find("neither a path"), std::string::npos);
  EXPECT_NE(Error("").find("neither a path"), std::string::npos);
  EXPECT_NE(Error("http:/v1/search").find("neither a path"), std::string::npos);
  // A client's bytes are quoted printable in the reason.
  EXPECT_NE(Error("/%\x01\x02").find("'%\\x01\\x02'"), std::string::npos);
}

TEST(CanonicalPath, AbsoluteForm) {
  EXPECT_EQ(Path("http://h"), "/");
  const auto t = CanonicalTarget("http://user@h:80?a=1", {});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->path, "/");
  EXPECT_EQ(t->query, "a=1");
  EXPECT_EQ(Path("svn+ssh://h/a/./b"), "/a/b");
}

}  // namespace
}  // namespace sluice::util
