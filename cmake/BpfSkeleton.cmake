# Compiles bpf/<name>.bpf.c with clang for the bpf target and turns the
# object into a libbpf skeleton header (<name>.skel.h) in the build tree.
# vmlinux.h is dumped from the build machine's kernel BTF; the programs are
# CO-RE, so the result runs on any kernel with BTF.

find_program(GPUOS_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(GPUOS_BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
set(GPUOS_VMLINUX_BTF /sys/kernel/btf/vmlinux CACHE FILEPATH
    "Kernel BTF that vmlinux.h is generated from")

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(GPUOS_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(GPUOS_BPF_ARCH arm64)
else()
  message(FATAL_ERROR "gpuos-trace: unsupported architecture ${CMAKE_SYSTEM_PROCESSOR}")
endif()

set(GPUOS_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf_gen)
file(MAKE_DIRECTORY ${GPUOS_BPF_GEN_DIR})

add_custom_command(
  OUTPUT ${GPUOS_BPF_GEN_DIR}/vmlinux.h
  COMMAND ${GPUOS_BPFTOOL} btf dump file ${GPUOS_VMLINUX_BTF} format c > ${GPUOS_BPF_GEN_DIR}/vmlinux.h
  COMMENT "Generating vmlinux.h from ${GPUOS_VMLINUX_BTF}"
  VERBATIM)
add_custom_target(gpuos_vmlinux_h DEPENDS ${GPUOS_BPF_GEN_DIR}/vmlinux.h)

# gpuos_bpf_skeleton(<name> <headers...>): bpf/<name>.bpf.c -> <name>.skel.h
function(gpuos_bpf_skeleton name)
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/${name}.bpf.c)
  set(obj ${GPUOS_BPF_GEN_DIR}/${name}.bpf.o)
  set(skel ${GPUOS_BPF_GEN_DIR}/${name}.skel.h)
  file(GLOB headers ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${GPUOS_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${GPUOS_BPF_ARCH}
            -Wall -Werror -Wno-unused-function
            -I${GPUOS_BPF_GEN_DIR} -I${CMAKE_CURRENT_SOURCE_DIR} -I${GPUOS_LIBBPF_INCLUDE}
            -c ${src} -o ${obj}
    DEPENDS ${src} ${headers} ${GPUOS_BPF_GEN_DIR}/vmlinux.h
    COMMENT "Compiling BPF program ${name}.bpf.c"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${GPUOS_BPFTOOL} gen skeleton ${obj} name ${name}_bpf > ${skel}
    DEPENDS ${obj}
    COMMENT "Generating BPF skeleton ${name}.skel.h"
    VERBATIM)
  set_property(GLOBAL APPEND PROPERTY GPUOS_BPF_SKELETONS ${skel})
endfunction()
