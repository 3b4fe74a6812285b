#include "stack/scrub_jobs.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace volstack::stack {

std::string ScrubProgress(const pool::ScanInfo& scan) {
  // to_examine is the allocation when the scan started; a finished scan examined all of it.
  const double pct = scan.state == "finished" ? 100.0
                     : scan.to_examine        ? 100.0 * static_cast<double>(scan.examined) /
                                             static_cast<double>(scan.to_examine)
                                       : 0.0;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f%% examined, %llu bytes repaired, %llu errors",
                pct > 100 ? 100.0 : pct, static_cast<unsigned long long>(scan.repaired),
                static_cast<unsigned long long>(scan.errors));
  return buf;
}

Result<std::shared_ptr<JobRecord>> StartScrubJob(Jobs& jobs, std::shared_ptr<pool::Pool> pool) {
  VS_RETURN_IF_ERROR(pool->Scrub());
  const std::string name = pool->name();
  return jobs.Start(
      "scrub", name,
      [pool](JobRecord& record) -> Status {
        // The scan runs in the pool; the job reports it until it ends or pauses.
        std::thread waiter;
        std::atomic<bool> ended{false};
        Status result;
        waiter = std::thread([&] {
          result = pool->WaitScan();
          ended = true;
        });
        while (!ended) {
          record.SetProgress(ScrubProgress(pool->Info().scan));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        waiter.join();
        const pool::ScanInfo scan = pool->Info().scan;
        record.SetProgress(ScrubProgress(scan) + " (" + scan.state + ")");
        if (!result.ok()) return result;
        if (scan.state == "canceled") return Status::FromErrno(ECANCELED, "scrub canceled");
        if (scan.state == "paused") return Status::FromErrno(ECANCELED, "scrub paused");
        return Status::Ok();
      },
      [pool] { pool->CancelScrub().IgnoreError(); });
}

}  // namespace volstack::stack
