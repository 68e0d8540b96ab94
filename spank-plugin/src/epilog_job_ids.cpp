#include "epilog_job_ids.hpp"

#include <algorithm>

namespace tenax::spank {

EpilogJobIds epilog_job_ids(const std::string& job_id, const char* het_leader) {
  EpilogJobIds result{{job_id}, {}};
  if (het_leader == nullptr || *het_leader == '\0') return result;
  const std::string text = het_leader;
  const bool digits =
      text.size() <= 10 && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    result.problem = "job " + job_id + ": SLURM_HET_JOB_ID='" + text.substr(0, 32) +
                     "' in the epilog's environment is not a job id; only the copies named after job " + job_id +
                     " are removed";
    return result;
  }
  if (text != job_id) result.ids.push_back(text);
  return result;
}

}  // namespace tenax::spank
