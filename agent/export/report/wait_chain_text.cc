// Wakeup chains for people and programs; see report/wait_chain_text.h.
#include "export/report/wait_chain_text.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "export/report/text_table.h"

namespace gpuos {

std::vector<const WaitVia*> ViaOf(const StepAnalysis& a, IdleCause cause) {
  std::vector<const WaitVia*> rows;
  for (const WaitVia& v : a.measured_total.via) {
    if (v.cause == cause && v.ns > 0) rows.push_back(&v);
  }
  std::sort(rows.begin(), rows.end(), [](const WaitVia* x, const WaitVia* y) {
    return x->hop != y->hop ? x->hop < y->hop : x->ns != y->ns ? x->ns > y->ns : x->tid < y->tid;
  });
  return rows;
}

namespace {

const ThreadInfo* Info(const StepAnalysis& a, uint32_t tid) {
  auto it = a.threads.find(tid);
  return it == a.threads.end() ? nullptr : &it->second;
}

std::string Thread(const StepAnalysis& a, uint32_t tid) {
  const ThreadInfo* info = Info(a, tid);
  return info ? absl::StrFormat("%u \"%s\"", tid, Printable(info->comm)) : absl::StrCat(tid);
}

// "pin-memory thread 812 "python3"" / "data workers 820 "w0", 821 "w1" (+2 more)"
std::string HopText(const StepAnalysis& a, const std::vector<const WaitVia*>& rows) {
  std::map<ThreadRole, std::vector<const WaitVia*>> by_role;
  for (const WaitVia* v : rows) {
    const ThreadInfo* info = Info(a, v->tid);
    by_role[info ? info->role : ThreadRole::kOther].push_back(v);
  }
  std::vector<std::string> parts;
  for (const auto& [role, vs] : by_role) {
    std::string names;
    for (size_t i = 0; i < vs.size() && i < 3; ++i) absl::StrAppend(&names, i ? ", " : "", Thread(a, vs[i]->tid));
    if (vs.size() > 3) absl::StrAppend(&names, absl::StrFormat(" (+%d more)", vs.size() - 3));
    parts.push_back(absl::StrCat(ThreadRoleName(role, vs.size()), " ", names));
  }
  return absl::StrJoin(parts, " / ");
}

}  // namespace

std::string WaitChainText(const StepAnalysis& a, IdleCause cause) {
  const std::vector<const WaitVia*> rows = ViaOf(a, cause);
  if (rows.empty()) return std::string();
  uint8_t deepest = 0;
  for (const WaitVia* v : rows) deepest = std::max(deepest, v->hop);
  std::string text = "via ";
  for (uint8_t hop = 0; hop <= deepest; ++hop) {
    std::vector<const WaitVia*> level;
    for (const WaitVia* v : rows) {
      // A thread is named once per hop, whether its chain ends there or not.
      if (v->hop != hop) continue;
      auto same = [&](const WaitVia* x) { return x->tid == v->tid; };
      if (std::none_of(level.begin(), level.end(), same)) level.push_back(v);
    }
    if (level.empty()) continue;
    if (hop > 0) text += " <- ";
    text += HopText(a, level);
  }
  // What the threads at the ends of the chains did while they were waited for.
  HopStates states{};
  uint64_t ends_ns = 0;
  size_t threads = 0;
  ThreadRole role = ThreadRole::kOther;
  bool one_role = true;
  std::vector<uint32_t> seen;
  for (const WaitVia* v : rows) {
    if (!v->last) continue;
    ends_ns += v->ns;
    for (size_t i = 0; i < kHopStateCount; ++i) states[i] += v->states[i];
    if (std::find(seen.begin(), seen.end(), v->tid) != seen.end()) continue;
    seen.push_back(v->tid);
    const ThreadInfo* info = Info(a, v->tid);
    const ThreadRole r = info ? info->role : ThreadRole::kOther;
    if (threads++ > 0 && r != role) one_role = false;
    role = r;
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < kHopStateCount; ++i) {
    if (ends_ns && states[i] * 100 >= ends_ns) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return states[x] > states[y]; });
  std::vector<std::string> shares;
  for (size_t i : order) {
    shares.push_back(absl::StrFormat("%s %.0f%%", HopStateName(static_cast<HopState>(i)),
                                     100.0 * static_cast<double>(states[i]) / static_cast<double>(ends_ns)));
  }
  if (!shares.empty()) {
    const std::string who = one_role ? absl::StrCat("the ", ThreadRoleName(role, threads), " waited for ",
                                                    threads > 1 ? "were " : "was ")
                                     : std::string("the threads waited for were ");
    absl::StrAppend(&text, ": ", who, absl::StrJoin(shares, ", "), " of the wait");
  }
  return text;
}

void WaitChainJson(const StepAnalysis& a, IdleCause cause, JsonWriter& json, size_t max_rows) {
  const std::vector<const WaitVia*> rows = ViaOf(a, cause);
  json.Key("via");
  json.BeginArray();
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    const WaitVia& v = *rows[i];
    const ThreadInfo* info = Info(a, v.tid);
    json.BeginObject();
    json.Field("tid", v.tid);
    json.Field("pid", info ? info->pid : 0u);
    json.Field("comm", info ? info->comm : std::string());
    json.Field("role", ThreadRoleKey(info ? info->role : ThreadRole::kOther));
    json.Field("hop", static_cast<uint32_t>(v.hop));
    json.Field("last", v.last);
    json.Field("ns", v.ns);
    json.Key("state_ns");
    json.BeginObject();
    for (size_t s = 0; s < kHopStateCount; ++s) json.Field(HopStateKey(static_cast<HopState>(s)), v.states[s]);
    json.EndObject();
    json.EndObject();
  }
  json.EndArray();
  if (rows.size() > max_rows) json.Field("via_left_out", static_cast<uint64_t>(rows.size() - max_rows));
}

std::string WorkerGroupLabel(const StepAnalysis& a) {
  return a.WorkersAreNotADataLoaders() ? absl::StrFormat("worker processes, not a DataLoader's (%u)", a.worker_processes)
                                     : absl::StrFormat("data workers (%u processes)", a.worker_processes);
}

}  // namespace gpuos
