// The tracks of an exported timeline: one per process and per thread, child
// tracks for what may overlap a thread's own slices (syscalls, off-CPU time),
// one per GPU stream, per-process tracks for NVTX start/end ranges, CUDA
// sync waits and what a kind names itself (a block device), the steps
// track, an attached recording's window and the counter tracks.  Found
// while the trace is read (pass 1), described to the viewers before any
// event (pass 2).
//
// A track whose slices would not nest (two kernels of one CUDA graph running
// at once on one stream) gets overflow lanes: more tracks, created during
// pass 2, that carry the slices which did not fit.  A lane has its base
// track's name and parent, so that Perfetto merges it back into one visual
// track (sibling tracks of one name merge by default).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuos {

enum class TrackKind : uint8_t {
  kProcess,       // ProcessDescriptor; process-wide instants (exec, exit)
  kThread,        // ThreadDescriptor; CUDA API calls, NVTX push/pop, marks
  kThreadOs,      // "<tid> OS": mmap, munmap, futex wait
  kThreadOffCpu,  // "<tid> off-CPU"
  kGpuStream,     // kernels, memcpys, memsets of one pid/device/context/stream
  kGpuSync,       // a process's host waits for the GPU
  kNvtxAsync,     // a process's NVTX start/end ranges (may cross threads)
  kSteps,         // training steps, per process or for the whole trace
  kAttachWindow,  // an attached recording's window, for the whole trace
  kCaptureWindows,  // a process's capture windows (--capture): CUDA detail inside
  kNamed,         // a process's track for one thing a kind draws ("disk vda"), named by the kind
  kCounter,
};

enum class CounterKind : uint8_t {
  kGpuBusyPercent,            // per device
  kPageFaultsPerSecond,       // per process
  kContextSwitchesPerSecond,  // per process
};

// Chrome JSON has only (pid, tid) to place an event; tracks that are not a
// thread get a made-up tid above any real one (pid_max is at most 2^22).
inline constexpr uint32_t kJsonSyntheticTidBase = 1u << 30;
// The made-up process of tracks that belong to no process.
inline constexpr uint32_t kJsonGlobalPid = 0x7ffffff0;

struct Track {
  uint64_t uuid = 0;
  uint64_t parent_uuid = 0;  // 0: a root track
  TrackKind kind = TrackKind::kProcess;
  CounterKind counter = CounterKind::kGpuBusyPercent;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  std::string name;
  std::vector<std::string> cmdline;  // processes only
  uint32_t base = 0;  // the track this is an overflow lane of (itself if none)
  uint32_t lane = 0;  // 0 for the track itself
  uint32_t json_pid = 0;
  uint32_t json_tid = 0;
};

class TrackTable {
 public:
  // Get-or-create; each returns the track's index.  A thread's process and a
  // child track's thread are created along with it.
  uint32_t Process(uint32_t pid);
  uint32_t Thread(uint32_t pid, uint32_t tid);
  uint32_t ThreadChild(uint32_t pid, uint32_t tid, TrackKind kind);
  uint32_t GpuStream(uint32_t pid, uint32_t device, uint32_t context, uint32_t stream);
  uint32_t ProcessChild(uint32_t pid, TrackKind kind);  // kGpuSync, kNvtxAsync
  // A kNamed track of process `pid`, one per name.
  uint32_t NamedProcessChild(uint32_t pid, std::string_view name);
  uint32_t Steps(uint32_t pid);                         // pid 0: the whole trace
  uint32_t AttachWindow();
  uint32_t Counter(CounterKind kind, uint32_t pid_or_device);
  // The n-th (n >= 1) overflow lane of `base`, created on first use.
  uint32_t Lane(uint32_t base, uint32_t n);

  // Latest names win: a process is shown under the name it ended with.
  void SetProcessName(uint32_t pid, std::string_view name);
  void SetProcessCmdline(uint32_t pid, std::vector<std::string> cmdline);
  void SetThreadName(uint32_t pid, uint32_t tid, std::string_view name);
  // A merged trace (stream/trace_merge.h): process pid belongs to host
  // pid / pid_stride, whose name prefixes the process's, so each host's
  // processes read, and sort, as one group.
  void SetHosts(std::vector<std::string> host_names, uint32_t pid_stride);
  // A process of a distributed job (its RankInfo): "rank R/W" prefixes its
  // name, after the host, so a job's ranks read as one group per host.
  void SetRank(uint32_t pid, int32_t rank, int32_t world_size);

  // Names the tracks derived from threads; call once, after pass 1.
  // Tracks created later (lanes) are named as they are created.
  void Seal();

  const Track& at(uint32_t index) const { return tracks_[index]; }
  uint32_t size() const { return static_cast<uint32_t>(tracks_.size()); }

 private:
  uint32_t Add(Track track);
  void NameChild(Track& track) const;

  std::vector<Track> tracks_;
  absl::flat_hash_map<uint32_t, uint32_t> processes_;
  absl::flat_hash_map<uint64_t, uint32_t> threads_;  // pid << 32 | tid
  absl::flat_hash_map<std::tuple<uint64_t, uint8_t>, uint32_t> children_;
  absl::flat_hash_map<std::tuple<uint32_t, std::string>, uint32_t> named_;
  absl::flat_hash_map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>, uint32_t> streams_;
  absl::flat_hash_map<std::tuple<uint8_t, uint32_t>, uint32_t> counters_;
  absl::flat_hash_map<std::tuple<uint32_t, uint32_t>, uint32_t> lanes_;
  bool sealed_ = false;
  std::vector<std::string> host_names_;
  uint32_t pid_stride_ = 0;
  absl::flat_hash_map<uint32_t, std::string> rank_labels_;
};

}  // namespace gpuos
