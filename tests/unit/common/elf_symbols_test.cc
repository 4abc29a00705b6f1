// ElfSymbols (common/elf_symbols.h), the one ELF reader, on this test's own
// executable: a function it does not export is found in the full symbol
// table only, its file offset holds the bytes the function runs (and a
// variable's, in a segment whose file offset differs from its address, its
// initial bytes), and a file cut short gives an error, never a read past
// its end.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "common/elf_symbols.h"
#include "gtest/gtest.h"

extern "C" __attribute__((noinline, used)) int gpuos_elf_symbols_test_marker(int x) {
  return x * 7 + 3;
}

// In .data, which the linker places at an address other than its file
// offset.
extern "C" {
__attribute__((used)) char gpuos_elf_symbols_test_data[] = "gpuos elf data marker";
}

namespace gpuos {
namespace {

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The start of the mapping of this executable's file offset 0.
uint64_t MappedBase(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long start = 0, end = 0, offset = 0;
    char perms[8] = {};
    if (sscanf(line.c_str(), "%lx-%lx %7s %lx", &start, &end, perms, &offset) == 4 &&
        offset == 0 && line.size() >= path.size() &&
        line.compare(line.size() - path.size(), path.size(), path) == 0) {
      return start;
    }
  }
  return 0;
}

TEST(ElfSymbols, TheFullTableHasWhatTheDynamicOneDoesNotExport) {
  const std::string path = SelfPath();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto dynamic = ElfSymbols::Read(fd, path);
  ElfReadOptions full_options;
  full_options.full_symbol_table = true;
  auto full = ElfSymbols::Read(fd, path, full_options);
  close(fd);
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE(dynamic->Find("gpuos_elf_symbols_test_marker"));
  std::optional<ElfSymbol> marker = full->Find("gpuos_elf_symbols_test_marker");
  ASSERT_TRUE(marker);
  EXPECT_TRUE(marker->is_function);
  // Where it runs: the load bias plus its value.
  const uint64_t bias = MappedBase(path) - (full->first_segment_vaddr() & ~uint64_t{0xfff});
  EXPECT_EQ(bias + marker->value,
            reinterpret_cast<uint64_t>(&gpuos_elf_symbols_test_marker));
}

TEST(ElfSymbols, AFunctionsFileOffsetHoldsTheBytesItRuns) {
  const std::string path = SelfPath();
  auto offsets = ElfFunctionOffsets(
      path, [](absl::string_view name) { return name == "gpuos_elf_symbols_test_marker"; });
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  ASSERT_EQ(offsets->size(), 1u);
  const uint64_t offset = offsets->begin()->second;
  char in_file[16] = {};
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pread(fd, in_file, sizeof(in_file), static_cast<off_t>(offset)),
            static_cast<ssize_t>(sizeof(in_file)));
  close(fd);
  EXPECT_EQ(memcmp(in_file, reinterpret_cast<const void*>(&gpuos_elf_symbols_test_marker),
                   sizeof(in_file)),
            0);
  EXPECT_EQ(gpuos_elf_symbols_test_marker(1), 10);
}

TEST(ElfSymbols, AVariablesFileOffsetHoldsItsInitialBytes) {
  const std::string path = SelfPath();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ElfReadOptions options;
  options.full_symbol_table = true;
  auto symbols = ElfSymbols::Read(fd, path, options);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  std::optional<ElfSymbol> data = symbols->Find("gpuos_elf_symbols_test_data");
  ASSERT_TRUE(data);
  EXPECT_FALSE(data->is_function);
  std::optional<uint64_t> offset = symbols->FileOffset(data->value);
  ASSERT_TRUE(offset);
  char in_file[sizeof(gpuos_elf_symbols_test_data)] = {};
  ASSERT_EQ(pread(fd, in_file, sizeof(in_file), static_cast<off_t>(*offset)),
            static_cast<ssize_t>(sizeof(in_file)));
  close(fd);
  EXPECT_STREQ(in_file, "gpuos elf data marker");
  EXPECT_FALSE(symbols->FileOffset(~uint64_t{0} - 16));
}

TEST(ElfSymbols, AFileCutShortIsAnErrorNotACrash) {
  const std::string path = SelfPath();
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  char cut[] = "/tmp/gpuos_elf_cut.XXXXXX";
  int fd = mkstemp(cut);
  ASSERT_GE(fd, 0);
  unlink(cut);
  ASSERT_EQ(write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  ElfReadOptions options;
  options.full_symbol_table = true;
  auto symbols = ElfSymbols::Read(fd, "cut", options);
  close(fd);
  // The section headers sit at the file's end, past the cut.
  ASSERT_FALSE(symbols.ok());
  EXPECT_NE(std::string(symbols.status().message()).find("cut"), std::string::npos);
}

}  // namespace
}  // namespace gpuos
