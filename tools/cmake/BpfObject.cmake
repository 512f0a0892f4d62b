# Compiles one bpf/*.bpf.c into a CO-RE object and a libbpf skeleton header.
#
#   loupe_add_bpf_skeleton(<name> <source> [DEPENDS headers...])
#
# Creates the INTERFACE target loupe_bpf_<name> whose include path holds
# <name>.skel.h; link it to use the skeleton.
find_program(LOUPE_CLANG NAMES clang clang-14 REQUIRED)
find_program(LOUPE_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(LOUPE_BPF_ARCH x86)
  set(LOUPE_VMLINUX_ARCH x86_64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(LOUPE_BPF_ARCH arm64)
  set(LOUPE_VMLINUX_ARCH aarch64)
else()
  message(FATAL_ERROR "BPF build: no vmlinux.h for ${CMAKE_SYSTEM_PROCESSOR}")
endif()

function(loupe_add_bpf_skeleton name source)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/skel/${name})  # one skeleton per include path
  set(object ${out_dir}/${name}.bpf.o)
  set(skeleton ${out_dir}/${name}.skel.h)
  file(MAKE_DIRECTORY ${out_dir})

  add_custom_command(
    OUTPUT ${object}
    COMMAND ${LOUPE_CLANG} -target bpf -D__TARGET_ARCH_${LOUPE_BPF_ARCH}
            -g -O2 -Wall -Werror
            -I${LOUPE_VMLINUX_DIR} -I${PROJECT_SOURCE_DIR}/bpf
            -c ${CMAKE_CURRENT_SOURCE_DIR}/${source} -o ${object}.tmp
    # `gen object` links the object, which also checks its BTF is sound.
    COMMAND ${LOUPE_BPFTOOL} gen object ${object} ${object}.tmp
    COMMAND ${CMAKE_COMMAND} -E rm -f ${object}.tmp
    DEPENDS ${source} ${LOUPE_VMLINUX_H} ${ARG_DEPENDS}
    COMMENT "BPF ${source}"
    VERBATIM)

  add_custom_command(
    OUTPUT ${skeleton}
    COMMAND ${LOUPE_BPFTOOL} gen skeleton ${object} name loupe_${name} > ${skeleton}
    DEPENDS ${object}
    COMMENT "BPF skeleton ${name}.skel.h")

  add_custom_target(loupe_bpf_${name}_gen DEPENDS ${skeleton})
  add_library(loupe_bpf_${name} INTERFACE)
  add_dependencies(loupe_bpf_${name} loupe_bpf_${name}_gen)
  target_include_directories(loupe_bpf_${name} INTERFACE ${out_dir})
  target_link_libraries(loupe_bpf_${name} INTERFACE PkgConfig::LIBBPF)
endfunction()
