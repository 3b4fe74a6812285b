#include "bench/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/cancel.h"

namespace volstack::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxOutput = 4 << 20;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The child side of a fork: only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(char* const* argv, char* const* envp, const char* cwd, int out_fd) {
  setpgid(0, 0);
  // A shell may have started us with SIGINT ignored (a background job); dbench and the FUSE
  // servers must still stop when the bench signals them.
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, 0);
  dup2(out_fd, 1);
  dup2(out_fd, 2);
  if (cwd != nullptr && chdir(cwd) != 0) _exit(126);
  execvpe(argv[0], argv, envp);
  _exit(errno == ENOENT ? 127 : 126);
}

struct ExecArgs {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<std::string> env_storage;
  std::vector<char*> envp;

  ExecArgs(const std::vector<std::string>& args, const std::vector<std::string>& extra_env)
      : storage(args) {
    for (auto& s : storage) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
    for (const auto& e : extra_env) env_storage.push_back(e);
    for (auto& s : env_storage) envp.push_back(s.data());
    envp.push_back(nullptr);
  }
};

// Signals the child's process group (it is its own group leader).
void SignalGroup(pid_t pid, int sig) {
  if (kill(-pid, sig) != 0) kill(pid, sig);
}

}  // namespace

std::string CommandResult::Tail(int n) const {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  std::string tail;
  for (size_t i = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0; i < lines.size();
       ++i) {
    if (!tail.empty()) tail += " | ";
    tail += lines[i];
  }
  return tail;
}

std::string JoinCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t'\"\\$") == std::string::npos;
    out += plain ? a : "'" + a + "'";
  }
  return out;
}

bool ProgramExists(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::istringstream in(dirs);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    std::string full = dir + "/" + program;
    struct stat st;
    if (stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(full.c_str(), X_OK) == 0) {
      return true;
    }
  }
  return false;
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const CommandOptions& options) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  if (!ProgramExists(argv[0])) return Status::NotFound(argv[0] + ": program not found");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  ExecArgs args(argv, options.env);
  const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    return ErrnoStatus("fork", err);
  }
  if (pid == 0) ExecChild(args.argv.data(), args.envp.data(), cwd, fds[1]);
  setpgid(pid, pid);  // also from the parent, so a signal right after fork finds the group
  close(fds[1]);
  int out = fds[0];
  fcntl(out, F_SETFL, fcntl(out, F_GETFL) | O_NONBLOCK);

  CommandResult result;
  std::string partial;
  auto consume = [&](const char* data, size_t n) {
    result.output.append(data, n);
    if (result.output.size() > kMaxOutput) {
      result.output.erase(0, result.output.size() - kMaxOutput);
    }
    if (!options.on_line) return;
    partial.append(data, n);
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      options.on_line(std::string_view(partial).substr(start, nl - start));
    }
    partial.erase(0, start);
  };
  auto drain = [&] {
    char buf[8192];
    for (;;) {
      ssize_t n = read(out, buf, sizeof buf);
      if (n > 0) {
        consume(buf, static_cast<size_t>(n));
        continue;
      }
      return n == 0;  // EOF
    }
  };

  const auto start = Clock::now();
  int stop_stage = 0;  // 0 running, 1 SIGINT sent, 2 SIGTERM sent, 3 SIGKILL sent
  Clock::time_point stop_time;
  bool eof = false;
  int wstatus = 0;
  for (;;) {
    pid_t done = waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) break;
    if (!eof) {
      struct pollfd p {
        out, POLLIN, 0
      };
      poll(&p, 1, 100);
      eof = drain();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (options.on_tick) options.on_tick();
    bool want_stop = (options.stop_on_cancel && CancelRequested()) ||
                     (options.timeout_seconds > 0 && SecondsSince(start) > options.timeout_seconds);
    if (want_stop && stop_stage == 0) {
      result.cancelled = CancelRequested();
      result.timed_out = !result.cancelled;
      SignalGroup(pid, SIGINT);
      stop_stage = 1;
      stop_time = Clock::now();
    } else if (stop_stage == 1 && SecondsSince(stop_time) > 3) {
      SignalGroup(pid, SIGTERM);
      stop_stage = 2;
    } else if (stop_stage == 2 && SecondsSince(stop_time) > 10) {
      SignalGroup(pid, SIGKILL);
      stop_stage = 3;
    }
  }
  drain();
  close(out);
  if (!partial.empty() && options.on_line) options.on_line(partial);
  // dbench's worker processes are in the child's group; make sure none outlives it.
  if (stop_stage > 0) SignalGroup(pid, SIGKILL);
  if (WIFEXITED(wstatus)) {
    result.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    result.term_signal = WTERMSIG(wstatus);
  }
  return result;
}

Result<std::string> RunChecked(const std::vector<std::string>& argv,
                               const CommandOptions& options) {
  VS_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, options));
  if (r.success()) return std::move(r.output);
  std::string what = JoinCommand(argv);
  if (r.cancelled) return Status::FromErrno(ECANCELED, what + ": interrupted");
  std::string how = r.timed_out          ? "timed out"
                    : r.term_signal != 0 ? "killed by signal " + std::to_string(r.term_signal)
                                         : "exit " + std::to_string(r.exit_code);
  std::string tail = r.Tail();
  return Status::IoError(what + ": " + how + (tail.empty() ? "" : ": " + tail));
}

Result<pid_t> StartBackground(const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  if (!ProgramExists(argv[0])) return Status::NotFound(argv[0] + ": program not found");
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) return ErrnoStatus("open " + log_path);
  ExecArgs args(argv, {});
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(log_fd);
    return ErrnoStatus("fork", err);
  }
  if (pid == 0) ExecChild(args.argv.data(), args.envp.data(), nullptr, log_fd);
  setpgid(pid, pid);
  close(log_fd);
  return pid;
}

bool ChildRunning(pid_t pid) {
  int wstatus;
  pid_t r = waitpid(pid, &wstatus, WNOHANG);
  return r == 0;
}

Status StopProcess(pid_t pid, double grace_seconds) {
  int wstatus = 0;
  if (waitpid(pid, &wstatus, WNOHANG) == pid) return Status::Ok();  // already gone
  kill(pid, SIGTERM);
  const auto start = Clock::now();
  while (SecondsSince(start) < grace_seconds) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  SignalGroup(pid, SIGKILL);
  waitpid(pid, &wstatus, 0);
  return Status::Busy("process " + std::to_string(pid) + " ignored SIGTERM for " +
                      std::to_string(static_cast<int>(grace_seconds)) + " s; killed");
}

Result<ProcessUsage> ParseProcessUsage(std::string_view status_text, std::string_view stat_text,
                                       long clock_ticks_per_second) {
  ProcessUsage usage;
  auto field_kib = [&](std::string_view key) -> uint64_t {
    size_t at = status_text.find(key);
    if (at == std::string_view::npos) return 0;
    return std::strtoull(std::string(status_text.substr(at + key.size(), 32)).c_str(), nullptr, 10);
  };
  usage.peak_rss_kib = field_kib("VmHWM:");
  usage.rss_kib = field_kib("VmRSS:");
  // /proc/PID/stat: "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // fields are counted from the last ')'. utime and stime are fields 14 and 15.
  size_t close_paren = stat_text.rfind(')');
  if (close_paren == std::string_view::npos) {
    return Status::Corruption("unexpected /proc/PID/stat text");
  }
  std::istringstream in(std::string(stat_text.substr(close_paren + 1)));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && (in >> field); ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  if (!in) return Status::Corruption("short /proc/PID/stat text");
  usage.cpu_seconds =
      static_cast<double>(utime + stime) / static_cast<double>(clock_ticks_per_second);
  return usage;
}

Result<ProcessUsage> ReadProcessUsage(pid_t pid) {
  auto slurp = [](const std::string& path) -> Result<std::string> {
    std::ifstream in(path);
    if (!in) return ErrnoStatus("read " + path, errno ? errno : ENOENT);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  std::string base = "/proc/" + std::to_string(pid);
  VS_ASSIGN_OR_RETURN(std::string status, slurp(base + "/status"));
  VS_ASSIGN_OR_RETURN(std::string stat, slurp(base + "/stat"));
  return ParseProcessUsage(status, stat, sysconf(_SC_CLK_TCK));
}

}  // namespace volstack::bench
