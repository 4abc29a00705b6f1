// A process's rank in a distributed job, from its environment: the
// variables torchrun (and launchers that mimic it) set for every rank --
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
// MASTER_PORT -- and CUDA_VISIBLE_DEVICES.  Read from /proc/PID/environ,
// the block the process was exec'ed with, when the recording learns of the
// process (its exec, or the attach scan).  A rank started without them
// (torch.multiprocessing.spawn passes the rank as an argument) is named by
// the Python hook instead: after init_process_group it marks the process
// with the same variables (kRankMarkPrefix), read by ParseRankMark.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string_view>

#include "gpuos_trace.pb.h"

namespace gpuos {

// Parses an environ block (NUL-separated NAME=value).  nullopt when it sets
// none of RANK, LOCAL_RANK and WORLD_SIZE (a launcher, a single-process
// job); values that are not integers are left unset.
std::optional<v1::RankInfo> ParseRankEnvironment(std::string_view environ_block);

// The name of the Python hook's range that states a process's rank:
// "torch.distributed RANK=1 WORLD_SIZE=4 ..." (agent/python_hooks).
inline constexpr std::string_view kRankMarkPrefix = "torch.distributed ";

// Parses such a range name (space-separated NAME=value, as in an environ
// block); nullopt when it is not one or names no rank.
std::optional<v1::RankInfo> ParseRankMark(std::string_view range_name);

// The same from /proc/`pid`/environ, with `host` filled in; nullopt when
// the file cannot be read (the process is gone) or names no rank.
std::optional<v1::RankInfo> ReadRankInfo(pid_t pid, std::string_view host);

}  // namespace gpuos
