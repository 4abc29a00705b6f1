// Roles of the traced threads, by name and by who wakes whom; see
// thread_roles.h.
#include "analysis/thread_roles.h"

#include "analysis/step_finder.h"

namespace gpuos {

const char* ThreadRoleKey(ThreadRole role) {
  switch (role) {
    case ThreadRole::kDriving: return "driving";
    case ThreadRole::kAutograd: return "autograd";
    case ThreadRole::kPinMemory: return "pin_memory";
    case ThreadRole::kDataWorker: return "data_worker";
    case ThreadRole::kWorkerProcess: return "worker_process";
    case ThreadRole::kCuda: return "cuda";
    case ThreadRole::kThreadPool: return "thread_pool";
    case ThreadRole::kOther:
    case ThreadRole::kCount: break;
  }
  return "other";
}

const char* ThreadRoleName(ThreadRole role) {
  switch (role) {
    case ThreadRole::kDriving: return "driving thread";
    case ThreadRole::kAutograd: return "autograd thread";
    case ThreadRole::kPinMemory: return "pin-memory thread";
    case ThreadRole::kDataWorker: return "data worker";
    case ThreadRole::kWorkerProcess: return "worker process";
    case ThreadRole::kCuda: return "CUDA thread";
    case ThreadRole::kThreadPool: return "pool thread";
    case ThreadRole::kOther:
    case ThreadRole::kCount: break;
  }
  return "thread";
}

std::string ThreadRoleName(ThreadRole role, size_t count) {
  std::string name = ThreadRoleName(role);
  if (count != 1) name += role == ThreadRole::kWorkerProcess ? "es" : "s";
  return name;
}

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

ThreadRole RoleFromComm(std::string_view comm) {
  if (StartsWith(comm, "pt_autograd")) return ThreadRole::kAutograd;
  if (StartsWith(comm, "pt_data_pin") || StartsWith(comm, "pt_pin_memory") || StartsWith(comm, "pin_memory")) {
    return ThreadRole::kPinMemory;
  }
  // The driver's and the runtime's threads: cuda-EvtHandlr, cuda000...,
  // cuda-Sched..., cuda-*.
  if (StartsWith(comm, "cuda-") || (StartsWith(comm, "cuda0"))) return ThreadRole::kCuda;
  for (std::string_view prefix : {"omp_", "gomp", "tbb", "pt_tp", "pt_thread_pool", "pt_intra", "pt_inter",
                                  "intra-op", "inter-op", "ThreadPool", "threadpool"}) {
    if (StartsWith(comm, prefix)) return ThreadRole::kThreadPool;
  }
  return ThreadRole::kOther;
}

ThreadRoles ThreadRoles::Assign(const ThreadActivity& activity, const StepPlan& plan) {
  ThreadRoles roles;
  for (const auto& [tid, facts] : activity.threads()) {
    ThreadInfo info;
    info.pid = facts.pid;
    info.comm = facts.comm;
    if (tid == plan.tid && facts.pid == plan.pid) {
      info.role = ThreadRole::kDriving;
    } else if (plan.IsWorker(facts.pid, tid)) {
      info.role = plan.WorkersAreNotADataLoaders() ? ThreadRole::kWorkerProcess : ThreadRole::kDataWorker;
    } else {
      info.role = RoleFromComm(facts.comm);
    }
    roles.threads_[tid] = std::move(info);
  }
  auto is_worker = [&](uint32_t tid) { return roles.RoleOf(tid) == ThreadRole::kDataWorker; };
  for (auto& [tid, info] : roles.threads_) {
    if (info.role != ThreadRole::kOther || info.pid != plan.pid) continue;
    if (ActsAsPinMemoryThread(activity, tid, plan.tid, is_worker)) info.role = ThreadRole::kPinMemory;
  }
  return roles;
}

ThreadRole ThreadRoles::RoleOf(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? ThreadRole::kOther : it->second.role;
}

const ThreadInfo* ThreadRoles::Find(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? nullptr : &it->second;
}

}  // namespace gpuos
