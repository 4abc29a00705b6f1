// The collection's shared state and its status reporting; see
// cupti_collection_state.h.
#include "cupti_collection_state.h"

#include <cstdio>

#include "event_channel.h"

namespace gpuos_shim {
namespace {

constexpr size_t kMaxProblemsInStatus = 4;

}  // namespace

State& S() {
  static State* state = new State();
  return *state;
}

void ReportProblem(const std::string& kind, const std::string& detail) {
  State& s = S();
  s.problems.fetch_add(1, std::memory_order_relaxed);
  std::string status;
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    for (const std::string& seen : s.problem_kinds) {
      if (seen == kind) return;
    }
    s.problem_kinds.push_back(kind);
    if (s.debug) fprintf(stderr, "gpuos-shim: %s\n", detail.c_str());
    if (s.problem_kinds.size() > kMaxProblemsInStatus) return;
    s.problem_text += "; " + detail;
    status = ComposeStatusLocked(s);
  }
  SetCuptiStatus(StatusActive(s), status);
}

bool CuptiOk(const char* call, CUptiResult result) {
  if (result == CUPTI_SUCCESS) return true;
  ReportProblem(call, std::string(call) + " failed: " + CuptiResultName(S().api, result));
  return false;
}

void Disable(const std::string& why) {
  State& s = S();
  std::string status;
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    s.base_status = why;
    status = ComposeStatusLocked(s);
    if (s.debug) fprintf(stderr, "gpuos-shim: %s\n", why.c_str());
  }
  s.active = false;
  SetCuptiStatus(false, status);
}

std::string CurrentStatus() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.problem_mu);
  return ComposeStatusLocked(s);
}

std::string ComposeStatusLocked(const State& s) {
  return s.base_status + s.capture_note + s.problem_text;
}

}  // namespace gpuos_shim
