// A scrub of a live pool as a job of the daemon's stack (jobs.h): `zpool scrub` in the daemon
// starts the pool's scan and a job that watches it, so `volstack jobs` lists it with its
// progress, `zpool scrub -w` and `volstack jobs -w` wait for it, and `zpool scrub -s` (or
// `volstack jobs -s`) cancels it. The scan itself runs in the pool (pool/scan.h); the job
// ends when the scan finishes, is canceled or paused.
#pragma once

#include <memory>
#include <string>

#include "pool/spa.h"
#include "stack/jobs.h"

namespace volstack::stack {

// Starts (or resumes) the scrub of `pool` and returns the job that follows it. EBUSY when a
// scan already runs (as Pool::Scrub).
Result<std::shared_ptr<JobRecord>> StartScrubJob(Jobs& jobs, std::shared_ptr<pool::Pool> pool);

// The job's progress text: "12.50% examined, 0B repaired".
std::string ScrubProgress(const pool::ScanInfo& scan);

}  // namespace volstack::stack
