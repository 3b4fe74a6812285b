// The NBD server against a minimal in-test client on a Unix socket: handshake paths, I/O,
// errors from the spec, bad input, and that a vanished client leaks nothing.
#include "export/nbd/nbd_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "bdev/memory_device.h"
#include "export/nbd/nbd_protocol.h"
#include "util/coding.h"

namespace volstack::exportfs::nbd {
namespace {

class Client {
 public:
  explicit Client(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, path.c_str());
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
    // A server that never answers fails the test instead of hanging it.
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }

  bool Send(const std::vector<uint8_t>& b) {
    return ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
  }
  // Empty on EOF.
  std::vector<uint8_t> Recv(size_t n) {
    std::vector<uint8_t> b(n);
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::recv(fd_, b.data() + done, n - done, 0);
      if (r <= 0) return {};
      done += static_cast<size_t>(r);
    }
    return b;
  }
  bool AtEof() {
    uint8_t c;
    return ::recv(fd_, &c, 1, 0) == 0;  // a timeout (-1) is not EOF
  }

  void Greet() {
    auto hello = Recv(18);
    ASSERT_EQ(hello.size(), 18u);
    ASSERT_EQ(DecodeBE64(hello.data()), kNbdMagic);
    ASSERT_EQ(DecodeBE64(hello.data() + 8), kOptMagic);
    ASSERT_EQ(DecodeBE16(hello.data() + 16), kFlagFixedNewstyle | kFlagNoZeroes);
    std::vector<uint8_t> flags(4);
    EncodeBE32(flags.data(), kClientFixedNewstyle | kClientNoZeroes);
    ASSERT_TRUE(Send(flags));
  }

  struct Reply {
    uint32_t type;
    std::vector<uint8_t> data;
  };
  // Sends an option and collects replies up to and including the final one.
  std::vector<Reply> Option(uint32_t option, const std::vector<uint8_t>& data) {
    std::vector<uint8_t> h(16);
    EncodeBE64(h.data(), kOptMagic);
    EncodeBE32(h.data() + 8, option);
    EncodeBE32(h.data() + 12, static_cast<uint32_t>(data.size()));
    h.insert(h.end(), data.begin(), data.end());
    std::vector<Reply> replies;
    if (!Send(h)) return replies;
    for (;;) {
      auto rh = Recv(20);
      if (rh.empty()) return replies;
      EXPECT_EQ(DecodeBE64(rh.data()), kOptReplyMagic);
      EXPECT_EQ(DecodeBE32(rh.data() + 8), option);
      Reply r{DecodeBE32(rh.data() + 12), Recv(DecodeBE32(rh.data() + 16))};
      replies.push_back(r);
      if (r.type == kRepAck || (r.type & 0x80000000u)) return replies;
    }
  }
  static std::vector<uint8_t> InfoBody(const std::string& name) {
    std::vector<uint8_t> b(4 + name.size() + 2);
    EncodeBE32(b.data(), static_cast<uint32_t>(name.size()));
    std::memcpy(b.data() + 4, name.data(), name.size());
    return b;
  }
  std::vector<Reply> Go(const std::string& name) { return Option(kOptGo, InfoBody(name)); }

  void Request(uint16_t type, uint16_t flags, uint64_t cookie, uint64_t offset, uint32_t length,
               const std::vector<uint8_t>& payload = {}) {
    std::vector<uint8_t> r(kRequestSize);
    EncodeRequest(std::span<uint8_t, kRequestSize>(r.data(), kRequestSize),
                  nbd::Request{flags, type, cookie, offset, length});
    r.insert(r.end(), payload.begin(), payload.end());
    ASSERT_TRUE(Send(r));
  }
  // A simple reply: {error, cookie}; data follows for successful simple reads.
  std::pair<uint32_t, uint64_t> SimpleReply() {
    auto r = Recv(kSimpleReplySize);
    EXPECT_EQ(r.size(), kSimpleReplySize);
    if (r.empty()) return {~0u, 0};
    EXPECT_EQ(DecodeBE32(r.data()), kSimpleReplyMagic);
    return {DecodeBE32(r.data() + 4), DecodeBE64(r.data() + 8)};
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

class NbdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/nbd_server_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    device_ = bdev::MemoryDevice::Create(1 << 20, 512, 4096);
    ASSERT_TRUE(registry_.Add("vol", device_).ok());
    options_.socket_path = dir_ + "/nbd.sock";
    options_.max_payload = 1 << 20;
    auto server = NbdServer::Start(registry_, options_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  void TearDown() override {
    server_.reset();
    ::rmdir(dir_.c_str());
  }
  // A client in transmission with structured replies on.
  std::unique_ptr<Client> Open(bool structured = true) {
    auto c = std::make_unique<Client>(options_.socket_path);
    EXPECT_TRUE(c->connected());
    c->Greet();
    if (structured) {
      EXPECT_EQ(c->Option(kOptStructuredReply, {}).back().type, kRepAck);
    }
    auto go = c->Go("vol");
    EXPECT_EQ(go.back().type, kRepAck);
    return c;
  }
  // Replaces the server with one started with `options_` as changed by the test.
  void Restart() {
    server_.reset();
    auto server = NbdServer::Start(registry_, options_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  // One 4 KiB read at 0 on a client in transmission (simple replies) succeeds.
  static void ExpectServed(Client& c, uint64_t cookie) {
    c.Request(kCmdRead, 0, cookie, 0, 4096);
    EXPECT_EQ(c.SimpleReply(), std::make_pair(0u, cookie));
    EXPECT_EQ(c.Recv(4096).size(), 4096u);
  }
  void WaitForNoConnections() {
    for (int i = 0; i < 100 && server_->active_connections() != 0; i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string dir_;
  bdev::DeviceRegistry registry_;
  std::shared_ptr<bdev::MemoryDevice> device_;
  NbdServerOptions options_;
  std::unique_ptr<NbdServer> server_;
};

TEST_F(NbdServerTest, GoReportsSizeFlagsAndBlockSizes) {
  Client c(options_.socket_path);
  c.Greet();
  auto replies = c.Go("vol");
  ASSERT_GE(replies.size(), 3u);
  bool saw_export = false, saw_bs = false;
  for (const auto& r : replies) {
    if (r.type != kRepInfo) continue;
    const uint16_t item = DecodeBE16(r.data.data());
    if (item == kInfoExport) {
      saw_export = true;
      EXPECT_EQ(DecodeBE64(r.data.data() + 2), 1u << 20);
      const uint16_t flags = DecodeBE16(r.data.data() + 10);
      EXPECT_TRUE(flags & kTransCanMultiConn);
      EXPECT_TRUE(flags & kTransSendFua);
      EXPECT_FALSE(flags & kTransReadOnly);
    } else if (item == kInfoBlockSize) {
      saw_bs = true;
      EXPECT_EQ(DecodeBE32(r.data.data() + 2), 512u);
      EXPECT_EQ(DecodeBE32(r.data.data() + 6), 4096u);
      EXPECT_EQ(DecodeBE32(r.data.data() + 10), 1u << 20);
    }
  }
  EXPECT_TRUE(saw_export);
  EXPECT_TRUE(saw_bs);
  EXPECT_EQ(replies.back().type, kRepAck);
}

TEST_F(NbdServerTest, UnknownOptionsAndBadBodiesDoNotEndTheHandshake) {
  Client c(options_.socket_path);
  c.Greet();
  EXPECT_EQ(c.Option(99, {1, 2, 3}).back().type, kRepErrUnsup);
  EXPECT_EQ(c.Option(kOptStartTls, {}).back().type, kRepErrPolicy);
  EXPECT_EQ(c.Option(kOptGo, {0, 0, 0, 9}).back().type, kRepErrInvalid);
  EXPECT_EQ(c.Go("nope").back().type, kRepErrUnknown);
  EXPECT_EQ(c.Option(kOptList, {1}).back().type, kRepErrInvalid);
  auto list = c.Option(kOptList, {});
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].type, kRepServer);
  EXPECT_EQ(std::string(list[0].data.begin() + 4, list[0].data.end()), "vol");
  EXPECT_EQ(c.Go("vol").back().type, kRepAck);  // still usable
}

TEST_F(NbdServerTest, AbortAcksAndCloses) {
  Client c(options_.socket_path);
  c.Greet();
  EXPECT_EQ(c.Option(kOptAbort, {}).back().type, kRepAck);
  EXPECT_TRUE(c.AtEof());
}

TEST_F(NbdServerTest, BadOptionMagicDisconnects) {
  Client c(options_.socket_path);
  c.Greet();
  ASSERT_TRUE(c.Send(std::vector<uint8_t>(16, 0x41)));
  EXPECT_TRUE(c.AtEof());
}

TEST_F(NbdServerTest, WriteReadFlushAndStructuredRead) {
  auto c = Open();
  std::vector<uint8_t> data(4096);
  for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<uint8_t>(i * 7);
  c->Request(kCmdWrite, kCmdFlagFua, 1, 8192, 4096, data);
  EXPECT_EQ(c->SimpleReply(), std::make_pair(0u, uint64_t{1}));
  c->Request(kCmdFlush, 0, 2, 0, 0);
  EXPECT_EQ(c->SimpleReply(), std::make_pair(0u, uint64_t{2}));
  c->Request(kCmdRead, 0, 3, 8192, 4096);
  auto h = c->Recv(kChunkHeaderSize + 8);
  ASSERT_FALSE(h.empty());
  EXPECT_EQ(DecodeBE32(h.data()), kStructuredReplyMagic);
  EXPECT_EQ(DecodeBE16(h.data() + 4), kChunkFlagDone);
  EXPECT_EQ(DecodeBE16(h.data() + 6), kChunkOffsetData);
  EXPECT_EQ(DecodeBE64(h.data() + 8), 3u);
  EXPECT_EQ(DecodeBE32(h.data() + 16), 4096u + 8);
  EXPECT_EQ(DecodeBE64(h.data() + 20), 8192u);
  EXPECT_EQ(c->Recv(4096), data);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(device_->Read(8192, back).ok());
  EXPECT_EQ(back, data);
}

TEST_F(NbdServerTest, ErrorsFollowTheSpec) {
  auto c = Open(/*structured=*/false);
  c->Request(kCmdWrite, 0, 1, (1 << 20) - 512, 1024, std::vector<uint8_t>(1024));
  EXPECT_EQ(c->SimpleReply().first, kEnospc);
  c->Request(kCmdRead, 0, 2, 1 << 20, 512);
  EXPECT_EQ(c->SimpleReply().first, kEinval);
  c->Request(kCmdTrim, 0, 3, (1 << 20) - 512, 4096);
  EXPECT_EQ(c->SimpleReply().first, kEinval);
  c->Request(42, 0, 4, 0, 512);
  EXPECT_EQ(c->SimpleReply().first, kEinval);
  c->Request(kCmdRead, kCmdFlagFua, 5, 0, 512);  // FUA is not a READ flag
  EXPECT_EQ(c->SimpleReply().first, kEinval);
  c->Request(kCmdRead, 0, 6, 0, (1 << 20) + 512);  // over max_payload
  EXPECT_EQ(c->SimpleReply().first, kEinval);
  c->Request(kCmdBlockStatus, 0, 7, 0, 4096);  // no meta context negotiated
  EXPECT_EQ(c->SimpleReply().first, kEinval);
  // An oversized WRITE is drained and refused; the stream stays in sync.
  c->Request(kCmdWrite, 0, 8, 0, (1 << 20) + 4096, std::vector<uint8_t>((1 << 20) + 4096));
  EXPECT_EQ(c->SimpleReply().first, kEinval);
  c->Request(kCmdWriteZeroes, kCmdFlagNoHole, 9, 0, 4096);
  EXPECT_EQ(c->SimpleReply(), std::make_pair(0u, uint64_t{9}));
}

TEST_F(NbdServerTest, BlockStatusReportsHoles) {
  Client c(options_.socket_path);
  c.Greet();
  ASSERT_EQ(c.Option(kOptStructuredReply, {}).back().type, kRepAck);
  std::vector<uint8_t> meta = {0, 0, 0, 3, 'v', 'o', 'l', 0, 0, 0, 1, 0, 0, 0, 15};
  const std::string q = "base:allocation";
  meta.insert(meta.end(), q.begin(), q.end());
  auto set = c.Option(kOptSetMetaContext, meta);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set[0].type, kRepMetaContext);
  const uint32_t id = DecodeBE32(set[0].data.data());
  ASSERT_EQ(c.Go("vol").back().type, kRepAck);
  ASSERT_TRUE(device_->Write(64 * 1024, std::vector<uint8_t>(64 * 1024, 1)).ok());
  c.Request(kCmdBlockStatus, 0, 5, 0, 256 * 1024);
  auto h = c.Recv(kChunkHeaderSize);
  ASSERT_FALSE(h.empty());
  EXPECT_EQ(DecodeBE16(h.data() + 6), kChunkBlockStatus);
  auto body = c.Recv(DecodeBE32(h.data() + 16));
  ASSERT_EQ(body.size(), 4u + 3 * 8);
  EXPECT_EQ(DecodeBE32(body.data()), id);
  EXPECT_EQ(DecodeBE32(body.data() + 4), 64u * 1024);
  EXPECT_EQ(DecodeBE32(body.data() + 8), kStateHole | kStateZero);
  EXPECT_EQ(DecodeBE32(body.data() + 12), 64u * 1024);
  EXPECT_EQ(DecodeBE32(body.data() + 16), 0u);
  EXPECT_EQ(DecodeBE32(body.data() + 20), 128u * 1024);
}

TEST_F(NbdServerTest, ReadOnlyExportRefusesWrites) {
  server_.reset();
  options_.read_only = true;
  auto server = NbdServer::Start(registry_, options_);
  ASSERT_TRUE(server.ok());
  server_ = std::move(*server);
  auto c = Open(false);
  c->Request(kCmdWrite, 0, 1, 0, 512, std::vector<uint8_t>(512));
  EXPECT_EQ(c->SimpleReply().first, kEperm);
  c->Request(kCmdTrim, 0, 2, 0, 512);
  EXPECT_EQ(c->SimpleReply().first, kEperm);
}

TEST_F(NbdServerTest, VanishingClientsLeakNothingAndOthersGoOn) {
  for (int i = 0; i < 5; i++) {
    auto c = Open();
    // Half a WRITE, then gone.
    c->Request(kCmdWrite, 0, 1, 0, 65536, std::vector<uint8_t>(1000));
  }
  {
    Client garbage(options_.socket_path);  // mid-handshake
    garbage.Recv(18);
  }
  WaitForNoConnections();
  EXPECT_EQ(server_->active_connections(), 0u);
  auto c = Open();
  c->Request(kCmdFlush, 0, 9, 0, 0);
  EXPECT_EQ(c->SimpleReply(), std::make_pair(0u, uint64_t{9}));
  c->Request(kCmdDisc, 0, 10, 0, 0);
  EXPECT_TRUE(c->AtEof());
}

TEST_F(NbdServerTest, ManyRequestsInFlight) {
  auto c = Open(false);
  constexpr int kN = 64;
  for (int i = 0; i < kN; i++) {
    c->Request(kCmdWrite, 0, 100 + i, static_cast<uint64_t>(i) * 4096, 4096,
               std::vector<uint8_t>(4096, static_cast<uint8_t>(i)));
  }
  std::vector<bool> seen(kN, false);
  for (int i = 0; i < kN; i++) {
    auto [err, cookie] = c->SimpleReply();
    ASSERT_EQ(err, 0u);
    ASSERT_GE(cookie, 100u);
    ASSERT_LT(cookie, 100u + kN);
    EXPECT_FALSE(seen[cookie - 100]);
    seen[cookie - 100] = true;
  }
  std::vector<uint8_t> b(4096);
  ASSERT_TRUE(device_->Read(63 * 4096, b).ok());
  EXPECT_EQ(b, std::vector<uint8_t>(4096, 63));
}

// --- limits: one deadline for the whole handshake, a connection limit that refuses clearly ---

TEST_F(NbdServerTest, HandshakeDeadlineDropsIdleAndDrippingClientsNotServedOnes) {
  options_.handshake_limit_sec = 1;
  Restart();
  auto served = Open(false);
  Client idle(options_.socket_path);  // connects and never answers the greeting
  Client dripping(options_.socket_path);
  dripping.Greet();
  // Each option is answered at once, so a per-read timeout would never fire; the whole
  // handshake's deadline does.
  const auto start = std::chrono::steady_clock::now();
  bool dropped = false;
  for (int i = 0; i < 40 && !dropped; i++) {
    dropped = dripping.Option(kOptList, {}).empty();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(dropped) << "a client sending an option every 200 ms was never dropped";
  // Well past the 1 s limit, with room for a loaded machine: the point is that it ends.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(6000));
  EXPECT_EQ(idle.Recv(18).size(), 18u);
  EXPECT_TRUE(idle.AtEof());
  ExpectServed(*served, 1);  // long past the limit, in transmission: untouched
}

TEST_F(NbdServerTest, AtTheConnectionLimitNewClientsAreRefusedAndOldOnesServed) {
  options_.max_connections = 2;
  Restart();
  auto served = Open(false);
  auto idle = std::make_unique<Client>(options_.socket_path);
  ASSERT_TRUE(idle->connected());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Client refused(options_.socket_path);
  refused.Greet();
  auto go = refused.Go("vol");
  ASSERT_EQ(go.size(), 1u);
  EXPECT_EQ(go.back().type, kRepErrShutdown);
  const std::string msg(go.back().data.begin(), go.back().data.end());
  EXPECT_NE(msg.find("connection limit (2 clients)"), std::string::npos) << msg;
  ExpectServed(*served, 2);
  // A freed slot is taken by the next client.
  idle.reset();
  std::unique_ptr<Client> next;
  for (int i = 0; i < 50; i++) {
    next = std::make_unique<Client>(options_.socket_path);
    next->Greet();
    auto r = next->Go("vol");
    if (!r.empty() && r.back().type == kRepAck) break;
    next.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(next, nullptr) << "the slot of a closed client was never freed";
  ExpectServed(*next, 3);
}

TEST_F(NbdServerTest, TlsRequiredRefusesEverythingButStartTls) {
  const std::string psk = dir_ + "/keys.psk";
  {
    std::ofstream f(psk);
    f << "alice:00112233445566778899aabbccddeeff\n";
  }
  options_.tls = TlsMode::kRequire;
  options_.tls_psk = psk;
  Restart();
  Client c(options_.socket_path);
  c.Greet();
  EXPECT_EQ(c.Go("vol").back().type, kRepErrTlsReqd);
  EXPECT_EQ(c.Option(kOptList, {}).back().type, kRepErrTlsReqd);
  EXPECT_EQ(c.Option(kOptStructuredReply, {}).back().type, kRepErrTlsReqd);
  EXPECT_EQ(c.Option(kOptStartTls, {1}).back().type, kRepErrInvalid);
  EXPECT_EQ(c.Option(kOptStartTls, {}).back().type, kRepAck);  // a TLS handshake would follow
  ::unlink(psk.c_str());
}

TEST(NbdTlsOptionsTest, ParseTlsMode) {
  EXPECT_EQ(*ParseTlsMode("off"), TlsMode::kOff);
  EXPECT_EQ(*ParseTlsMode("on"), TlsMode::kOn);
  EXPECT_EQ(*ParseTlsMode("require"), TlsMode::kRequire);
  EXPECT_EQ(*ParseTlsMode("no"), TlsMode::kOff);
  EXPECT_FALSE(ParseTlsMode("").ok());
  EXPECT_FALSE(ParseTlsMode("required").ok());
  EXPECT_STREQ(TlsModeName(TlsMode::kRequire), "require");
}

TEST(NbdTlsOptionsTest, TcpWithoutTlsNeedsAnExplicitOff) {
  const std::string none;
  auto tcp = ResolveTlsMode(TlsMode::kDefault, /*tcp=*/true, none, none);
  ASSERT_FALSE(tcp.ok());
  EXPECT_NE(tcp.status().message().find("--tls=off"), std::string::npos);
  EXPECT_EQ(*ResolveTlsMode(TlsMode::kOff, true, none, none), TlsMode::kOff);
  EXPECT_EQ(*ResolveTlsMode(TlsMode::kDefault, false, none, none), TlsMode::kOff);
  EXPECT_EQ(*ResolveTlsMode(TlsMode::kDefault, true, "/k.psk", none), TlsMode::kRequire);
  EXPECT_EQ(*ResolveTlsMode(TlsMode::kOn, true, none, "/pki"), TlsMode::kOn);
  EXPECT_FALSE(ResolveTlsMode(TlsMode::kRequire, true, none, none).ok());
  EXPECT_FALSE(ResolveTlsMode(TlsMode::kOn, false, none, none).ok());
  EXPECT_FALSE(ResolveTlsMode(TlsMode::kOff, true, "/k.psk", none).ok());
  EXPECT_FALSE(ResolveTlsMode(TlsMode::kRequire, true, "/k.psk", "/pki").ok());
}

TEST(NbdTlsOptionsTest, StartRefusesBadSettingsWithOneMessage) {
  bdev::DeviceRegistry registry;
  NbdServerOptions o;
  o.bind = "127.0.0.1:0";
  auto s = NbdServer::Start(registry, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), EINVAL);
  EXPECT_NE(s.status().message().find("needs TLS"), std::string::npos);
  o.tls = TlsMode::kOff;
  o.max_connections = 0;
  EXPECT_NE(NbdServer::Start(registry, o).status().message().find("--max-connections"),
            std::string::npos);
  o.max_connections = 64;
  o.handshake_limit_sec = 0;
  EXPECT_NE(NbdServer::Start(registry, o).status().message().find("--handshake-limit"),
            std::string::npos);
  o.handshake_limit_sec = 10;
  o.tls = TlsMode::kRequire;
  char dir[] = "/tmp/nbd_tls_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  o.tls_psk = std::string(dir) + "/keys.psk";
  EXPECT_NE(NbdServer::Start(registry, o).status().message().find("not a readable file"),
            std::string::npos);
  {
    std::ofstream f(o.tls_psk);
    f << "alice:00112233\nbob=zz\n";
  }
  auto bad = NbdServer::Start(registry, o);
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().ToString();
  o.tls_psk.clear();
  o.tls_certificates = dir;
  EXPECT_NE(NbdServer::Start(registry, o).status().message().find("server-cert.pem"),
            std::string::npos);
  ::unlink((std::string(dir) + "/keys.psk").c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace volstack::exportfs::nbd
