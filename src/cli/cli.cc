#include "cli/cli.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <thread>

#include "cli/verbs.h"
#include "stack/control_socket.h"
#include "stack/requests.h"
#include "stack/stack.h"
#include "stack/state_dir.h"
#include "util/request_io.h"
#include "util/state_file.h"

namespace volstack::cli {

int ReportFailure(const Status& status, int code) {
  std::fprintf(Err(), "volstack: %s\n", status.ToString().c_str());
  return code;
}

int ReportUsage(const std::string& message) {
  std::fprintf(Err(), "volstack: %s\n", message.c_str());
  return kExitUsage;
}

stack::Stack& Context::stack() const {
  if (live != nullptr) return *live;
  if (!one_shot) {
    one_shot = stack::Stack::Open(stack::StateDir{global.state_dir}, stack::Mode::kOneShot);
  }
  return *one_shot;
}

Result<stack::Reply> Context::Call(const stack::Request& request,
                                   const std::function<void(const std::string&)>& progress) const {
  if (live == nullptr) {
    const stack::StateDir state{global.state_dir};
    if (stack::DaemonIsRunning(state.socket_path())) {
      return stack::CallDaemon(state.socket_path(), request, progress);
    }
  }
  return stack::Handle(stack(), request, progress);
}

CLI::App* AddVerb(CLI::App& parent, Context& ctx, const std::string& name,
                  const std::string& description, std::function<int()> body) {
  CLI::App* verb = parent.add_subcommand(name, description);
  verb->callback([&ctx, body = std::move(body)] { ctx.exit_code = body(); });
  return verb;
}

namespace {

void AddGlobalOptions(CLI::App& app, Context& ctx) {
  if (const char* env = std::getenv("VOLSTACK_STATE_DIR"); env && *env) {
    ctx.global.state_dir = env;
  }
  app.add_option("--state-dir", ctx.global.state_dir,
                 "State directory (default /var/lib/volstack; env VOLSTACK_STATE_DIR)")
      ->capture_default_str();
  app.add_flag("--json", ctx.global.json, "Machine-readable output where a command reports");
  app.add_flag("-v,--verbose", ctx.global.verbose, "More detail on stderr (repeatable)");
}

// CLI11 prints multi-line errors with a usage hint; volstack answers a bad argument with
// one line naming the command.
std::string OneLine(const CLI::App& app, const std::string& what) {
  std::string line = what;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  // The verb's path below the program, whose name ReportUsage puts first.
  std::string path;
  for (const CLI::App* a = &app; a->get_parent() != nullptr; a = a->get_parent()) {
    path = a->get_name() + (path.empty() ? "" : " " + path);
  }
  return path.empty() ? line : path + ": " + line;
}

const CLI::App* DeepestParsed(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return DeepestParsed(*sub);
  return &app;
}

// The daemon holds its pid file locked until it has closed every device, which is after its
// control socket stops answering. Returns once that lock is free (or after 30 s).
void WaitForDaemonExit(const stack::StateDir& state) {
  for (int i = 0; i < 600; i++) {
    const int fd = ::open(state.pid_path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    const bool free = ::flock(fd, LOCK_SH | LOCK_NB) == 0;
    ::close(fd);
    if (free) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The state dir and the verb of a command line, read before CLI11 parses it; `help` when it
// asks for help or the version.
struct Invocation {
  std::string state_dir = stack::kDefaultStateDir;
  std::string verb;
  bool help = false;
};

Invocation ReadInvocation(int argc, char** argv) {
  Invocation inv;
  if (const char* env = std::getenv("VOLSTACK_STATE_DIR"); env && *env) inv.state_dir = env;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--state-dir" && i + 1 < argc) {
      inv.state_dir = argv[++i];
    } else if (a.rfind("--state-dir=", 0) == 0) {
      inv.state_dir = a.substr(12);
    } else if (a == "-h" || a == "--help" || a == "--version") {
      inv.help = true;
    } else if (inv.verb.empty() && !a.empty() && a[0] != '-') {
      inv.verb = a;
    }
  }
  return inv;
}

// The state dir is checked before anything is read from it or written anywhere: its files
// name the devices root's commands write to (util/state_file.h). `bench` makes its own.
std::optional<int> RefuseUnsafeStateDir(const Invocation& inv) {
  if (inv.help || inv.verb.empty() || inv.verb == "bench") return std::nullopt;
  if (Status st = CheckStateDir(inv.state_dir); !st.ok()) return ReportFailure(st);
  return std::nullopt;
}

// With a daemon running for the state dir, a command runs inside it, against the devices it
// holds open, with this process's stdio; without one, the same code runs here. The daemon and
// the verbs that start or serve a stack on their own always run here (`nbd` is forwarded:
// the daemon serves NBD itself, see export_nbd.cc).
std::optional<int> ForwardToDaemonIfRunning(const Invocation& inv, int argc, char** argv) {
  // A background mover started by `pvmove -b` holds its VG's mover lock and must run here:
  // a daemon could not take that lock over.
  if (std::getenv("VOLSTACK_PVMOVE_LOCK_FD") != nullptr) return std::nullopt;
  const std::string& verb = inv.verb;
  if (inv.help || verb.empty() || verb == "daemon" || verb == "bench" || verb == "devfs") {
    return std::nullopt;
  }
  // A verb with a typed reply parses its command line here and calls the daemon itself
  // (Context::Call).
  if (stack::HasTypedReply(verb)) return std::nullopt;
  const stack::StateDir state{inv.state_dir};
  if (!stack::DaemonIsRunning(state.socket_path())) return std::nullopt;
  std::vector<std::string> args(argv, argv + argc);
  auto code = stack::ForwardToDaemon(state.socket_path(), args);
  if (!code.ok()) return ReportFailure(code.status());
  if (verb == "down" && *code == kExitOk) {
    // The daemon stops after answering; `down` returns once it is gone, so what follows
    // (a new `up`, a reboot) never meets it half-stopped.
    for (int i = 0; i < 600 && stack::DaemonIsRunning(state.socket_path()); i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    WaitForDaemonExit(state);
  }
  return *code;
}

}  // namespace

int Main(int argc, char** argv, stack::Stack* live) {
  try {
    const Invocation inv = ReadInvocation(argc, argv);
    if (auto refused = RefuseUnsafeStateDir(inv)) return *refused;
    if (live == nullptr) {
      if (auto forwarded = ForwardToDaemonIfRunning(inv, argc, argv)) return *forwarded;
    }
    Context ctx;
    ctx.live = live;
    CLI::App app{"volstack: a userspace storage stack (pool, LVM2-compatible volumes, exports)",
                 "volstack"};
    app.set_version_flag("--version", std::string("volstack ") + VOLSTACK_VERSION);
    app.require_subcommand(1);
    app.fallthrough();
    AddGlobalOptions(app, ctx);
    RegisterPoolVerbs(app, ctx);
    RegisterLvmVerbs(app, ctx);
    RegisterExportVerbs(app, ctx);
    RegisterStackVerbs(app, ctx);
    RegisterBenchVerbs(app, ctx);
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      const CLI::App* verb = DeepestParsed(app);
      const int code = ReportUsage(OneLine(*verb, e.what()));
      while (verb->get_parent() != nullptr && verb->get_parent() != &app) verb = verb->get_parent();
      // The LVM verbs answer a bad command line as lvm2 does.
      const std::string& name = verb->get_name();
      const bool lvm_verb =
          name.rfind("pv", 0) == 0 || name.rfind("vg", 0) == 0 || name.rfind("lv", 0) == 0;
      return lvm_verb ? 3 : code;
    }
    return ctx.exit_code;
  } catch (const std::exception& e) {
    std::fprintf(Err(), "volstack: internal error: %s\n", e.what());
    return kExitFailure;
  }
}

}  // namespace volstack::cli
