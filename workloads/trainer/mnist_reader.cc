// See mnist_reader.h.  idx format: a big-endian magic number (0x0803 for
// 3-D unsigned bytes, 0x0801 for 1-D), one big-endian u32 per dimension,
// then the bytes.
#include "mnist_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuos::trainer {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::vector<uint8_t>> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    std::string hint;
    if (FileExists(path + ".gz")) {
      hint = absl::StrCat(" (found ", path, ".gz: gunzip it first)");
    }
    return absl::NotFoundError(
        absl::StrFormat("--mnist: cannot open %s: %s%s", path, std::strerror(err), hint));
  }
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint32_t BigEndian32(const std::vector<uint8_t>& bytes, size_t offset) {
  return (uint32_t{bytes[offset]} << 24) | (uint32_t{bytes[offset + 1]} << 16) |
         (uint32_t{bytes[offset + 2]} << 8) | uint32_t{bytes[offset + 3]};
}

absl::Status Malformed(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("--mnist: %s is not an MNIST idx file: %s", path, what));
}

}  // namespace

absl::StatusOr<MnistData> ReadMnist(const std::string& dir) {
  const std::string images_path = absl::StrCat(dir, "/", kMnistImagesFile);
  const std::string labels_path = absl::StrCat(dir, "/", kMnistLabelsFile);

  absl::StatusOr<std::vector<uint8_t>> images = ReadWholeFile(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<std::vector<uint8_t>> labels = ReadWholeFile(labels_path);
  if (!labels.ok()) return labels.status();

  if (images->size() < 16) return Malformed(images_path, "shorter than its 16-byte header");
  if (uint32_t magic = BigEndian32(*images, 0); magic != kImagesMagic) {
    return Malformed(images_path, absl::StrFormat("magic number 0x%08x, expected 0x%08x%s", magic,
                                                  kImagesMagic,
                                                  magic >> 16 == 0x1f8b ? " (gzipped?)" : ""));
  }
  MnistData data;
  data.count = BigEndian32(*images, 4);
  data.rows = BigEndian32(*images, 8);
  data.cols = BigEndian32(*images, 12);
  if (data.rows != 28 || data.cols != 28) {
    return Malformed(images_path,
                     absl::StrFormat("images are %dx%d, expected 28x28", data.rows, data.cols));
  }
  if (data.count == 0) return Malformed(images_path, "it holds no images");
  const uint64_t pixel_bytes = static_cast<uint64_t>(data.count) * data.rows * data.cols;
  if (images->size() != 16 + pixel_bytes) {
    return Malformed(images_path, absl::StrFormat("%d bytes, the header promises %d",
                                                  images->size(), 16 + pixel_bytes));
  }

  if (labels->size() < 8) return Malformed(labels_path, "shorter than its 8-byte header");
  if (uint32_t magic = BigEndian32(*labels, 0); magic != kLabelsMagic) {
    return Malformed(labels_path, absl::StrFormat("magic number 0x%08x, expected 0x%08x%s", magic,
                                                  kLabelsMagic,
                                                  magic >> 16 == 0x1f8b ? " (gzipped?)" : ""));
  }
  const int64_t label_count = BigEndian32(*labels, 4);
  if (label_count != data.count) {
    return Malformed(labels_path, absl::StrFormat("%d labels for %d images in %s", label_count,
                                                  data.count, images_path));
  }
  if (labels->size() != 8 + static_cast<uint64_t>(label_count)) {
    return Malformed(labels_path, absl::StrFormat("%d bytes, the header promises %d",
                                                  labels->size(), 8 + label_count));
  }
  for (int64_t i = 0; i < label_count; ++i) {
    if ((*labels)[8 + i] > 9) {
      return Malformed(labels_path,
                       absl::StrFormat("label %d of sample %d is not a digit", (*labels)[8 + i], i));
    }
  }
  data.pixels.assign(images->begin() + 16, images->end());
  data.labels.assign(labels->begin() + 8, labels->end());
  return data;
}

}  // namespace gpuos::trainer
