// nbd.json: a round trip, and every kind of damage a hand edit can do gives Corruption
// naming the line (bad JSON) or the field (bad content).
#include "stack/nbd_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace volstack::stack {
namespace {

std::vector<NbdListenerRecord> Sample() {
  NbdListenerRecord a;
  a.socket = "/run/x/nbd.sock";
  a.exports = {{"funk", "trunk/funk"}, {"vg0/lv0", "vg0/lv0"}};
  NbdListenerRecord b;
  b.bind = "127.0.0.1:10809";
  b.read_only = true;
  b.tls = "require";
  b.tls_psk = "/etc/volstack/keys.psk";
  b.max_connections = 8;
  b.handshake_limit = 3;
  b.exports = {{"disk", "/tmp/disk.img"}};
  NbdListenerRecord c;
  c.bind = "127.0.0.1:10810";
  c.tls = "on";
  c.tls_certificates = "/etc/volstack/pki";
  c.tls_verify_peer = true;
  c.exports = {{"disk", "/tmp/disk.img"}};
  return {a, b, c};
}

// The error message for `text`, which must not parse.
std::string ErrorOf(const std::string& text) {
  auto r = ParseNbdState(text, "/s/nbd.json");
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  return r.status().ToString();
}

TEST(NbdStateTest, RoundTrip) {
  const auto listeners = Sample();
  auto parsed = ParseNbdState(FormatNbdState(listeners), "x");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, listeners);
  EXPECT_EQ((*parsed)[0].address(), "unix:/run/x/nbd.sock");
  EXPECT_EQ((*parsed)[1].address(), "127.0.0.1:10809");
  EXPECT_EQ((*parsed)[1].tls_psk, "/etc/volstack/keys.psk");
  EXPECT_EQ((*parsed)[2].tls_certificates, "/etc/volstack/pki");
  EXPECT_TRUE((*parsed)[2].tls_verify_peer);
  EXPECT_FALSE((*parsed)[1].tls_verify_peer);
}

TEST(NbdStateTest, SaveAndLoad) {
  char tmpl[] = "/tmp/volstack-nbdstate-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/nbd.json";
  auto empty = LoadNbdState(path);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  ASSERT_TRUE(UpdateNbdState(tmpl, path, [](std::vector<NbdListenerRecord>& now) {
                now = Sample();
                return Status::Ok();
              }).ok());
  auto loaded = LoadNbdState(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(*loaded, Sample());
  ::unlink(path.c_str());
  ::rmdir(tmpl);
}

TEST(NbdStateTest, SyntaxErrorNamesTheLine) {
  const std::string msg = ErrorOf("{\n  \"version\": 1,\n  \"listeners\": [\n    {,\n  ]\n}\n");
  EXPECT_NE(msg.find("/s/nbd.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 4"), std::string::npos) << msg;
  // Truncated file.
  EXPECT_NE(ErrorOf("{\"version\": 1, \"listeners\": [").find("line 1"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("not valid JSON"), std::string::npos);
}

TEST(NbdStateTest, BadFieldsAreNamed) {
  struct Case {
    std::string text;
    std::string field;
  };
  const std::string ok_export = R"([{"name": "a", "device": "trunk/a"}])";
  const std::vector<Case> cases = {
      {"[]", "top level"},
      {R"({"listeners": []})", "version"},
      {R"({"version": 2, "listeners": []})", "version"},
      {R"({"version": 1})", "listeners"},
      {R"({"version": 1, "listeners": [7]})", "listeners[0]"},
      {R"({"version": 1, "listeners": [{"exports": )" + ok_export + "}]}", "exactly one"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "bind": "127.0.0.1:1", "exports": )" +
           ok_export + "}]}",
       "exactly one"},
      {R"({"version": 1, "listeners": [{"socket": 5, "exports": )" + ok_export + "}]}",
       "listeners[0].socket: not a string"},
      {R"({"version": 1, "listeners": [{"socket": "rel.sock", "exports": )" + ok_export + "}]}",
       "listeners[0].socket: not an absolute path"},
      {R"({"version": 1, "listeners": [{"bind": "127.0.0.1:0", "exports": )" + ok_export + "}]}",
       "listeners[0].bind"},
      {R"({"version": 1, "listeners": [{"bind": "127.0.0.1:http", "exports": )" + ok_export + "}]}",
       "listeners[0].bind"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "read_only": "yes", "exports": )" +
           ok_export + "}]}",
       "listeners[0].read_only"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "exports": []}]})", "listeners[0].exports"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "tls": "maybe", "exports": )" + ok_export +
           "}]}",
       "listeners[0].tls: not off, on or require"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "tls_psk": "k.psk", "exports": )" +
           ok_export + "}]}",
       "listeners[0].tls_psk: not an absolute path"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "tls_certificates": 3, "exports": )" +
           ok_export + "}]}",
       "listeners[0].tls_certificates: not a string"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "max_connections": 0, "exports": )" +
           ok_export + "}]}",
       "listeners[0].max_connections"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "handshake_limit": -1, "exports": )" +
           ok_export + "}]}",
       "listeners[0].handshake_limit"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "exports": [{"name": "a"}]}]})",
       "listeners[0].exports[0].device: missing"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "exports": [{"name": "../x", "device": "d"}]}]})",
       "listeners[0].exports[0].name: not a valid export name"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "exports": [{"name": "a", "device": "d"}, {"name": "a", "device": "e"}]}]})",
       "listeners[0].exports[1].name: 'a' is exported twice"},
      {R"({"version": 1, "listeners": [{"socket": "/a", "exports": )" + ok_export +
           R"(}, {"socket": "/a", "exports": )" + ok_export + "}]}",
       "listeners[1]: a second listener on unix:/a"},
  };
  for (const auto& c : cases) {
    const std::string msg = ErrorOf(c.text);
    EXPECT_NE(msg.find(c.field), std::string::npos) << c.text << "\n  -> " << msg;
  }
}

TEST(NbdStateTest, EveryTruncationIsACleanError) {
  const std::string text = FormatNbdState(Sample());
  for (size_t n = 0; n < text.size() - 2; n++) {
    auto r = ParseNbdState(text.substr(0, n), "x");
    EXPECT_FALSE(r.ok()) << n;
  }
}

TEST(NbdStateTest, AddressOf) {
  EXPECT_EQ(NbdAddressOf("/a/b.sock"), "unix:/a/b.sock");
  EXPECT_EQ(NbdAddressOf("unix:/a/b.sock"), "unix:/a/b.sock");
  EXPECT_EQ(NbdAddressOf("127.0.0.1:10809"), "127.0.0.1:10809");
}

}  // namespace
}  // namespace volstack::stack
