# Finds libbpf, libelf, zlib, zstd, protobuf and Abseil.  With GPUOS_STATIC
# the agent links their static archives, so that one gpuos-trace binary runs
# on machines (the GPU machine) that have none of them; only glibc stays
# dynamic, because initgroups() and getpwuid() need its NSS modules.

find_package(Threads REQUIRED)

if(GPUOS_STATIC)
  set(Protobuf_USE_STATIC_LIBS ON)
endif()
find_package(Protobuf REQUIRED)
find_package(absl REQUIRED)

set(_gpuos_libdir /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})

function(gpuos_find_lib var name)
  if(GPUOS_STATIC)
    find_library(${var} NAMES lib${name}.a REQUIRED)
  else()
    find_library(${var} NAMES ${name} REQUIRED)
  endif()
endfunction()

gpuos_find_lib(GPUOS_LIBBPF bpf)
gpuos_find_lib(GPUOS_LIBELF elf)
gpuos_find_lib(GPUOS_LIBZ z)
gpuos_find_lib(GPUOS_LIBZSTD zstd)
find_path(GPUOS_LIBBPF_INCLUDE bpf/libbpf.h REQUIRED)

add_library(gpuos_libbpf INTERFACE)
target_include_directories(gpuos_libbpf INTERFACE ${GPUOS_LIBBPF_INCLUDE})
target_link_libraries(gpuos_libbpf INTERFACE
  ${GPUOS_LIBBPF} ${GPUOS_LIBELF} ${GPUOS_LIBZ} ${GPUOS_LIBZSTD})

# Debian's Abseil CMake package points every target at its shared library;
# swap in the static archive that sits beside it.
if(GPUOS_STATIC)
  file(GLOB _absl_archives ${_gpuos_libdir}/libabsl_*.a)
  foreach(_archive IN LISTS _absl_archives)
    get_filename_component(_name ${_archive} NAME_WE)
    string(REGEX REPLACE "^libabsl_" "" _name ${_name})
    if(TARGET absl::${_name})
      get_target_property(_type absl::${_name} TYPE)
      if(NOT _type STREQUAL "INTERFACE_LIBRARY")
        set_target_properties(absl::${_name} PROPERTIES
          IMPORTED_LOCATION_NONE ${_archive}
          IMPORTED_LOCATION ${_archive}
          IMPORTED_LOCATION_RELWITHDEBINFO ${_archive}
          IMPORTED_LOCATION_RELEASE ${_archive}
          IMPORTED_LOCATION_DEBUG ${_archive})
      endif()
    endif()
  endforeach()
endif()

# Link options for programs that must run where these libraries are absent.
add_library(gpuos_static_runtime INTERFACE)
if(GPUOS_STATIC)
  target_link_options(gpuos_static_runtime INTERFACE -static-libstdc++ -static-libgcc)
endif()
