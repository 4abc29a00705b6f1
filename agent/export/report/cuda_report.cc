// CUDA and NVTX tables; see report/cuda_report.h.
#include "export/report/cuda_report.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "export/report/format.h"
#include "export/report/text_table.h"
#include "export/report/trace_identity.h"

namespace gpuos {
namespace {

constexpr size_t kTopRows = 25;

void Omitted(std::ostream& out, size_t total, const char* what) {
  if (total > kTopRows) {
    out << "  ... " << total - kTopRows << " more " << what << " (the JSON report lists all)\n";
  }
}

void NamedTable(std::ostream& out, const char* title, const std::vector<NamedTotals>& rows,
                bool with_domain) {
  std::vector<TextTable::Column> columns = {{"#"}, {"name", TextTable::Align::kLeft}};
  if (with_domain) columns.push_back({"domain", TextTable::Align::kLeft});
  for (const char* c : {"count", "total ms", "mean us", "max us"}) columns.push_back({c});
  TextTable table(columns);
  for (size_t i = 0; i < rows.size() && i < kTopRows; ++i) {
    const NamedTotals& r = rows[i];
    std::vector<std::string> cells = {std::to_string(i + 1), Printable(r.name)};
    if (with_domain) cells.push_back(Printable(r.domain));
    cells.push_back(std::to_string(r.count));
    cells.push_back(FormatMs3(r.total_ns));
    cells.push_back(FormatUs1(r.count ? static_cast<double>(r.total_ns) / r.count : 0));
    cells.push_back(FormatUs1(static_cast<double>(r.max_ns)));
    table.AddRow(std::move(cells));
  }
  out << "\n" << title << "\n";
  table.Render(out, "  ");
  Omitted(out, rows.size(), "rows");
}

void NamedArray(JsonWriter& json, const std::vector<NamedTotals>& rows, bool with_domain) {
  json.BeginArray();
  for (const NamedTotals& r : rows) {
    json.BeginObject();
    json.Field("name", r.name);
    if (with_domain) json.Field("domain", r.domain);
    json.Field("count", r.count);
    json.Field("total_ns", r.total_ns);
    json.Field("max_ns", r.max_ns);
    json.EndObject();
  }
  json.EndArray();
}

}  // namespace

void WriteCudaTextReport(const CudaSummary& s, std::ostream& out) {
  if (s.empty()) return;
  if (s.cpu_side_only()) out << "\nCUDA: " << kCpuSideOnlyText << "\n";
  for (const ShimProcessStatus& p : s.shims) {
    if (!p.cupti_status.empty() && !p.cupti_active) {
      out << "\nNOTE: pid " << p.pid << ": " << Printable(p.cupti_status) << "\n";
    }
    if (p.dropped) out << "\nWARNING: pid " << p.pid << ": the CUDA shim dropped " << p.dropped << " events\n";
  }
  if (s.kernel_count) {
    out << "\nGPU kernels: " << s.kernel_count << " launches, " << FormatMs3(s.kernel_total_ns) << " ms on the GPU, "
        << s.kernels.size() << " distinct kernels\n";
    NamedTable(out, "Top kernels by GPU time", s.kernels, false);
  }
  if (!s.memcpy.empty()) {
    TextTable table({{"direction", TextTable::Align::kLeft}, {"src", TextTable::Align::kLeft},
                     {"dst", TextTable::Align::kLeft}, {"count"}, {"MiB"}, {"total ms"}, {"GB/s"}});
    for (const MemcpyTotals& m : s.memcpy) {
      table.AddRow({MemcpyDirectionName(m.direction), MemoryKindName(m.src_kind), MemoryKindName(m.dst_kind),
                    std::to_string(m.count), FormatMiB1(m.bytes), FormatMs3(m.total_ns),
                    absl::StrFormat("%.2f", m.gb_per_s())});
    }
    out << "\nMemory copies by direction and memory kinds\n";
    table.Render(out, "  ");
  }
  if (s.memset_count) {
    out << "\nMemsets: " << s.memset_count << ", " << FormatMiB1(s.memset_bytes) << " MiB, "
        << FormatMs3(s.memset_total_ns) << " ms\n";
  }
  if (s.launch_delay.count()) {
    const LatencyHistogram& h = s.launch_delay;
    out << "\nKernel launch-to-start delay (GPU start - launch call start, us): n=" << h.count()
        << " min=" << FormatUs1(h.min()) << " p50=" << FormatUs1(h.Quantile(0.5))
        << " p90=" << FormatUs1(h.Quantile(0.9)) << " p99=" << FormatUs1(h.Quantile(0.99))
        << " max=" << FormatUs1(h.max()) << "\n";
  }
  if (!s.api.empty()) NamedTable(out, "CUDA API calls by CPU time", s.api, false);
  if (!s.sync.empty()) NamedTable(out, "GPU synchronization waits", s.sync, false);
  if (!s.nvtx.empty()) NamedTable(out, "NVTX ranges", s.nvtx, true);
}

void WriteCudaJsonMembers(const CudaSummary& s, JsonWriter& json) {
  json.Key("nvtx");
  NamedArray(json, s.nvtx, true);
  json.Key("cuda");
  json.BeginObject();
  json.Field("cpu_side_only", s.cpu_side_only());
  json.Field("uprobe_api_calls", s.uprobe_api_calls);
  if (s.cpu_side_only()) json.Field("cpu_side_only_note", kCpuSideOnlyText);
  json.Key("kernels");
  json.BeginObject();
  json.Field("count", s.kernel_count);
  json.Field("total_ns", s.kernel_total_ns);
  json.Key("by_name");
  NamedArray(json, s.kernels, false);
  json.EndObject();
  json.Key("memcpy");
  json.BeginArray();
  for (const MemcpyTotals& m : s.memcpy) {
    json.BeginObject();
    json.Field("direction", MemcpyDirectionName(m.direction));
    json.Field("src_kind", MemoryKindName(m.src_kind));
    json.Field("dst_kind", MemoryKindName(m.dst_kind));
    json.Field("count", m.count);
    json.Field("bytes", m.bytes);
    json.Field("total_ns", m.total_ns);
    json.Field("gb_per_s", m.gb_per_s());
    json.EndObject();
  }
  json.EndArray();
  json.Key("memset");
  json.BeginObject();
  json.Field("count", s.memset_count);
  json.Field("bytes", s.memset_bytes);
  json.Field("total_ns", s.memset_total_ns);
  json.EndObject();
  json.Key("api");
  NamedArray(json, s.api, false);
  json.Key("sync");
  NamedArray(json, s.sync, false);
  json.Key("launch_delay_ns");
  json.BeginObject();
  const LatencyHistogram& h = s.launch_delay;
  json.Field("count", h.count());
  json.Field("min", h.min());
  json.Field("p50", h.Quantile(0.5));
  json.Field("p90", h.Quantile(0.9));
  json.Field("p99", h.Quantile(0.99));
  json.Field("max", h.max());
  json.Field("unmatched_kernels", s.kernels_without_launch);
  json.EndObject();
  json.Field("nvtx_marks", s.nvtx_marks);
  json.Key("shim");
  json.BeginArray();
  for (const ShimProcessStatus& p : s.shims) {
    json.BeginObject();
    json.Field("pid", p.pid);
    json.Field("cupti_active", p.cupti_active);
    json.Field("cupti_status", p.cupti_status);
    json.Field("nvtx_active", p.nvtx_active);
    json.Field("events_sent", p.events_sent);
    json.Field("dropped", p.dropped);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

}  // namespace gpuos
