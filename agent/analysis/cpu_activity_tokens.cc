// The CPU side of a job as tokens; see cpu_activity_tokens.h.
#include "analysis/cpu_activity_tokens.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpuos {
namespace {

const char* CauseName(v1::OffCpuCause cause) {
  switch (cause) {
    case v1::OFF_CPU_CAUSE_FUTEX: return "futex";
    case v1::OFF_CPU_CAUSE_SYSCALL: return "syscall";
    case v1::OFF_CPU_CAUSE_PAGE_FAULT: return "page fault";
    default: return "blocked";
  }
}

}  // namespace

uint32_t CpuActivityTokens::Symbol(const std::string& name) {
  auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
  if (inserted) names_.push_back(name);
  return it->second;
}

void CpuActivityTokens::Add(const v1::Event& e) {
  // Every thread's timeline: a loop may run on any thread.
  if (e.payload_case() == v1::Event::kOffCpu) {
    off_cpu_[e.tid()].emplace_back(e.ts_ns(), e.ts_ns() + e.off_cpu().duration_ns());
    sorted_ = false;
  } else if (e.payload_case() == v1::Event::kPageFaults) {
    page_faults_[e.tid()].emplace_back(e.ts_ns(), e.page_faults().count());
    sorted_ = false;
    return;
  }
  // Tokens: other threads (intra-op pools that spin then sleep, timer
  // threads) block on their own clocks, not the loop's.
  if (e.tid() != e.pid()) return;
  const char* role = "main thread";
  std::string name;
  uint64_t duration = 0;
  switch (e.payload_case()) {
    case v1::Event::kOffCpu: {
      const v1::OffCpu& off = e.off_cpu();
      if (off.cause() == v1::OFF_CPU_CAUSE_PREEMPTED || (!off.voluntary() && off.prev_state() == 0)) return;
      name = absl::StrCat(role, " blocked: ", CauseName(off.cause()));
      if (off.syscall_nr() >= 0) absl::StrAppend(&name, " in syscall ", off.syscall_nr());
      duration = off.duration_ns();
      break;
    }
    case v1::Event::kMmap:
      name = absl::StrCat(role, " mmap ", e.mmap().length(), " B");
      duration = e.mmap().duration_ns();
      break;
    case v1::Event::kMunmap:
      name = absl::StrCat(role, " munmap ", e.munmap().length(), " B");
      duration = e.munmap().duration_ns();
      break;
    default:
      return;
  }
  by_pid_[e.pid()].push_back(Token{e.ts_ns(), e.ts_ns() + duration, Symbol(name)});
}

uint32_t CpuActivityTokens::BusiestProcess() const {
  uint32_t best = 0;
  size_t most = 0;
  for (const auto& [pid, tokens] : by_pid_) {
    if (tokens.size() > most || (tokens.size() == most && pid < best)) {
      best = pid;
      most = tokens.size();
    }
  }
  return best;
}

size_t CpuActivityTokens::TokenCount(uint32_t pid) const {
  auto it = by_pid_.find(pid);
  return it == by_pid_.end() ? 0 : it->second.size();
}

std::vector<SequenceToken> CpuActivityTokens::Tokens(uint32_t pid, std::vector<std::string>& names) const {
  std::vector<SequenceToken> out;
  auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) return out;
  std::vector<Token> sorted = it->second;
  std::sort(sorted.begin(), sorted.end(), [](const Token& a, const Token& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.symbol < b.symbol;
  });
  // Dense symbol ids for this process only.
  absl::flat_hash_map<uint32_t, uint32_t> dense;
  names.clear();
  out.reserve(sorted.size());
  for (const Token& t : sorted) {
    auto [d, inserted] = dense.try_emplace(t.symbol, static_cast<uint32_t>(names.size()));
    if (inserted) names.push_back(names_[t.symbol]);
    out.push_back(SequenceToken{d->second, t.start_ns, t.end_ns});
  }
  return out;
}

bool CpuActivityTokens::HasTimeline(uint32_t tid) const { return off_cpu_.contains(tid); }

void CpuActivityTokens::SortOnce() const {
  if (sorted_) return;
  for (auto& [t, intervals] : off_cpu_) std::sort(intervals.begin(), intervals.end());
  for (auto& [t, records] : page_faults_) std::sort(records.begin(), records.end());
  sorted_ = true;
}

uint64_t CpuActivityTokens::PageFaults(uint32_t tid, uint64_t from, uint64_t to) const {
  SortOnce();
  auto it = page_faults_.find(tid);
  if (it == page_faults_.end()) return 0;
  uint64_t faults = 0;
  for (auto r = std::lower_bound(it->second.begin(), it->second.end(), std::make_pair(from, uint64_t{0}));
       r != it->second.end() && r->first < to; ++r) {
    faults += r->second;
  }
  return faults;
}

uint64_t CpuActivityTokens::RunningNs(uint32_t tid, uint64_t from, uint64_t to) const {
  if (to <= from) return 0;
  SortOnce();
  auto it = off_cpu_.find(tid);
  if (it == off_cpu_.end()) return to - from;
  const std::vector<std::pair<uint64_t, uint64_t>>& v = it->second;
  // The first interval that may end after `from`: intervals of one thread
  // do not overlap, so their ends are sorted too.
  auto k = std::lower_bound(v.begin(), v.end(), from,
                            [](const std::pair<uint64_t, uint64_t>& iv, uint64_t ts) { return iv.second <= ts; });
  uint64_t off = 0;
  for (; k != v.end() && k->first < to; ++k) off += std::min(to, k->second) - std::max(from, k->first);
  return to - from - std::min(off, to - from);
}

}  // namespace gpuos
