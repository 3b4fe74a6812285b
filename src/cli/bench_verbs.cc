// volstack bench: the seed's dbench experiment on volstack's stacks (src/bench/bench.h).
// This file only maps the command line onto bench::BenchOptions.
#include <fmt/format.h>

#include "bench/bench.h"
#include "cli/verbs.h"
#include "util/size.h"

namespace volstack::cli {

namespace {

struct BenchArgs {
  bench::BenchOptions options;
  std::string size = "2G";
  std::string stacks;
  // Set once the options exist; --quick fills in only what was not given.
  CLI::Option* time = nullptr;
  CLI::Option* clients = nullptr;
  CLI::Option* size_option = nullptr;
  CLI::Option* repeat = nullptr;
  bool seed_params = false;
};

}  // namespace

void RegisterBenchVerbs(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* verb = AddVerb(
      app, ctx, "bench", "Run the seed's dbench experiment on volstack's stacks and compare them",
      [&ctx, args]() -> int {
        bench::BenchOptions& o = args->options;
        bench::QuickOverrides set;
        set.seconds = args->time->count() > 0;
        set.clients = args->clients->count() > 0;
        set.size = args->size_option->count() > 0;
        set.repeat = args->repeat->count() > 0;
        if (o.quick && args->seed_params) {
          return ReportUsage("bench: --quick and --seed-params cannot be combined");
        }
        bench::ApplyQuickDefaults(o, set);
        if (args->seed_params) {
          bench::ApplySeedParams(o, set);
          if (!set.size) args->size = "8G";
        }
        if (o.quick && !set.size) args->size = "1G";
        auto size = ParseSize(args->size);
        if (!size.ok()) return ReportUsage("bench: --size: " + size.status().message());
        o.size_bytes = *size;
        if (!args->stacks.empty()) {
          auto stacks = bench::ParseStackList(args->stacks);
          if (!stacks.ok()) return ReportUsage("bench: --stacks: " + stacks.status().message());
          o.stacks = *stacks;
        }
        o.verbose = ctx.global.verbose;
        o.version = VOLSTACK_VERSION;
        return bench::RunBench(o);
      });
  bench::BenchOptions& o = args->options;
  auto* time = verb->add_option("-t,--time", o.seconds, "Seconds of dbench per stack and repeat")
                   ->capture_default_str();
  auto* clients =
      verb->add_option("-c,--clients", o.clients, "dbench clients (block mode: threads)")
          ->capture_default_str();
  auto* size = verb->add_option("-s,--size", args->size,
                                "Size of each stack's filesystem device (sparse files)")
                   ->capture_default_str();
  verb->add_option("-d,--dir", o.dir, "Where to make the scratch directory")->capture_default_str();
  verb->add_option("--stacks", args->stacks,
                   "Comma-separated stacks: file, zvol, lvm-on-zvol, lvm-on-loop-on-zvol, "
                   "lvm-on-file, zvol-512 (default: all)");
  auto* repeat = verb->add_option("-r,--repeat", o.repeat, "Runs per stack, interleaved")
                     ->capture_default_str();
  verb->add_option("-o,--output", o.output,
                   "Results directory (default: DIR/volstack-bench-results/TIMESTAMP)");
  verb->add_flag("--quick", o.quick, "The demo: 5 s per stack, 1 repeat, 1 GiB stores, 4 clients");
  verb->add_flag("--block", o.block,
                 "In-process block workload instead of dbench (no root, loop or dbench needed)");
  verb->add_flag("--fio", o.fio,
                 "fio's 4 KiB random and 1 MiB sequential phases on each stack's loop device "
                 "instead of dbench (--time is split over its five phases)");
  verb->add_flag("--seed-params", args->seed_params,
                 "The seed's own dbench run: 50 clients, 120 s, 8 GiB stores");
  args->time = time;
  args->clients = clients;
  args->size_option = size;
  args->repeat = repeat;
}

}  // namespace volstack::cli
