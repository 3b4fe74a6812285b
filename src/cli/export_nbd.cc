// volstack nbd serve [--socket PATH | --bind 127.0.0.1:PORT] [-r] [--foreground] NAME...
// volstack nbd stop (-a | LISTENER...)
// volstack nbd list
//
// With a daemon running, `serve` starts a listener inside it and returns at once, printing
// the address it listens on ("unix:PATH" or "127.0.0.1:PORT"); the listener is recorded in
// <state_dir>/nbd.json and `volstack up` restores it (cli/nbd_listeners.h). `stop` closes a
// listener (named by its address or socket path) and drops its record, as `losetup -d` does
// for a loop device; `list` shows the recorded listeners and whether they are serving.
//
// Without a daemon, `serve` runs its own server until SIGINT/SIGTERM (in the background
// unless --foreground), recorded nowhere; `stop` and `list` work on the records only.
// Export name = device name, or NAME of NAME=PATH. Default: the Unix socket
// <state_dir>/nbd.sock.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "bdev/device_registry.h"
#include "cli/device_names.h"
#include "cli/export_common.h"
#include "cli/nbd_listeners.h"
#include "export/nbd/nbd_server.h"

namespace volstack::cli {

namespace {

struct NbdArgs {
  std::string socket;
  std::string bind;
  bool read_only = false;
  bool foreground = false;
  unsigned threads = 8;
  std::vector<std::string> names;
};

// Runs the server in this process (no daemon).
int ServeStandalone(Context& ctx, const NbdArgs& args, const stack::NbdListenerRecord& record) {
  exportfs::nbd::NbdServerOptions options;
  options.read_only = args.read_only;
  options.threads_per_connection = args.threads;
  options.socket_path = record.socket;
  options.bind = record.bind;
  auto registry = std::make_shared<bdev::DeviceRegistry>();
  std::unique_ptr<exportfs::nbd::NbdServer> server;
  auto start = [&]() -> Status {
    for (const auto& e : record.exports) {
      VS_ASSIGN_OR_RETURN(auto device, OpenDeviceByName(ctx, e.device, args.read_only));
      VS_RETURN_IF_ERROR(registry->Add(e.name, std::move(device)));
    }
    VS_ASSIGN_OR_RETURN(server, exportfs::nbd::NbdServer::Start(*registry, options));
    if (args.foreground)
      std::fprintf(stderr, "volstack: serving NBD on %s\n", server->address().c_str());
    return Status::Ok();
  };
  auto stop = [&]() {
    server.reset();
    for (const auto& [name, device] : registry->List()) {
      Status s = device->Flush();
      if (!s.ok())
        std::fprintf(stderr, "volstack: flush %s: %s\n", name.c_str(), s.ToString().c_str());
    }
  };
  return RunServer(ctx, "nbd", args.foreground, start, stop);
}

int RunNbdServe(Context& ctx, const NbdArgs& args) {
  if (!args.socket.empty() && !args.bind.empty()) {
    return ReportUsage("nbd serve: --socket and --bind are mutually exclusive");
  }
  if (args.names.empty()) return ReportUsage("nbd serve: no device to export");
  stack::NbdListenerRecord record;
  record.read_only = args.read_only;
  for (const auto& arg : args.names) {
    auto [name, open_name] = SplitExportArg(arg);
    if (!bdev::DeviceRegistry::IsValidName(name)) {
      return ReportUsage("nbd serve: '" + name + "' is not a valid export name (use NAME=PATH)");
    }
    for (const auto& e : record.exports) {
      if (e.name == name) return ReportUsage("nbd serve: '" + name + "' is exported twice");
    }
    // A path is recorded absolute: `up` runs in another directory.
    if (!open_name.empty() && (open_name.front() == '.' || open_name.find('/') == 0 ||
                               std::filesystem::exists(open_name))) {
      std::error_code ec;
      auto abs = std::filesystem::absolute(open_name, ec);
      if (!ec) open_name = abs.lexically_normal().string();
    }
    record.exports.push_back({name, open_name});
  }
  if (!args.bind.empty()) {
    record.bind = args.bind;
  } else {
    std::string socket = args.socket.empty() ? ctx.global.state_dir + "/nbd.sock" : args.socket;
    std::error_code ec;
    auto abs = std::filesystem::absolute(socket, ec);
    record.socket = ec ? socket : abs.lexically_normal().string();
  }
  auto* daemon = stack::Daemon::Current();
  if (daemon == nullptr) return ServeStandalone(ctx, args, record);
  auto address = ServeNbdInDaemon(*daemon, ctx, record);
  if (!address.ok()) return ReportFailure(address.status().WithContext("nbd serve"));
  std::printf("%s\n", address->c_str());
  return kExitOk;
}

int RunNbdStop(Context& ctx, bool all, const std::vector<std::string>& listeners) {
  if (all == !listeners.empty()) return ReportUsage("nbd stop: give -a or listener addresses");
  std::vector<std::string> addresses;
  if (all) {
    auto list = ListNbd(ctx);
    if (!list.ok()) return ReportFailure(list.status());
    for (const auto& l : *list) addresses.push_back(l.record.address());
  } else {
    for (const auto& l : listeners) addresses.push_back(stack::NbdAddressOf(l));
  }
  int rc = kExitOk;
  for (const auto& a : addresses) {
    if (Status s = StopNbd(ctx, a); !s.ok()) rc = ReportFailure(s.WithContext("nbd stop"));
  }
  return rc;
}

std::string ExportsText(const stack::NbdListenerRecord& r) {
  std::string text;
  for (const auto& e : r.exports) {
    if (!text.empty()) text += ",";
    text += e.name == e.device ? e.name : e.name + "=" + e.device;
  }
  return text;
}

int RunNbdList(const Context& ctx) {
  auto list = ListNbd(ctx);
  if (!list.ok()) return ReportFailure(list.status());
  if (ctx.global.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& l : *list) {
      nlohmann::json exports = nlohmann::json::array();
      for (const auto& e : l.record.exports) {
        exports.push_back({{"name", e.name}, {"device", e.device}});
      }
      arr.push_back({{"address", l.record.address()},
                     {"read_only", l.record.read_only},
                     {"serving", l.serving},
                     {"connections", l.connections},
                     {"unserved", l.unserved},
                     {"exports", exports}});
    }
    std::printf("%s\n", nlohmann::json{{"listeners", arr}}.dump(2).c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"ADDRESS", "RO", "STATE", "EXPORTS"}};
  for (const auto& l : *list) {
    std::string state = l.serving ? "serving" : "stopped";
    if (!l.unserved.empty()) state += " (missing " + std::to_string(l.unserved.size()) + ")";
    rows.push_back(
        {l.record.address(), l.record.read_only ? "yes" : "no", state, ExportsText(l.record)});
  }
  std::vector<size_t> width(4, 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); i++) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); i++) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
  return kExitOk;
}

}  // namespace

void RegisterNbdVerb(CLI::App& app, Context& ctx) {
  CLI::App* nbd = app.add_subcommand("nbd", "Serve devices over NBD");
  nbd->require_subcommand(1);
  auto args = std::make_shared<NbdArgs>();
  CLI::App* serve = AddVerb(
      *nbd, ctx, "serve",
      "Serve devices over NBD (in the daemon when one runs, recorded for `up`; else until stopped)",
      [&ctx, args] { return RunNbdServe(ctx, *args); });
  serve->add_option("--socket", args->socket, "Unix socket (default <state-dir>/nbd.sock)");
  serve->add_option("--bind", args->bind, "TCP address HOST:PORT (e.g. 127.0.0.1:10809)");
  serve->add_flag("-r,--read-only", args->read_only, "Export read-only");
  serve->add_flag("-f,--foreground", args->foreground, "Without a daemon: stay in the foreground");
  serve->add_option("--threads", args->threads, "Requests in service per connection")
      ->check(CLI::Range(1, 128));
  serve->add_option("NAME", args->names, "Devices: NAME, PATH or NAME=PATH")->required();

  auto all = std::make_shared<bool>(false);
  auto listeners = std::make_shared<std::vector<std::string>>();
  CLI::App* stop = AddVerb(*nbd, ctx, "stop", "Stop NBD listeners and forget them",
                           [&ctx, all, listeners] { return RunNbdStop(ctx, *all, *listeners); });
  stop->add_flag("-a,--all", *all, "Every recorded listener");
  stop->add_option("LISTENER", *listeners, "unix:PATH, a socket path, or HOST:PORT");

  AddVerb(*nbd, ctx, "list", "List the NBD listeners recorded for `up`",
          [&ctx] { return RunNbdList(ctx); });
}

}  // namespace volstack::cli
