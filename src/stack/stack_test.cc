// The Stack without root: pools on MemoryDevices (the path opener is the test's), devfs and
// loop devices faked at the Stack's kernel boundary (test_kernel.h). Each test brings a stack
// up from a state dir in a temporary directory and checks the live graph it holds.
#include "stack/stack.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "bdev/memory_device.h"
#include "export/loop_bindings.h"
#include "stack/nbd_state.h"
#include "stack/pool_cache.h"
#include "stack/requests.h"
#include "stack/test_kernel.h"

namespace volstack::stack {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class StackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volstack-stack-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    state_.root = tmpl;
    kernel_ = std::make_shared<TestKernel>();
  }
  void TearDown() override { std::filesystem::remove_all(state_.root); }

  // Pool `name` on one memory vdev named `vdev`, with the volume `volume`, recorded in
  // zpool.cache as `zpool create` would.
  void MakePool(const std::string& name, const std::string& vdev, const std::string& volume) {
    auto device = bdev::MemoryDevice::Create(128 * kMiB);
    devices_[vdev] = device;
    pool::PoolCreateOptions o;
    o.props = {{"cachemax", "16M"}, {"dirtymax", "16M"}};
    auto p = pool::Pool::Create(name, {device}, o);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    pool::VolumeOptions v;
    v.volsize = 16 * kMiB;
    ASSERT_TRUE((*p)->CreateVolume(volume, v).ok());
    const uint64_t guid = (*p)->guid();
    ASSERT_TRUE((*p)->Close().ok());
    ASSERT_TRUE(AddToPoolCache(state_.root, {name, guid, {vdev}}).ok());
  }

  std::unique_ptr<Stack> OpenStack() {
    Stack::Options o;
    o.kernel = kernel_;
    o.open_path = [this](const std::string& path, bool) -> Result<bdev::BlockDevicePtr> {
      auto it = devices_.find(path);
      if (it == devices_.end()) return Status::NotFound(path + ": no such device");
      return it->second;
    };
    return Stack::Open(state_, Mode::kDaemon, o);
  }

  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  StateDir state_;
  std::shared_ptr<TestKernel> kernel_;
  std::map<std::string, bdev::BlockDevicePtr> devices_;
};

TEST_F(StackTest, UpDropEverythingUpAgain) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  std::vector<uint8_t> data(4096, 0x5a), back(4096);
  {
    auto stack = OpenStack();
    ASSERT_TRUE(stack->Up().ok());
    auto vol = stack->registry().Find("tank/vol");
    ASSERT_NE(vol, nullptr);
    EXPECT_NE(stack->FindLivePool("tank"), nullptr);
    EXPECT_EQ(stack->devfs_dir(), state_.devfs_dir());
    EXPECT_TRUE(kernel_->mounted.count(state_.devfs_dir()));
    // A name resolves to the registered device itself.
    auto opened = stack->OpenDevice("tank/vol", Access::kReadWrite);
    ASSERT_TRUE(opened.ok());
    EXPECT_EQ(*opened, vol);
    ASSERT_TRUE(vol->Write(8192, data).ok());
    ASSERT_TRUE(vol->Flush().ok());
    vol.reset();
    opened = Status::NotFound("dropped");

    ASSERT_TRUE(stack->Down(/*force=*/false).ok());
    EXPECT_TRUE(stack->registry().List().empty());
    EXPECT_EQ(stack->FindLivePool("tank"), nullptr);
    EXPECT_EQ(stack->devfs_dir(), "");
    EXPECT_TRUE(kernel_->mounted.empty());

    // The same stack comes up again.
    ASSERT_TRUE(stack->Up().ok());
    EXPECT_NE(stack->registry().Find("tank/vol"), nullptr);
    ASSERT_TRUE(stack->Down(false).ok());
  }
  // Everything dropped (a new process): a new stack on the same state dir.
  auto stack = OpenStack();
  ASSERT_TRUE(stack->Up().ok());
  auto vol = stack->registry().Find("tank/vol");
  ASSERT_NE(vol, nullptr);
  ASSERT_TRUE(vol->Read(8192, back).ok());
  EXPECT_EQ(back, data);
  ASSERT_TRUE(stack->Down(false).ok());
}

TEST_F(StackTest, ReleaseDestroyThenReconcile) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  auto stack = OpenStack();
  ASSERT_TRUE(stack->Up().ok());
  auto p = stack->FindLivePool("tank");
  ASSERT_NE(p, nullptr);
  // A destroy releases the volume first; while the registry holds it, it is busy.
  EXPECT_FALSE(p->DestroyVolume("tank/vol").ok());
  stack->Release({"tank/vol"});
  EXPECT_EQ(stack->registry().Find("tank/vol"), nullptr);
  ASSERT_TRUE(p->DestroyVolume("tank/vol").ok());
  pool::VolumeOptions v;
  v.volsize = 8 * kMiB;
  ASSERT_TRUE(p->CreateVolume("tank/new", v).ok());
  stack->Reconcile();
  EXPECT_EQ(stack->registry().Find("tank/vol"), nullptr);
  EXPECT_NE(stack->registry().Find("tank/new"), nullptr);
  // The pool leaves the cache (zpool export): Reconcile closes it and drops its volumes.
  p.reset();
  ASSERT_TRUE(RemoveFromPoolCache(state_.root, "tank").ok());
  stack->Reconcile();
  EXPECT_EQ(stack->FindLivePool("tank"), nullptr);
  EXPECT_TRUE(stack->registry().List().empty());
  ASSERT_TRUE(stack->Down(false).ok());
}

TEST_F(StackTest, MissingVdevLeavesItsPoolUnavailableAndTheRestUp) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  MakePool("gone", "/mem/gone0", "gone/vol");
  devices_.erase("/mem/gone0");
  auto stack = OpenStack();
  Status up = stack->Up();
  EXPECT_TRUE(up.IsNotFound()) << up.ToString();
  EXPECT_NE(up.ToString().find("pool gone is unavailable"), std::string::npos) << up.ToString();
  // The import's own error, wrapped once: one errno text, at the end (issue 37, item 7).
  const std::string enoent = std::strerror(ENOENT);
  EXPECT_EQ(up.message().find(enoent), std::string::npos) << up.ToString();
  EXPECT_EQ(up.ToString().find(enoent), up.ToString().size() - enoent.size()) << up.ToString();
  EXPECT_NE(stack->registry().Find("tank/vol"), nullptr);
  EXPECT_EQ(stack->registry().Find("gone/vol"), nullptr);
  const auto unavailable = stack->UnavailablePools();
  ASSERT_EQ(unavailable.count("gone"), 1u);
  EXPECT_NE(unavailable.at("gone").find("/mem/gone0"), std::string::npos);
  EXPECT_TRUE(kernel_->mounted.count(state_.devfs_dir()));
  ASSERT_TRUE(stack->Down(false).ok());
}

TEST_F(StackTest, DamagedStateFilesAreReportedAndLeftAsTheyWere) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  const std::string loops = exportfs::LoopBindingsPath(state_.root);
  std::ofstream(loops) << "{\"loops\": [{\"name\": 7}]}";
  auto stack = OpenStack();
  Status up = stack->Up();
  EXPECT_TRUE(up.IsCorruption()) << up.ToString();
  EXPECT_NE(up.ToString().find(loops), std::string::npos) << up.ToString();
  // The pools came up regardless; the damaged file is not rewritten.
  EXPECT_NE(stack->registry().Find("tank/vol"), nullptr);
  EXPECT_EQ(Slurp(loops), "{\"loops\": [{\"name\": 7}]}");
  ASSERT_TRUE(stack->Down(false).ok());

  // A damaged zpool.cache: no pool comes up, nothing is written, devfs still mounts.
  std::filesystem::remove(loops);
  const std::string cache = PoolCachePath(state_.root);
  std::ofstream(cache, std::ios::trunc) << "not json";
  auto again = OpenStack();
  again->Up().IgnoreError();
  EXPECT_TRUE(again->registry().List().empty());
  EXPECT_EQ(Slurp(cache), "not json");
  EXPECT_TRUE(kernel_->mounted.count(state_.devfs_dir()));
  ASSERT_TRUE(again->Down(false).ok());
}

TEST_F(StackTest, LoopBindingsAreRestoredAndAMountedOneHoldsDown) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  const std::string file = state_.devfs_dir() + "/tank/vol";
  ASSERT_TRUE(exportfs::UpdateLoopBindings(state_.root, [&](auto& now) {
                now.push_back({"/dev/loop3", "tank/vol", file, 4096, false, false});
                return Status::Ok();
              }).ok());
  // Another binding holds loop3: the device moves to a free loop and the record follows.
  kernel_->loops["/dev/loop3"] = {.device = "/dev/loop3", .backing_file = "/elsewhere"};
  auto stack = OpenStack();
  ASSERT_TRUE(stack->Up().ok());
  auto bindings = exportfs::LoadLoopBindings(state_.root);
  ASSERT_TRUE(bindings.ok());
  ASSERT_EQ(bindings->size(), 1u);
  const std::string device = (*bindings)[0].device;
  EXPECT_NE(device, "/dev/loop3");
  ASSERT_TRUE(kernel_->loops.count(device));
  EXPECT_EQ(kernel_->loops[device].backing_file, file);
  EXPECT_EQ(kernel_->loops[device].sector_size, 4096u);

  kernel_->mounted_loops.insert(device);
  Status down = stack->Down(/*force=*/false);
  EXPECT_EQ(down.code(), EBUSY) << down.ToString();
  EXPECT_NE(stack->registry().Find("tank/vol"), nullptr);  // still up
  ASSERT_TRUE(stack->Down(/*force=*/true).ok());
  EXPECT_FALSE(kernel_->loops.count(device));
  EXPECT_TRUE(kernel_->loops.count("/dev/loop3"));  // not ours: left alone
  // Still recorded for the next `up`.
  EXPECT_EQ(exportfs::LoadLoopBindings(state_.root)->size(), 1u);
}

TEST_F(StackTest, OneShotStackRegistersNothing) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  Stack::Options o;
  o.kernel = kernel_;
  o.open_path = [this](const std::string& path, bool) -> Result<bdev::BlockDevicePtr> {
    return devices_.at(path);
  };
  auto stack = Stack::Open(state_, Mode::kOneShot, o);
  EXPECT_FALSE(stack->Up().ok());
  auto vol = stack->OpenDevice("tank/vol", Access::kReadOnly);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_TRUE((*vol)->read_only());
  EXPECT_TRUE(stack->registry().List().empty());
  EXPECT_EQ(stack->ListDeviceNames(), std::vector<std::string>{"tank/vol"});
  EXPECT_TRUE(stack->OpenDevice("tank/none", Access::kReadOnly).status().IsNotFound());
}

bool HasEdge(const StackGraph& g, NodeKind from_kind, const std::string& from, EdgeKind kind,
             NodeKind to_kind, const std::string& to) {
  for (const auto& e : g.edges) {
    if (e.from == NodeRef{from_kind, from} && e.kind == kind && e.to == NodeRef{to_kind, to}) {
      return true;
    }
  }
  return false;
}

// The graph of a live stack: the pool, its vdev and volume as the pool holds them, the
// volume's exports as the (fake) kernel and the records show them, and what uses what.
TEST_F(StackTest, GraphHoldsTheLiveStackAndItsUses) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  const std::string file = state_.devfs_dir() + "/tank/vol";
  // Recorded for `up` on loop7, which is bound elsewhere: up moves it to a free loop.
  ASSERT_TRUE(exportfs::UpdateLoopBindings(state_.root, [&](auto& now) {
                now.push_back({"/dev/loop7", "tank/vol", file, 512, false, false});
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(UpdateNbdState(state_.root, state_.nbd_path(), [](auto& now) {
                NbdListenerRecord r;
                r.socket = "/nonexistent/nbd.sock";
                r.exports.push_back({"vol", "tank/vol"});
                now.push_back(r);
                return Status::Ok();
              }).ok());
  kernel_->loops["/dev/loop7"] = {.device = "/dev/loop7", .backing_file = "/elsewhere"};
  auto stack = OpenStack();
  stack->Up().IgnoreError();  // the NBD socket's directory does not exist: reported, not fatal
  auto bindings = exportfs::LoadLoopBindings(state_.root);
  ASSERT_TRUE(bindings.ok());
  const std::string loop = (*bindings)[0].device;
  kernel_->mounts = {{loop, "/mnt/x", "xfs"}, {"/dev/sda1", "/", "ext4"}};
  kernel_->open_files[file] = {"pid 42 (dd)"};

  const StackGraph g = stack->Graph(GraphDepth::kFull);
  EXPECT_TRUE(g.daemon);
  EXPECT_EQ(g.devfs_dir, state_.devfs_dir());
  ASSERT_EQ(g.pools.size(), 1u);
  EXPECT_EQ(g.pools[0].health, "ONLINE");
  ASSERT_EQ(g.volumes.size(), 1u);
  EXPECT_EQ(g.volumes[0].name, "tank/vol");
  EXPECT_EQ(g.volumes[0].size, 16 * kMiB);
  EXPECT_TRUE(g.volumes[0].active);
  EXPECT_TRUE(
      HasEdge(g, NodeKind::kPool, "tank", EdgeKind::kBuiltOn, NodeKind::kVdev, "/mem/tank0"));
  EXPECT_TRUE(
      HasEdge(g, NodeKind::kVolume, "tank/vol", EdgeKind::kBuiltOn, NodeKind::kPool, "tank"));
  EXPECT_TRUE(
      HasEdge(g, NodeKind::kDevice, "tank/vol", EdgeKind::kExportedAs, NodeKind::kLoop, loop));
  EXPECT_TRUE(HasEdge(g, NodeKind::kDevice, "tank/vol", EdgeKind::kExportedAs, NodeKind::kDevfs,
                      "tank/vol"));
  EXPECT_TRUE(HasEdge(g, NodeKind::kDevfs, "tank/vol", EdgeKind::kOpenedBy, NodeKind::kProcess,
                      "pid 42 (dd)"));
  EXPECT_TRUE(HasEdge(g, NodeKind::kDevice, "tank/vol", EdgeKind::kExportedAs, NodeKind::kNbd,
                      "unix:/nonexistent/nbd.sock vol"));
  // Only the loop's mount is a node: the rest of the machine's mounts are not the stack's.
  ASSERT_EQ(g.mounts.size(), 1u);
  EXPECT_EQ(g.MountsOf(loop).size(), 1u);

  const std::vector<std::string> uses = {
      "bound to " + loop + ", mounted on /mnt/x", "open by pid 42 (dd)",
      "recorded for `up` as served over NBD on unix:/nonexistent/nbd.sock (`volstack nbd stop "
      "unix:/nonexistent/nbd.sock` first)"};
  EXPECT_EQ(g.UsesOf("tank/vol"), uses);
  EXPECT_EQ(g.UsesOf("/mem/tank0"), std::vector<std::string>{"a vdev of pool tank"});
  EXPECT_TRUE(g.UsesOf("tank/other").empty());
  // A busy check reads the same uses without opening anything more.
  const StackGraph cheap = stack->Graph(GraphDepth::kUses);
  EXPECT_TRUE(cheap.volumes.empty());
  EXPECT_EQ(cheap.UsesOf("tank/vol"), uses);
  Status busy = stack->CheckNotInUse({"tank/other", "tank/vol"});
  EXPECT_EQ(busy.code(), EBUSY);
  EXPECT_EQ(busy.message(), "tank/vol is " + uses[0] + "; " + uses[1] + "; " + uses[2]);

  // Unbound, the binding is still recorded for `up`: a use, and a loop of status's.
  kernel_->loops.erase(loop);
  kernel_->open_files.clear();
  const StackGraph after = stack->Graph(GraphDepth::kUses);
  ASSERT_FALSE(after.UsesOf("tank/vol").empty());
  EXPECT_EQ(after.UsesOf("tank/vol")[0], "recorded for `up` as bound to " + loop +
                                             " (`volstack losetup -d " + loop + "` first)");
  ASSERT_EQ(after.LoopsOf("tank/vol").size(), 1u);
  EXPECT_FALSE(after.LoopsOf("tank/vol")[0]->bound);
  ASSERT_TRUE(stack->Down(/*force=*/true).ok());
}

// A damaged record is a problem of the graph, which the rest still fills.
TEST_F(StackTest, GraphReportsADamagedRecordAndReadsTheRest) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  { std::ofstream(state_.root + "/loops.json") << "{ not json"; }
  auto stack = OpenStack();
  stack->Up().IgnoreError();
  const StackGraph g = stack->Graph(GraphDepth::kFull);
  ASSERT_EQ(g.problems.size(), 1u);
  EXPECT_NE(g.problems[0].ToString().find("loops.json"), std::string::npos);
  EXPECT_EQ(g.volumes.size(), 1u);
  ASSERT_TRUE(stack->Down(/*force=*/true).ok());
}

// Typed replies: status's tree is the graph's; the same request answered by a one-shot stack
// differs only in what is live.
TEST_F(StackTest, StatusReplyIsTheGraphsTree) {
  MakePool("tank", "/mem/tank0", "tank/vol");
  nlohmann::json live_tree, offline_tree;
  {
    auto stack = OpenStack();
    ASSERT_TRUE(stack->Up().ok());
    auto reply = Handle(*stack, {"status", nlohmann::json::object()});
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->code, 0);
    live_tree = reply->data["tree"];
    ASSERT_TRUE(stack->Down(/*force=*/true).ok());
  }
  {
    Stack::Options o;
    o.kernel = kernel_;
    o.open_path = [this](const std::string& path, bool) -> Result<bdev::BlockDevicePtr> {
      return devices_.at(path);
    };
    auto stack = Stack::Open(state_, Mode::kOneShot, o);
    auto reply = Handle(*stack, {"status", nlohmann::json::object()});
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    offline_tree = reply->data["tree"];
  }
  EXPECT_EQ(live_tree["daemon"], true);
  EXPECT_EQ(offline_tree["daemon"], false);
  EXPECT_EQ(live_tree["pools"][0]["volumes"][0]["active"], true);
  EXPECT_EQ(live_tree["pools"][0]["volumes"][0]["exports"]["devfs"],
            state_.devfs_dir() + "/tank/vol");
  EXPECT_EQ(offline_tree["pools"][0]["volumes"][0]["active"], false);
  EXPECT_TRUE(offline_tree["pools"][0]["volumes"][0]["exports"]["devfs"].is_null());
  // What is not live is the same.
  for (auto* t : {&live_tree, &offline_tree}) {
    (*t)["daemon"] = nullptr;
    (*t)["devfs"] = nullptr;
    (*t)["fuse_transport"] = nullptr;
    auto& v = (*t)["pools"][0]["volumes"][0];
    v["active"] = nullptr;
    v["exports"]["devfs"] = nullptr;
  }
  EXPECT_EQ(live_tree.dump(), offline_tree.dump());
  EXPECT_EQ(offline_tree["pools"][0]["vdevs"], nlohmann::json::array({"/mem/tank0"}));
}

TEST_F(StackTest, JobsReplyWithoutADaemonNamesNoJob) {
  auto stack = Stack::Open(state_, Mode::kOneShot, {});
  auto list = Handle(
      *stack, {"jobs", {{"wait", false}, {"stop", false}, {"ids", nlohmann::json::array()}}});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->code, 0);
  EXPECT_TRUE(list->data["jobs"].empty());
  auto wait = Handle(*stack, {"jobs", {{"wait", true}, {"ids", {3}}}});
  ASSERT_TRUE(wait.ok());
  EXPECT_EQ(wait->code, 1);
  ASSERT_EQ(wait->errors.size(), 1u);
  EXPECT_NE(wait->errors[0].find("no daemon is running, so no job"), std::string::npos);
  EXPECT_EQ(Handle(*stack, {"nonesuch", nlohmann::json::object()}).status().code(), EINVAL);
}

}  // namespace
}  // namespace volstack::stack
