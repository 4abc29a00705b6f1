// Communication of one rank of a distributed job, per step: the time its
// threads spent in collectives, and how much of it no compute hid.
//
// GPU side: NCCL kernels (ncclKernel*/ncclDevKernel*) are communication.
// CPU side (gloo, and the store of torch.distributed), from the OS events
// alone, with no help from the job:
//   network threads  threads of the rank that blocked at least
//                    kMinNetworkWaits times, and for at least
//                    kMinNetworkFraction of their blocked waits, in a
//                    poll/epoll/select/recv call ended by an interrupt
//                    (data arriving from the network: over TCP, loopback
//                    included, the wakeup comes from the softirq) or in
//                    any wait ended by a thread of another rank (gloo's
//                    device loop; not the training thread, whose store
//                    reads at start-up and barriers are a few of its
//                    waits);
//   comm threads     the network threads, and every other thread of the
//                    rank (not the driving one) that at least
//                    kMinNetworkWaits times and for kMinCommWaitFraction of
//                    its waits was woken by a network thread (gloo's
//                    workers, waiting for a peer's data in a collective).
// Within a step, communication is the union of
//   (a) NCCL kernels of the rank,
//   (b) comm threads' waits ended by a network thread (a collective waiting
//       for its peers),
//   (c) the driving thread's waits ended by a comm thread (it waited for a
//       collective: DDP's backward finalization, a synchronous all_reduce),
//   (d) the driving thread's own network waits (e.g. a store barrier);
// and exposed communication is the part of it when the driving thread was
// off the CPU and no other kernel ran: what no compute overlapped.
// A network thread's own waits are not counted: gloo's device loop waits
// in epoll whether or not a collective is running.
// Known gaps: a poll/recv ended by a timer interrupt cannot be told from
// one ended by data, so a thread that polls with timeouts and also feeds
// another counts as a network thread; collectives' CPU work (gloo's
// reductions) is not counted, only their waits.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

inline constexpr uint32_t kMinNetworkWaits = 2;
inline constexpr double kMinNetworkFraction = 0.5;
inline constexpr double kMinCommWaitFraction = 0.2;

bool IsNcclKernel(std::string_view name);

// The syscall numbers of `header`'s table that wait for a socket: poll,
// ppoll, select, pselect6, epoll_wait, epoll_pwait(2), recvfrom, recvmsg,
// recvmmsg.
absl::flat_hash_set<int32_t> NetworkWaitSyscalls(const v1::TraceHeader& header);

// One off-CPU interval of a thread of the rank.
struct ThreadWait {
  uint32_t tid = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  int32_t syscall_nr = -1;
  uint32_t waker_tid = 0;
  uint32_t waker_pid = 0;
  bool blocked = false;         // voluntary: it waited for something
  bool from_interrupt = false;  // woken from an interrupt (known context only)
};

struct KernelSpan {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool nccl = false;
};

struct CommunicationInput {
  std::vector<ThreadWait> waits;    // every off-CPU interval of the rank's threads
  std::vector<KernelSpan> kernels;  // of the rank's processes
  uint32_t driving_tid = 0;
  absl::flat_hash_set<uint32_t> peer_pids;  // the processes of the other ranks
  absl::flat_hash_set<int32_t> network_syscalls;
};

struct StepCommunication {
  uint64_t comm_ns = 0;
  uint64_t exposed_ns = 0;
  // The ends, within the step, of the comm threads' waits ended by a
  // network thread (b): a collective's worker receiving a peer's data, at
  // about the same instant on every rank for the collective's last
  // exchange (what a merge aligns hosts' clocks by).  Sorted.
  std::vector<uint64_t> collective_ends_ns;
};

struct CommunicationAnalysis {
  std::vector<uint32_t> network_threads;  // sorted
  std::vector<uint32_t> comm_threads;     // sorted; the network threads included
  std::vector<StepCommunication> steps;   // one per requested step
};

// The network and comm threads, from the waits alone (driving_tid is not
// read): what the step analysis is told to leave out of its choice of the
// driving thread.
struct CommunicationThreads {
  absl::flat_hash_set<uint32_t> network;
  absl::flat_hash_set<uint32_t> comm;  // the network threads included
};
CommunicationThreads ClassifyCommunicationThreads(const CommunicationInput& input);

// `steps`: [start, end) of each step.  The driving thread is never a comm
// thread here.
CommunicationAnalysis AnalyzeCommunication(const CommunicationInput& input,
                                           const std::vector<std::pair<uint64_t, uint64_t>>& steps);

}  // namespace gpuos
