// volstack nbd serve [--socket PATH | --bind HOST:PORT] [-r] [--foreground]
//                    [--tls=off|on|require] [--tls-psk FILE | --tls-certificates DIR
//                    [--tls-verify-peer]]
//                    [--max-connections N] [--handshake-limit SECONDS] NAME...
// volstack nbd stop (-a | LISTENER...)
// volstack nbd list
//
// With a daemon running, `serve` starts a listener inside it and returns at once, printing
// the address it listens on ("unix:PATH" or "127.0.0.1:PORT"); the listener is recorded in
// <state_dir>/nbd.json and `volstack up` restores it (stack/nbd_listeners.h). `stop` closes a
// listener (named by its address or socket path) and drops its record, as `losetup -d` does
// for a loop device; `list` shows the recorded listeners and whether they are serving.
//
// Without a daemon, `serve` runs its own server until SIGINT/SIGTERM (in the background
// unless --foreground), recorded nowhere; `stop` and `list` work on the records only.
// Export name = device name, or NAME of NAME=PATH. Default: the Unix socket
// <state_dir>/nbd.sock.
//
// A TCP listener serves only over TLS (STARTTLS with a PSK file in psktool's format or an
// X.509 directory, as nbdkit) unless --tls=off says plaintext on purpose; a Unix socket
// (mode 0600) defaults to off. The TLS and limit settings are recorded with the listener.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "bdev/device_registry.h"
#include "cli/device_names.h"
#include "cli/export_common.h"
#include "export/nbd/nbd_server.h"
#include "stack/nbd_listeners.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::cli {

namespace {

struct NbdArgs {
  std::string socket;
  std::string bind;
  bool read_only = false;
  bool foreground = false;
  unsigned threads = 8;
  std::string tls;
  std::string tls_psk;
  std::string tls_certificates;
  bool tls_verify_peer = false;
  uint64_t max_connections = 64;
  uint64_t handshake_limit = 10;
  std::vector<std::string> names;
};

std::string Absolute(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

// Runs the server in this process (no daemon).
int ServeStandalone(Context& ctx, const NbdArgs& args, const stack::NbdListenerRecord& record,
                    exportfs::nbd::NbdServerOptions options) {
  options.threads_per_connection = args.threads;
  auto registry = std::make_shared<bdev::DeviceRegistry>();
  std::unique_ptr<exportfs::nbd::NbdServer> server;
  auto start = [&]() -> Status {
    for (const auto& e : record.exports) {
      VS_ASSIGN_OR_RETURN(auto device, OpenDeviceByName(ctx, e.device, args.read_only));
      VS_RETURN_IF_ERROR(registry->Add(e.name, std::move(device)));
    }
    VS_ASSIGN_OR_RETURN(server, exportfs::nbd::NbdServer::Start(*registry, options));
    if (args.foreground)
      std::fprintf(Err(), "volstack: serving NBD on %s\n", server->address().c_str());
    return Status::Ok();
  };
  auto stop = [&]() {
    server.reset();
    for (const auto& [name, device] : registry->List()) {
      Status s = device->Flush();
      if (!s.ok())
        std::fprintf(Err(), "volstack: flush %s: %s\n", name.c_str(), s.ToString().c_str());
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
  record.tls = args.tls;
  record.tls_psk = Absolute(args.tls_psk);
  record.tls_certificates = Absolute(args.tls_certificates);
  record.tls_verify_peer = args.tls_verify_peer;
  record.max_connections = args.max_connections;
  record.handshake_limit = args.handshake_limit;
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
  // Bad TLS or limit settings are refused before any device is opened or anything recorded.
  auto options = stack::NbdServerOptionsOf(record);
  // The message names the option at fault and starts with "nbd: " already.
  if (!options.ok()) return ReportUsage(options.status().message());
  if (!ctx.stack().live()) return ServeStandalone(ctx, args, record, *options);
  auto address = ctx.stack().nbd().Serve(record);
  if (!address.ok()) return ReportFailure(address.status().WithContext("nbd serve"));
  std::fprintf(Out(), "%s\n", address->c_str());
  return kExitOk;
}

int RunNbdStop(Context& ctx, bool all, const std::vector<std::string>& listeners) {
  if (all == !listeners.empty()) return ReportUsage("nbd stop: give -a or listener addresses");
  std::vector<std::string> addresses;
  if (all) {
    auto list = ctx.stack().nbd().List();
    if (!list.ok()) return ReportFailure(list.status());
    for (const auto& l : *list) addresses.push_back(l.record.address());
  } else {
    for (const auto& l : listeners) addresses.push_back(stack::NbdAddressOf(l));
  }
  int rc = kExitOk;
  for (const auto& a : addresses) {
    if (Status s = ctx.stack().nbd().Stop(a); !s.ok())
      rc = ReportFailure(s.WithContext("nbd stop"));
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
  auto list = ctx.stack().nbd().List();
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
                     {"tls", l.record.tls.empty() ? "off" : l.record.tls},
                     {"serving", l.serving},
                     {"connections", l.connections},
                     {"unserved", l.unserved},
                     {"exports", exports}});
    }
    std::fprintf(Out(), "%s\n", nlohmann::json{{"listeners", arr}}.dump(2).c_str());
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
    std::fprintf(Out(), "%s\n", line.c_str());
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
  serve->add_option("--tls", args->tls,
                    "off, on or require (default: require with credentials; a TCP listener "
                    "without TLS needs --tls=off)");
  serve->add_option("--tls-psk", args->tls_psk, "TLS pre-shared keys file (psktool's format)");
  serve->add_option("--tls-certificates", args->tls_certificates,
                    "TLS X.509 directory: server-cert.pem, server-key.pem, ca-cert.pem");
  serve->add_flag("--tls-verify-peer", args->tls_verify_peer,
                  "X.509: serve only clients whose certificate ca-cert.pem signs");
  serve
      ->add_option("--max-connections", args->max_connections,
                   "Clients served at once; more are refused (default 64)")
      ->check(CLI::Range(1, 65536));
  serve
      ->add_option("--handshake-limit", args->handshake_limit,
                   "Seconds a client has to finish the handshake, TLS included (default 10)")
      ->check(CLI::Range(1, 3600));
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
