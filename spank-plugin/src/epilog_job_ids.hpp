// The job ids a job's node-local checkpoint copies may be named by, for the job epilog (context_job_script.cpp).
//
// Each component of a heterogeneous job has its own epilog, run under the component's own job id, but tenax-launch
// names the copies of every component after the id its batch script sees: the leader's, which slurmd gives the epilog
// as SLURM_HET_JOB_ID. Pure: the epilog passes its environment's value and logs the problem.
#pragma once

#include <string>
#include <vector>

namespace tenax::spank {

struct EpilogJobIds {
  std::vector<std::string> ids;  // the job's own id first, then the leader's when it is another
  std::string problem;           // a leader id that is not a job id, ignored: what to log ("" when none)
};

// `het_leader`: SLURM_HET_JOB_ID (nullptr or "" outside a heterogeneous job). Only decimal digits (at most 10, a
// 32-bit id) are taken: the value names folders to remove.
EpilogJobIds epilog_job_ids(const std::string& job_id, const char* het_leader);

}  // namespace tenax::spank
