// A BpfSource whose object is one bpftool skeleton (<name>.skel.h): opens it
// and destroys it; the source sets its own rodata and maps in Configure().
// Base: BpfSource, or an interface derived from it that the source offers.
#pragma once

#include <bpf/libbpf.h>

#include <cerrno>
#include <string>

#include "record/sources/bpf_source.h"

namespace gpuos {

template <typename Skel, Skel* (*OpenSkel)(const bpf_object_open_opts*),
          void (*DestroySkel)(Skel*), typename Base = BpfSource>
class SkeletonSource : public Base {
 public:
  explicit SkeletonSource(const char* name) : name_(name) {}
  ~SkeletonSource() override {
    if (skel_) DestroySkel(skel_);
  }
  absl::Status Open(const BpfSourceSetup& setup) final {
    skel_ = OpenSkel(setup.open_opts);
    if (!skel_) return BpfLoadError(std::string("open the BPF object ") + name_, errno);
    return Configure(setup);
  }
  bpf_object_skeleton* skeleton() const final { return skel_ ? skel_->skeleton : nullptr; }

 protected:
  // Sets the object's rodata and map sizes before it is loaded.
  virtual absl::Status Configure(const BpfSourceSetup& setup) = 0;
  Skel* skel() const { return skel_; }

 private:
  const char* name_;
  Skel* skel_ = nullptr;
};

}  // namespace gpuos
