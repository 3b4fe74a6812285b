// volstack nbd serve [--socket PATH | --bind 127.0.0.1:PORT] [-r] [--foreground] NAME...
//
// Serves the named devices over NBD (export name = device name, or NAME of NAME=PATH) until
// SIGINT/SIGTERM. Default: the Unix socket <state_dir>/nbd.sock.
#include <cstdio>
#include <memory>

#include "bdev/device_registry.h"
#include "cli/device_names.h"
#include "cli/export_common.h"
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

int RunNbdServe(Context& ctx, const NbdArgs& args) {
  if (!args.socket.empty() && !args.bind.empty()) {
    return ReportUsage("nbd serve: --socket and --bind are mutually exclusive");
  }
  if (args.names.empty()) return ReportUsage("nbd serve: no device to export");
  std::vector<std::pair<std::string, std::string>> exports;
  for (const auto& arg : args.names) {
    auto [name, open_name] = SplitExportArg(arg);
    if (!bdev::DeviceRegistry::IsValidName(name)) {
      return ReportUsage("nbd serve: '" + name + "' is not a valid export name (use NAME=PATH)");
    }
    exports.emplace_back(name, open_name);
  }
  exportfs::nbd::NbdServerOptions options;
  options.read_only = args.read_only;
  options.threads_per_connection = args.threads;
  if (!args.bind.empty()) {
    options.bind = args.bind;
  } else {
    options.socket_path = args.socket.empty() ? ctx.global.state_dir + "/nbd.sock" : args.socket;
  }
  auto registry = std::make_shared<bdev::DeviceRegistry>();
  std::unique_ptr<exportfs::nbd::NbdServer> server;
  auto start = [&]() -> Status {
    for (const auto& [name, open_name] : exports) {
      VS_ASSIGN_OR_RETURN(auto device, OpenDeviceByName(ctx, open_name, args.read_only));
      VS_RETURN_IF_ERROR(registry->Add(name, std::move(device)));
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

}  // namespace

void RegisterNbdVerb(CLI::App& app, Context& ctx) {
  CLI::App* nbd = app.add_subcommand("nbd", "Serve devices over NBD");
  nbd->require_subcommand(1);
  auto args = std::make_shared<NbdArgs>();
  CLI::App* serve = AddVerb(*nbd, ctx, "serve", "Serve devices over NBD until stopped",
                            [&ctx, args] { return RunNbdServe(ctx, *args); });
  serve->add_option("--socket", args->socket, "Unix socket (default <state-dir>/nbd.sock)");
  serve->add_option("--bind", args->bind, "TCP address HOST:PORT (e.g. 127.0.0.1:10809)");
  serve->add_flag("-r,--read-only", args->read_only, "Export read-only");
  serve->add_flag("-f,--foreground", args->foreground, "Stay in the foreground");
  serve->add_option("--threads", args->threads, "Requests in service per connection")
      ->check(CLI::Range(1, 128));
  serve->add_option("NAME", args->names, "Devices: NAME, PATH or NAME=PATH")->required();
}

}  // namespace volstack::cli
