// Protobuf wire encoding, just enough to append Perfetto TracePackets to an
// output buffer without building message objects (the exporter writes tens
// of millions of packets).  Field numbers come from the generated classes of
// proto/perfetto/perfetto_trace.proto, never from literals, so the encoder
// cannot drift from the schema; tests decode its output with those classes.
//
// Nested messages get a one-byte length slot before their contents are
// known; when the contents turn out longer than 127 bytes, they are shifted
// to make room (they are the tail of the buffer and rarely long), so every
// length is a minimal varint.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gpuos {

class WireBuffer {
 public:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

  void Varint(uint64_t value) {
    char* p = Reserve(10);
    while (value >= 0x80) {
      *p++ = static_cast<char>(value | 0x80);
      value >>= 7;
    }
    *p++ = static_cast<char>(value);
    size_ = static_cast<size_t>(p - data_.data());
  }
  void Tag(int field, WireType type) { Varint((static_cast<uint64_t>(field) << 3) | type); }

  void UintField(int field, uint64_t value) {
    Tag(field, kVarint);
    Varint(value);
  }
  // int32/int64 fields: negative values take ten bytes, as protobuf wants.
  void IntField(int field, int64_t value) { UintField(field, static_cast<uint64_t>(value)); }
  void BoolField(int field, bool value) { UintField(field, value ? 1 : 0); }
  void Fixed64Field(int field, uint64_t value) {
    Tag(field, kFixed64);
    char* p = Reserve(8);
    for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(value >> (8 * i));
    size_ += 8;
  }
  void DoubleField(int field, double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    Fixed64Field(field, bits);
  }
  void StringField(int field, std::string_view value) {
    Tag(field, kLengthDelimited);
    Varint(value.size());
    std::memcpy(Reserve(value.size()), value.data(), value.size());
    size_ += value.size();
  }

  // Returns the position to pass to EndNested.
  size_t BeginNested(int field) {
    Tag(field, kLengthDelimited);
    Reserve(1);
    return size_++;
  }
  void EndNested(size_t at) {
    uint64_t length = size_ - at - 1;
    if (length < 0x80) {
      data_[at] = static_cast<char>(length);
      return;
    }
    char bytes[10];
    size_t n = 0;
    while (length >= 0x80) {
      bytes[n++] = static_cast<char>(length | 0x80);
      length >>= 7;
    }
    bytes[n++] = static_cast<char>(length);
    Reserve(n - 1);
    std::memmove(&data_[at + n], &data_[at + 1], size_ - at - 1);
    std::memcpy(&data_[at], bytes, n);
    size_ += n - 1;
  }

  const char* data() const { return data_.data(); }
  size_t size() const { return size_; }
  void clear() { size_ = 0; }

 private:
  // Room for `n` more bytes at the end; returns where they start.
  char* Reserve(size_t n) {
    if (size_ + n > data_.size()) data_.resize(std::max(data_.size() * 2, size_ + n + 4096));
    return &data_[size_];
  }

  std::string data_;  // bytes [0, size_) are written; the rest is room
  size_t size_ = 0;
};

}  // namespace gpuos
