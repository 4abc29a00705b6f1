// Putting traces of several hosts on one clock.  Every host timestamps in
// its own CLOCK_MONOTONIC (time since that host booted); a trace records
// (monotonic, realtime) pairs at its start and end, which map that clock to
// the host's wall clock, and so to another host's monotonic clock as far as
// the two wall clocks agree.  Collectives that all ranks end together (an
// allreduce ends on every rank within one message latency) then measure the
// remaining skew directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuos_trace.pb.h"

namespace gpuos {

// realtime - monotonic of one host over its recording.
struct WallClockOffset {
  int64_t offset_ns = 0;
  // How far the true offset at any instant of the recording may be from
  // offset_ns: the pair readings' own uncertainty plus half of how much the
  // offset moved from start to end (NTP slewing the wall clock).
  uint64_t uncertainty_ns = 0;
};

// `end` may be null or unset (monotonic_ns 0): a trace without a trailer.
WallClockOffset WallClockOffsetOf(const v1::ClockPair& start, const v1::ClockPair* end);

// What to add to one host's monotonic timestamps to put them on another's.
struct SkewEstimate {
  int64_t skew_ns = 0;
  uint64_t bound_ns = 0;
  // "reference", "wall_clock", "collectives" (NCCL kernels) or
  // "cpu_collectives" (gloo's waits; see MergedHost in the proto).
  std::string basis;
  uint32_t collectives_matched = 0;
};

// From the two hosts' wall-clock offsets.  The bound is what the files
// measure; it cannot include how far the two wall clocks themselves
// disagree (NTP keeps that to about a millisecond or less on a LAN, PTP to
// microseconds; the files cannot say which).
SkewEstimate SkewFromWallClocks(const WallClockOffset& reference, const WallClockOffset& host);

// Refines `coarse` from the end times of the same collectives on the
// reference host and on this host, each in its own host's clock (any order;
// either list may start or stop earlier than the other).  The collectives
// are paired by the shift that lines up the most of them, the one nearest
// `coarse` among near-equals (periodic collectives line up at every
// multiple of their period, so the coarse estimate must be within half a
// period of the truth for the pairing to be right); the skew is `coarse`
// plus the median of the paired differences and the bound their largest
// distance from that median.  nullopt when fewer than 3 pair up.
std::optional<SkewEstimate> RefineSkewFromCollectives(std::vector<uint64_t> reference_ends,
                                                      std::vector<uint64_t> host_ends,
                                                      const SkewEstimate& coarse);

// The ends of the CPU collectives (gloo) one rank waited for in one of its
// steps, in its host's clock, sorted.
struct StepCollectiveEnds {
  uint64_t step = 0;  // the step's index
  std::vector<uint64_t> ends_ns;
};

// How far apart two ranks' ends of one exchange of a CPU collective are
// taken to be at most: a message latency and a thread wakeup on each side
// (tens of microseconds on an idle host and LAN, more under load).
inline constexpr uint64_t kSameExchangeNs = 250'000;

// Refines `coarse` from CPU collectives: a rank waiting in an allreduce is
// woken when a peer's data arrives, so the ranks' waits for one exchange end
// within kSameExchangeNs of each other.  The ranks' counts of waits differ
// (a rank waiting for a straggler blocks in every phase, the straggler
// finds most data there, several threads wake within microseconds, a rank
// may wait again after the collective), so ends pair neither by order nor
// by nearness alone.  Steps pair first: host step k with reference step
// k + d, d the offset that pairs the most steps, the one whose last ends
// line up nearest `coarse` among near-equals (so `coarse` must be within
// half a step of the truth).  Then the difference of ends that the most
// steps share (within kSameExchangeNs: some exchange of the step ends
// together on both) is found among every reference end minus every host end
// of each pair of steps, and each step contributes its difference nearest
// it.  The skew is their median; the bound their largest distance from it
// plus kSameExchangeNs, for a lag common to every step (the rank that sends
// last gets its data a message latency before the others; a busier host
// wakes its threads later), which their spread cannot show.  nullopt when
// fewer than 3 steps pair up.
std::optional<SkewEstimate> RefineSkewFromStepCollectives(const std::vector<StepCollectiveEnds>& reference,
                                                          const std::vector<StepCollectiveEnds>& host,
                                                          const SkewEstimate& coarse);

}  // namespace gpuos
