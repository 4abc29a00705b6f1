// Rank variables from a process's environment; see rank_environment.h.
#include "record/rank_environment.h"

#include <algorithm>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "absl/strings/numbers.h"
#include "common/valid_utf8.h"

namespace gpuos {
namespace {

// The environment block is at most ARG_MAX-ish; a rank's variables are
// normally near its end or start, so the whole block is read, within a cap
// that keeps a huge environment from costing the recording loop.
constexpr size_t kMaxEnvironBytes = 1 << 20;

std::optional<int32_t> Int(std::string_view value) {
  int32_t v = 0;
  if (!absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<v1::RankInfo> ParseRankEnvironment(std::string_view block) {
  v1::RankInfo info;
  bool named = false;
  while (!block.empty()) {
    const size_t end = block.find('\0');
    const std::string_view entry = block.substr(0, end);
    block = end == std::string_view::npos ? std::string_view() : block.substr(end + 1);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = entry.substr(0, eq);
    const std::string_view value = entry.substr(eq + 1);
    if (name == "RANK") {
      if (auto v = Int(value)) info.set_rank(*v), named = true;
    } else if (name == "LOCAL_RANK") {
      if (auto v = Int(value)) info.set_local_rank(*v), named = true;
    } else if (name == "WORLD_SIZE") {
      if (auto v = Int(value)) info.set_world_size(*v), named = true;
    } else if (name == "LOCAL_WORLD_SIZE") {
      if (auto v = Int(value)) info.set_local_world_size(*v);
    } else if (name == "GROUP_RANK") {
      if (auto v = Int(value)) info.set_group_rank(*v);
    } else if (name == "MASTER_ADDR") {
      info.set_master_addr(ValidUtf8(std::string(value.substr(0, 255))));
    } else if (name == "MASTER_PORT") {
      if (auto v = Int(value); v && *v > 0) info.set_master_port(static_cast<uint32_t>(*v));
    } else if (name == "CUDA_VISIBLE_DEVICES") {
      info.set_cuda_visible_devices(ValidUtf8(std::string(value.substr(0, 255))));
    }
  }
  if (!named) return std::nullopt;
  return info;
}

std::optional<v1::RankInfo> ParseRankMark(std::string_view range_name) {
  if (range_name.substr(0, kRankMarkPrefix.size()) != kRankMarkPrefix) return std::nullopt;
  std::string block(range_name.substr(kRankMarkPrefix.size()));
  std::replace(block.begin(), block.end(), ' ', '\0');
  return ParseRankEnvironment(block);
}

std::optional<v1::RankInfo> ReadRankInfo(pid_t pid, std::string_view host) {
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string block;
  char buf[8192];
  while (block.size() < kMaxEnvironBytes) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    block.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  std::optional<v1::RankInfo> info = ParseRankEnvironment(block);
  if (info) info->set_host(std::string(host));
  return info;
}

}  // namespace gpuos
