// Host lines and fields of the report; see report/host_report.h.
#include "export/report/host_report.h"

#include "absl/strings/str_format.h"

namespace gpuos {
namespace {

std::string BasisText(const v1::MergedHost& host) {
  if (host.skew_basis() == "reference") return "the reference clock";
  if (host.skew_basis() == "collectives") {
    return absl::StrFormat("from %d allreduce ends shared with the first host", host.collectives_matched());
  }
  if (host.skew_basis() == "cpu_collectives") {
    return absl::StrFormat("from the gloo collective waits of %d steps shared with the first host",
                           host.collectives_matched());
  }
  // The files cannot tell how far the hosts' wall clocks disagree.
  return "from wall clocks; plus however far the hosts' wall clocks disagree (NTP: ~0.1-10 ms)";
}

// 40 ns, 3.2 us, 1.250 ms: a bound of nanoseconds must not read as 0.000 ms.
std::string Duration(uint64_t ns) {
  if (ns < 1000) return absl::StrFormat("%d ns", ns);
  if (ns < 1000000) return absl::StrFormat("%.1f us", ns / 1e3);
  return absl::StrFormat("%.3f ms", ns / 1e6);
}

}  // namespace

void WriteHostsText(const v1::TraceHeader& header, std::ostream& out) {
  if (!header.has_merged()) return;
  if (header.merged().hosts().empty()) {
    out << "hosts (merged, but the header lists none: a damaged file)\n\n";
    return;
  }
  out << "hosts (merged; times on " << header.merged().hosts(0).hostname()
      << "'s clock; host i's pids and tids are i*" << header.merged().pid_stride() << " + its own):\n";
  int index = 0;
  for (const v1::MergedHost& host : header.merged().hosts()) {
    const uint64_t magnitude = host.skew_ns() < 0 ? -static_cast<uint64_t>(host.skew_ns()) : host.skew_ns();
    out << absl::StrFormat("  %d %-20s skew %s%s +/- %s  %s  (%s)\n", index++, host.hostname(),
                           host.skew_ns() < 0 ? "-" : "+", Duration(magnitude), Duration(host.skew_bound_ns()),
                           BasisText(host), host.source());
  }
  out << "\n";
}

void WriteHostsJson(const v1::TraceHeader& header, JsonWriter& json) {
  json.Key("hosts");
  json.BeginArray();
  if (!header.has_merged()) {
    json.BeginObject();
    json.Field("name", header.hostname());
    json.Field("skew_ns", int64_t{0});
    json.Field("skew_bound_ns", uint64_t{0});
    json.Field("skew_basis", "reference");
    json.Field("pid_offset", uint64_t{0});
    json.EndObject();
  } else {
    uint64_t index = 0;
    for (const v1::MergedHost& host : header.merged().hosts()) {
      json.BeginObject();
      json.Field("name", host.hostname());
      json.Field("skew_ns", host.skew_ns());
      json.Field("skew_bound_ns", host.skew_bound_ns());
      json.Field("skew_basis", host.skew_basis());
      json.Field("collectives_matched", host.collectives_matched());
      json.Field("pid_offset", index++ * header.merged().pid_stride());
      json.Field("source", host.source());
      json.EndObject();
    }
  }
  json.EndArray();
}

}  // namespace gpuos
